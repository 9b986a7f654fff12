"""The run store's file: where it is, how it is opened without writing, and how it is checked.

A run directory holds its store as ``run.sqlite`` (:data:`~agent_kit.store.layout.RUN_FILE`);
:func:`resolve_path` finds it from a run directory or takes a file path as given. The rest is
what a reader needs before it trusts the file, kept apart from the connection that then reads
and writes it (:mod:`agent_kit.store.connection`):

- **Damage is refused, never written.** An empty file, a file that is not SQLite, one written by
  a newer agent_kit or one that fails SQLite's ``quick_check`` is refused at open
  (:func:`check_readable`, :func:`check_intact`) with an error naming the file.
- **Reading writes nothing.** :func:`connect_readonly` reads a run on a read-only location too
  (``mode=ro``, else ``immutable=1`` when no write-ahead log holds commits), and
  :func:`verify` checks a file without creating even SQLite's side files.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Final

from agent_kit.errors import RunStoreError, UsageError
from agent_kit.store.layout import RunLayout
from agent_kit.store.schema import check_version, user_version

__all__ = [
    "WRITE_FAILURE_CODES",
    "check_intact",
    "check_readable",
    "connect",
    "connect_readonly",
    "is_damage",
    "resolve_path",
    "verify",
]

#: Suffixes of a path that names the store file itself (anything else is a run directory).
_FILE_SUFFIXES: Final = (".sqlite", ".sqlite3", ".db")


def resolve_path(path: str | Path) -> Path:
    """The store file: ``path`` if it ends in .sqlite/.sqlite3/.db, else ``path/run.sqlite``."""
    p = Path(path)
    if p.suffix in _FILE_SUFFIXES:
        return p
    return RunLayout(p).store


#: SQLite result codes (and their extended forms) of a write the file could not take.
WRITE_FAILURE_CODES: Final = ("SQLITE_FULL", "SQLITE_IOERR")
#: SQLite result codes (and their extended forms) that mean the file is damaged or unreadable.
_DAMAGE_CODES: Final = ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_IOERR", "SQLITE_CANTOPEN")


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    """Whether ``exc`` says the file is damaged or unreadable (not a failing statement)."""
    return str(getattr(exc, "sqlite_errorname", "")).startswith(_DAMAGE_CODES)


def connect(uri: str) -> sqlite3.Connection:
    """A connection to the SQLite ``uri`` that any thread may use, in autocommit mode (every
    transaction is begun explicitly)."""
    return sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)


#: SQLite's answers when ``mode=ro`` cannot create a WAL store's ``-shm`` beside it.
_NO_SIDE_FILES: Final = frozenset({"SQLITE_CANTOPEN", "SQLITE_READONLY_DIRECTORY"})


def connect_readonly(file: Path) -> sqlite3.Connection:
    """A read-only connection to ``file`` that never writes into it.

    SQLite's ``mode=ro`` first: it reads a WAL store, running or not, but needs the ``-wal``
    and ``-shm`` files to exist or to be creatable next to the file. On a read-only location
    without them SQLite cannot open the file (``SQLITE_CANTOPEN`` on a read-only mount,
    ``SQLITE_READONLY_DIRECTORY`` in a directory without write permission); then, when no
    ``-wal`` with content exists (every commit is in the main file), the file is opened
    ``immutable=1``
    (no locks, no side files; SQLite ignores any WAL then, so it is used only when there is
    none). A non-empty ``-wal`` that cannot be read is refused with
    :class:`~agent_kit.errors.RunStoreError` rather than read without its latest commits.
    """
    base = file.resolve().as_uri()
    conn = connect(f"{base}?mode=ro")
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        # CANTOPEN on a read-only mount; READONLY_DIRECTORY where permissions forbid the
        # side files (a directory without write permission)
        if getattr(exc, "sqlite_errorname", "") not in _NO_SIDE_FILES:
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
    return connect(f"{base}?mode=ro&immutable=1")


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
        connect_readonly(file)
        if wal.exists()
        else connect(f"{file.resolve().as_uri()}?mode=ro&immutable=1")
    )
    try:
        check_readable(conn, str(file))
    except sqlite3.DatabaseError as exc:
        raise RunStoreError(f"cannot read run store {file}: {exc}") from None
    finally:
        conn.close()
