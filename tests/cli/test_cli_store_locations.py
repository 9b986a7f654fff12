"""Run stores in places they cannot be: ``emulate --store`` on a file that is not a store or
where nothing can be created, ``replay`` of a run whose location is read-only.

The read-only case runs ``agent-kit`` as a real subprocess with file permissions binding it
(as root too: :mod:`fakes.permissions`); the emulator case stops before it binds a socket.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.permissions import run_unprivileged

from agent_kit.cli import main

AGENTS = Path(__file__).parents[1] / "agents"


@pytest.mark.parametrize("kind", ["regular-file", "proc"])
def test_emulate_store_that_cannot_be_a_store_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """``emulate --store`` naming a regular file (like /etc/passwd) or a place nothing can be
    created (/proc) prints one ``error:`` line naming it and exits 2; the file is untouched."""
    if kind == "regular-file":
        store = tmp_path / "passwd"
        store.write_text("root:x:0:0::/root:/bin/sh\n")
    else:
        store = Path("/proc/agent-kit-store")
    code = main(["emulate", "--store", str(store), "--port", "0"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: cannot open the run store {store}")
    assert len(err.strip().splitlines()) == 1
    if kind == "regular-file":
        assert store.read_text() == "root:x:0:0::/root:/bin/sh\n"


@pytest.mark.e2e
def test_replay_of_a_run_on_a_read_only_location_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``replay`` of a run whose directory and parent are read-only cannot write its replay run
    beside it: one ``error:`` line that names the place and ``--out``, exit 14 (the run store
    error), no traceback; with ``--out`` elsewhere it replays."""
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": json.dumps({"turns": 1})}) + "\n")
    runs = tmp_path / "runs"
    argv = ["run", str(AGENTS / "good_agent.py"), "--dataset", str(data), "--group-size", "2"]
    assert main([*argv, "--out", str(runs), "--name", "rec", "--json"]) == 0
    capsys.readouterr()
    modes = {path: path.stat().st_mode for path in [runs, *runs.rglob("*")]}
    for path in modes:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        done = run_unprivileged(["replay", str(runs / "rec"), "--limit", "1"])
        elsewhere = run_unprivileged(
            ["replay", str(runs / "rec"), "--limit", "1", "--out", str(tmp_path / "out")]
        )
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
    assert done.returncode == 14, done.stderr
    assert done.stderr.startswith(f"error: cannot write the replay run under {runs}")
    assert "--out" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert elsewhere.returncode == 0, elsewhere.stderr
