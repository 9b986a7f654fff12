"""The commands the CLI prints for the user run as pasted: ``agent-kit`` when it is the one on
PATH, else the path it was started from (``make run`` leaves the venv unactivated).

Real processes with a controlled PATH: the venv's console script, started by path, and the
printed "next" commands run back through a shell.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agent_kit.cli.program import program

pytestmark = pytest.mark.e2e

AGENTS = Path(__file__).parents[1] / "agents"
#: The venv's bin folder (the console script beside this interpreter) and a PATH without it.
VENV_BIN = Path(sys.executable).parent
SCRIPT = VENV_BIN / "agent-kit"
BARE_PATH = "/usr/bin:/bin"


def _env(path: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = path
    env["COLUMNS"] = "400"
    return env


def _run(argv: list[str], *, cwd: Path, path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=_env(path), capture_output=True, text=True, timeout=120, check=False
    )


def _next_commands(out: str) -> list[str]:
    """The commands of the end summary's "next" block (the indented lines after a step)."""
    lines = out.splitlines()
    start = lines.index("next")
    return [line.strip() for line in lines[start + 1 :] if line.startswith("    ")]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A finished two-rollout run, played by the venv's console script started by its path
    from the venv's parent folder with the venv off PATH; returns that folder and stdout."""
    tmp = tmp_path_factory.mktemp("program")
    data = tmp / "d.jsonl"
    data.write_text(json.dumps({"prompt": json.dumps({"turns": 1})}) + "\n")
    argv = [str(SCRIPT), "run", str(AGENTS / "good_agent.py"), "--dataset", str(data)]
    argv += ["--group-size", "2", "--out", str(tmp / "runs"), "--name", "r"]
    done = _run(argv, cwd=VENV_BIN.parent.parent, path=BARE_PATH)
    assert done.returncode == 0, done.stderr
    return tmp / "runs" / "r", done.stdout


def test_off_path_the_summary_names_the_script_relative_to_cwd(
    recorded: tuple[Path, str],
) -> None:
    """Started as ``.venv/bin/agent-kit`` with the venv off PATH, every "next" command starts
    with that relative path, and the job plan it names runs as pasted through a shell."""
    run_dir, out = recorded
    shown = f"{VENV_BIN.parent.name}/bin/agent-kit"
    commands = [c for c in _next_commands(out) if not c.startswith("file://")]
    assert commands
    assert all(c.startswith(f"{shown} ") for c in commands), commands
    (plan,) = [c for c in commands if c.endswith(f" job plan {run_dir}")]
    done = subprocess.run(
        ["/bin/sh", "-c", plan],
        cwd=VENV_BIN.parent.parent,
        env=_env(BARE_PATH),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "planned job" in done.stdout


def test_on_path_the_summary_says_agent_kit(recorded: tuple[Path, str], tmp_path: Path) -> None:
    """The same script found first on PATH: the re-rendered summary's commands start with a
    bare ``agent-kit``."""
    run_dir, _ = recorded
    done = _run(["agent-kit", "report", str(run_dir)], cwd=tmp_path, path=f"{VENV_BIN}:{BARE_PATH}")
    assert done.returncode == 0, done.stderr
    commands = [c for c in _next_commands(done.stdout) if not c.startswith("file://")]
    assert commands
    assert all(c.startswith("agent-kit ") for c in commands), commands


def test_another_agent_kit_on_path_is_not_taken_for_this_one(
    recorded: tuple[Path, str], tmp_path: Path
) -> None:
    """With a different ``agent-kit`` first on PATH, the commands name this one by its
    absolute path (outside the working directory)."""
    run_dir, _ = recorded
    other = tmp_path / "bin"
    other.mkdir()
    (other / "agent-kit").write_text("#!/bin/sh\nexit 3\n")
    (other / "agent-kit").chmod(0o755)
    done = _run([str(SCRIPT), "report", str(run_dir)], cwd=tmp_path, path=f"{other}:{VENV_BIN}")
    assert done.returncode == 0, done.stderr
    commands = [c for c in _next_commands(done.stdout) if not c.startswith("file://")]
    assert all(c.startswith(f"{shlex.quote(str(SCRIPT))} ") for c in commands), commands


def test_python_dash_m_names_the_interpreter(recorded: tuple[Path, str], tmp_path: Path) -> None:
    """Started as ``python -m agent_kit.cli``, the commands say so, with this interpreter."""
    run_dir, _ = recorded
    argv = [sys.executable, "-m", "agent_kit.cli", "report", str(run_dir)]
    done = _run(argv, cwd=tmp_path, path=BARE_PATH)
    assert done.returncode == 0, done.stderr
    commands = [c for c in _next_commands(done.stdout) if not c.startswith("file://")]
    prefix = f"{shlex.quote(sys.executable)} -m agent_kit.cli "
    assert all(c.startswith(prefix) for c in commands), commands


def test_in_process_the_prefix_is_agent_kit() -> None:
    """Neither the console script nor ``-m agent_kit.cli`` (a test runner, an embedding
    program): the prefix stays ``agent-kit``."""
    assert program("/usr/lib/python3/pytest") == "agent-kit"
