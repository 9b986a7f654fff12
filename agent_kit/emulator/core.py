"""The emulated Job Runtime service: jobs, the trajectory state machine and the turn path.

:class:`Emulator` owns the rules of docs/contract.md §3–§4 and nothing about HTTP: the server
(:mod:`agent_kit.emulator.server`) parses the wire and calls it, the job driver calls it
in-process. Every rule violation raises a :class:`~agent_kit.errors.JobRuntimeError` subclass
that already knows its status code and ``x-amzn-ErrorType``. Turning a chat-completions body
into a :class:`~agent_kit.emulator.schemas.PolicyRequest` is
:mod:`agent_kit.emulator.chat_request`'s job (``flatten_content`` is re-exported here).

State lives in the :class:`~agent_kit.store.RunStore`; the hot fields of each trajectory
(job, state, turn count) are mirrored in memory by
:class:`~agent_kit.emulator.trajectory_table.TrajectoryTable` (which also wakes
:meth:`Emulator.wait_state`), so a turn costs one SQLite transaction (its row and the events it
noted, :meth:`~agent_kit.store.RunStore.record_turn`) and no read.

Why one module of ~700 lines: it is one noun, the service's rules. The three operations (a
turn, CompleteRollout, UpdateReward) decide under one lock from one cached state and share the
job checks and the idempotency tokens; split apart, each half would need the other's
internals. The pieces that are their own concern live beside it: body parsing
(:mod:`~agent_kit.emulator.chat_request`), the cache and waiters
(:mod:`~agent_kit.emulator.trajectory_table`), the wire (:mod:`~agent_kit.emulator.server`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final, Protocol

from agent_kit.contract import (
    JOB_ARN_PATTERN,
    CompleteRolloutBody,
    RolloutStatus,
    TrajectoryState,
    UpdateRewardBody,
)
from agent_kit.emulator.chaos import (
    REPORT_FAULTS,
    Chaos,
    as_text_tool_calls,
    with_malformed_arguments,
)
from agent_kit.emulator.chat_request import flatten_content, parse_chat, policy_request
from agent_kit.emulator.schemas import ChatCompletionBody, PolicyRequest
from agent_kit.emulator.sse import dumps
from agent_kit.emulator.trajectory_table import CachedTrajectory, TrajectoryTable
from agent_kit.errors import (
    AccessDeniedError,
    ConflictError,
    InternalServiceError,
    JobRuntimeError,
    NotFoundError,
    ThrottlingError,
    UsageError,
    ValidationError,
)
from agent_kit.store import JobRow, RunStore, TrajectoryRow, TurnEvent, TurnRow
from agent_kit.store.events import (
    CHAOS_EVENT,
    CONNECTION_EVENT,
    FAILED_REASON,
    LENIENT_OPEN_EVENT,
    POLICY_ERROR_EVENT,
    TURN_DISCARDED_EVENT,
    TURN_LIMIT_EVENT,
)

#: Trajectories whose last connection is remembered (far more than can be in flight).
_PEER_MEMORY: Final = 8192

__all__ = [
    "DEFAULT_ACCOUNT",
    "Emulator",
    "PolicyBackendLike",
    "TurnOutcome",
    "flatten_content",
]

DEFAULT_ACCOUNT: Final = "123456789012"


class _UsageLike(Protocol):
    prompt_tokens: int
    completion_tokens: int
    estimated: bool


class _ResultLike(Protocol):
    response: dict[str, Any]
    usage: _UsageLike
    chunks: list[dict[str, Any]] | None


class PolicyBackendLike(Protocol):
    """What the emulator needs of a policy backend (``agent_kit.emulator.policies``)."""

    name: str

    async def complete(self, request: PolicyRequest) -> Any:
        """Answer one turn with a PolicyResult (``response``, ``usage``, ``chunks``)."""
        ...

    async def aclose(self) -> None:
        """Release connections or processes."""
        ...


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


def body_hash(operation: str, fields: dict[str, Any]) -> str:
    """Stable hash of an operation's meaningful fields (ClientToken idempotency)."""
    text = json.dumps({"op": operation, **fields}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class Emulator:
    """The Job Runtime's state and rules, shared by the HTTP server and the job driver.

    Thread-safe: state transitions are serialised by one lock; :meth:`wait_state` may be awaited
    from any event loop. ``policy`` is any object with ``name``, ``async complete(request)`` and
    ``async aclose()``; its ``seed`` attribute (if any) seeds the per-turn RNG unless ``seed``
    is given. ``lenient`` creates an unknown trajectory of a known job on its first turn.
    """

    def __init__(
        self,
        store: RunStore,
        policy: PolicyBackendLike,
        *,
        account_id: str = DEFAULT_ACCOUNT,
        region: str = "us-west-2",
        max_body_bytes: int = 4 << 20,
        max_turns_per_trajectory: int = 256,
        lenient: bool = False,
        seed: int | None = None,
        chaos: Chaos | None = None,
    ) -> None:
        if not (len(account_id) == 12 and account_id.isdigit()):
            raise UsageError(f"account id must be 12 digits, got {account_id!r}")
        if max_body_bytes <= 0 or max_turns_per_trajectory <= 0:
            raise UsageError("max_body_bytes and max_turns_per_trajectory must be positive")
        self.store = store
        self.policy = policy
        self.account_id = account_id
        self.region = region
        self.max_body_bytes = max_body_bytes
        self.max_turns_per_trajectory = max_turns_per_trajectory
        self.lenient = lenient
        self.seed = int(seed if seed is not None else getattr(policy, "seed", 0) or 0)
        self.default_job_arn: str | None = None
        #: Fault injection (``--chaos``); None answers every call as the contract says.
        self.chaos = chaos
        self._policy_calls: dict[str, int] = {}
        #: The connection of each trajectory's last policy call (bounded, oldest dropped).
        self._last_peer: OrderedDict[str, str] = OrderedDict()
        self._report_calls: dict[str, int] = {}
        self._jobs: set[str] = set()
        self._table = TrajectoryTable(store)
        #: One lock serialises every state change (the table's, re-entrant).
        self._lock = self._table.lock

    # -- jobs --------------------------------------------------------------------------------

    def job_arn_for(self, name: str, category: str = "AgentRFT") -> str:
        """The ARN this emulator gives a job name."""
        return f"arn:aws:sagemaker:{self.region}:{self.account_id}:job/{category}/{name}"

    def create_job(
        self, name: str, config: dict[str, Any] | None = None, *, arn: str | None = None
    ) -> JobRow:
        """Create (or return) a job; the first job becomes :attr:`default_job_arn`.

        ``arn`` overrides the generated ARN; it must match the contract pattern and this
        emulator's account.
        """
        arn = arn or self.job_arn_for(name)
        match = JOB_ARN_PATTERN.match(arn)
        if not match:
            raise UsageError(f"not a SageMaker job ARN: {arn!r}")
        if match["account"] != self.account_id:
            raise UsageError(f"job ARN {arn} is not in account {self.account_id}")
        job = self.store.create_job(arn, name, config or {})
        with self._lock:
            self._jobs.add(arn)
            if self.default_job_arn is None:
                self.default_job_arn = arn
        return job

    def check_job(self, job_arn: str | None) -> str:
        """Validate a job ARN from the wire: 400 invalid/unknown, 403 another account's job."""
        if not job_arn:
            raise ValidationError("JobArn is required (header X-Amzn-SageMaker-Job-Arn or body)")
        if job_arn in self._jobs:
            return job_arn
        match = JOB_ARN_PATTERN.match(job_arn)
        if not match:
            raise ValidationError(f"Invalid JobArn: {job_arn[:300]!r}")
        if match["account"] != self.account_id:
            raise AccessDeniedError(f"Not authorized to access job {job_arn}")
        if self.store.get_job(job_arn) is None:
            raise ValidationError(f"Could not find job {job_arn}")
        with self._lock:
            self._jobs.add(job_arn)
        return job_arn

    # -- trajectories ------------------------------------------------------------------------

    def open_trajectory(
        self,
        job_arn: str,
        prompt: str,
        *,
        step: int = 0,
        prompt_index: int = 0,
        sample_index: int = 0,
        attempt: int = 0,
        retry_of: str | None = None,
        replay_of: str | None = None,
        trajectory_id: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> TrajectoryRow:
        """Create an OPEN trajectory in a known job (UsageError if the job or id is bad)."""
        if job_arn not in self._jobs and self.store.get_job(job_arn) is None:
            raise UsageError(f"unknown job {job_arn}")
        tid = trajectory_id or f"traj-{uuid.uuid4().hex}"
        if not 1 <= len(tid) <= 256:
            raise UsageError("trajectory id must be 1..256 characters")
        row = self.store.create_trajectory(
            TrajectoryRow(
                id=tid,
                job_arn=job_arn,
                state=TrajectoryState.OPEN.value,
                prompt=prompt,
                payload=payload,
                step=step,
                prompt_index=prompt_index,
                sample_index=sample_index,
                attempt=attempt,
                retry_of=retry_of,
                replay_of=replay_of,
            )
        )
        with self._lock:
            self._jobs.add(job_arn)
        self._table.add(row)
        return row

    def rollout_payload(
        self,
        trajectory: TrajectoryRow,
        endpoint: str,
        inference_params: dict[str, Any] | None = None,
        api_key: str | None = None,
    ) -> dict[str, Any]:
        """The payload the service would send the agent for this trajectory (docs/contract.md
        §2); with ``api_key`` (a rollout token of this trajectory) also ``metadata.apiKey``."""
        metadata = {
            "jobArn": trajectory.job_arn,
            "rolloutId": trajectory.id,
            "endpoint": endpoint.rstrip("/"),
            "region": self.region,
        }
        if api_key is not None:
            metadata["apiKey"] = api_key
        return {
            "prompt": trajectory.prompt,
            "metadata": metadata,
            "inferenceParams": inference_params
            or {"temperature": 1.0, "topP": 1.0, "maxTokens": 4096},
        }

    def _lookup(self, job_arn: str, trajectory_id: str | None) -> CachedTrajectory:
        if not trajectory_id or len(trajectory_id) > 256:
            raise ValidationError("TrajectoryId must be 1..256 characters")
        traj = self._table.get(trajectory_id)
        if traj is None or traj.job_arn != job_arn:
            raise NotFoundError(f"Trajectory {trajectory_id} not found in job {job_arn}")
        return traj

    def state(self, trajectory_id: str) -> TrajectoryState | None:
        """The current state of a trajectory, or None if unknown."""
        traj = self._table.get(trajectory_id)
        return None if traj is None else traj.state

    def turn_count(self, trajectory_id: str) -> int:
        """How many turns the trajectory has recorded (0 if unknown)."""
        traj = self._table.get(trajectory_id)
        return 0 if traj is None else traj.turns

    def limit_reached(self, trajectory_id: str) -> str | None:
        """The deterministic limit the trajectory ran into (its turn cap), or None."""
        traj = self._table.get(trajectory_id)
        return None if traj is None else traj.limit

    async def wait_state(
        self, trajectory_id: str, states: Collection[TrajectoryState], timeout: float
    ) -> TrajectoryState:
        """Wait until the trajectory is in one of ``states``; return its state (current on timeout).

        Raises UsageError for an unknown trajectory. Any thread, any event loop.
        """
        return await self._table.wait_state(trajectory_id, states, timeout)

    def expire(self, trajectory_id: str, reason: str) -> TrajectoryState:
        """OPEN/READY → TIMED_OUT (the driver's rollout_timeout); return the resulting state."""
        with self._lock:
            traj = self._table.get(trajectory_id)
            if traj is None:
                raise UsageError(f"unknown trajectory {trajectory_id}")
            if traj.state in (TrajectoryState.OPEN, TrajectoryState.READY):
                self._table.transition(trajectory_id, traj, TrajectoryState.TIMED_OUT, reason)
            return traj.state

    # -- turns -------------------------------------------------------------------------------
    #
    # A turn is five steps: admit (job, trajectory, state) → request (the PolicyRequest) →
    # chaos (this call's injected fault) → backend (the policy's answer, shaped) → record (the
    # second state check and the write). Events noted on the way (a new connection, a fault, a
    # policy error, a discarded answer) wait in ``events`` and land with the turn's row in one
    # store transaction, or alone when the turn records no row.

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
                events.append(_chaos_event(fault, request.turn))
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
        events.append(_chaos_event(fault, request.turn))
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
        event = _chaos_event(fault, call)
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
        self._lost(fault)

    def update_reward(self, job_arn: str | None, body: UpdateRewardBody) -> None:
        """UpdateReward per the §4 table: READY → REWARDED with length-checked finite rewards."""
        job_arn = self.check_job(job_arn)
        fault = self._report_chaos(body.trajectory_id)
        rewards = [float(r) for r in body.rewards]
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

    async def aclose(self) -> None:
        """Close the policy backend (the store is the caller's to close)."""
        await self.policy.aclose()


def _event(kind: str, detail: dict[str, Any]) -> TurnEvent:
    """An event a turn notes now (written with the turn)."""
    return TurnEvent(kind, detail, time.time())


def _chaos_event(fault: str, index: int) -> TurnEvent:
    """The ``chaos`` event of ``fault`` on a policy call's turn or a report call's index."""
    return _event(
        CHAOS_EVENT, {"fault": fault, ("call" if fault in REPORT_FAULTS else "turn"): index}
    )


def _not_sampling(trajectory_id: str, state: TrajectoryState) -> ValidationError:
    """The 400 of a turn on a trajectory that is not OPEN (docs/contract.md §4)."""
    return ValidationError(
        f"Trajectory {trajectory_id} is not in valid status for sampling: {state.value}"
    )
