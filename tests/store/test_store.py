"""Run store: schema versioning, round trips, WAL durability and cross-process reads."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agent_kit.errors import RunStoreError, UsageError
from agent_kit.store import (
    RUN_FILE,
    SCHEMA_VERSION,
    RunStore,
    TrajectoryRow,
    TurnEvent,
    TurnRow,
    TurnTotals,
    load_rollouts,
    resolve_path,
)
from agent_kit.store import schema as store_schema

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


def test_a_turn_and_its_events_are_one_transaction(tmp_path: Path) -> None:
    """record_turn stores a turn's events in order with their own times, then its row; a
    duplicate turn stores none of it; events alone are stored without a row."""
    with RunStore.open(tmp_path / "run") as store:
        store.create_job(ARN, "j", {})
        store.create_trajectory(TrajectoryRow(id="t", job_arn=ARN, state="OPEN", prompt=""))
        noted = [TurnEvent("policy_connection", {"turn": 0}, 1.5), TurnEvent("chaos", {}, 2.5)]
        store.record_turn("t", noted, _turn("t", 0), response_json='{"a":1}')
        (turn,) = store.list_turns("t")
        assert turn.response == {"a": 1}
        events = [(e.kind, e.detail, e.created_at) for e in store.list_events("t")][1:]
        assert events == [("policy_connection", {"turn": 0}, 1.5), ("chaos", {}, 2.5)]
        with pytest.raises(UsageError, match="turn 0 of 't' already stored"):
            store.record_turn("t", [TurnEvent("lost", {}, 3.0)], _turn("t", 0))
        assert store.list_events("t", kind="lost") == []
        nan_turn = dataclasses.replace(_turn("t", 1), request={"x": float("nan")})
        with pytest.raises(ValueError, match="not JSON compliant"):
            store.record_turn("t", [TurnEvent("lost", {}, 3.0)], nan_turn)
        assert store.list_events("t", kind="lost") == []
        assert store.count_turns("t") == 1
        store.record_turn("t", [TurnEvent("policy_error", {"turn": 1}, 4.0)])
        assert [e.kind for e in store.list_events("t")][-1] == "policy_error"
        assert store.count_turns("t") == 1


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
    """An unrelated SQLite file and a missing read-only store are UsageErrors, a file that is not
    SQLite at all is a damaged store (RunStoreError), not a crash."""
    conn = sqlite3.connect(tmp_path / "other.db")
    conn.execute("CREATE TABLE x (a)")
    conn.close()
    with pytest.raises(UsageError, match="not an agent_kit run store"):
        RunStore.open(tmp_path / "other.db")
    with pytest.raises(UsageError, match="no run store"):
        RunStore.open(tmp_path / "missing", readonly=True)
    (tmp_path / "garbage.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(RunStoreError, match="cannot open run store"):
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
from agent_kit.store import RunStore, TrajectoryRow, TurnRow
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
from agent_kit.store import RunStore
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


# -- schema migrations ---------------------------------------------------------------------------

#: The schema exactly as agent_kit wrote it at schema version 1 (before migrations existed).
_V1_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    arn TEXT PRIMARY KEY, name TEXT NOT NULL, created_at REAL NOT NULL,
    config TEXT NOT NULL, status TEXT NOT NULL, summary TEXT);
CREATE TABLE IF NOT EXISTS trajectories (
    id TEXT PRIMARY KEY, job_arn TEXT NOT NULL, state TEXT NOT NULL, prompt TEXT NOT NULL,
    payload TEXT, step INTEGER NOT NULL, prompt_index INTEGER NOT NULL,
    sample_index INTEGER NOT NULL, attempt INTEGER NOT NULL, retry_of TEXT, replay_of TEXT,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, reason TEXT);
CREATE INDEX IF NOT EXISTS trajectories_job ON trajectories(job_arn, step, prompt_index);
CREATE TABLE IF NOT EXISTS turns (
    trajectory_id TEXT NOT NULL, idx INTEGER NOT NULL, route TEXT NOT NULL,
    request TEXT NOT NULL, response TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL, usage_estimated INTEGER NOT NULL,
    latency_ms REAL NOT NULL, created_at REAL NOT NULL, stream INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (trajectory_id, idx));
CREATE TABLE IF NOT EXISTS rewards (
    trajectory_id TEXT PRIMARY KEY, rewards TEXT NOT NULL, total REAL NOT NULL,
    client_token TEXT, body_hash TEXT, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, trajectory_id TEXT, kind TEXT NOT NULL,
    detail TEXT NOT NULL, created_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS events_trajectory ON events(trajectory_id);
CREATE TABLE IF NOT EXISTS client_tokens (
    token TEXT PRIMARY KEY, operation TEXT NOT NULL, body_hash TEXT NOT NULL,
    created_at REAL NOT NULL);
"""


def _write_v1_store(file: Path) -> None:
    """A version 1 run store with one row in every table, written the way the v1 code did."""
    file.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(file, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("BEGIN IMMEDIATE")
    for statement in _V1_SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1'), ('created_at', '1700000000.5')")
    conn.execute("PRAGMA user_version=1")
    conn.execute(
        "INSERT INTO jobs VALUES (?, 'old-job', 1700000001.0, ?, 'completed', ?)",
        (ARN, json.dumps({"group_size": 2}), json.dumps({"run": {"done": 1}})),
    )
    conn.execute(
        "INSERT INTO trajectories VALUES "
        "('t1', ?, 'REWARDED', 'p', ?, 3, 1, 0, 0, NULL, NULL, 1700000002.0, 1700000003.0, NULL)",
        (ARN, json.dumps({"prompt": "p"})),
    )
    conn.execute(
        "INSERT INTO turns VALUES ('t1', 0, '/sample', ?, ?, 11, 7, 0, 2.5, 1700000002.5, 0)",
        (json.dumps({"messages": []}), json.dumps({"choices": [{"message": {}}]})),
    )
    conn.execute("INSERT INTO rewards VALUES ('t1', '[0.5]', 0.5, 'tok', 'h', 1700000003.0)")
    conn.execute(
        "INSERT INTO events(trajectory_id, kind, detail, created_at) "
        "VALUES ('t1', 'invocation', '{\"status\":\"ok\"}', 1700000003.0)"
    )
    conn.execute("INSERT INTO client_tokens VALUES ('tok', 'UpdateReward', 'h', 1700000003.0)")
    conn.execute("COMMIT")
    conn.close()


def _indexes(file: Path) -> set[str]:
    """The names of the indexes defined in a store file."""
    with sqlite3.connect(file) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type='index'").fetchall()
    return {r[0] for r in rows if not r[0].startswith("sqlite_autoindex")}


def _user_version(file: Path) -> int:
    """PRAGMA user_version of a store file."""
    with sqlite3.connect(file) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def test_v1_store_is_migrated_to_the_current_version_with_rows_intact(tmp_path: Path) -> None:
    """A writable open of a version 1 store adds the v2 indexes, sets version 2, keeps every row."""
    file = tmp_path / "old" / RUN_FILE
    _write_v1_store(file)
    with RunStore.open(tmp_path / "old") as store:
        job = store.get_job(ARN)
        assert job is not None
        assert (job.name, job.status, job.config, job.summary) == (
            "old-job",
            "completed",
            {"group_size": 2},
            {"run": {"done": 1}},
        )
        (traj,) = store.list_trajectories(ARN, states=["REWARDED"])
        assert (traj.id, traj.step, traj.prompt_index, traj.payload) == (
            "t1",
            3,
            1,
            {"prompt": "p"},
        )
        (turn,) = store.list_turns("t1")
        assert (turn.route, turn.prompt_tokens, turn.completion_tokens) == ("/sample", 11, 7)
        reward = store.get_reward("t1")
        assert reward is not None
        assert (reward.rewards, reward.total) == ([0.5], 0.5)
        assert [e.detail for e in store.list_events(kind="invocation")] == [{"status": "ok"}]
        assert store.get_token("tok") == ("UpdateReward", "h")
        assert store.meta() == {
            "schema_version": str(SCHEMA_VERSION),
            "created_at": "1700000000.5",
        }
        store.add_turn(_turn("t1", 1))  # the migrated store takes new writes
        assert store.count_turns("t1") == 2
    assert SCHEMA_VERSION == 4
    assert _user_version(file) == 4
    assert {"events_kind", "trajectories_job_state"} <= _indexes(file)


def test_a_failing_migration_step_rolls_the_whole_migration_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step that fails leaves the store at version 1 with none of the step's changes."""
    file = tmp_path / "old" / RUN_FILE
    _write_v1_store(file)
    first, second, *_ = store_schema.MIGRATIONS
    broken = store_schema.Migration(
        2, second.purpose, (*second.statements, "CREATE INDEX broken ON no_such_table(x)")
    )
    monkeypatch.setattr(store_schema, "MIGRATIONS", (first, broken))
    with pytest.raises(UsageError, match="cannot open run store"):
        RunStore.open(tmp_path / "old")
    assert _user_version(file) == 1
    assert "events_kind" not in _indexes(file)
    with sqlite3.connect(file) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
            "1",
        )
        assert conn.execute("SELECT count(*) FROM turns").fetchone() == (1,)


def test_readonly_open_reads_an_older_store_without_migrating(tmp_path: Path) -> None:
    """A read-only open of a version 1 store reads its rows and leaves it at version 1."""
    file = tmp_path / "old" / RUN_FILE
    _write_v1_store(file)
    with RunStore.open(tmp_path / "old", readonly=True) as store:
        assert [t.id for t in store.list_trajectories(ARN)] == ["t1"]
        assert store.count_turns("t1") == 1
    assert _user_version(file) == 1
    assert "events_kind" not in _indexes(file)


def test_a_migrated_store_records_auxiliary_calls_apart_from_the_policy_turns(
    tmp_path: Path,
) -> None:
    """A version 1 store migrated to version 3 stores judge/user calls in their own numbering,
    lists them per trajectory and per job, and its policy turns stay as they were."""
    from agent_kit.store import AuxTurnRow

    file = tmp_path / "old" / RUN_FILE
    _write_v1_store(file)
    with RunStore.open(tmp_path / "old") as store:
        for kind in ("judge", "user", "judge"):
            row = AuxTurnRow("t1", -1, kind, {"messages": []}, {"choices": []}, 5, 2, False, 1.0)
            store.add_aux_turn(row)
        assert [(a.idx, a.kind) for a in store.list_aux_turns("t1")] == [
            (0, "judge"),
            (1, "user"),
            (2, "judge"),
        ]
        assert [len(v) for v in store.job_aux_turns(ARN).values()] == [3]
        assert store.count_turns("t1") == 1


def test_a_migrated_store_names_the_adapter_that_sampled_a_rollout(tmp_path: Path) -> None:
    """A version 1 store migrated to version 4 takes a rollout's adapter; its rollout names it,
    and ids it does not hold are ignored."""
    file = tmp_path / "old" / RUN_FILE
    _write_v1_store(file)
    with RunStore.open(tmp_path / "old") as store:
        assert store.list_trajectories(ARN)[0].adapter is None
        store.set_adapter(["t1", "not-stored"], "step-0002")
        (rollout,) = load_rollouts(store, ARN)
    assert rollout.adapter == "step-0002"


def test_an_older_store_read_as_it_is_names_no_adapter(tmp_path: Path) -> None:
    """A read-only open of a version 1 store (no adapter column) reads its rollouts, adapter
    None, and leaves the file as it was."""
    file = tmp_path / "old" / RUN_FILE
    _write_v1_store(file)
    with RunStore.open(tmp_path / "old", readonly=True) as store:
        (rollout,) = load_rollouts(store, ARN)
    assert rollout.adapter is None
    assert _user_version(file) == 1


def test_a_store_read_as_it_is_without_the_aux_table_has_no_auxiliary_calls(
    tmp_path: Path,
) -> None:
    """A read-only open of a version 1 store lists no auxiliary calls (it has no aux table)."""
    file = tmp_path / "old" / RUN_FILE
    _write_v1_store(file)
    with RunStore.open(tmp_path / "old", readonly=True) as store:
        assert store.list_aux_turns("t1") == []
        assert store.job_aux_turns(ARN) == {}


def test_migration_steps_are_numbered_in_order() -> None:
    """Step i produces version i + 1, and the last step's version is the current one."""
    assert [m.version for m in store_schema.MIGRATIONS] == list(
        range(1, len(store_schema.MIGRATIONS) + 1)
    )
    assert store_schema.MIGRATIONS[-1].version == SCHEMA_VERSION


def test_new_store_runs_every_step_and_queries_use_the_v2_indexes(tmp_path: Path) -> None:
    """A new store is at version 2, and events by kind / trajectories by job+state use indexes."""
    RunStore.open(tmp_path / "new").close()
    file = tmp_path / "new" / RUN_FILE
    assert _user_version(file) == SCHEMA_VERSION
    with sqlite3.connect(file) as conn:
        by_kind = conn.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM events WHERE kind = ? ORDER BY id", ("x",)
        ).fetchall()
        by_state = conn.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM trajectories WHERE job_arn = ? AND state IN (?, ?) "
            "ORDER BY created_at, rowid",
            (ARN, "OPEN", "READY"),
        ).fetchall()
    assert any("USING INDEX events_kind" in row[3] for row in by_kind)
    assert any("USING INDEX trajectories_job_state" in row[3] for row in by_state)


def test_row_types_and_version_stay_importable_from_the_store_module() -> None:
    """Row types and SCHEMA_VERSION, moved to store_rows / store_schema, are re-exported."""
    from agent_kit import store
    from agent_kit.store import rows as store_rows

    for name in ("EventRow", "JobRow", "RewardRow", "TrajectoryRow", "TurnRow"):
        assert getattr(store, name) is getattr(store_rows, name), name
    assert store.SCHEMA_VERSION == store_schema.SCHEMA_VERSION


def test_turn_and_reward_totals_agree_with_the_rows_and_stay_inside_the_job(tmp_path: Path) -> None:
    """The summary's one-query sums equal what the turn and reward rows say, per trajectory,
    and never count another job's rows (a store may hold several jobs)."""
    other = ARN.replace("store-test", "other-job")
    with RunStore.open(tmp_path / "run") as store:
        store.create_job(ARN, "store-test", {})
        store.create_job(other, "other-job", {})
        for tid, arn, turns in (("a", ARN, 3), ("b", ARN, 0), ("c", ARN, 1), ("x", other, 2)):
            store.create_trajectory(TrajectoryRow(id=tid, job_arn=arn, state="OPEN", prompt=""))
            for i in range(turns):
                fields = {**_turn(tid, i).__dict__, "prompt_tokens": 5 + i}
                store.add_turn(TurnRow(**{**fields, "usage_estimated": i != 1}))
        store.set_reward("a", [0.25, 0.5], None, None, state="REWARDED")
        store.set_reward("x", [1.0], None, None, state="REWARDED")
        totals = store.turn_totals(ARN)
        assert set(totals) == {"a", "c"}  # "b" has no turns, "x" is the other job's
        for tid, got in totals.items():
            rows = store.list_turns(tid)
            assert got == TurnTotals(
                turns=len(rows),
                prompt_tokens=sum(t.prompt_tokens for t in rows),
                completion_tokens=sum(t.completion_tokens for t in rows),
                estimated=sum(1 for t in rows if t.usage_estimated),
            )
        assert totals["a"] == TurnTotals(3, 18, 6, 2)
        assert store.reward_totals(ARN) == {"a": 0.75}
        assert store.reward_totals(other) == {"x": 1.0}
