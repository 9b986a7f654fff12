"""The emulator's in-memory mirror of its trajectories, and waiting for a state from any loop.

:class:`TrajectoryTable` caches the hot fields of each trajectory (job, state, turn count, the
context a policy sees) so that a turn costs one SQLite write and no read; the
:class:`~agent_kit.store.RunStore` stays the record (a miss reads it). State changes go
through :meth:`TrajectoryTable.transition` (store + cache) or :meth:`TrajectoryTable.settle`
(cache only, when the store was written by the caller) under :attr:`TrajectoryTable.lock`, and
wake whoever awaits that state in :meth:`TrajectoryTable.wait_state` — from any thread and any
event loop. The rules of which change is allowed are :mod:`agent_kit.emulator.core`'s.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from agent_kit.contract import TrajectoryState
from agent_kit.errors import UsageError
from agent_kit.store import RunStore, TrajectoryRow

__all__ = ["CachedTrajectory", "TrajectoryTable", "trajectory_context"]


@dataclass
class CachedTrajectory:
    """What the emulator keeps in memory of one trajectory (mutated under the table's lock).

    Not a copy of the rollout record (:class:`~agent_kit.store.Rollout`, what readers of a run
    get): this is the service's *working state*, the few fields its state machine checks and
    changes on every call (state, turn count, the context a policy sees), kept so a turn costs
    one SQLite write and no read. It is mutable, lives only while the service runs, and is
    rebuilt from the store on a miss; the store stays the record.
    """

    job_arn: str
    state: TrajectoryState
    turns: int
    context: dict[str, Any]
    #: Set when a policy call was refused on the turn cap: what limit the rollout reached.
    limit: str | None = None
    #: Auxiliary calls admitted so far (None: not counted yet; read from the store once).
    aux_calls: int | None = None
    #: The auxiliary calls waiting for the auxiliary policy now, by index: who asked
    #: (``judge 'tone'``, ``simulated user``), for a timeout's reason to name.
    aux_waiting: dict[int, str] = field(default_factory=dict)


@dataclass
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[TrajectoryState]
    states: frozenset[TrajectoryState] = field(default_factory=frozenset)


def trajectory_context(row: TrajectoryRow) -> dict[str, Any]:
    """The trajectory attributes a policy sees as ``PolicyRequest.context``."""
    context: dict[str, Any] = {
        "prompt": row.prompt,
        "step": row.step,
        "prompt_index": row.prompt_index,
        "sample_index": row.sample_index,
        "attempt": row.attempt,
    }
    if row.replay_of:
        context["replay_of"] = row.replay_of
    if row.retry_of:
        context["retry_of"] = row.retry_of
    return context


def _resolve(future: asyncio.Future[TrajectoryState], state: TrajectoryState) -> None:
    if not future.done():
        future.set_result(state)


class TrajectoryTable:
    """Cache + waiters over one store; thread-safe through :attr:`lock` (re-entrant, so the
    emulator holds it across a check and the change it decides)."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.lock = threading.RLock()
        self._cache: dict[str, CachedTrajectory] = {}
        self._waiters: dict[str, list[_Waiter]] = {}

    def get(self, trajectory_id: str) -> CachedTrajectory | None:
        """The cached trajectory (read from the store on a miss), or None if unknown."""
        traj = self._cache.get(trajectory_id)
        if traj is not None:
            return traj
        row = self.store.get_trajectory(trajectory_id)
        if row is None:
            return None
        traj = CachedTrajectory(
            row.job_arn,
            TrajectoryState(row.state),
            self.store.count_turns(trajectory_id),
            trajectory_context(row),
        )
        with self.lock:
            return self._cache.setdefault(trajectory_id, traj)

    def add(self, row: TrajectoryRow) -> CachedTrajectory:
        """Cache a trajectory the caller has just created in the store (no turns yet)."""
        traj = CachedTrajectory(row.job_arn, TrajectoryState(row.state), 0, trajectory_context(row))
        with self.lock:
            self._cache[row.id] = traj
        return traj

    def transition(
        self,
        trajectory_id: str,
        traj: CachedTrajectory,
        state: TrajectoryState,
        reason: str | None,
    ) -> None:
        """Record ``state`` (with ``reason``) in the store and the cache; wake its waiters."""
        with self.lock:
            self.store.set_state(trajectory_id, state.value, reason)
            self.settle(trajectory_id, traj, state)

    def settle(self, trajectory_id: str, traj: CachedTrajectory, state: TrajectoryState) -> None:
        """Set the cached state the caller has already stored; wake its waiters."""
        with self.lock:
            traj.state = state
            waiters = self._waiters.pop(trajectory_id, [])
            keep = []
            for waiter in waiters:
                if state in waiter.states:
                    waiter.loop.call_soon_threadsafe(_resolve, waiter.future, state)
                else:
                    keep.append(waiter)
            if keep:
                self._waiters[trajectory_id] = keep

    async def wait_state(
        self, trajectory_id: str, states: Collection[TrajectoryState], timeout: float
    ) -> TrajectoryState:
        """Wait until the trajectory is in one of ``states``; return its state (current on timeout).

        Raises UsageError for an unknown trajectory.
        """
        wanted = frozenset(TrajectoryState(s) for s in states)
        loop = asyncio.get_running_loop()
        with self.lock:
            traj = self.get(trajectory_id)
            if traj is None:
                raise UsageError(f"unknown trajectory {trajectory_id}")
            if traj.state in wanted:
                return traj.state
            waiter = _Waiter(loop, loop.create_future(), wanted)
            self._waiters.setdefault(trajectory_id, []).append(waiter)
        try:
            return await asyncio.wait_for(asyncio.shield(waiter.future), timeout)
        except asyncio.TimeoutError:
            with self.lock:
                waiters = self._waiters.get(trajectory_id, [])
                if waiter in waiters:
                    waiters.remove(waiter)
                return traj.state
