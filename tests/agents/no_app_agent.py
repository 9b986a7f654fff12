"""Test entrypoint without a module-level ``app``."""

application = None
