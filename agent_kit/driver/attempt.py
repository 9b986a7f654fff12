"""One rollout attempt, the one path the job driver and replay share.

:meth:`Attempts.play` plays one attempt of a rollout the way the service does: it builds the
payload (:meth:`~agent_kit.contract.RolloutPayload.for_rollout`, or agentcore-rl-toolkit's
``_rollout`` payload with a :class:`~agent_kit.driver.trainer_side.TrainerSide`), opens the
trajectory in the emulator, invokes the agent, records what it answered (event
:data:`~agent_kit.store.INVOCATION_EVENT`), waits for the report and classifies the outcome into
an :class:`Attempt`:

- ``rewarded``: the trajectory is REWARDED;
- ``job_failure``: one of the service's job-killing reasons (``Status: failed``, no sampling
  request, no reward in time, an agent that refuses its row);
- ``retry``: no answer, an unreachable agent or an unfinished rollout (the trajectory is
  expired TIMED_OUT and the slot may be played again);
- ``limit``: the rollout ran into a deterministic limit (the turn cap, an answer too large, an
  agent killed for its memory): final, never retried.

The outcome of one rollout attempt, in the service's words (docs/contract.md §1), and what
the job driver does with it:

- REWARDED → done.
- ``Status: failed`` → job failure "The agent signaled that the trajectory failed".
- The invocation ended but no turn was recorded → job failure "No sampling requests were
  received for this rollout".
- READY but no reward within the grace period → job failure "The rollout completed but no
  reward was received in time".
- No answer within ``rollout_timeout``, the agent unreachable (crashed process, connection
  reset), or the agent returned without completing → the trajectory is TIMED_OUT and the
  rollout retried under a new id (``retry_of`` links it), up to ``max_retries``; when retries
  run out, the rollout fails the job (**[chosen]**: "Rollout failed after N attempts: …").
  A timeout while an auxiliary call of the rollout (its judge, its simulated user) waited for
  the auxiliary model names that call and ``--aux-policy`` in the reason.
- The rollout ran into the emulator's turn cap and then ended without completing → final at
  once (a ``limit``, reason ``limit: …``): not retried, not a job failure, the slot unrewarded.
- The agent answered HTTP 4xx (not 408/429) without completing → job failure at once, no
  grace, no retry (**[chosen]**: the "No sampling requests …" reason with the HTTP status, or
  "The agent refused the rollout after N policy calls …").

The job driver (:class:`~agent_kit.driver.rollouts.RolloutLoop`) wraps it with the slot's
retries, counters and progress; replay (:func:`agent_kit.replay.engine.replay_run`) plays each
recorded episode through it once and compares.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from typing import Any, Final, Literal

from agent_kit.contract import (
    CompleteRolloutBody,
    InferenceParams,
    RolloutPayload,
    RolloutStatus,
    TrajectoryState,
    UpdateRewardBody,
)
from agent_kit.driver.config import JobConfig
from agent_kit.driver.invokers import Invoker, InvokeResult
from agent_kit.driver.trainer_side import (
    MAX_RESULT_ENV,
    S3Object,
    TrainerSide,
    processing_key,
    read_result,
    shared_key_reason,
)
from agent_kit.emulator.aux_route import aux_waiting_note
from agent_kit.emulator.core import Emulator
from agent_kit.errors import AgentKitError
from agent_kit.store import INVOCATION_EVENT, RunStore
from agent_kit.store.events import (
    FAILED_REASON,
    LIMIT_REASON,
    NO_REWARD_REASON,
    NO_SAMPLE_REASON,
    REFUSED_REASON,
)

__all__ = [
    "NOT_PROCESSING_REASON",
    "Attempt",
    "AttemptKind",
    "AttemptSpec",
    "Attempts",
    "session_id_for",
    "trajectory_id_for",
]

#: The job failure of an agent that does not answer the rl-toolkit contract's first answer.
NOT_PROCESSING_REASON: Final = (
    'The agent did not answer {"status": "processing", "result_key": ...} '
    "(agentcore-rl-toolkit contract)"
)
#: Client errors that may pass (a timeout, a throttle): other 4xx answers refuse the rollout.
_TRANSIENT_4XX: Final = frozenset({408, 429})

AttemptKind = Literal["rewarded", "job_failure", "retry", "limit"]


def trajectory_id_for(job: str, step: int, prompt: int, sample: int, attempt: int) -> str:
    """The deterministic trajectory id of one rollout attempt."""
    return f"{job}-s{step}-p{prompt}-g{sample}-a{attempt}"


def session_id_for(trajectory_id: str) -> str:
    """A unique AgentCore session id (≥ 33 characters) derived from the trajectory id."""
    return "agent-kit-" + hashlib.sha256(trajectory_id.encode()).hexdigest()[:48]


@dataclass(frozen=True)
class AttemptSpec:
    """What one attempt plays: the trajectory id, the prompt, its slot, the sampling
    parameters, and its links (``retry_of`` the attempt it retries, ``replay_of`` the recorded
    rollout it replays)."""

    trajectory_id: str
    prompt: str
    step: int
    prompt_index: int
    sample_index: int
    inference_params: InferenceParams
    attempt: int = 0
    retry_of: str | None = None
    replay_of: str | None = None


@dataclass(frozen=True)
class Attempt:
    """The classified outcome of one attempt (see the module docstring); ``result`` is what
    the invoker returned, ``reward`` the trajectory's total once rewarded."""

    kind: AttemptKind
    trajectory_id: str
    reason: str | None = None
    reward: float | None = None
    result: InvokeResult | None = None


class Attempts:
    """Plays attempts of one job against one agent and one emulator (see the module
    docstring). ``report_grace`` is how long, after the agent's answer, the report is waited
    for (bounded by what is left of ``rollout_timeout``); ``grace_after_error`` False waits for
    no report after an answer that is not a success (replay: the recording decides)."""

    def __init__(
        self,
        *,
        emu: Emulator,
        store: RunStore,
        invoker: Invoker,
        job_arn: str,
        job_name: str,
        endpoint: str,
        config: JobConfig,
        trainer: TrainerSide | None = None,
        grace_after_error: bool = True,
    ) -> None:
        self.emu, self.store, self.invoker = emu, store, invoker
        self.job_arn, self.job_name = job_arn, job_name
        self.endpoint, self.config, self.region = endpoint, config, config.region
        self.rollout_timeout, self.report_grace = config.rollout_timeout, config.report_grace
        self.trainer = trainer
        self.grace_after_error = grace_after_error

    def open(self, spec: AttemptSpec) -> dict[str, Any]:
        """Open the attempt's trajectory in the emulator; return the payload to send."""
        trainer = self.trainer
        if trainer is None:
            payload = recorded = RolloutPayload.for_rollout(
                spec.prompt,
                job_arn=self.job_arn,
                trajectory_id=spec.trajectory_id,
                endpoint=self.endpoint,
                region=self.region,
                inference_params=spec.inference_params,
            ).wire()
        else:
            params = spec.inference_params.to_openai()
            payload = trainer.payload(
                spec.prompt,
                spec.trajectory_id,
                self.job_name,
                spec.prompt_index,
                params,
                job_arn=self.job_arn,
            )
            recorded = trainer.recorded(payload)
        self.emu.open_trajectory(
            self.job_arn,
            spec.prompt,
            step=spec.step,
            prompt_index=spec.prompt_index,
            sample_index=spec.sample_index,
            attempt=spec.attempt,
            retry_of=spec.retry_of,
            replay_of=spec.replay_of,
            trajectory_id=spec.trajectory_id,
            payload=recorded,
        )
        return payload

    async def play(self, spec: AttemptSpec, payload: dict[str, Any]) -> Attempt:
        """Invoke the agent with ``payload`` (from :meth:`open`), record its answer and
        classify the attempt."""
        tid = spec.trajectory_id
        deadline = asyncio.get_running_loop().time() + self.rollout_timeout
        result = await self.invoker.invoke(payload, session_id_for(tid), self.rollout_timeout)
        # What the agent answered (reward breakdown, failure reason): replay compares it.
        self._record_answer(tid, result.status, result.http_status, result.body, result.error)
        decided = await self._decided_at_once(tid, result, deadline)
        if decided is not None:
            return decided
        if self.trainer is None:
            return await self._classify(tid, result, deadline)
        return await self._classify_trainer(self.trainer, tid, result, deadline)

    async def _decided_at_once(
        self, tid: str, result: InvokeResult, deadline: float
    ) -> Attempt | None:
        """What either contract's attempt is at once, whatever it answered: over a limit, no
        answer (timeout, unreachable), or final (:meth:`_final_at_once`); None to classify."""
        if result.limit is not None:
            return await self._over_limit(tid, result, deadline)
        if result.status in ("timeout", "unreachable"):
            return self._no_answer(tid, result)
        return self._final_at_once(tid, result)

    def _record_answer(
        self, tid: str, status: str, http_status: int | None, body: Any, error: str | None
    ) -> None:
        detail = {"status": status, "http_status": http_status, "body": body, "error": error}
        self.store.add_event(INVOCATION_EVENT, detail, trajectory_id=tid)

    def _grace(self, deadline: float) -> float:
        left = deadline - asyncio.get_running_loop().time()
        return max(0.0, min(left, self.report_grace))

    async def _classify(self, tid: str, result: InvokeResult, deadline: float) -> Attempt:
        emu = self.emu
        grace = self._grace(deadline) if result.ok or self.grace_after_error else 0.0
        state = await emu.wait_state(tid, TrajectoryState.finished(), grace)
        if state is TrajectoryState.REWARDED:
            return self._rewarded(tid, result)
        if state is TrajectoryState.FAILED:
            return Attempt("job_failure", tid, FAILED_REASON, result=result)
        if state is TrajectoryState.TIMED_OUT:
            return Attempt("retry", tid, "expired while waiting for the reward", result=result)
        if state is TrajectoryState.READY:
            return self._ended(tid, result, "job_failure", NO_REWARD_REASON)
        # still OPEN after the agent answered
        if emu.turn_count(tid) == 0:
            return self._ended(tid, result, "job_failure", _no_sample_reason(result))
        if asyncio.get_running_loop().time() >= deadline:
            reason = "The rollout did not finish within rollout_timeout"
        else:
            reason = "The agent answered without completing the rollout"
            if result.error:
                reason += f" ({result.error})"
        return self._ended(tid, result, "retry", reason)

    async def _classify_trainer(
        self, trainer: TrainerSide, tid: str, result: InvokeResult, deadline: float
    ) -> Attempt:
        """The trainer's side of an attempt: the agent answers ``processing`` + ``result_key``,
        the result object is polled from S3 until ``deadline``, the session is stopped, and its
        rewards are recorded through the emulator (see agent_kit.driver.trainer_side). A key
        another rollout answered too is a job failure; an object over the cap a limit."""
        key = processing_key(result.body)
        if key is None:
            if not result.ok:
                reason = f"The agent answered without starting the rollout ({result.error})"
                return self._ended(tid, result, "retry", reason)
            reason = (
                f"{NOT_PROCESSING_REASON}: it answered {str(result.body)[:200]}"
                if result.body is not None
                else NOT_PROCESSING_REASON
            )
            return self._ended(tid, result, "job_failure", reason)
        owners = trainer.claim(key, tid)
        if len(owners) > 1:
            return self._ended(tid, result, "job_failure", shared_key_reason(key, owners))
        found = await trainer.s3.wait_for(key, deadline)
        stop = getattr(self.invoker, "stop_session", None)
        if stop is not None:
            await stop(session_id_for(tid))
        return self._trainer_object(trainer, tid, result, key, found)

    def _trainer_object(
        self, trainer: TrainerSide, tid: str, result: InvokeResult, key: str, found: S3Object | None
    ) -> Attempt:
        """Classify what was found at the rollout's result key (None: nothing in time)."""
        where = f"s3://{trainer.s3.bucket}/{key[:300]}"
        if found is None:
            reason = f"The rollout did not finish within rollout_timeout (no object at {where})"
            return self._ended(tid, result, "retry", reason)
        owners = trainer.claimed_by(key)
        if len(owners) > 1:  # another rollout answered the same key while this one waited
            return self._ended(tid, result, "job_failure", shared_key_reason(key, owners))
        if found.over_cap is not None:
            limit = (
                f"the result object at {where} is {found.size} bytes, over the limit of "
                f"{found.over_cap} bytes ({MAX_RESULT_ENV})"
            )
            return self._ended(tid, result, "limit", f"{LIMIT_REASON}: {limit}")
        return self._record_trainer_result(tid, result, found.doc)

    def _record_trainer_result(self, tid: str, result: InvokeResult, doc: Any) -> Attempt:
        """Record the rewards of a trainer's result object through the emulator."""
        verdict = read_result(doc)
        self._record_answer(tid, "ok", result.http_status, verdict.body, None)
        try:
            if verdict.rewards is None or verdict.total is None:
                if not verdict.failed:
                    reason = f"{NO_REWARD_REASON} ({verdict.failure})"
                    return self._ended(tid, result, "job_failure", reason)
                body = CompleteRolloutBody(trajectory_id=tid, status=RolloutStatus.FAILED)
                self.emu.complete_rollout(self.job_arn, body)
                return Attempt("job_failure", tid, f"{FAILED_REASON} ({verdict.failure})")
            turns = self.emu.turn_count(tid)
            if turns == 0:
                return self._ended(tid, result, "job_failure", NO_SAMPLE_REASON)
            rewards = verdict.rewards
            if len(rewards) not in (1, turns):
                rewards = [verdict.total]
            self.emu.complete_rollout(self.job_arn, CompleteRolloutBody(trajectory_id=tid))
            self.emu.update_reward(
                self.job_arn, UpdateRewardBody(trajectory_id=tid, rewards=rewards)
            )
        except AgentKitError as exc:  # the trajectory was sealed meanwhile (expired, stopped)
            return self._ended(tid, result, "retry", f"the result could not be recorded: {exc}")
        return self._rewarded(tid, result)

    async def _over_limit(self, tid: str, result: InvokeResult, deadline: float) -> Attempt:
        """The invocation ran into a limit of the driver's (``result.limit``: an answer too
        large to read, an agent killed for its memory): final, never retried. A rollout the
        agent had completed keeps what it reports within the report grace (while the agent
        lives); one it rewarded stays rewarded."""
        state = self.emu.state(tid)
        if state is TrajectoryState.READY and result.status != "unreachable":
            state = await self.emu.wait_state(
                tid, TrajectoryState.finished(), self._grace(deadline)
            )
        if state is TrajectoryState.REWARDED:
            return self._rewarded(tid, result)
        return self._ended(tid, result, "limit", f"{LIMIT_REASON}: {result.limit}")

    def _no_answer(self, tid: str, result: InvokeResult) -> Attempt:
        """No answer (timeout) or no agent (unreachable): retried, unless the rollout had
        already run into its turn cap (a limit is final)."""
        if self.emu.state(tid) is TrajectoryState.REWARDED:
            return self._rewarded(tid, result)
        limit = self.emu.limit_reached(tid)
        if limit is not None:
            return self._ended(tid, result, "limit", f"{LIMIT_REASON}: {limit}")
        if result.status == "timeout":
            waiting = aux_waiting_note(self.emu, tid)  # the agent waited on its judge's model
            detail = f"{result.error}; {waiting}" if waiting else result.error
            reason = f"The rollout did not finish within rollout_timeout ({detail})"
        else:
            reason = f"The agent could not be reached or crashed: {result.error}"
        return self._ended(tid, result, "retry", reason)

    def _final_at_once(self, tid: str, result: InvokeResult) -> Attempt | None:
        """The outcome of an answer that no wait or retry can change, or None.

        A trajectory still OPEN when the agent answered is final at once when it ran into the
        turn cap (kind ``limit``: the same rollout would again) or when the agent refused it
        with a 4xx (an unplayable row: a job failure, in the service's words when no policy
        call was made); no report grace is waited for either.
        """
        emu = self.emu
        if emu.state(tid) is not TrajectoryState.OPEN:
            return None
        limit = emu.limit_reached(tid)
        if limit is not None:
            return self._ended(tid, result, "limit", f"{LIMIT_REASON}: {limit}")
        status = result.http_status
        if result.status != "error" or status is None or not 400 <= status < 500:
            return None
        if status in _TRANSIENT_4XX:
            return None
        turns = emu.turn_count(tid)
        if turns == 0:
            return self._ended(tid, result, "job_failure", _no_sample_reason(result))
        calls = f"{turns} policy call{'' if turns == 1 else 's'}"
        reason = f"{REFUSED_REASON} after {calls} (the agent answered HTTP {status})"
        return self._ended(tid, result, "job_failure", reason)

    def _ended(self, tid: str, result: InvokeResult, kind: AttemptKind, reason: str) -> Attempt:
        """Expire the trajectory with ``reason`` and return the attempt of ``kind`` — or the
        outcome that raced the expiry (a reward, or the agent's ``Status: failed``)."""
        state = self.emu.expire(tid, reason)
        if state is TrajectoryState.REWARDED:
            return self._rewarded(tid, result)
        if state is TrajectoryState.FAILED:
            return Attempt("job_failure", tid, FAILED_REASON, result=result)
        return Attempt(kind, tid, reason, result=result)

    def _rewarded(self, tid: str, result: InvokeResult) -> Attempt:
        reward = self.store.get_reward(tid)
        total = None if reward is None else reward.total
        return Attempt("rewarded", tid, reward=total, result=result)


def _no_sample_reason(result: InvokeResult) -> str:
    """The service's reason for a rollout without a policy call, with the agent's HTTP status
    when it answered an error (its message is the agent-side failure, listed once)."""
    if result.status == "error" and result.http_status is not None:
        return f"{NO_SAMPLE_REASON} (the agent answered HTTP {result.http_status})"
    return NO_SAMPLE_REASON
