"""One open connection to a run store: how it is opened and migrated, its lock and
transactions, and how SQLite's errors read.

:class:`StoreConnection` is the base of :class:`~agent_kit.store.run_store.RunStore`, which adds
the tables; every read and write of a store goes through the helpers here, so these guarantees
hold for all of them:

- **Versioned schema, migrated forward.** The version lives in ``PRAGMA user_version`` (and
  ``meta.schema_version``); the schema and its ordered migration steps are
  :mod:`agent_kit.store.schema` (its docstring lists the versions). A writable open reads the
  version inside one ``BEGIN IMMEDIATE`` transaction and runs every missing step, sets the
  version and commits: a new file gets every step, an older store is brought to the current
  version, and a failing step rolls the whole migration back (the file keeps its old version).
  Two processes opening the same old store serialise on that transaction; the second finds it
  current. A file written by a newer agent_kit is refused with
  :class:`~agent_kit.errors.UsageError`, as is an SQLite file that is not a run store. A
  ``readonly`` open never migrates (it cannot write): it refuses a newer store and reads an
  older one as it is, which works because every step so far either adds what a reader checks for
  (a table, an index) or appends a column a reader takes only when the row has it
  (``trajectories.adapter``); a step that changes a table otherwise must make read-only opens
  refuse older files.
- **Durable per write call.** WAL journal, ``synchronous=NORMAL``, one transaction per write
  call. In WAL mode every commit is written to the ``-wal`` file before the call returns, so
  after a ``kill -9`` of the writing process the OS still holds every committed page: only a
  write that was in flight (not yet committed) is lost. ``NORMAL`` skips the fsync per commit,
  which only matters for an OS crash or power loss (then the last few commits may be lost, the
  file is never corrupt). That keeps a turn write at tens of microseconds instead of a disk
  flush.
- **Readable while running.** Other processes may open the file with ``readonly=True`` at any
  time (WAL readers never block the writer).
- **Damage is refused, never written.** An empty file, a file that is not SQLite or one that
  fails SQLite's ``quick_check`` is a :class:`~agent_kit.errors.RunStoreError` naming the file
  at open (before a writable open writes anything; the checks are
  :mod:`agent_kit.store.store_file`), and an SQLite error of a later read is one too. A
  ``readonly`` open writes nothing into the file and also reads a run on a read-only location
  (``mode=ro``, else ``immutable=1`` when no write-ahead log holds commits).
- **A full disk is one error.** A write the file cannot take (``SQLITE_FULL``: disk full or
  the file size limit; ``SQLITE_IOERR``) is a :class:`~agent_kit.errors.RunStoreError` naming
  the file, nothing of that write is kept, and the first one stays in
  :attr:`StoreConnection.write_failure` so the writer can stop starting new work.
- **Thread-safe.** One connection per store, every call serialised by a lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from agent_kit.errors import RunStoreError, UsageError
from agent_kit.store.layout import RunLayout
from agent_kit.store.schema import SCHEMA_VERSION, check_version, migrate, user_version
from agent_kit.store.store_file import (
    WRITE_FAILURE_CODES,
    check_intact,
    check_readable,
    connect_readonly,
    is_damage,
    resolve_path,
)

__all__ = ["StoreConnection"]

logger = logging.getLogger("agent_kit.store")

_S = TypeVar("_S", bound="StoreConnection")


class StoreConnection:
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
    def open(cls: type[_S], path: str | Path, *, readonly: bool = False) -> _S:
        """Open (creating unless ``readonly``) the store of a run directory or file.

        ``":memory:"`` gives a private in-memory store (tests). Raises
        :class:`~agent_kit.errors.UsageError` when the file is missing (read-only), not a
        store, or written by a newer agent_kit, and :class:`~agent_kit.errors.RunStoreError`
        when it is damaged: not an SQLite database, failing SQLite's ``quick_check``, or
        (read-only) empty. A read-only open writes nothing into the file and works on a
        read-only location (see :func:`~agent_kit.store.store_file.connect_readonly`); a
        writable open checks an existing non-empty file before it writes anything.
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
                conn = connect_readonly(file)
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
                error = RunStoreError if is_damage(exc) else UsageError
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

    def __enter__(self: _S) -> _S:
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
    def snapshot(self: _S) -> Iterator[_S]:
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
            if not str(getattr(exc, "sqlite_errorname", "")).startswith(WRITE_FAILURE_CODES):
                raise
            error = RunStoreError(
                f"cannot write run store {self.path}: {exc} (what it holds is kept; make room "
                f"and continue with {RunLayout(Path(self.path).parent).resume_command()})"
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
            text = re.match(r"Could not decode to UTF-8 column '([^']*)'", str(exc))
            if text is not None:  # the message goes on with the whole value: leave it out
                raise RunStoreError(
                    f"run store {self.path} is damaged: a value of column {text[1]!r} is not "
                    "UTF-8 text; restore it from a copy or start a new run"
                ) from None
            raise RunStoreError(f"cannot read run store {self.path}: {exc}") from None
