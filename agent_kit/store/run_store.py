"""The run store: one SQLite file per run (``RUN_DIR/run.sqlite``) holding jobs, trajectories,
turns, rewards, events and idempotency tokens.

Why one module of ~550 lines: it is the one class :class:`RunStore`, whose methods share one
connection, lock and transaction helper. The row types are :mod:`agent_kit.store.rows`
and the schema with its migrations is :mod:`agent_kit.store.schema` (both re-exported
here where they were public before).

Guarantees:

- **Versioned schema, migrated forward.** The version lives in ``PRAGMA user_version`` (and
  ``meta.schema_version``); the schema and its ordered migration steps are
  :mod:`agent_kit.store.schema` (current version 2: version 1 plus indexes for events
  by kind and trajectories by job and state). A writable open reads the version inside one
  ``BEGIN IMMEDIATE`` transaction and runs every missing step, sets the version and commits:
  a new file gets every step, an older store is brought to the current version, and a failing
  step rolls the whole migration back (the file keeps its old version). Two processes opening
  the same old store serialise on that transaction; the second finds it current. A file
  written by a newer agent_kit is refused with :class:`~agent_kit.errors.UsageError`, as is an
  SQLite file that is not a run store. A ``readonly`` open never migrates (it cannot write):
  it refuses a newer store and reads an older one as it is, which works because no step so
  far has changed a table (a step that does must make read-only opens refuse older files).
- **Durable per turn.** WAL journal, ``synchronous=NORMAL``, one transaction per write call;
  a turn and the events it noted are one call (:meth:`RunStore.record_turn`).
  In WAL mode every commit is written to the ``-wal`` file before the call returns, so after a
  ``kill -9`` of the writing process the OS still holds every committed page: only a write that
  was in flight (not yet committed) is lost. ``NORMAL`` skips the fsync per commit, which only
  matters for an OS crash or power loss (then the last few commits may be lost, the file is never
  corrupt). That keeps a turn write at tens of microseconds instead of a disk flush.
- **Readable while running.** Other processes may open the file with ``readonly=True`` at any
  time (WAL readers never block the writer).
- **Damage is refused, never written.** An empty file, a file that is not SQLite or one that
  fails SQLite's ``quick_check`` is a :class:`~agent_kit.errors.RunStoreError` naming the file
  at open (before a writable open writes anything), and an SQLite error of a later read is one
  too. A ``readonly`` open writes nothing into the file and also reads a run on a read-only
  location (``mode=ro``, else ``immutable=1`` when no write-ahead log holds commits).
- **A full disk is one error.** A write the file cannot take (``SQLITE_FULL``: disk full or
  the file size limit; ``SQLITE_IOERR``) is a :class:`~agent_kit.errors.RunStoreError` naming
  the file, nothing of that write is kept, and the first one stays in
  :attr:`RunStore.write_failure` so the writer can stop starting new work.
- **Thread-safe.** One connection per store, every call serialised by a lock.
- **No secrets.** The store holds only what callers hand it; the emulator passes request bodies,
  never headers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, NamedTuple

from agent_kit.errors import RunStoreError, UsageError
from agent_kit.store.events import INVOCATION_EVENT
from agent_kit.store.layout import RUN_FILE
from agent_kit.store.rows import (
    EventRow,
    JobRow,
    RewardRow,
    TrajectoryRow,
    TurnRow,
    TurnTotals,
    event_from_row,
    job_from_row,
    reward_from_row,
    trajectory_from_row,
    turn_from_row,
)
from agent_kit.store.schema import SCHEMA_VERSION, check_version, migrate, user_version

__all__ = [
    "INVOCATION_EVENT",
    "RUN_FILE",
    "SCHEMA_VERSION",
    "EventRow",
    "JobRow",
    "RewardRow",
    "RunStore",
    "TrajectoryRow",
    "TurnEvent",
    "TurnRow",
    "TurnTotals",
    "check_intact",
    "check_readable",
    "resolve_path",
    "verify",
]

#: File name of the store inside a run directory.
_FILE_SUFFIXES: Final = (".sqlite", ".sqlite3", ".db")

logger = logging.getLogger("agent_kit.store")


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def resolve_path(path: str | Path) -> Path:
    """The store file: ``path`` if it ends in .sqlite/.sqlite3/.db, else ``path/run.sqlite``."""
    p = Path(path)
    if p.suffix in _FILE_SUFFIXES:
        return p
    return p / RUN_FILE


_INSERT_EVENT: Final = (
    "INSERT INTO events(trajectory_id, kind, detail, created_at) VALUES (?,?,?,?)"
)
_INSERT_TURN: Final = (
    "INSERT INTO turns(trajectory_id, idx, route, request, response, prompt_tokens, "
    "completion_tokens, usage_estimated, latency_ms, created_at, stream) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?)"
)


class TurnEvent(NamedTuple):
    """An event one turn noted (a new connection, a chaos fault, a policy error, a discarded
    answer), written with the turn by :meth:`RunStore.record_turn`; ``created_at`` is when it
    happened, not when it was written."""

    kind: str
    detail: dict[str, Any]
    created_at: float


def _turn_values(
    row: TurnRow, request_json: str | None, response_json: str | None
) -> tuple[Any, ...]:
    """The parameters of :data:`_INSERT_TURN` for ``row`` (JSON encoded unless given)."""
    return (
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
    )


#: SQLite result codes (and their extended forms) of a write the file could not take.
_WRITE_FAILURE_CODES: Final = ("SQLITE_FULL", "SQLITE_IOERR")
#: SQLite result codes (and their extended forms) that mean the file is damaged or unreadable.
_DAMAGE_CODES: Final = ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_IOERR", "SQLITE_CANTOPEN")


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    """Whether ``exc`` says the file is damaged or unreadable (not a failing statement)."""
    return str(getattr(exc, "sqlite_errorname", "")).startswith(_DAMAGE_CODES)


def _connect(uri: str) -> sqlite3.Connection:
    return sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)


def _connect_readonly(file: Path) -> sqlite3.Connection:
    """A read-only connection to ``file`` that never writes into it.

    SQLite's ``mode=ro`` first: it reads a WAL store, running or not, but needs the ``-wal``
    and ``-shm`` files to exist or to be creatable next to the file. On a read-only location
    without them SQLite cannot open the file (``SQLITE_CANTOPEN``); then, when no ``-wal`` with
    content exists (every commit is in the main file), the file is opened ``immutable=1``
    (no locks, no side files; SQLite ignores any WAL then, so it is used only when there is
    none). A non-empty ``-wal`` that cannot be read is refused with
    :class:`~agent_kit.errors.RunStoreError` rather than read without its latest commits.
    """
    base = file.resolve().as_uri()
    conn = _connect(f"{base}?mode=ro")
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if getattr(exc, "sqlite_errorname", "") != "SQLITE_CANTOPEN":
            raise
    except BaseException:
        conn.close()
        raise
    if not os.access(file, os.R_OK):
        raise RunStoreError(f"cannot read run store {file}: permission denied")
    wal = Path(f"{file}-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        raise RunStoreError(
            f"cannot read run store {file}: its write-ahead log {wal.name} holds commits "
            f"that SQLite reads only with a {file.name}-shm it can create, and the location is "
            "read-only; copy the run directory somewhere writable and read the copy"
        )
    return _connect(f"{base}?mode=ro&immutable=1")


def check_readable(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a store file before anything reads it as a run: empty (RunStoreError), written
    by a newer agent_kit or not a run store (UsageError), or failing SQLite's ``quick_check``
    (RunStoreError naming the first problems). Reads only."""
    if int(conn.execute("PRAGMA page_count").fetchone()[0]) == 0:
        raise RunStoreError(f"run store {path} is empty (0 bytes): it holds no run")
    version = user_version(conn)
    check_version(version, path)
    check_intact(conn, path)
    if version == 0:
        tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()
        if tables[0]:
            raise UsageError(f"{path} is an SQLite file but not an agent_kit run store")
        raise RunStoreError(f"run store {path} holds no tables: it holds no run")


def check_intact(conn: sqlite3.Connection, path: str) -> None:
    """RunStoreError naming the first problems when the file fails SQLite's ``quick_check``
    (damaged pages, broken b-trees); reads only."""
    rows = [str(row[0]) for row in conn.execute("PRAGMA quick_check(3)")]
    if rows == ["ok"]:
        return
    lines = (line.strip() for row in rows for line in row.splitlines())
    problems = [line for line in lines if line and not line.startswith("***")][:3]
    raise RunStoreError(
        f"run store {path} is damaged (SQLite's quick_check: {'; '.join(problems)}); "
        "restore it from a copy or start a new run"
    )


def verify(path: str | Path) -> None:
    """Check the store of ``path`` as :func:`check_readable` does, writing nothing at all (not
    even SQLite's ``-wal``/``-shm`` side files where none exist), for a caller that holds the
    run's lock (so no writer can start meanwhile); UsageError when there is no file."""
    file = resolve_path(path)
    if not file.is_file():
        raise UsageError(f"no run store at {file}")
    wal = Path(f"{file}-wal")
    conn = (
        _connect_readonly(file)
        if wal.exists()
        else _connect(f"{file.resolve().as_uri()}?mode=ro&immutable=1")
    )
    try:
        check_readable(conn, str(file))
    except sqlite3.DatabaseError as exc:
        raise RunStoreError(f"cannot read run store {file}: {exc}") from None
    finally:
        conn.close()


class RunStore:
    """Thread-safe access to one run's SQLite file; see the module docstring for guarantees."""

    def __init__(self, conn: sqlite3.Connection, path: str, *, readonly: bool) -> None:
        self._conn = conn
        self._lock = threading.RLock()
        self.path = path
        self.readonly = readonly
        #: The first write that failed because the file could not be written (disk full, file
        #: size limit, I/O error), or None: a caller stops writing new work once it is set.
        self.write_failure: RunStoreError | None = None
        #: (device, inode) of the file when opened: :meth:`check_file` tells a vanished one.
        self._identity: tuple[int, int] | None = None
        if path != ":memory:":
            with contextlib.suppress(OSError):
                info = os.stat(path)
                self._identity = (info.st_dev, info.st_ino)

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, *, readonly: bool = False) -> RunStore:
        """Open (creating unless ``readonly``) the store of a run directory or file.

        ``":memory:"`` gives a private in-memory store (tests). Raises
        :class:`~agent_kit.errors.UsageError` when the file is missing (read-only), not a
        store, or written by a newer agent_kit, and :class:`~agent_kit.errors.RunStoreError`
        when it is damaged: not an SQLite database, failing SQLite's ``quick_check``, or (read-only)
        empty. A read-only open writes nothing into the file and works on a read-only location
        (see :func:`_connect_readonly`); a writable open checks an existing non-empty file
        before it writes anything.
        """
        if str(path) == ":memory:":
            memory = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            store = cls(memory, ":memory:", readonly=False)
            store._init_schema()
            return store
        file = resolve_path(path)
        if readonly and not file.exists():
            raise UsageError(f"no run store at {file}")
        conn: sqlite3.Connection | None = None
        existed = False
        try:
            if readonly:
                conn = _connect_readonly(file)
            else:
                file.parent.mkdir(parents=True, exist_ok=True)
                existed = file.is_file() and file.stat().st_size > 0
                conn = sqlite3.connect(str(file), check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=5000")
            store = cls(conn, str(file), readonly=readonly)
            if readonly:
                check_readable(conn, store.path)
            else:
                if existed:
                    check_intact(conn, store.path)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                store._init_schema()
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.DatabaseError):
                error = RunStoreError if _is_damage(exc) else UsageError
                raise error(f"cannot open run store {file}: {exc}") from None
            raise
        return store

    def check_file(self) -> None:
        """Raise :class:`~agent_kit.errors.RunStoreError` when the store's file is no longer the
        one this store opened (the run directory was deleted or replaced while the run went
        on: SQLite keeps writing to the unlinked file, and everything would be lost silently)."""
        if self._identity is None:
            return
        try:
            info = os.stat(self.path)
        except OSError:
            raise RunStoreError(
                f"the run store {self.path} vanished while the run went on (its directory was "
                "deleted or moved): what it recorded is lost"
            ) from None
        if (info.st_dev, info.st_ino) != self._identity:
            raise RunStoreError(
                f"the run store {self.path} was replaced by another file while the run went on"
            )

    def close(self) -> None:
        """Close the connection; later calls raise ``sqlite3.ProgrammingError``."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _init_schema(self) -> None:
        """Create or migrate the schema to :data:`SCHEMA_VERSION` in one write transaction (no
        transaction when the file is already current)."""
        with self._lock:
            current = user_version(self._conn)
        check_version(current, self.path)
        if current == SCHEMA_VERSION:
            return
        with self._tx() as conn:
            found = migrate(conn, self.path)
        if 0 < found < SCHEMA_VERSION:
            logger.info(
                "migrated run store %s from schema version %d to %d",
                self.path,
                found,
                SCHEMA_VERSION,
            )

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._writing():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                if self._conn.in_transaction:  # SQLite may have rolled back on its own
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[RunStore]:
        """One read transaction: every read inside the block sees the store as it was at its
        first read, whatever another process (a live run's driver) commits meanwhile. Other
        threads of this process wait for the block to end; nothing may be written inside it."""
        with self._lock:
            with self._reading():
                self._conn.execute("BEGIN")
            try:
                yield self
            finally:
                with self._reading():
                    self._conn.execute("COMMIT")

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Turn an SQLite error that says the file cannot grow or be written (disk full, file
        size limit, I/O error) into a :class:`~agent_kit.errors.RunStoreError`, and remember
        the first one in :attr:`write_failure`; other errors pass unchanged."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if not str(getattr(exc, "sqlite_errorname", "")).startswith(_WRITE_FAILURE_CODES):
                raise
            error = RunStoreError(
                f"cannot write run store {self.path}: {exc} (what it holds is kept; make room "
                f"and continue with agent-kit run --resume {Path(self.path).parent})"
            )
            if self.write_failure is None:
                self.write_failure = error
            raise error from None

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        with self._lock, self._reading():
            return self._conn.execute(sql, args).fetchone()

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock, self._reading():
            return self._conn.execute(sql, args).fetchall()

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Turn an SQLite error of a read (a damaged page, an unreadable file, a missing table)
        into a :class:`~agent_kit.errors.RunStoreError` naming the file; a closed store's
        ``ProgrammingError`` passes."""
        try:
            yield
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError):
            raise
        except sqlite3.DatabaseError as exc:
            raise RunStoreError(f"cannot read run store {self.path}: {exc}") from None

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
        if job is None:
            raise UsageError(f"job {arn!r} was not stored in {self.path}")
        return job

    def get_job(self, arn: str) -> JobRow | None:
        """The job with this ARN, or None."""
        row = self._one("SELECT * FROM jobs WHERE arn = ?", (arn,))
        return None if row is None else job_from_row(row)

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
        return [job_from_row(r) for r in self._all("SELECT * FROM jobs ORDER BY created_at, arn")]

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
                    _INSERT_EVENT,
                    (row.id, "state", _dumps({"state": row.state, "reason": "created"}), created),
                )
        except sqlite3.IntegrityError:
            raise UsageError(f"trajectory {row.id!r} already exists") from None
        stored = self.get_trajectory(row.id)
        if stored is None:
            raise UsageError(f"trajectory {row.id!r} was not stored in {self.path}")
        return stored

    def get_trajectory(self, trajectory_id: str) -> TrajectoryRow | None:
        """The trajectory with this id, or None."""
        row = self._one("SELECT * FROM trajectories WHERE id = ?", (trajectory_id,))
        return None if row is None else trajectory_from_row(row)

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
                _INSERT_EVENT,
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
        return [trajectory_from_row(r) for r in self._all(sql, args)]

    # -- turns -------------------------------------------------------------------------------

    def add_turn(
        self, row: TurnRow, *, request_json: str | None = None, response_json: str | None = None
    ) -> None:
        """Append one turn (one INSERT, one commit); a duplicate (id, idx) raises UsageError.

        ``request_json`` / ``response_json``, when given, are stored verbatim instead of
        re-encoding ``row.request`` / ``row.response`` (the caller guarantees they are the same
        values as strict JSON); the emulator passes the bytes it already has.
        """
        self.record_turn(
            row.trajectory_id, (), row, request_json=request_json, response_json=response_json
        )

    def record_turn(
        self,
        trajectory_id: str,
        events: Sequence[TurnEvent],
        turn: TurnRow | None = None,
        *,
        request_json: str | None = None,
        response_json: str | None = None,
    ) -> None:
        """Write what one turn left behind in one transaction: its ``events`` (in order, for
        ``trajectory_id``, each with its own ``created_at``) and then its row, if any.

        All or nothing: a duplicate (id, idx) raises UsageError and a value that is not strict
        JSON raises TypeError/ValueError, and then none of it is stored. ``request_json`` /
        ``response_json`` are as for :meth:`add_turn`. A turn without events is one INSERT.
        """
        rows = [(trajectory_id, e.kind, _dumps(e.detail), e.created_at) for e in events]
        values = None if turn is None else _turn_values(turn, request_json, response_json)
        try:
            if not rows:
                if values is not None:
                    with self._lock, self._writing():
                        self._conn.execute(_INSERT_TURN, values)
                return
            with self._tx() as conn:
                conn.executemany(_INSERT_EVENT, rows)
                if values is not None:
                    conn.execute(_INSERT_TURN, values)
        except sqlite3.IntegrityError:
            what = f"turn {turn.idx}" if turn is not None else "an event"
            raise UsageError(f"{what} of {trajectory_id!r} already stored") from None

    def list_turns(self, trajectory_id: str) -> list[TurnRow]:
        """The turns of a trajectory in order."""
        rows = self._all(
            "SELECT * FROM turns WHERE trajectory_id = ? ORDER BY idx", (trajectory_id,)
        )
        return [turn_from_row(r) for r in rows]

    def count_turns(self, trajectory_id: str) -> int:
        """How many turns a trajectory has recorded."""
        row = self._one("SELECT count(*) FROM turns WHERE trajectory_id = ?", (trajectory_id,))
        return int(row[0])

    def turn_totals(self, job_arn: str) -> dict[str, TurnTotals]:
        """Per trajectory of the job that has turns, their count and token sums (one query)."""
        rows = self._all(
            "SELECT t.trajectory_id, count(*), sum(t.prompt_tokens), sum(t.completion_tokens), "
            "sum(t.usage_estimated) FROM turns t JOIN trajectories j ON j.id = t.trajectory_id "
            "WHERE j.job_arn = ? GROUP BY t.trajectory_id",
            (job_arn,),
        )
        return {str(r[0]): TurnTotals(int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows}

    def job_turns(
        self, job_arn: str, states: Iterable[str] | None = None
    ) -> dict[str, list[TurnRow]]:
        """Per trajectory of the job (optionally only those in ``states``) that has turns, its
        turns in order (one query)."""
        sql = (
            "SELECT t.* FROM turns t JOIN trajectories j ON j.id = t.trajectory_id "
            "WHERE j.job_arn = ?"
        )
        args: list[Any] = [job_arn]
        if states is not None:
            wanted = [str(getattr(s, "value", s)) for s in states]
            sql += f" AND j.state IN ({','.join('?' * len(wanted))})"
            args.extend(wanted)
        turns: dict[str, list[TurnRow]] = {}
        for r in self._all(sql + " ORDER BY t.trajectory_id, t.idx", args):
            turn = turn_from_row(r)
            turns.setdefault(turn.trajectory_id, []).append(turn)
        return turns

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
                    _INSERT_EVENT,
                    (trajectory_id, "state", _dumps({"state": state, "reason": None}), now),
                )
        reward = self.get_reward(trajectory_id)
        if reward is None:
            raise UsageError(f"the reward of {trajectory_id!r} was not stored in {self.path}")
        return reward

    def reward_totals(self, job_arn: str) -> dict[str, float]:
        """The reward total of every rewarded trajectory of the job (one query)."""
        rows = self._all(
            "SELECT r.trajectory_id, r.total FROM rewards r "
            "JOIN trajectories j ON j.id = r.trajectory_id WHERE j.job_arn = ?",
            (job_arn,),
        )
        return {str(r[0]): float(r[1]) for r in rows}

    def job_rewards(self, job_arn: str) -> dict[str, RewardRow]:
        """The reward row of every rewarded trajectory of the job (one query; the reward lists,
        each stored as a JSON array, are decoded together as one array of arrays)."""
        rows = self._all(
            "SELECT r.* FROM rewards r JOIN trajectories j ON j.id = r.trajectory_id "
            "WHERE j.job_arn = ?",
            (job_arn,),
        )
        lists = json.loads(f"[{','.join(r[1] for r in rows)}]")
        return {str(r[0]): reward_from_row(r, v) for r, v in zip(rows, lists, strict=True)}

    def get_reward(self, trajectory_id: str) -> RewardRow | None:
        """The rewards of a trajectory, or None."""
        row = self._one("SELECT * FROM rewards WHERE trajectory_id = ?", (trajectory_id,))
        return None if row is None else reward_from_row(row)

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
        with self._lock, self._writing():
            self._conn.execute(
                _INSERT_EVENT,
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
        details = json.loads(f"[{','.join(r[3] for r in rows)}]")  # one decode for all
        return [event_from_row(r, d) for r, d in zip(rows, details, strict=True)]
