"""``python -m agent_kit.cli``: the ``agent-kit`` console script."""

from agent_kit.cli import main

if __name__ == "__main__":
    main()
