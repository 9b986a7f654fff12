"""The run store: one SQLite file per run (``RUN_DIR/run.sqlite``) holding jobs, trajectories,
turns, rewards, events and idempotency tokens.

Guarantees:

- **Versioned schema.** The version lives in ``PRAGMA user_version`` and in the ``meta`` table.
  A file written by a newer agent_kit is refused with :class:`~agent_kit.errors.UsageError`;
  an older known version is migrated forward on open.
- **Durable per turn.** WAL journal, ``synchronous=NORMAL``, one transaction per write call.
  In WAL mode every commit is written to the ``-wal`` file before the call returns, so after a
  ``kill -9`` of the writing process the OS still holds every committed page: only a write that
  was in flight (not yet committed) is lost. ``NORMAL`` skips the fsync per commit, which only
  matters for an OS crash or power loss (then the last few commits may be lost, the file is never
  corrupt). That keeps a turn write at tens of microseconds instead of a disk flush.
- **Readable while running.** Other processes may open the file with ``readonly=True`` at any
  time (WAL readers never block the writer).
- **Thread-safe.** One connection per store, every call serialised by a lock.
- **No secrets.** The store holds only what callers hand it; the emulator passes request bodies,
  never headers.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent_kit.errors import UsageError

__all__ = [
    "INVOCATION_EVENT",
    "RUN_FILE",
    "SCHEMA_VERSION",
    "EventRow",
    "JobRow",
    "RewardRow",
    "RunStore",
    "TrajectoryRow",
    "TurnRow",
    "resolve_path",
]

#: Version of the schema below; bump and add a migration when it changes.
SCHEMA_VERSION: Final = 1
#: File name of the store inside a run directory.
RUN_FILE: Final = "run.sqlite"
#: Event kind recording what the agent answered to an invocation (status, body, error).
INVOCATION_EVENT: Final = "invocation"
_FILE_SUFFIXES: Final = (".sqlite", ".sqlite3", ".db")

_SCHEMA: Final = """
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


@dataclass(frozen=True)
class JobRow:
    """One emulated job (an MTRL training or evaluation job)."""

    arn: str
    name: str
    created_at: float
    config: dict[str, Any]
    status: str
    summary: dict[str, Any] | None


@dataclass(frozen=True)
class TrajectoryRow:
    """One trajectory (= one rollout id) and its state-machine state."""

    id: str
    job_arn: str
    state: str
    prompt: str
    payload: dict[str, Any] | None = None
    step: int = 0
    prompt_index: int = 0
    sample_index: int = 0
    attempt: int = 0
    retry_of: str | None = None
    replay_of: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    reason: str | None = None


@dataclass(frozen=True)
class TurnRow:
    """One policy call of a trajectory: full request and response bodies, usage and latency.

    ``route`` is the HTTP route that carried it (``/sample``, ``/sample-with-response-stream``,
    ``/v1/chat/completions``); ``stream`` tells whether the caller asked for SSE.
    """

    trajectory_id: str
    idx: int
    route: str
    request: dict[str, Any]
    response: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    usage_estimated: bool
    latency_ms: float
    created_at: float = 0.0
    stream: bool = False


@dataclass(frozen=True)
class RewardRow:
    """The rewards reported for a trajectory; ``total`` is their sum."""

    trajectory_id: str
    rewards: list[float]
    total: float
    client_token: str | None
    body_hash: str | None
    created_at: float


@dataclass(frozen=True)
class EventRow:
    """A state change or notable occurrence (``kind``) with JSON details."""

    id: int
    trajectory_id: str | None
    kind: str
    detail: dict[str, Any]
    created_at: float


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _loads_opt(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def resolve_path(path: str | Path) -> Path:
    """The store file: ``path`` if it ends in .sqlite/.sqlite3/.db, else ``path/run.sqlite``."""
    p = Path(path)
    if p.suffix in _FILE_SUFFIXES:
        return p
    return p / RUN_FILE


class RunStore:
    """Thread-safe access to one run's SQLite file; see the module docstring for guarantees."""

    def __init__(self, conn: sqlite3.Connection, path: str, *, readonly: bool) -> None:
        self._conn = conn
        self._lock = threading.RLock()
        self.path = path
        self.readonly = readonly

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, *, readonly: bool = False) -> RunStore:
        """Open (creating unless ``readonly``) the store of a run directory or file.

        ``":memory:"`` gives a private in-memory store (tests). Raises
        :class:`~agent_kit.errors.UsageError` when the file is missing (read-only), not a
        store, or written by a newer agent_kit.
        """
        if str(path) == ":memory:":
            conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            store = cls(conn, ":memory:", readonly=False)
            store._init_schema()
            return store
        file = resolve_path(path)
        try:
            if readonly:
                if not file.exists():
                    raise UsageError(f"no run store at {file}")
                conn = sqlite3.connect(
                    f"{file.resolve().as_uri()}?mode=ro",
                    uri=True,
                    check_same_thread=False,
                    isolation_level=None,
                )
            else:
                file.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(str(file), check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=5000")
            store = cls(conn, str(file), readonly=readonly)
            if readonly:
                store._check_version(store._user_version())
            else:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                store._init_schema()
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"cannot open run store {file}: {exc}") from None
        return store

    def close(self) -> None:
        """Close the connection; later calls raise ``sqlite3.ProgrammingError``."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _user_version(self) -> int:
        row = self._conn.execute("PRAGMA user_version").fetchone()
        return int(row[0])

    def _check_version(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise UsageError(
                f"run store {self.path} has schema version {version}, newer than this "
                f"agent_kit understands ({SCHEMA_VERSION}); upgrade agent_kit to read it"
            )

    def _init_schema(self) -> None:
        with self._lock:
            version = self._user_version()
            self._check_version(version)
            if version == SCHEMA_VERSION:
                return
            if version == 0:
                has_tables = self._conn.execute(
                    "SELECT count(*) FROM sqlite_master WHERE type='table'"
                ).fetchone()[0]
                if has_tables:
                    raise UsageError(
                        f"{self.path} is an SQLite file but not an agent_kit run store"
                    )
            with self._tx():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
                self._conn.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
                self._conn.execute(
                    "INSERT OR IGNORE INTO meta(key, value) VALUES ('created_at', ?)",
                    (str(time.time()),),
                )
                self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        with self._lock:
            return self._conn.execute(sql, args).fetchone()

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def meta(self) -> dict[str, str]:
        """The ``meta`` table (``schema_version``, ``created_at``)."""
        return dict(self._all("SELECT key, value FROM meta"))

    # -- jobs --------------------------------------------------------------------------------

    def create_job(self, arn: str, name: str, config: dict[str, Any]) -> JobRow:
        """Insert a job in status ``running``; an existing ARN is returned unchanged."""
        now = time.time()
        with self._tx() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO jobs(arn, name, created_at, config, status, summary) "
                "VALUES (?, ?, ?, ?, 'running', NULL)",
                (arn, name, now, _dumps(config)),
            )
        job = self.get_job(arn)
        assert job is not None
        return job

    def get_job(self, arn: str) -> JobRow | None:
        """The job with this ARN, or None."""
        row = self._one("SELECT * FROM jobs WHERE arn = ?", (arn,))
        return None if row is None else _job(row)

    def update_job(
        self, arn: str, status: str | None = None, summary: dict[str, Any] | None = None
    ) -> None:
        """Set a job's status and/or summary (None leaves a field as it is)."""
        with self._tx() as conn:
            if status is not None:
                conn.execute("UPDATE jobs SET status = ? WHERE arn = ?", (status, arn))
            if summary is not None:
                conn.execute("UPDATE jobs SET summary = ? WHERE arn = ?", (_dumps(summary), arn))

    def list_jobs(self) -> list[JobRow]:
        """All jobs, oldest first."""
        return [_job(r) for r in self._all("SELECT * FROM jobs ORDER BY created_at, arn")]

    # -- trajectories ------------------------------------------------------------------------

    def create_trajectory(self, row: TrajectoryRow) -> TrajectoryRow:
        """Insert a trajectory (timestamps default to now); a duplicate id raises UsageError."""
        now = time.time()
        created = row.created_at or now
        try:
            with self._tx() as conn:
                conn.execute(
                    "INSERT INTO trajectories(id, job_arn, state, prompt, payload, step, "
                    "prompt_index, sample_index, attempt, retry_of, replay_of, created_at, "
                    "updated_at, reason) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        row.id,
                        row.job_arn,
                        row.state,
                        row.prompt,
                        None if row.payload is None else _dumps(row.payload),
                        row.step,
                        row.prompt_index,
                        row.sample_index,
                        row.attempt,
                        row.retry_of,
                        row.replay_of,
                        created,
                        row.updated_at or created,
                        row.reason,
                    ),
                )
                conn.execute(
                    "INSERT INTO events(trajectory_id, kind, detail, created_at) VALUES (?,?,?,?)",
                    (row.id, "state", _dumps({"state": row.state, "reason": "created"}), created),
                )
        except sqlite3.IntegrityError:
            raise UsageError(f"trajectory {row.id!r} already exists") from None
        stored = self.get_trajectory(row.id)
        assert stored is not None
        return stored

    def get_trajectory(self, trajectory_id: str) -> TrajectoryRow | None:
        """The trajectory with this id, or None."""
        row = self._one("SELECT * FROM trajectories WHERE id = ?", (trajectory_id,))
        return None if row is None else _trajectory(row)

    def set_state(self, trajectory_id: str, state: str, reason: str | None = None) -> None:
        """Move a trajectory to ``state`` and record a ``state`` event, in one transaction."""
        now = time.time()
        with self._tx() as conn:
            conn.execute(
                "UPDATE trajectories SET state = ?, reason = COALESCE(?, reason), updated_at = ? "
                "WHERE id = ?",
                (state, reason, now, trajectory_id),
            )
            conn.execute(
                "INSERT INTO events(trajectory_id, kind, detail, created_at) VALUES (?,?,?,?)",
                (trajectory_id, "state", _dumps({"state": state, "reason": reason}), now),
            )

    def list_trajectories(
        self, job_arn: str | None = None, states: Iterable[str] | None = None
    ) -> list[TrajectoryRow]:
        """Trajectories (optionally of one job and/or in some states), in creation order."""
        sql = "SELECT * FROM trajectories"
        clauses: list[str] = []
        args: list[Any] = []
        if job_arn is not None:
            clauses.append("job_arn = ?")
            args.append(job_arn)
        if states is not None:
            wanted = [str(getattr(s, "value", s)) for s in states]
            clauses.append(f"state IN ({','.join('?' * len(wanted))})")
            args.extend(wanted)
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY created_at, rowid"
        return [_trajectory(r) for r in self._all(sql, args)]

    # -- turns -------------------------------------------------------------------------------

    def add_turn(
        self, row: TurnRow, *, request_json: str | None = None, response_json: str | None = None
    ) -> None:
        """Append one turn (one INSERT, one commit); a duplicate (id, idx) raises UsageError.

        ``request_json`` / ``response_json``, when given, are stored verbatim instead of
        re-encoding ``row.request`` / ``row.response`` (the caller guarantees they are the same
        values as strict JSON); the emulator passes the bytes it already has.
        """
        try:
            with self._lock:
                self._conn.execute(
                    "INSERT INTO turns(trajectory_id, idx, route, request, response, "
                    "prompt_tokens, completion_tokens, usage_estimated, latency_ms, created_at, "
                    "stream) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        row.trajectory_id,
                        row.idx,
                        row.route,
                        request_json if request_json is not None else _dumps(row.request),
                        response_json if response_json is not None else _dumps(row.response),
                        row.prompt_tokens,
                        row.completion_tokens,
                        int(row.usage_estimated),
                        row.latency_ms,
                        row.created_at or time.time(),
                        int(row.stream),
                    ),
                )
        except sqlite3.IntegrityError:
            raise UsageError(f"turn {row.idx} of {row.trajectory_id!r} already stored") from None

    def list_turns(self, trajectory_id: str) -> list[TurnRow]:
        """The turns of a trajectory in order."""
        rows = self._all(
            "SELECT * FROM turns WHERE trajectory_id = ? ORDER BY idx", (trajectory_id,)
        )
        return [_turn(r) for r in rows]

    def count_turns(self, trajectory_id: str) -> int:
        """How many turns a trajectory has recorded."""
        row = self._one("SELECT count(*) FROM turns WHERE trajectory_id = ?", (trajectory_id,))
        return int(row[0])

    # -- rewards, tokens, events -------------------------------------------------------------

    def set_reward(
        self,
        trajectory_id: str,
        rewards: Sequence[float],
        client_token: str | None,
        body_hash: str | None,
        *,
        state: str | None = None,
    ) -> RewardRow:
        """Store the rewards (total = sum); with ``state``, also move the trajectory, atomically."""
        now = time.time()
        values = [float(v) for v in rewards]
        with self._tx() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO rewards(trajectory_id, rewards, total, client_token, "
                "body_hash, created_at) VALUES (?,?,?,?,?,?)",
                (trajectory_id, _dumps(values), sum(values), client_token, body_hash, now),
            )
            if state is not None:
                conn.execute(
                    "UPDATE trajectories SET state = ?, updated_at = ? WHERE id = ?",
                    (state, now, trajectory_id),
                )
                conn.execute(
                    "INSERT INTO events(trajectory_id, kind, detail, created_at) VALUES (?,?,?,?)",
                    (trajectory_id, "state", _dumps({"state": state, "reason": None}), now),
                )
        reward = self.get_reward(trajectory_id)
        assert reward is not None
        return reward

    def get_reward(self, trajectory_id: str) -> RewardRow | None:
        """The rewards of a trajectory, or None."""
        row = self._one("SELECT * FROM rewards WHERE trajectory_id = ?", (trajectory_id,))
        if row is None:
            return None
        return RewardRow(row[0], json.loads(row[1]), float(row[2]), row[3], row[4], float(row[5]))

    def remember_token(self, token: str, operation: str, body_hash: str) -> tuple[str, str] | None:
        """Record an idempotency token; return the (operation, hash) already stored, or None."""
        with self._tx() as conn:
            row = conn.execute(
                "SELECT operation, body_hash FROM client_tokens WHERE token = ?", (token,)
            ).fetchone()
            if row is not None:
                return str(row[0]), str(row[1])
            conn.execute(
                "INSERT INTO client_tokens(token, operation, body_hash, created_at) "
                "VALUES (?,?,?,?)",
                (token, operation, body_hash, time.time()),
            )
        return None

    def get_token(self, token: str) -> tuple[str, str] | None:
        """The (operation, body hash) recorded for an idempotency token, or None."""
        row = self._one("SELECT operation, body_hash FROM client_tokens WHERE token = ?", (token,))
        return None if row is None else (str(row[0]), str(row[1]))

    def add_event(
        self, kind: str, detail: dict[str, Any], trajectory_id: str | None = None
    ) -> None:
        """Append an event (``kind`` plus JSON ``detail``)."""
        with self._lock:
            self._conn.execute(
                "INSERT INTO events(trajectory_id, kind, detail, created_at) VALUES (?,?,?,?)",
                (trajectory_id, kind, _dumps(detail), time.time()),
            )

    def list_events(
        self, trajectory_id: str | None = None, kind: str | None = None
    ) -> list[EventRow]:
        """Events in order, optionally of one trajectory and/or one kind."""
        sql = "SELECT * FROM events"
        clauses: list[str] = []
        args: list[Any] = []
        if trajectory_id is not None:
            clauses.append("trajectory_id = ?")
            args.append(trajectory_id)
        if kind is not None:
            clauses.append("kind = ?")
            args.append(kind)
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        rows = self._all(sql + " ORDER BY id", args)
        return [EventRow(int(r[0]), r[1], str(r[2]), json.loads(r[3]), float(r[4])) for r in rows]


def _job(r: Sequence[Any]) -> JobRow:
    return JobRow(r[0], r[1], float(r[2]), json.loads(r[3]), r[4], _loads_opt(r[5]))


def _trajectory(r: Sequence[Any]) -> TrajectoryRow:
    return TrajectoryRow(
        id=r[0],
        job_arn=r[1],
        state=r[2],
        prompt=r[3],
        payload=_loads_opt(r[4]),
        step=int(r[5]),
        prompt_index=int(r[6]),
        sample_index=int(r[7]),
        attempt=int(r[8]),
        retry_of=r[9],
        replay_of=r[10],
        created_at=float(r[11]),
        updated_at=float(r[12]),
        reason=r[13],
    )


def _turn(r: Sequence[Any]) -> TurnRow:
    return TurnRow(
        trajectory_id=r[0],
        idx=int(r[1]),
        route=r[2],
        request=json.loads(r[3]),
        response=json.loads(r[4]),
        prompt_tokens=int(r[5]),
        completion_tokens=int(r[6]),
        usage_estimated=bool(r[7]),
        latency_ms=float(r[8]),
        created_at=float(r[9]),
        stream=bool(r[10]),
    )
