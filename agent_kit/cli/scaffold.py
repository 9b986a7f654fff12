"""``agent-kit new`` and ``agent-kit templates``: scaffold a trainable agent project."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agent_kit.cli.run_options import key_values
from agent_kit.scaffold import project as scaffold

__all__ = ["register"]

_console = Console(highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the ``new`` and ``templates`` commands to the CLI."""
    app.command("new")(new)
    app.command("templates")(templates)


def new(
    name: Annotated[str, typer.Argument(help="Project name; the directory is its slug.")],
    template: Annotated[
        str,
        typer.Option("--template", "-t", help="Template name (see `agent-kit templates`) or path."),
    ] = scaffold.DEFAULT_TEMPLATE,
    no_input: Annotated[
        bool,
        typer.Option(
            "--no-input",
            help="Use defaults and -x values without prompting (implied when stdin is not a TTY).",
        ),
    ] = False,
    output_dir: Annotated[
        Path, typer.Option("--output-dir", "-o", help="Where to create the project directory.")
    ] = Path("."),
    extra: Annotated[
        list[str] | None,
        typer.Option("--extra", "-x", help="Set a template variable: -x key=value (repeatable)."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Render over an existing directory (template files are replaced)."
        ),
    ] = False,
) -> None:
    """Create a new agent project from a template (a cookiecutter template)."""
    overrides = key_values(extra, "expected key=value")
    interactive = not no_input and sys.stdin.isatty()
    project = scaffold.create_project(
        template,
        project_name=name,
        output_dir=output_dir,
        extra_context=overrides,
        no_input=not interactive,
        force=force,
    )
    _console.print(
        f"Created [bold]{escape(str(project.path))}[/] from template "
        f"{escape(repr(project.template.name))}.",
        markup=True,
    )
    source = _source_checkout()
    if source is not None:
        _console.print(
            f"agent_kit comes from the checkout {source}: install it into the project's "
            f"environment with `pip install -e {source}`.",
            markup=False,
        )
    _console.print("Next steps:", markup=False)
    for step in project.next_steps:
        _console.print(f"  {step}", markup=False)


def templates(
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    """List the available project templates."""
    found = scaffold.list_templates()
    if as_json:
        rows = [
            {
                "name": t.name,
                "description": t.description,
                "path": str(t.path),
                "variables": t.variables(),
            }
            for t in found
        ]
        typer.echo(json.dumps(rows, indent=2))
        return
    if not found:
        _console.print(
            "no templates found (searched: "
            f"{', '.join(map(str, scaffold.template_roots())) or 'nothing'})"
        )
        return
    table = Table("name", "description", "variables")
    for t in found:
        table.add_row(t.name, t.description, ", ".join(t.variables()))
    _console.print(table)


def _source_checkout() -> Path | None:
    """The source tree agent_kit runs from when it is an editable/source install, else None."""
    root = Path(scaffold.__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "templates").is_dir() else None
