"""Run store: schema versioning, round trips, WAL durability and cross-process reads."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agent_kit.emulator.store import (
    RUN_FILE,
    SCHEMA_VERSION,
    RunStore,
    TrajectoryRow,
    TurnRow,
    resolve_path,
)
from agent_kit.errors import UsageError

ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/store-test"


def _turn(tid: str, idx: int) -> TurnRow:
    return TurnRow(
        trajectory_id=tid,
        idx=idx,
        route="/v1/chat/completions",
        request={"messages": [{"role": "user", "content": f"turn {idx}"}]},
        response={"choices": [{"message": {"content": "ok"}}]},
        prompt_tokens=7,
        completion_tokens=2,
        usage_estimated=True,
        latency_ms=0.5,
        stream=idx % 2 == 1,
    )


def test_round_trip_of_every_table(tmp_path: Path) -> None:
    """Jobs, trajectories, turns, rewards, tokens and events read back exactly as written."""
    with RunStore.open(tmp_path / "run") as store:
        job = store.create_job(ARN, "store-test", {"group_size": 4})
        assert job.status == "running"
        assert job.config == {"group_size": 4}
        store.update_job(ARN, status="done", summary={"reward": 1.5})
        assert store.get_job(ARN) is not None
        assert store.get_job(ARN).summary == {"reward": 1.5}
        store.create_trajectory(
            TrajectoryRow(id="t1", job_arn=ARN, state="OPEN", prompt="p", payload={"a": 1}, step=2)
        )
        store.add_turn(_turn("t1", 0))
        store.add_turn(_turn("t1", 1))
        turns = store.list_turns("t1")
        assert [t.idx for t in turns] == [0, 1]
        assert turns[1].stream
        assert not turns[0].stream
        assert turns[0].request["messages"][0]["content"] == "turn 0"
        assert store.count_turns("t1") == 2
        store.set_state("t1", "READY")
        reward = store.set_reward("t1", [0.25, 0.5], "tok", "hash", state="REWARDED")
        assert reward.total == pytest.approx(0.75)
        assert reward.rewards == [0.25, 0.5]
        assert store.get_trajectory("t1").state == "REWARDED"  # type: ignore[union-attr]
        assert store.remember_token("tok", "UpdateReward", "h") is None
        assert store.remember_token("tok", "UpdateReward", "other") == ("UpdateReward", "h")
        kinds = [(e.kind, e.detail["state"]) for e in store.list_events("t1")]
        assert kinds == [("state", "OPEN"), ("state", "READY"), ("state", "REWARDED")]
        assert [t.id for t in store.list_trajectories(ARN, states=["REWARDED"])] == ["t1"]
        assert store.list_trajectories(states=["OPEN"]) == []


def test_duplicates_are_usage_errors(tmp_path: Path) -> None:
    """A repeated trajectory id or turn index raises UsageError instead of overwriting."""
    with RunStore.open(tmp_path / "x.sqlite") as store:
        store.create_job(ARN, "j", {})
        store.create_trajectory(TrajectoryRow(id="t", job_arn=ARN, state="OPEN", prompt=""))
        with pytest.raises(UsageError, match="already exists"):
            store.create_trajectory(TrajectoryRow(id="t", job_arn=ARN, state="OPEN", prompt=""))
        store.add_turn(_turn("t", 0))
        with pytest.raises(UsageError, match="already stored"):
            store.add_turn(_turn("t", 0))


def test_path_resolution_and_pragmas(tmp_path: Path) -> None:
    """A directory gets run.sqlite inside; the file is in WAL mode with the schema version set."""
    assert resolve_path(tmp_path / "r") == tmp_path / "r" / RUN_FILE
    assert resolve_path(tmp_path / "a.db") == tmp_path / "a.db"
    RunStore.open(tmp_path / "r").close()
    conn = sqlite3.connect(tmp_path / "r" / RUN_FILE)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    assert meta["schema_version"] == str(SCHEMA_VERSION)
    conn.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    """A store written by a newer agent_kit is refused with a clear UsageError, read-only too."""
    RunStore.open(tmp_path / "r").close()
    conn = sqlite3.connect(tmp_path / "r" / RUN_FILE)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(UsageError, match="newer than this agent_kit"):
        RunStore.open(tmp_path / "r")
    with pytest.raises(UsageError, match="newer than this agent_kit"):
        RunStore.open(tmp_path / "r", readonly=True)


def test_foreign_sqlite_and_missing_files_are_refused(tmp_path: Path) -> None:
    """An unrelated SQLite file and a missing read-only store are UsageErrors, not crashes."""
    conn = sqlite3.connect(tmp_path / "other.db")
    conn.execute("CREATE TABLE x (a)")
    conn.close()
    with pytest.raises(UsageError, match="not an agent_kit run store"):
        RunStore.open(tmp_path / "other.db")
    with pytest.raises(UsageError, match="no run store"):
        RunStore.open(tmp_path / "missing", readonly=True)
    (tmp_path / "garbage.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(UsageError, match="cannot open run store"):
        RunStore.open(tmp_path / "garbage.sqlite")


def test_readonly_store_rejects_writes(tmp_path: Path) -> None:
    """A read-only handle reads rows and refuses writes."""
    with RunStore.open(tmp_path / "r") as store:
        store.create_job(ARN, "j", {})
    with RunStore.open(tmp_path / "r", readonly=True) as ro:
        assert [j.arn for j in ro.list_jobs()] == [ARN]
        with pytest.raises(sqlite3.OperationalError):
            ro.create_job(ARN + "x", "k", {})


def test_concurrent_writers_from_threads(tmp_path: Path) -> None:
    """Eight threads appending turns concurrently lose nothing and corrupt nothing."""
    with RunStore.open(tmp_path / "r") as store:
        store.create_job(ARN, "j", {})
        for t in range(8):
            store.create_trajectory(TrajectoryRow(id=f"t{t}", job_arn=ARN, state="OPEN", prompt=""))

        def work(t: int) -> None:
            for i in range(50):
                store.add_turn(_turn(f"t{t}", i))
                store.add_event("tick", {"i": i}, f"t{t}")

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert [store.count_turns(f"t{t}") for t in range(8)] == [50] * 8
        assert len(store.list_events(kind="tick")) == 400


_WRITER = """
import os, sys
from agent_kit.emulator.store import RunStore, TrajectoryRow, TurnRow
store = RunStore.open(sys.argv[1])
arn = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/kill"
store.create_job(arn, "kill", {})
store.create_trajectory(TrajectoryRow(id="t", job_arn=arn, state="OPEN", prompt=""))
for i in range(25):
    store.add_turn(TurnRow("t", i, "/sample", {"i": i}, {"ok": True}, 1, 1, True, 0.1))
print("written", flush=True)
os.kill(os.getpid(), 9)
"""


def test_kill_minus_nine_keeps_committed_turns_and_other_process_reads(tmp_path: Path) -> None:
    """A writer killed with SIGKILL right after its commits leaves every committed turn readable."""
    proc = subprocess.run(
        [sys.executable, "-c", _WRITER, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == -9, proc.stderr
    assert proc.stdout.strip() == "written"
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        turns = store.list_turns("t")
        assert [t.request["i"] for t in turns] == list(range(25))


_READER = """
import json, sys
from agent_kit.emulator.store import RunStore
with RunStore.open(sys.argv[1], readonly=True) as store:
    print(json.dumps([store.count_turns("t"), store.get_trajectory("t").state]))
"""


def test_other_process_reads_while_writer_is_open(tmp_path: Path) -> None:
    """Another process reads committed rows while this process still holds the store open."""
    with RunStore.open(tmp_path / "run") as store:
        store.create_job(ARN, "j", {})
        store.create_trajectory(TrajectoryRow(id="t", job_arn=ARN, state="OPEN", prompt=""))
        for i in range(3):
            store.add_turn(_turn("t", i))
        out = subprocess.run(
            [sys.executable, "-c", _READER, str(tmp_path / "run")],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert json.loads(out.stdout) == [3, "OPEN"]
