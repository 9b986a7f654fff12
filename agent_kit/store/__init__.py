"""The run store: one SQLite file per run, and the names everyone reads it by.

Every room that reads a run (reporting, export, doctor, replay) reads it through this room,
never through the service that wrote it:

- :mod:`~agent_kit.store.run_store` — :class:`RunStore`, the tables of ``RUN_DIR/run.sqlite``
  (jobs, trajectories, turns, rewards, tokens, events);
- :mod:`~agent_kit.store.connection` — its base: the one connection, lock and transaction
  helper, how a store is opened and migrated and how SQLite's errors read;
- :mod:`~agent_kit.store.store_file` — finding the file, opening it read-only, checking it;
- :mod:`~agent_kit.store.rows` — the frozen row types it returns;
- :mod:`~agent_kit.store.records` — :class:`Rollout`, the one record of a rollout every reader
  works on (composed of those rows), and :func:`load_rollouts`;
- :mod:`~agent_kit.store.schema` — the versioned schema and its migrations;
- :mod:`~agent_kit.store.events` — event kinds and trajectory reasons;
- :mod:`~agent_kit.store.layout` — the run directory's file names;
- :mod:`~agent_kit.store.runlock` — the run directory's lock file;
- :mod:`~agent_kit.store.run_figures` — the driver's figures stored with a job (the summary's
  ``run`` section); imported by name, not re-exported here (it loads pydantic).
"""

from __future__ import annotations

from agent_kit.store.events import INVOCATION_EVENT
from agent_kit.store.layout import RUN_FILE
from agent_kit.store.records import Rollout, load_rollouts
from agent_kit.store.rows import (
    AuxTurnRow,
    EventRow,
    JobRow,
    RewardRow,
    TrajectoryRow,
    TurnRow,
    TurnTotals,
)
from agent_kit.store.run_store import RunStore, TurnEvent
from agent_kit.store.schema import SCHEMA_VERSION
from agent_kit.store.store_file import resolve_path

__all__ = [
    "INVOCATION_EVENT",
    "RUN_FILE",
    "SCHEMA_VERSION",
    "AuxTurnRow",
    "EventRow",
    "JobRow",
    "RewardRow",
    "Rollout",
    "RunStore",
    "TrajectoryRow",
    "TurnEvent",
    "TurnRow",
    "TurnTotals",
    "load_rollouts",
    "resolve_path",
]
