"""The emulated Job Runtime service: :class:`Emulator`, and its reports (CompleteRollout and
UpdateReward).

:class:`Emulator` owns the rules of docs/contract.md §3–§4 and nothing about HTTP: the server
(:mod:`agent_kit.emulator.server`) parses the wire and calls it, the job driver calls it
in-process. Every rule violation raises a :class:`~agent_kit.errors.JobRuntimeError` subclass
that already knows its status code and ``x-amzn-ErrorType``.

It is built in three layers, one module each, so that each holds one part of the rules:

- :mod:`~agent_kit.emulator.service` — :class:`~agent_kit.emulator.service.ServiceState`: the
  settings, jobs and trajectories outside a turn (open, look up, wait, expire);
- :mod:`~agent_kit.emulator.turns` — :class:`~agent_kit.emulator.turns.TurnPath`: one policy
  call, from admission to its one store write, with the policy route's chaos;
- this module — the two reports an agent sends at the end of a rollout, their idempotency
  tokens and the report route's chaos.

The three operations (a turn, CompleteRollout, UpdateReward) decide under one lock from one
cached state and share the job checks; the layers are one class, so no half needs another's
internals passed to it. State lives in the :class:`~agent_kit.store.RunStore`; the hot fields
of each trajectory (job, state, turn count) are mirrored in memory by
:class:`~agent_kit.emulator.trajectory_table.TrajectoryTable` (which also wakes
:meth:`Emulator.wait_state`), so a turn costs one SQLite transaction and no read. Turning a
chat-completions body into a :class:`~agent_kit.emulator.schemas.PolicyRequest` is
:mod:`agent_kit.emulator.chat_request`'s job (``flatten_content`` included).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from agent_kit.contract import (
    CompleteRolloutBody,
    RolloutStatus,
    TrajectoryState,
    UpdateRewardBody,
)
from agent_kit.emulator.turns import TurnPath, chaos_event
from agent_kit.errors import (
    ConflictError,
    InternalServiceError,
    ThrottlingError,
    ValidationError,
)
from agent_kit.store.events import FAILED_REASON

__all__ = ["Emulator"]


def body_hash(operation: str, fields: dict[str, Any]) -> str:
    """Stable hash of an operation's meaningful fields (ClientToken idempotency)."""
    text = json.dumps({"op": operation, **fields}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _check_total(rewards: list[float]) -> None:
    """400 ValidationException for rewards whose sum leaves the float range."""
    try:
        total = math.fsum(rewards)
    except OverflowError:
        total = math.inf
    if not math.isfinite(total):
        raise ValidationError(
            "Rewards must have a finite total: these finite values sum past the float range"
        )


class Emulator(TurnPath):
    """The Job Runtime's state and rules, shared by the HTTP server and the job driver.

    Thread-safe: state transitions are serialised by one lock; :meth:`wait_state` may be awaited
    from any event loop. ``policy`` is any object with ``name``, ``async complete(request)`` and
    ``async aclose()``; its ``seed`` attribute (if any) seeds the per-turn RNG unless ``seed``
    is given. ``lenient`` creates an unknown trajectory of a known job on its first turn.

    The layers (module docstring): :class:`~agent_kit.emulator.service.ServiceState` takes the
    constructor's settings, :class:`~agent_kit.emulator.turns.TurnPath` adds :meth:`turn`, and
    this class adds :meth:`complete_rollout` and :meth:`update_reward`.
    """

    # -- report chaos ------------------------------------------------------------------------

    def _report_chaos(self, trajectory_id: str) -> str | None:
        """The report fault for this CompleteRollout/UpdateReward call; a throttle raises."""
        if self.chaos is None:
            return None
        with self._lock:
            call = self._report_calls.get(trajectory_id, 0)
            self._report_calls[trajectory_id] = call + 1
        fault = self.chaos.report_fault(trajectory_id, call)
        if fault is None:
            return None
        event = chaos_event(fault, call)
        self.store.add_event(event.kind, event.detail, trajectory_id)
        if fault == "report_throttle":
            raise ThrottlingError("chaos: injected throttling of the report, retry")
        return fault

    @staticmethod
    def _lost(fault: str | None) -> None:
        if fault == "report_lost":
            raise InternalServiceError("chaos: the report was applied but its answer was lost")

    # -- CompleteRollout / UpdateReward ------------------------------------------------------

    def _replayed(self, token: str | None, operation: str, digest: str) -> bool:
        if not token:
            return False
        seen = self.store.get_token(token)
        if seen is None:
            return False
        if seen == (operation, digest):
            return True
        raise ValidationError(f"ClientToken {token!r} was already used with a different request")

    def complete_rollout(self, job_arn: str | None, body: CompleteRolloutBody) -> None:
        """CompleteRollout per the §4 table (idempotent on ClientToken and on the same status)."""
        job_arn = self.check_job(job_arn)
        fault = self._report_chaos(body.trajectory_id)
        target = (
            TrajectoryState.READY if body.status is RolloutStatus.READY else TrajectoryState.FAILED
        )
        digest = body_hash(
            "CompleteRollout",
            {"job": job_arn, "tid": body.trajectory_id, "status": body.status.value},
        )
        with self._lock:
            if self._replayed(body.client_token, "CompleteRollout", digest):
                return
            traj = self._lookup(job_arn, body.trajectory_id)
            current = traj.state
            if current is TrajectoryState.OPEN:
                reason = FAILED_REASON if target is TrajectoryState.FAILED else None
                self._table.transition(body.trajectory_id, traj, target, reason)
            elif current is not target:
                raise ConflictError(
                    f"Cannot transition trajectory {body.trajectory_id} from {current.value} "
                    f"to {target.value}"
                )
            if body.client_token:
                self.store.remember_token(body.client_token, "CompleteRollout", digest)
        if current is TrajectoryState.OPEN:
            self.rollout_ended(body.trajectory_id)
        self._lost(fault)

    def update_reward(self, job_arn: str | None, body: UpdateRewardBody) -> None:
        """UpdateReward per the §4 table: READY → REWARDED with length-checked finite rewards
        whose total is finite too (``[1e308, 1e308]`` is a 400: nothing non-finite is stored)."""
        job_arn = self.check_job(job_arn)
        fault = self._report_chaos(body.trajectory_id)
        rewards = [float(r) for r in body.rewards]
        _check_total(rewards)
        digest = body_hash(
            "UpdateReward", {"job": job_arn, "tid": body.trajectory_id, "rewards": rewards}
        )
        with self._lock:
            if self._replayed(body.client_token, "UpdateReward", digest):
                return
            traj = self._lookup(job_arn, body.trajectory_id)
            if traj.state is not TrajectoryState.READY:
                hint = " (complete the rollout first)" if traj.state is TrajectoryState.OPEN else ""
                raise ConflictError(
                    f"Trajectory {body.trajectory_id} is not in valid status for UpdateReward: "
                    f"{traj.state.value}{hint}"
                )
            if len(rewards) not in (1, traj.turns):
                raise ValidationError(
                    f"Rewards must hold 1 value or one per turn ({traj.turns}), got {len(rewards)}"
                )
            self.store.set_reward(
                body.trajectory_id,
                rewards,
                body.client_token,
                digest,
                state=TrajectoryState.REWARDED.value,
            )
            if body.client_token:
                self.store.remember_token(body.client_token, "UpdateReward", digest)
            self._table.settle(body.trajectory_id, traj, TrajectoryState.REWARDED)
        self._lost(fault)
