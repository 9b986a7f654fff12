"""Start a new agent project from a cookiecutter template (``agent-kit new``): see ``project``."""
