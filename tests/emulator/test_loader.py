"""The one loader for user files (agent_kit.emulator.loader) and the paths that use it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import AGENTS, SAY_AGENT

from agent_kit.emulator.loader import load_entrypoint, load_module
from agent_kit.emulator.policies import load_policy
from agent_kit.errors import UsageError
from agent_kit.testing import load_app, run_episode

SAY_POLICY_FILE = AGENTS / "say_policy.py"


def _project(tmp_path: Path, helper: str) -> Path:
    """A folder holding ``helper.py`` and ``agent.py``: the say agent importing ``helper``."""
    folder = tmp_path / helper
    folder.mkdir()
    (folder / f"{helper}.py").write_text("def echo(n):\n    return f'said {n}'\n")
    entry = folder / "agent.py"
    entry.write_text(f"import {helper}\n\n" + SAY_AGENT.read_text(encoding="utf-8"))
    return entry


def test_run_episode_imports_a_helper_beside_the_entrypoint(tmp_path: Path) -> None:
    """`import helper` beside agent.py works in run_episode (the folder is put on sys.path)."""
    entry = _project(tmp_path, "helper_for_episode")
    result = run_episode(entry, {"target": 3}, policy=load_module(SAY_POLICY_FILE).policy)
    assert result["reward"] == 1.0


def test_failed_import_reports_the_real_error_every_time(tmp_path: Path) -> None:
    """A file that raises on import reports that error on every attempt, never a half module."""
    entry = tmp_path / "broken.py"
    entry.write_text("import json\nraise RuntimeError('boom at import')\napp = None\n")
    for _ in range(2):
        with pytest.raises(UsageError, match="boom at import") as info:
            load_app(entry)
        assert isinstance(info.value.__cause__, RuntimeError)
    assert not [m for m, mod in sys.modules.items() if getattr(mod, "__file__", None) == str(entry)]


def test_same_file_loads_once(tmp_path: Path) -> None:
    """Loading a file twice returns the same module object (import side effects run once)."""
    file = tmp_path / "counter.py"
    file.write_text("import builtins\nbuiltins.__dict__.setdefault('_ak_loads', []).append(1)\n")
    first = load_module(file)
    assert load_module(file) is first
    import builtins

    assert builtins.__dict__.pop("_ak_loads") == [1]


def test_missing_file_and_missing_app_are_usage_errors(tmp_path: Path) -> None:
    """A missing file, or one without a callable `app`, is a UsageError naming it."""
    with pytest.raises(UsageError, match="entrypoint not found"):
        load_entrypoint(tmp_path / "nope.py")
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    with pytest.raises(UsageError, match="has no module-level ASGI `app`"):
        load_entrypoint(plain)


def test_scripted_policy_imports_its_sibling_module(tmp_path: Path) -> None:
    """A scripted: policy file can import a module beside it, and errors name the real cause."""
    (tmp_path / "policy_helper_mod.py").write_text("ANSWER = 'from the helper'\n")
    (tmp_path / "pol.py").write_text(
        "import policy_helper_mod\n\ndef answer(request):\n    return policy_helper_mod.ANSWER\n"
    )
    backend = load_policy(f"scripted:{tmp_path / 'pol.py'}:answer")
    assert backend.name.endswith("pol.py:answer")
    (tmp_path / "bad.py").write_text("raise ValueError('bad policy file')\n")
    for _ in range(2):
        with pytest.raises(UsageError, match="bad policy file"):
            load_policy(f"scripted:{tmp_path / 'bad.py'}:answer")
