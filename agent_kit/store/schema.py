"""The run store's schema versions and the ordered steps that bring an older store forward.

The version of a store file is ``PRAGMA user_version`` (mirrored in ``meta.schema_version``).
:data:`MIGRATIONS` lists one :class:`Migration` per version, oldest first: step ``N`` turns a
version ``N-1`` store into version ``N``, and a new file (version 0) runs them all.
:func:`migrate` runs the missing steps, sets the version and updates ``meta`` on a connection
the caller has put in a write transaction, so a store is either fully migrated or left as it
was. To change the schema: append a step, bump :data:`SCHEMA_VERSION`, never edit a released
step (files in the field were written by it).

Versions:

1. The tables ``meta``, ``jobs``, ``trajectories``, ``turns``, ``rewards``, ``events`` and
   ``client_tokens`` (agent_kit 0.1's initial layout), with indexes on trajectories by
   (job, step, prompt) and events by trajectory.
2. Indexes for the queries that scanned whole tables: events by ``kind`` (the driver's
   ``rollout_done`` / ``job_failure`` reads and the recording loader's ``invocation`` read) and
   trajectories by (job, state, creation time) (stale-rollout sweeps, replayable episodes,
   summaries). Tables are unchanged, so a version 1 file stays readable as it is.
3. The table ``aux_turns``: the auxiliary model calls of a rollout (an LLM judge's, a simulated
   user's), each a turn of its own ``kind`` (``judge`` | ``user``) numbered apart from the
   policy's turns, so every reader of ``turns`` still sees the policy's calls only. An older
   file read as it is has no auxiliary calls (readers check for the table).
4. The column ``trajectories.adapter``: the policy's adapter that sampled the rollout, where
   the policy says (``agent-kit train``: ``base``, ``warm``, ``step-NNNN``); NULL otherwise. The
   column is the table's last, and a reader takes it only when the row has it, so an older file
   read as it is (read-only opens never migrate) reads NULL.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Final

from agent_kit.errors import UsageError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Migration", "check_version", "migrate", "user_version"]


@dataclass(frozen=True)
class Migration:
    """One schema step: the version it produces, why it exists, and its SQL statements."""

    version: int
    purpose: str
    statements: tuple[str, ...]


_V1_TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS jobs (
    arn TEXT PRIMARY KEY, name TEXT NOT NULL, created_at REAL NOT NULL,
    config TEXT NOT NULL, status TEXT NOT NULL, summary TEXT)""",
    """CREATE TABLE IF NOT EXISTS trajectories (
    id TEXT PRIMARY KEY, job_arn TEXT NOT NULL, state TEXT NOT NULL, prompt TEXT NOT NULL,
    payload TEXT, step INTEGER NOT NULL, prompt_index INTEGER NOT NULL,
    sample_index INTEGER NOT NULL, attempt INTEGER NOT NULL, retry_of TEXT, replay_of TEXT,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, reason TEXT)""",
    "CREATE INDEX IF NOT EXISTS trajectories_job ON trajectories(job_arn, step, prompt_index)",
    """CREATE TABLE IF NOT EXISTS turns (
    trajectory_id TEXT NOT NULL, idx INTEGER NOT NULL, route TEXT NOT NULL,
    request TEXT NOT NULL, response TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL, usage_estimated INTEGER NOT NULL,
    latency_ms REAL NOT NULL, created_at REAL NOT NULL, stream INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (trajectory_id, idx))""",
    """CREATE TABLE IF NOT EXISTS rewards (
    trajectory_id TEXT PRIMARY KEY, rewards TEXT NOT NULL, total REAL NOT NULL,
    client_token TEXT, body_hash TEXT, created_at REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, trajectory_id TEXT, kind TEXT NOT NULL,
    detail TEXT NOT NULL, created_at REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS events_trajectory ON events(trajectory_id)",
    """CREATE TABLE IF NOT EXISTS client_tokens (
    token TEXT PRIMARY KEY, operation TEXT NOT NULL, body_hash TEXT NOT NULL,
    created_at REAL NOT NULL)""",
)

_V2_INDEXES: Final = (
    # events(kind) also orders by id: the rowid is the last column of every index.
    "CREATE INDEX IF NOT EXISTS events_kind ON events(kind)",
    "CREATE INDEX IF NOT EXISTS trajectories_job_state ON trajectories(job_arn, state, created_at)",
)

_V3_AUX: Final = (
    """CREATE TABLE IF NOT EXISTS aux_turns (
    trajectory_id TEXT NOT NULL, idx INTEGER NOT NULL, kind TEXT NOT NULL,
    request TEXT NOT NULL, response TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL, usage_estimated INTEGER NOT NULL,
    latency_ms REAL NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (trajectory_id, idx))""",
)

_V4_ADAPTER: Final = ("ALTER TABLE trajectories ADD COLUMN adapter TEXT",)

#: Every schema step, oldest first; ``MIGRATIONS[i].version == i + 1``.
MIGRATIONS: Final = (
    Migration(1, "initial tables", _V1_TABLES),
    Migration(2, "indexes for events by kind and trajectories by job and state", _V2_INDEXES),
    Migration(3, "auxiliary model calls (judge, simulated user) as turns of their own", _V3_AUX),
    Migration(4, "the adapter that sampled a rollout", _V4_ADAPTER),
)
#: The version this agent_kit writes (the last step's).
SCHEMA_VERSION: Final = MIGRATIONS[-1].version


def user_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in the file (``PRAGMA user_version``; 0 for a new file)."""
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def check_version(version: int, path: str) -> None:
    """Refuse a store written by a newer agent_kit (UsageError naming both versions)."""
    if version > SCHEMA_VERSION:
        raise UsageError(
            f"run store {path} has schema version {version}, newer than this "
            f"agent_kit understands ({SCHEMA_VERSION}); upgrade agent_kit to read it"
        )


def migrate(conn: sqlite3.Connection, path: str) -> int:
    """Bring the store on ``conn`` to :data:`SCHEMA_VERSION`; returns the version it had.

    The caller holds a write transaction (``BEGIN IMMEDIATE``), so the version read here cannot
    change under it and every step commits or rolls back together. Raises UsageError for a
    newer store and for an SQLite file that is not a run store (version 0 with tables).
    """
    found = user_version(conn)
    check_version(found, path)
    if found == SCHEMA_VERSION:
        return found
    if found == 0:
        tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()
        if tables[0]:
            raise UsageError(f"{path} is an SQLite file but not an agent_kit run store")
    for step in MIGRATIONS:
        if step.version > found:
            for statement in step.statements:
                conn.execute(statement)
    conn.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
        (str(SCHEMA_VERSION),),
    )
    conn.execute(
        "INSERT OR IGNORE INTO meta(key, value) VALUES ('created_at', ?)", (str(time.time()),)
    )
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    return found
