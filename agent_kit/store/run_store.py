"""The run store: one SQLite file per run (``RUN_DIR/run.sqlite``) holding jobs, trajectories,
turns, rewards, events and idempotency tokens.

:class:`RunStore` is the tables: what is written and read, one method per question. How the
file is opened, migrated, locked and written in transactions is its base
:class:`~agent_kit.store.connection.StoreConnection` (whose docstring holds the guarantees:
versioned schema, durability, damage and full-disk errors, thread safety); checking the file
before reading it is :mod:`agent_kit.store.store_file`; the row types are
:mod:`agent_kit.store.rows` and the schema with its migrations :mod:`agent_kit.store.schema`
(the public ones are exported by the room's face, :mod:`agent_kit.store`).

Guarantees of the tables:

- **Durable per turn.** A turn and the events it noted are one write call, so one transaction
  (:meth:`RunStore.record_turn`); a state change and its ``state`` event are one too.
- **No secrets.** The store holds only what callers hand it; the emulator passes request bodies,
  never headers.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple, TypeVar

from agent_kit.errors import UsageError
from agent_kit.store.connection import StoreConnection
from agent_kit.store.decoding import decode_rows, decodes
from agent_kit.store.events import CREATED_REASON, STATE_EVENT
from agent_kit.store.rows import (
    AuxTurnRow,
    EventRow,
    JobRow,
    RewardRow,
    TrajectoryRow,
    TurnRow,
    TurnTotals,
    aux_turn_from_row,
    event_from_row,
    job_from_row,
    reward_from_row,
    trajectory_from_row,
    turn_from_row,
)

__all__ = ["RunStore", "TurnEvent"]

_T = TypeVar("_T")


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _select(
    sql: str, order: str, *conditions: tuple[str, list[Any] | None]
) -> tuple[str, list[Any]]:
    """``sql`` filtered by the conditions whose arguments are not None (ANDed), then ordered by
    ``order``; and those arguments in order."""
    kept = [(clause, args) for clause, args in conditions if args is not None]
    if kept:
        sql += " WHERE " + " AND ".join(clause for clause, _ in kept)
    return f"{sql} ORDER BY {order}", [a for _, args in kept for a in args]


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


class RunStore(StoreConnection):
    """One run's tables over a :class:`~agent_kit.store.connection.StoreConnection` (open one
    with :meth:`RunStore.open`); see the module docstrings for guarantees."""

    def meta(self) -> dict[str, str]:
        """The ``meta`` table (``schema_version``, ``created_at``)."""
        return dict(self._all("SELECT key, value FROM meta"))

    def _stored(self, value: _T | None, what: str) -> _T:
        """``value`` read back after a write; UsageError naming ``what`` when it is missing."""
        if value is None:
            raise UsageError(f"{what} was not stored in {self.path}")
        return value

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
        return self._stored(self.get_job(arn), f"job {arn!r}")

    @decodes
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

    @decodes
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
                    (
                        row.id,
                        STATE_EVENT,
                        _dumps({"state": row.state, "reason": CREATED_REASON}),
                        created,
                    ),
                )
        except sqlite3.IntegrityError:
            raise UsageError(f"trajectory {row.id!r} already exists") from None
        return self._stored(self.get_trajectory(row.id), f"trajectory {row.id!r}")

    @decodes
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
                (trajectory_id, STATE_EVENT, _dumps({"state": state, "reason": reason}), now),
            )

    def set_adapter(self, trajectory_ids: Iterable[str], adapter: str) -> None:
        """Record the policy adapter that sampled these trajectories (unknown ids: ignored)."""
        rows = [(adapter, tid) for tid in trajectory_ids]
        with self._tx() as conn:
            conn.executemany("UPDATE trajectories SET adapter = ? WHERE id = ?", rows)

    @decodes
    def list_trajectories(
        self, job_arn: str | None = None, states: Iterable[str] | None = None
    ) -> list[TrajectoryRow]:
        """Trajectories (optionally of one job and/or in some states), in creation order."""
        wanted = None if states is None else [str(getattr(s, "value", s)) for s in states]
        sql, args = _select(
            "SELECT * FROM trajectories",
            "created_at, rowid",
            ("job_arn = ?", None if job_arn is None else [job_arn]),
            (f"state IN ({','.join('?' * len(wanted or []))})", wanted),
        )
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

    @decodes
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

    @decodes
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

    # -- auxiliary calls (judge, simulated user) --------------------------------------------

    def add_aux_turn(self, row: AuxTurnRow) -> int:
        """Append one auxiliary call as the trajectory's next auxiliary turn; returns its
        index (``row.idx`` is ignored: the index is taken in the write transaction)."""
        with self._tx() as conn:
            found = conn.execute(  # the primary key's last entry: no scan of earlier calls
                "SELECT coalesce(max(idx) + 1, 0) FROM aux_turns WHERE trajectory_id = ?",
                (row.trajectory_id,),
            ).fetchone()
            idx = int(found[0])
            conn.execute(
                "INSERT INTO aux_turns(trajectory_id, idx, kind, request, response, "
                "prompt_tokens, completion_tokens, usage_estimated, latency_ms, created_at) "
                "VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    row.trajectory_id,
                    idx,
                    row.kind,
                    _dumps(row.request),
                    _dumps(row.response),
                    row.prompt_tokens,
                    row.completion_tokens,
                    int(row.usage_estimated),
                    row.latency_ms,
                    row.created_at or time.time(),
                ),
            )
        return idx

    def _has_aux(self) -> bool:
        """Whether the file has the ``aux_turns`` table (a version 1-2 file read as it is has
        not)."""
        row = self._one(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='aux_turns'"
        )
        return bool(row[0])

    def count_aux_turns(self, trajectory_id: str) -> int:
        """How many auxiliary calls a trajectory has recorded (0 for a file without them)."""
        if not self._has_aux():
            return 0
        row = self._one(
            "SELECT coalesce(max(idx) + 1, 0) FROM aux_turns WHERE trajectory_id = ?",
            (trajectory_id,),
        )
        return int(row[0])

    @decodes
    def list_aux_turns(self, trajectory_id: str) -> list[AuxTurnRow]:
        """The auxiliary calls of a trajectory in order (none for a file without them)."""
        if not self._has_aux():
            return []
        rows = self._all(
            "SELECT * FROM aux_turns WHERE trajectory_id = ? ORDER BY idx", (trajectory_id,)
        )
        return [aux_turn_from_row(r) for r in rows]

    @decodes
    def job_aux_turns(self, job_arn: str) -> dict[str, list[AuxTurnRow]]:
        """Per trajectory of the job that made auxiliary calls, those calls in order."""
        if not self._has_aux():
            return {}
        found: dict[str, list[AuxTurnRow]] = {}
        for r in self._all(
            "SELECT a.* FROM aux_turns a JOIN trajectories j ON j.id = a.trajectory_id "
            "WHERE j.job_arn = ? ORDER BY a.trajectory_id, a.idx",
            (job_arn,),
        ):
            row = aux_turn_from_row(r)
            found.setdefault(row.trajectory_id, []).append(row)
        return found

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
                    (trajectory_id, STATE_EVENT, _dumps({"state": state, "reason": None}), now),
                )
        return self._stored(self.get_reward(trajectory_id), f"the reward of {trajectory_id!r}")

    def reward_totals(self, job_arn: str) -> dict[str, float]:
        """The reward total of every rewarded trajectory of the job (one query)."""
        rows = self._all(
            "SELECT r.trajectory_id, r.total FROM rewards r "
            "JOIN trajectories j ON j.id = r.trajectory_id WHERE j.job_arn = ?",
            (job_arn,),
        )
        return {str(r[0]): float(r[1]) for r in rows}

    @decodes
    def job_rewards(self, job_arn: str) -> dict[str, RewardRow]:
        """The reward row of every rewarded trajectory of the job (one query; the reward lists,
        each stored as a JSON array, are decoded together as one array of arrays)."""
        rows = self._all(
            "SELECT r.* FROM rewards r JOIN trajectories j ON j.id = r.trajectory_id "
            "WHERE j.job_arn = ?",
            (job_arn,),
        )
        lists = decode_rows(rows, 1, "rewards.rewards of trajectory", list)
        return {str(r[0]): reward_from_row(r, v) for r, v in zip(rows, lists, strict=True)}

    @decodes
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
            self._conn.execute(_INSERT_EVENT, (trajectory_id, kind, _dumps(detail), time.time()))

    @decodes
    def list_events(
        self, trajectory_id: str | None = None, kind: str | None = None
    ) -> list[EventRow]:
        """Events in order, optionally of one trajectory and/or one kind."""
        sql, args = _select(
            "SELECT * FROM events",
            "id",
            ("trajectory_id = ?", None if trajectory_id is None else [trajectory_id]),
            ("kind = ?", None if kind is None else [kind]),
        )
        rows = self._all(sql, args)
        details = decode_rows(rows, 3, "events.detail of event", dict)
        return [event_from_row(r, d) for r, d in zip(rows, details, strict=True)]
