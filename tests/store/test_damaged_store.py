"""A damaged, empty or read-only run store: every reader and ``run --resume`` answers with one
clear line and never writes into the file.

The stores are real (written through :class:`RunStore`, closed, so every commit is in the main
file) and damaged for real: truncated to 0 bytes, or 64 KB in the middle overwritten with
garbage. The read-only location is a read-only tmpfs mount when the tests run as root (where
``chmod`` stops nothing) and a ``chmod 0555`` directory otherwise.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_kit.cli import main
from agent_kit.errors import RunStoreError, UsageError
from agent_kit.store import INVOCATION_EVENT, RunStore, TrajectoryRow, TurnRow, load_rollouts

ARN = "arn:aws:sagemaker:us-west-2:000000000000:rl-job/damaged"
GARBAGE = 64 * 1024


def _write_run(directory: Path, *, turns: int = 40) -> Path:
    """A finished one-job run of two rewarded trajectories with ``turns`` turns each of ~2 KB
    (a file of a few hundred KB, so 64 KB of garbage lands mid-file)."""
    with RunStore.open(directory) as store:
        config = {"entrypoint": "agent.py", "dataset": "data.jsonl", "job": {"group_size": 2}}
        store.create_job(ARN, "damaged", config)
        for sample in range(2):
            tid = f"t{sample}"
            store.create_trajectory(
                TrajectoryRow(tid, ARN, "OPEN", "{}", step=0, prompt_index=0, sample_index=sample)
            )
            for idx in range(turns):
                request = {"messages": [{"role": "user", "content": f"{idx} " + "x" * 2000}]}
                response = {"choices": [{"message": {"role": "assistant", "content": "ok"}}]}
                store.add_turn(
                    TurnRow(tid, idx, "/v1/chat/completions", request, response, 10, 2, False, 1.0)
                )
            store.add_event(INVOCATION_EVENT, {"status": "ok", "body": {}}, trajectory_id=tid)
            store.set_reward(tid, [float(sample)], None, None, state="REWARDED")
        store.update_job(ARN, status="completed")
    return directory


def _empty(file: Path) -> None:
    file.write_bytes(b"")


def _garbage(file: Path) -> None:
    size = file.stat().st_size
    assert size > 3 * GARBAGE
    with file.open("r+b") as out:
        out.seek(size // 2 - GARBAGE // 2)
        out.write(random.Random(8).randbytes(GARBAGE))


DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "empty": (_empty, "is empty (0 bytes)"),
    "garbage": (_garbage, "is damaged (SQLite's quick_check: "),
}


def _fingerprint(directory: Path) -> tuple[str, int, list[str]]:
    """The store file's bytes (hash) and mtime, and the directory's file names."""
    file = directory / "run.sqlite"
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    return digest, file.stat().st_mtime_ns, sorted(p.name for p in directory.iterdir())


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: ")
    return lines[0]


def _readers(run_dir: Path, out: Path) -> dict[str, list[str]]:
    return {
        "report": ["report", str(run_dir)],
        "report --html": ["report", str(run_dir), "--html"],
        "replay": ["replay", str(run_dir)],
        "replay export": ["replay", "export", str(run_dir), "-o", str(out / "c.jsonl")],
        "export mlflow": ["export", "mlflow", str(run_dir)],
        "doctor reward": ["doctor", "reward", str(run_dir)],
    }


@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("reader", sorted(_readers(Path("r"), Path("o"))))
def test_readers_answer_a_damaged_store_with_one_line_and_leave_it_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, reader: str
) -> None:
    """Each reader exits 14 with one line naming the file and the damage, and the file keeps
    its bytes and mtime (an empty one gets no tables and no -wal/-shm)."""
    run_dir = _write_run(tmp_path / "run")
    damage_file, words = DAMAGES[damage]
    damage_file(run_dir / "run.sqlite")
    before = _fingerprint(run_dir)
    code = main(_readers(run_dir, tmp_path)[reader])
    line = _one_error_line(capsys)
    assert code == RunStoreError.exit_code, line
    assert f"run store {run_dir / 'run.sqlite'} {words}" in line
    after = _fingerprint(run_dir)
    assert after[:2] == before[:2]
    if damage == "empty":
        assert after[2] == ["run.sqlite"]


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_resume_of_a_damaged_store_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """``run --resume`` refuses a damaged store with one line saying nothing was changed, and
    the file keeps its bytes and mtime, without SQLite side files."""
    run_dir = _write_run(tmp_path / "run")
    with RunStore.open(run_dir) as store:
        store.update_job(ARN, status="running")
    damage_file, words = DAMAGES[damage]
    damage_file(run_dir / "run.sqlite")
    before = _fingerprint(run_dir)
    code = main(["run", "--resume", str(run_dir)])
    line = _one_error_line(capsys)
    assert code == RunStoreError.exit_code, line
    assert f"run store {run_dir / 'run.sqlite'} {words}" in line
    assert line.endswith("nothing was changed, the run was not resumed")
    after = _fingerprint(run_dir)
    assert after[:2] == before[:2]
    assert not {"run.sqlite-wal", "run.sqlite-shm"} & set(after[2])


def test_store_opens_refuse_damage_without_writing(tmp_path: Path) -> None:
    """RunStore.open, read-only or writable, raises RunStoreError for a damaged file and leaves
    its bytes as they were; a read-only open leaves an empty file empty."""
    run_dir = _write_run(tmp_path / "garbage")
    _garbage(run_dir / "run.sqlite")
    before = _fingerprint(run_dir)
    for readonly in (True, False):
        with pytest.raises(RunStoreError, match="is damaged"):
            RunStore.open(run_dir, readonly=readonly)
    assert _fingerprint(run_dir)[:2] == before[:2]
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "run.sqlite").write_bytes(b"")
    with pytest.raises(RunStoreError, match="is empty"):
        RunStore.open(empty, readonly=True)
    assert _fingerprint(empty)[2] == ["run.sqlite"]
    assert (empty / "run.sqlite").stat().st_size == 0


@contextlib.contextmanager
def _read_only_copy(run_dir: Path, base: Path, extra: tuple[str, ...] = ()) -> Iterator[Path]:
    """A copy of ``run_dir``'s store (plus ``extra`` side files) in a directory nobody can
    write: a read-only tmpfs mount as root, a chmod 0555 directory otherwise."""
    target = base / "ro"
    target.mkdir()
    root = os.geteuid() == 0
    if root:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(target)], check=False)
        if mounted.returncode != 0:
            pytest.skip("running as root without the right to mount a read-only tmpfs")
    try:
        for name in ("run.sqlite", *extra):
            shutil.copyfile(run_dir / name, target / name)
        if root:
            subprocess.run(["mount", "-o", "remount,ro", str(target)], check=True)
        else:
            target.chmod(0o555)
        with pytest.raises(OSError, match=r"Read-only file system|Permission denied"):
            (target / "probe").write_bytes(b"")
        yield target
    finally:
        if root:
            subprocess.run(["umount", str(target)], check=True)
        else:
            target.chmod(0o755)


@pytest.mark.e2e
def test_readers_read_a_run_on_a_read_only_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a read-only location (no -wal/-shm can be created) the store opens read-only,
    ``report --json`` and ``replay export`` succeed, and the file is unchanged."""
    run_dir = _write_run(tmp_path / "run")
    with _read_only_copy(run_dir, tmp_path) as ro:
        before = _fingerprint(ro)
        with RunStore.open(ro, readonly=True) as store:
            assert [job.arn for job in store.list_jobs()] == [ARN]
            assert len(store.list_turns("t1")) == 40
        assert main(["report", str(ro), "--json"]) == 0
        assert '"schema":"agent_kit.summary/2"' in capsys.readouterr().out
        cassette = tmp_path / "c.jsonl"
        assert main(["replay", "export", str(ro), "-o", str(cassette)]) == 0
        assert cassette.stat().st_size > 0
        assert _fingerprint(ro) == before


@pytest.mark.e2e
def test_a_write_ahead_log_unreadable_on_a_read_only_location_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store whose commits sit in a -wal that SQLite cannot read there (no -shm, read-only
    location) is refused with one line (exit 14), not read without its latest commits."""
    run_dir = _write_run(tmp_path / "run", turns=2)
    writer = sqlite3.connect(run_dir / "run.sqlite")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE jobs SET status = 'running'")
    writer.commit()
    try:
        with _read_only_copy(run_dir, tmp_path, extra=("run.sqlite-wal",)) as ro:
            with pytest.raises(RunStoreError, match=r"write-ahead log run\.sqlite-wal"):
                RunStore.open(ro, readonly=True)
            assert main(["report", str(ro)]) == RunStoreError.exit_code
            line = _one_error_line(capsys)
            assert "read-only" in line
    finally:
        writer.close()


def test_foreign_and_newer_stores_stay_usage_errors_for_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that is SQLite but no run store is a UsageError (exit 2) for resume, before the
    writable open touches it."""
    run_dir = tmp_path / "foreign"
    run_dir.mkdir()
    conn = sqlite3.connect(run_dir / "run.sqlite")
    conn.execute("CREATE TABLE x (a)")
    conn.close()
    before = _fingerprint(run_dir)
    assert main(["run", "--resume", str(run_dir)]) == UsageError.exit_code
    assert "not an agent_kit run store" in _one_error_line(capsys)
    assert _fingerprint(run_dir)[:2] == before[:2]


#: A row damaged in place: (SQL that damages it, words of the error line).
ROW_DAMAGES: dict[str, tuple[str, str]] = {
    "turn not JSON": (
        "UPDATE turns SET request = '{bad' WHERE idx = 1",
        "is damaged: turns.request of trajectory t0, turn 1 is not valid JSON (",
    ),
    "turn not UTF-8": (
        "UPDATE turns SET response = CAST(X'7B22FF22' AS TEXT) WHERE idx = 1",
        "is damaged: a value of column 'response' is not UTF-8 text;",
    ),
    "event not JSON": (
        "UPDATE events SET detail = '{\"a\": 1' WHERE kind = 'invocation'",
        "is not valid JSON (",
    ),
    "event not an object": (
        "UPDATE events SET detail = '[1, 2]' WHERE kind = 'invocation'",
        "is JSON but not a dict",
    ),
    "job config not JSON": ("UPDATE jobs SET config = 'nope'", f"jobs.config of job {ARN}"),
    "reward list not JSON": ("UPDATE rewards SET rewards = '[1,'", "rewards.rewards of"),
}


def _damage_row(run_dir: Path, sql: str) -> None:
    conn = sqlite3.connect(run_dir / "run.sqlite")
    conn.execute(sql)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("reader", ["report", "report --html", "replay", "replay export"])
@pytest.mark.parametrize("damage", sorted(ROW_DAMAGES))
def test_a_damaged_row_is_one_line_for_every_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, reader: str
) -> None:
    """A row whose JSON is broken, not UTF-8 or of the wrong shape (the file itself intact):
    each reader exits 14 with one line naming the file, the column and the row, and saying
    what to do. (The terminal report reads only the turns' sums, so it reads past a damaged
    turn.)"""
    run_dir = _write_run(tmp_path / "run", turns=2)
    sql, words = ROW_DAMAGES[damage]
    _damage_row(run_dir, sql)
    code = main(_readers(run_dir, tmp_path)[reader])
    if reader == "report" and damage.startswith("turn "):
        assert code == 0
        return
    line = _one_error_line(capsys)
    assert code == RunStoreError.exit_code, line
    assert f"run store {run_dir / 'run.sqlite'} " in line
    assert words in line
    assert line.endswith("restore it from a copy or start a new run")


@pytest.mark.parametrize("damage", ["turn not JSON", "turn not UTF-8", "reward list not JSON"])
def test_the_warm_start_reader_raises_the_clear_error(tmp_path: Path, damage: str) -> None:
    """What the warm start reads (a job's rewarded rollouts with their turns) raises
    RunStoreError with the same line, not a JSONDecodeError."""
    run_dir = _write_run(tmp_path / "run", turns=2)
    _damage_row(run_dir, ROW_DAMAGES[damage][0])
    with (
        RunStore.open(run_dir, readonly=True) as store,
        pytest.raises(RunStoreError, match=r"is damaged: .*start a new run$"),
    ):
        load_rollouts(store, ARN, with_turns=True)
