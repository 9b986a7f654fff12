"""What a grid's ``--out`` holds is read for what it is: a cell's folder kept only when its run
is the cell's, a folder whose store holds no run played again, and a results page that cannot
be written (a full disk) one line with exit 14 and the page as it was.

Real agent processes (``tests/agents/say_agent.py``, reward 1) and the emulator on loopback,
one cell (the ``say_policy`` policy, id ``policy``) of two prompts × 2 samples. The full disk
is a real one as far as the process can tell: the command runs under a file size limit
(RLIMIT_FSIZE, set in a subprocess before it execs ``agent-kit``), so the write of the page
fails with EFBIG at the OS boundary, as a full disk fails it with ENOSPC. A limit binds writes
at any offset past it, also inside SQLite's existing 32 KiB ``-shm`` file that a full disk
would let a reader use, so the kept cell's store is put in rollback-journal mode first (a reader
then writes nothing).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import SAY_AGENT, SAY_POLICY

from agent_kit.cli import main

pytestmark = pytest.mark.e2e

AGENT_KIT = Path(sys.executable).with_name("agent-kit")
CELL = "policy"
#: Runs ``argv[2:]`` with its file size limit set to ``argv[1]`` bytes (a write past it fails
#: with EFBIG; Python ignores SIGXFSZ), as tests/driver/test_reliability.py does.
LIMIT_FSIZE = (
    "import os, resource, sys\n"
    "limit = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def _dataset(path: Path, prompts: int) -> Path:
    path.write_text(
        "".join(json.dumps({"prompt": json.dumps({"n": i})}) + "\n" for i in range(prompts)),
        encoding="utf-8",
    )
    return path


def _argv(dataset: Path, out: Path, *extra: str) -> list[str]:
    return [
        "eval", str(SAY_AGENT), "--dataset", str(dataset), "--policy", SAY_POLICY,
        "--samples", "2", "--workers", "1", "--out", str(out), *extra,
    ]  # fmt: skip


def _eval(argv: list[str]) -> tuple[int, dict[str, Any] | None]:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main([*argv, "--json"])
    lines = stdout.getvalue().strip().splitlines()
    return code, json.loads(lines[-1]) if lines else None


@pytest.fixture
def played(tmp_path: Path) -> tuple[Path, Path]:
    """A one-cell grid played to the end: (dataset, eval directory)."""
    dataset = _dataset(tmp_path / "d.jsonl", 2)
    out = tmp_path / "ev"
    code, doc = _eval(_argv(dataset, out))
    assert code == 0
    assert doc is not None
    assert doc["cells"][0]["figures"]["n"] == 4
    return dataset, out


def test_a_run_named_like_a_cell_is_not_adopted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An --out holding another run under the cell's name (`run --name policy`, another
    holdout, group size 4) and no grid.json: one line naming the folder and what differs,
    exit 2, from the run and from --plan; the run is left as it was and no grid.json is
    written."""
    other = _dataset(tmp_path / "other.jsonl", 3)
    out = tmp_path / "ev"
    run = ["run", str(SAY_AGENT), "--dataset", str(other), "--policy", SAY_POLICY]
    run += ["--group-size", "4", "--workers", "1", "--name", CELL, "--out", str(out), "--json"]
    assert main(run) == 0
    store = out / CELL / "run.sqlite"
    before = store.stat().st_mtime_ns
    capsys.readouterr()
    code, _ = _eval(_argv(_dataset(tmp_path / "d.jsonl", 2), out))
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert f"{out / CELL} holds a run that is not the cell {CELL}" in err
    assert "samples" in err
    assert "holdout" in err
    assert main([*_argv(tmp_path / "d.jsonl", out), "--plan"]) == 2  # nor planned from
    assert "holds a run that is not the cell" in capsys.readouterr().err
    assert store.stat().st_mtime_ns == before
    assert not (out / "grid.json").exists()


def test_a_kept_cell_is_checked_when_grid_json_was_deleted(
    played: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """grid.json deleted, the same grid at another temperature: the played cell is not this
    grid's cell (its temperature differs), so it is refused, not kept."""
    dataset, out = played
    (out / "grid.json").unlink()
    capsys.readouterr()
    code, _ = _eval(_argv(dataset, out, "--temperature", "0.5"))
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert "(its temperature differ)" in err
    code, doc = _eval(_argv(dataset, out))  # the grid it is: kept
    assert code == 0
    assert doc is not None
    assert f"{CELL}: completed (kept)" in capsys.readouterr().err


def test_a_cell_whose_store_holds_no_run_is_played_again(
    played: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A cell whose run.sqlite is empty (0 bytes, as a failure at its creation leaves it) and
    has no summary is played again, with a line saying why; the re-run completes."""
    dataset, out = played
    cell = out / CELL
    for name in ("summary.json", "report.html", "run.sqlite-wal", "run.sqlite-shm"):
        (cell / name).unlink(missing_ok=True)
    (cell / "run.sqlite").write_bytes(b"")
    capsys.readouterr()
    code, doc = _eval(_argv(dataset, out))
    err = capsys.readouterr().err
    assert code == 0, err
    assert "its run store is empty (0 bytes): played again" in err
    assert doc is not None
    figures = doc["cells"][0]["figures"]
    assert (figures["state"], figures["n"], figures["mean"]) == ("completed", 4, 1.0)


def test_a_full_disk_at_the_page_is_one_line_and_exit_14(played: tuple[Path, Path]) -> None:
    """The re-run's writes are limited to a size between table.json's and eval.html's: the
    page cannot be written, so one `error:` line names it, exit 14, no traceback; eval.html
    keeps its earlier bytes (never left empty or half written) and no temporary file stays."""
    dataset, out = played
    with contextlib.closing(sqlite3.connect(out / CELL / "run.sqlite")) as conn:
        assert conn.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    page = (out / "eval.html").read_bytes()
    table = (out / "table.json").stat().st_size
    limit = (table + len(page)) // 2
    assert table < limit < len(page)
    command = [sys.executable, "-c", LIMIT_FSIZE, str(limit), str(AGENT_KIT), *_argv(dataset, out)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RFT_"))}
    proc = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 14, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert f"cannot write {out / 'eval.html'}" in errors[0]
    assert (out / "eval.html").read_bytes() == page
    assert not list(out.glob("*.tmp"))
