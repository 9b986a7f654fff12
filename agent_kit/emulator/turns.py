"""The turn path: one policy call of a trajectory, from admission to its one store write.

:class:`TurnPath` (a layer of :class:`~agent_kit.emulator.core.Emulator` over
:class:`~agent_kit.emulator.service.ServiceState`) holds :meth:`TurnPath.turn` and its steps.
A turn is five steps: admit (job, trajectory, state) → request (the PolicyRequest) → chaos
(this call's injected fault) → backend (the policy's answer, shaped) → record (the second state
check and the write). Events noted on the way (a new connection, a fault, a policy error, a
discarded answer) wait in ``events`` and land with the turn's row in one store transaction
(:meth:`~agent_kit.store.RunStore.record_turn`), or alone when the turn records no row; the
hot fields a turn checks are read from the in-memory table, so a turn costs no read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Final, Protocol

from agent_kit.contract import TrajectoryState
from agent_kit.emulator.chaos import REPORT_FAULTS, as_text_tool_calls, with_malformed_arguments
from agent_kit.emulator.chat_request import parse_chat, policy_request
from agent_kit.emulator.schemas import ChatCompletionBody, PolicyRequest
from agent_kit.emulator.service import ServiceState
from agent_kit.emulator.sse import dumps
from agent_kit.emulator.trajectory_table import CachedTrajectory
from agent_kit.errors import (
    AccessDeniedError,
    InternalServiceError,
    JobRuntimeError,
    NotFoundError,
    ThrottlingError,
    UsageError,
    ValidationError,
)
from agent_kit.store import TurnEvent, TurnRow
from agent_kit.store.events import (
    CHAOS_EVENT,
    CONNECTION_EVENT,
    LENIENT_OPEN_EVENT,
    POLICY_ERROR_EVENT,
    TURN_DISCARDED_EVENT,
    TURN_LIMIT_EVENT,
)

__all__ = ["TurnOutcome", "TurnPath", "chaos_event"]

#: Trajectories whose last connection is remembered (far more than can be in flight).
_PEER_MEMORY: Final = 8192


class _UsageLike(Protocol):
    prompt_tokens: int
    completion_tokens: int
    estimated: bool


class _ResultLike(Protocol):
    response: dict[str, Any]
    usage: _UsageLike
    chunks: list[dict[str, Any]] | None


@dataclass(frozen=True)
class TurnOutcome:
    """One turn's answer: the chat.completion, upstream chunks, usage and, once the turn is
    recorded, its index (``-1`` while the answer is only shaped, before it is stored)."""

    response: dict[str, Any]
    chunks: list[dict[str, Any]] | None
    idx: int
    prompt_tokens: int
    completion_tokens: int
    usage_estimated: bool
    #: ``response`` as compact JSON bytes (what the non-stream routes send).
    response_json: bytes = b""
    #: Chaos ``truncated_sse``: the server cuts the answer short.
    truncated: bool = False


class TurnPath(ServiceState):
    """The service's turn path (:meth:`turn`) over its state; see the module docstring."""

    def _admit_turn(
        self, job_arn: str | None, trajectory_id: str | None, events: list[TurnEvent]
    ) -> tuple[str, str, CachedTrajectory]:
        """The first check of a turn: job, trajectory and its state; (job, id, cached state)."""
        job_arn = self.check_job(job_arn)
        if not trajectory_id or len(trajectory_id) > 256:
            raise ValidationError("TrajectoryId must be 1..256 characters")
        traj = self._table.get(trajectory_id)
        if traj is None and self.lenient:
            with self._lock:
                traj = self._table.get(trajectory_id)
                if traj is None:
                    self.open_trajectory(job_arn, "", trajectory_id=trajectory_id)
                    events.append(_event(LENIENT_OPEN_EVENT, {"job_arn": job_arn}))
                    traj = self._table.get(trajectory_id)
        if traj is None or traj.job_arn != job_arn:
            raise NotFoundError(f"Trajectory {trajectory_id} not found in job {job_arn}")
        if traj.state is not TrajectoryState.OPEN:
            raise _not_sampling(trajectory_id, traj.state)
        if traj.turns >= self.max_turns_per_trajectory:
            if traj.limit is None:  # noted once: the driver ends such a rollout without a retry
                cap = self.max_turns_per_trajectory
                traj.limit = f"the rollout reached the limit of {cap} policy calls per trajectory"
                events.append(_event(TURN_LIMIT_EVENT, {"turns": traj.turns, "limit": cap}))
            raise ValidationError(
                f"Trajectory {trajectory_id} reached the limit of "
                f"{self.max_turns_per_trajectory} turns"
            )
        return job_arn, trajectory_id, traj

    async def turn(
        self,
        job_arn: str | None,
        trajectory_id: str | None,
        body: Any,
        *,
        route: str,
        stream: bool = False,
        raw: bytes | None = None,
        parsed: ChatCompletionBody | None = None,
        peer: str | None = None,
    ) -> TurnOutcome:
        """One policy call: check the state machine, ask the policy, check again, record the turn.

        ``body`` is the parsed OpenAI chat-completions request (``parsed``, if given, its
        validated :class:`ChatCompletionBody`); ``raw``, if given, is its strict JSON text
        (stored verbatim, saving a re-encode). A trajectory sealed while the policy answered
        gets the 400 of docs/contract.md §4 and no turn is recorded. ``peer`` is the caller's
        address (host:port of its TCP connection): a call from another connection than the
        trajectory's previous one is recorded as a ``policy_connection`` event, so the summary
        can tell an agent that opens a new client per call. Policy failures are recorded
        as ``policy_error`` events and raised as 5xx InternalServiceError (or the backend's own
        JobRuntimeError); nothing is recorded as a turn then. Everything one call writes (its
        turn row and the events it noted) is one store transaction.
        """
        started = time.perf_counter()
        events: list[TurnEvent] = []
        try:
            job_arn, trajectory_id, traj = self._admit_turn(job_arn, trajectory_id, events)
            if peer is not None:
                self._note_peer(trajectory_id, peer, traj.turns, events)
            request = policy_request(
                body,
                seed=self.seed,
                trajectory_id=trajectory_id,
                job_arn=job_arn,
                turn=traj.turns,
                context=traj.context,
                parsed=parsed if parsed is not None else parse_chat(body),
            )
            fault = await self._policy_chaos(request, events) if self.chaos else None
            answer = await self._answer(request, fault, route, events)
            return self._record(traj, request, answer, body, raw, route, stream, started, events)
        finally:
            if events and trajectory_id:  # noted by a call that recorded no turn: written alone
                self.store.record_turn(trajectory_id, events)

    async def _answer(
        self, request: PolicyRequest, fault: str | None, route: str, events: list[TurnEvent]
    ) -> TurnOutcome:
        """Ask the policy; apply a tool-call fault to its answer, fill in usage, encode it."""
        result = await self._ask_policy(request, route, events)
        response, chunks = result.response, result.chunks
        if fault in ("text_tool_calls", "malformed_tool_calls"):
            rewrite = as_text_tool_calls if fault == "text_tool_calls" else with_malformed_arguments
            rewritten = rewrite(response)
            if rewritten is not None:
                response, chunks = rewritten, None
                events.append(chaos_event(fault, request.turn))
            else:  # nothing to rewrite: the fault did not apply to this answer
                fault = None
        usage = result.usage
        prompt_tokens = int(usage.prompt_tokens)
        completion_tokens = int(usage.completion_tokens)
        if response.get("usage") is None:
            response = {
                **response,
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        try:
            response_json = dumps(response)
        except (TypeError, ValueError) as exc:  # e.g. a NaN or an object the policy produced
            raise InternalServiceError(f"The policy response is not JSON: {exc}") from None
        return TurnOutcome(
            response,
            chunks,
            -1,
            prompt_tokens,
            completion_tokens,
            bool(usage.estimated),
            response_json,
            truncated=fault == "truncated_sse",
        )

    async def _ask_policy(
        self, request: PolicyRequest, route: str, events: list[TurnEvent]
    ) -> _ResultLike:
        """The backend's answer, checked to be a chat.completion; a failure is noted as a
        ``policy_error`` event and raised (its own JobRuntimeError, else a 5xx)."""
        try:
            result: _ResultLike = await self.policy.complete(request)
            response = result.response
            if not isinstance(response, dict) or not isinstance(response.get("choices"), list):
                raise TypeError("policy returned something that is not a chat.completion")
        except JobRuntimeError as exc:
            detail = {"error": exc.error_type, "message": exc.message}
            events.append(
                _event(POLICY_ERROR_EVENT, {**detail, "turn": request.turn, "route": route})
            )
            raise
        except Exception as exc:  # noqa: BLE001 - any backend failure becomes a recorded 5xx
            detail = {"error": type(exc).__name__, "message": str(exc)[:2000]}
            events.append(
                _event(POLICY_ERROR_EVENT, {**detail, "turn": request.turn, "route": route})
            )
            raise InternalServiceError(
                f"The policy {self.policy.name!r} failed: {type(exc).__name__}: {str(exc)[:500]}"
            ) from None
        return result

    def _record(
        self,
        traj: CachedTrajectory,
        request: PolicyRequest,
        answer: TurnOutcome,
        body: Any,
        raw: bytes | None,
        route: str,
        stream: bool,
        started: float,
        events: list[TurnEvent],
    ) -> TurnOutcome:
        """The second check of docs/contract.md §4, then the turn's one write (its row and the
        events noted so far, which are then no longer pending)."""
        trajectory_id, turn = request.trajectory_id, request.turn
        request_json: str | None = None
        if raw is not None:
            try:
                request_json = raw.decode("utf-8")
            except UnicodeDecodeError:
                request_json = None
        with self._lock:
            # A trajectory sealed while the policy was answering gets the sealed-state answer,
            # and the turn is not recorded.
            if traj.state is not TrajectoryState.OPEN:
                detail = {"state": traj.state.value, "turn": turn, "route": route}
                events.append(_event(TURN_DISCARDED_EVENT, detail))
                raise _not_sampling(trajectory_id, traj.state)
            idx = traj.turns
            row = TurnRow(
                trajectory_id=trajectory_id,
                idx=idx,
                route=route,
                request=body,
                response=answer.response,
                prompt_tokens=answer.prompt_tokens,
                completion_tokens=answer.completion_tokens,
                usage_estimated=answer.usage_estimated,
                latency_ms=(time.perf_counter() - started) * 1000.0,
                stream=stream,
            )
            try:
                self.store.record_turn(
                    trajectory_id,
                    events,
                    row,
                    request_json=request_json,
                    response_json=answer.response_json.decode("utf-8"),
                )
            except (TypeError, ValueError, UsageError) as exc:
                raise InternalServiceError(f"The turn could not be recorded: {exc}") from None
            events.clear()
            traj.turns += 1
        return dataclasses.replace(answer, idx=idx)

    def _note_peer(self, trajectory_id: str, peer: str, turn: int, events: list[TurnEvent]) -> None:
        with self._lock:
            if self._last_peer.get(trajectory_id) == peer:
                return
            self._last_peer[trajectory_id] = peer
            self._last_peer.move_to_end(trajectory_id)
            while len(self._last_peer) > _PEER_MEMORY:
                self._last_peer.popitem(last=False)
        events.append(_event(CONNECTION_EVENT, {"turn": turn}))

    # -- chaos -------------------------------------------------------------------------------

    async def _policy_chaos(self, request: PolicyRequest, events: list[TurnEvent]) -> str | None:
        """Apply this call's policy-route fault (noted in ``events``; raise, or wait); return the
        fault left for the answer (truncation or a tool-call rewrite), if any."""
        chaos, trajectory_id = self.chaos, request.trajectory_id
        if chaos is None:
            return None
        with self._lock:
            call = self._policy_calls.get(trajectory_id, 0)
            self._policy_calls[trajectory_id] = call + 1
        fault = chaos.policy_fault(trajectory_id, call)
        if fault is None:
            return None
        if fault in ("text_tool_calls", "malformed_tool_calls"):
            return fault  # noted once the answer is known to have tool calls
        events.append(chaos_event(fault, request.turn))
        if fault == "policy_5xx":
            raise InternalServiceError("chaos: injected policy failure")
        if fault == "policy_429":
            raise ThrottlingError("chaos: injected throttling, slow down")
        if fault == "policy_403":
            raise AccessDeniedError("chaos: injected 403, the request signature expired")
        await asyncio.sleep(chaos.delay(fault))  # the injected delay itself
        if fault == "timeout":
            raise InternalServiceError("chaos: injected timeout, the policy did not answer")
        return fault if fault == "truncated_sse" else None


def _event(kind: str, detail: dict[str, Any]) -> TurnEvent:
    """An event a turn notes now (written with the turn)."""
    return TurnEvent(kind, detail, time.time())


def chaos_event(fault: str, index: int) -> TurnEvent:
    """The ``chaos`` event of ``fault`` on a policy call's turn or a report call's index."""
    return _event(
        CHAOS_EVENT, {"fault": fault, ("call" if fault in REPORT_FAULTS else "turn"): index}
    )


def _not_sampling(trajectory_id: str, state: TrajectoryState) -> ValidationError:
    """The 400 of a turn on a trajectory that is not OPEN (docs/contract.md §4)."""
    return ValidationError(
        f"Trajectory {trajectory_id} is not in valid status for sampling: {state.value}"
    )
