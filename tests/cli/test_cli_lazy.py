"""The root command makes a command from its module on first use (``COMMAND_MODULES``): the map
names every command the modules register, in the help's order, and a command that needs neither
Strands nor boto3 does not import them (nor torch) when it starts."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from typing import Any

import pytest
import typer

from agent_kit.cli import COMMAND_MODULES, app


def _registered(module: str) -> list[str]:
    """The names ``agent_kit.cli.<module>.register`` adds to an app."""
    commands = typer.Typer()
    importlib.import_module(f"agent_kit.cli.{module}").register(commands)
    named = [c.name for c in commands.registered_commands]
    return [*named, *(g.name for g in commands.registered_groups)]  # type: ignore[list-item]


def test_the_map_names_every_command_its_module_registers() -> None:
    """Every cli module's commands are in the map under that module, and nothing else is."""
    modules = sorted(set(COMMAND_MODULES.values()))
    registered = {name: module for module in modules for name in _registered(module)}
    assert registered == COMMAND_MODULES
    root = typer.main.get_command(app)
    assert list(root.commands) == list(COMMAND_MODULES)  # type: ignore[attr-defined]


HEAVY = ("strands", "openai", "boto3", "torch", "transformers", "mlflow")


@pytest.mark.e2e
def test_a_command_imports_only_its_own_module() -> None:
    """In a fresh interpreter, the root command and the ``run``, ``report``, ``eval`` and
    ``train`` commands are made without importing Strands, openai, boto3, torch, transformers
    or MLflow (``dev`` and ``replay`` need Strands, and import it when they are made)."""
    script = f"""
import json, sys, typer
from agent_kit.cli import app
root = typer.main.get_command(app)
seen = {{}}
for name in ("run", "report", "eval", "train", "job", "doctor", "dev"):
    root.commands[name]
    seen[name] = sorted(m for m in {HEAVY!r} if m in sys.modules)
print(json.dumps(seen))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    seen = json.loads(done.stdout)
    light = ("run", "report", "eval", "train", "job", "doctor")
    assert {name: seen[name] for name in light} == {name: [] for name in light}
    assert "strands" in seen["dev"]  # the check sees an import when there is one


def test_the_commands_mapping_is_a_mapping() -> None:
    """Deleting a command (made or not yet made) removes it from the listing, the lookup and
    the count; setting one adds it back; an unknown name is a KeyError, as in a dict."""
    root: Any = typer.main.get_command(app)
    commands = root.commands
    count = len(commands)
    report = commands["report"]  # made
    del commands["report"], commands["train"]  # "train" never made
    assert "train" not in commands
    assert "report" not in list(commands)
    assert "train" not in list(commands)
    assert len(commands) == count - 2
    with pytest.raises(KeyError):
        commands["train"]
    commands["report"] = report
    assert commands["report"] is report
    assert len(commands) == count - 1
    with pytest.raises(KeyError):
        commands["no-such-command"]
    with pytest.raises(KeyError):
        del commands["no-such-command"]
