"""The ``agent-kit`` command line: the only place in agent_kit that prints or exits.

Commands live in sibling modules, each exposing ``register(app)``. :func:`main` runs the Typer
app and turns any :class:`~agent_kit.errors.AgentKitError` into ``error: <message>`` on stderr
with that error's exit code — users never see a traceback for a deliberate error.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import typer
from rich.console import Console
from rich.markup import escape

from agent_kit.errors import AgentKitError

__all__ = ["app", "main"]

_COMMAND_MODULES = ("emulate", "run", "report", "replay", "scaffold", "deploy")

app = typer.Typer(
    name="agent-kit",
    help="Build, run locally, replay and deploy agents trained with SageMaker AI multi-turn RL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

err_console = Console(stderr=True, highlight=False)


def _register_all() -> None:
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(f"agent_kit.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"agent_kit.cli.{name}":
                continue  # command group not built yet
            raise
        module.register(app)


_register_all()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return (and, as a console script, exit with) the process exit code."""
    try:
        app(args=list(argv) if argv is not None else None, standalone_mode=False)
    except AgentKitError as exc:
        err_console.print(f"[bold red]error:[/] {escape(exc.message)}", soft_wrap=True)
        return _exit(exc.exit_code, argv)
    except typer.Exit as exc:
        return _exit(exc.exit_code, argv)
    except typer.Abort:
        err_console.print("aborted")
        return _exit(130, argv)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return _exit(130, argv)
    except Exception as exc:  # click's usage errors
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            return _exit(exc.exit_code, argv)
        raise
    return _exit(0, argv)


def _exit(code: int, argv: Sequence[str] | None) -> int:
    if argv is None:
        sys.exit(code)
    return code
