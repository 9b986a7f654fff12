"""The ``agent-kit`` command line: the only place in agent_kit that prints or exits.

Commands live in sibling modules, each exposing ``register(app)``, imported when one of their
commands is used (:data:`COMMAND_MODULES`). The root command's ``main``
(:class:`_RootGroup`, used by :func:`main` and by a ``typer.testing.CliRunner`` alike) turns every
outcome into an exit code, and users never see a traceback for a deliberate error:

- an :class:`~agent_kit.errors.AgentKitError` prints ``error: <message>`` on stderr and exits
  with that error's exit code;
- a click usage error (unknown command or option, bad value, missing argument) prints one
  ``error: <message>`` line, click's hint included ("Did you mean 'run'?"), and exits 2;
- a bare ``agent-kit`` (or a bare command group) prints the help and exits 2, as click does;
- ``--version`` prints the version and exits 0; Ctrl-C exits 130 (``run`` stops gracefully
  first, and exits 143 after a SIGTERM: see :mod:`agent_kit.cli.run` and
  :mod:`agent_kit.driver.stop`).

The root command is the CLI's door (docs/settings.md): it reads the ``AGENT_KIT_*`` variables of
the environment once, before any command runs, into a :class:`~agent_kit.settings.Settings` on
the click context (a malformed one is one ``error:`` line naming it, exit 2); commands take it
with :func:`~agent_kit.cli.run_options.door_settings` and hand it down.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator, MutableMapping, Sequence
from typing import Annotated, Any, Final

import click
import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from agent_kit import __version__
from agent_kit.errors import AgentKitError
from agent_kit.settings import Settings

__all__ = ["COMMAND_MODULES", "EXIT_INTERRUPTED", "PROG_NAME", "app", "main"]

PROG_NAME: Final = "agent-kit"
#: Exit code of a Ctrl-C (128 + SIGINT), as typer reports it.
EXIT_INTERRUPTED: Final = 130

# typer >= 0.29 raises the exceptions of its bundled copy of click (``typer._click``), which are
# not the standalone ``click`` classes; older typer raises click's. Both are caught, by class.
_CLICK_MODULES: Final = tuple(dict.fromkeys((getattr(typer, "_click", click), click)))
_CLICK_ERRORS: Final[tuple[type[Exception], ...]] = tuple(
    m.exceptions.ClickException for m in _CLICK_MODULES
)
_NO_ARGS_IS_HELP: Final[tuple[type[Exception], ...]] = tuple(
    cls
    for m in _CLICK_MODULES
    if (cls := getattr(m.exceptions, "NoArgsIsHelpError", None)) is not None
)
# typer's own Abort (click's Abort for older typer, where the two are one class).
_ABORTS: Final[tuple[type[BaseException], ...]] = tuple(dict.fromkeys((typer.Abort, click.Abort)))

err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def _error(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {escape(message)}")


def _click_error(exc: Any) -> int:
    """Show a ClickException (of either click) in one ``error:`` line; return its exit code."""
    code = int(exc.exit_code)
    text = str(exc.format_message())
    if isinstance(exc, _NO_ARGS_IS_HELP):
        # Its message is the help text, shown as click shows it (typer's rich help has
        # already printed itself, to stdout, leaving the message empty).
        if text.strip():
            err_console.print(text, markup=False)
        return code
    ctx = getattr(exc, "ctx", None)  # usage errors carry the command's context
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        text = f"{text.rstrip()} (try '{ctx.command_path} {ctx.help_option_names[0]}')"
    _error(" ".join(text.split()))
    return code


def _flags_without_type(command: Any, *, subcommands: bool = True) -> None:
    """Show every flag of ``command`` (and of its subcommands) (``--version``, ``--help``,
    ``--json`` …) as a flag in the help: no ``<bool>`` type column (typer ≥ 0.29 prints one for a
    flag without a metavar)."""
    context = _CLICK_MODULES[0].Context(command)
    help_option = command.get_help_option(context)  # cached by the command once made
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    if subcommands:
        for sub in getattr(command, "commands", {}).values():
            _flags_without_type(sub)


#: Each command's module (``agent_kit.cli.<module>``, whose ``register(app)`` adds it), in the
#: help's order. A module is imported when one of its commands runs or a listing (the help, a
#: "did you mean") needs it: ``agent-kit run`` does not import what ``dev`` or ``replay`` needs
#: (Strands, openai, boto3: a second and more of every start). tests/cli/test_cli_lazy.py holds
#: this map to what the modules register.
COMMAND_MODULES: Final = {
    "emulate": "emulate",
    "run": "run",
    "dev": "dev",
    "invoke": "invoke",
    "eval": "eval",
    "report": "report",
    "new": "scaffold",
    "templates": "scaffold",
    "package": "deploy",
    "deploy": "deploy",
    "train": "train",
    "replay": "replay",
    "export": "export",
    "job": "job",
    "doctor": "doctor",
}


def _module_commands(module: str) -> dict[str, Any]:
    """The click commands that ``agent_kit.cli.<module>`` registers, made as typer makes them."""
    commands = typer.Typer(add_completion=False)

    @commands.callback()
    def _group() -> None:  # a callback makes typer build a group, even of one command
        """The module's commands."""

    importlib.import_module(f"agent_kit.cli.{module}").register(commands)
    made: dict[str, Any] = dict(typer.main.get_command(commands).commands)  # type: ignore[attr-defined]
    for command in made.values():
        _flags_without_type(command)
    return made


class _Commands(MutableMapping[str, Any]):
    """The root group's commands: those registered on :data:`app` itself (a test's), then the
    :data:`COMMAND_MODULES`' ones, each module's made on its first lookup."""

    def __init__(self, registered: MutableMapping[str, Any]) -> None:
        self._made: dict[str, Any] = dict(registered)
        self._removed: set[str] = set()  # module commands deleted before or after being made

    def __getitem__(self, name: str) -> Any:
        if name in self._removed:
            raise KeyError(name)
        if name not in self._made and name in COMMAND_MODULES:
            made = _module_commands(COMMAND_MODULES[name])
            self._made.update({k: v for k, v in made.items() if k not in self._made})
        return self._made[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._removed.discard(name)
        self._made[name] = command

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is a command, without making (importing) it."""
        return name not in self._removed and (name in self._made or name in COMMAND_MODULES)

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._made.pop(name, None)
        self._removed.add(name)

    def __iter__(self) -> Iterator[str]:
        names = dict.fromkeys([*COMMAND_MODULES, *self._made])
        return iter([n for n in names if n not in self._removed])

    def __len__(self) -> int:
        return len(list(iter(self)))


class _RootGroup(TyperGroup):
    """The ``agent-kit`` group; its :meth:`main` maps every outcome to an exit code; its
    commands are made on first use (:data:`COMMAND_MODULES`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Commands(self.commands)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the CLI; return the exit code (``standalone_mode=False``) or exit with it."""
        _flags_without_type(self, subcommands=False)  # each module's, as it is made
        try:
            value = super().main(
                args=args,
                prog_name=prog_name or PROG_NAME,
                complete_var=complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
            # typer returns the code of a typer.Exit, including the 130 of a Ctrl-C.
            code = value if isinstance(value, int) and not isinstance(value, bool) else 0
            if code == EXIT_INTERRUPTED:
                err_console.print("interrupted")
        except AgentKitError as exc:
            _error(exc.message)
            code = exc.exit_code
        except _CLICK_ERRORS as exc:
            code = _click_error(exc)
        except _ABORTS as exc:
            if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
                err_console.print("interrupted")
                code = EXIT_INTERRUPTED
            else:
                _error("aborted")
                code = 1
        except KeyboardInterrupt:
            err_console.print("interrupted")
            code = EXIT_INTERRUPTED
        if standalone_mode:
            sys.exit(code)
        return code


app = typer.Typer(
    name=PROG_NAME,
    cls=_RootGroup,
    help="Build, run locally, replay and deploy agents trained with SageMaker AI multi-turn RL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"{PROG_NAME} {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print the agent-kit version and exit.",
        ),
    ] = False,
) -> None:
    del version  # handled by its eager callback
    ctx.obj = Settings.from_environ(os.environ, door="tooling")  # the one read (module doc)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (and, as the console script, exit with it)."""
    code: int = typer.main.get_command(app).main(
        args=list(argv) if argv is not None else None,
        prog_name=PROG_NAME,
        standalone_mode=False,
    )
    if argv is None:
        sys.exit(code)
    return code
