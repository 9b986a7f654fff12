"""The rollout loop of a local job: settings, ids, progress, and one slot's attempts.

:class:`RolloutLoop` plays (step, prompt, sample) *slots* against an invoker and the in-process
:class:`~agent_kit.emulator.core.Emulator`, classifying every attempt the way the service does
(see :mod:`agent_kit.driver.job` for the outcome table).
:func:`~agent_kit.driver.job.run_job` builds one around a served emulator and an agent;
this module knows nothing about run directories, summaries or servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

from agent_kit.contract import (
    CompleteRolloutBody,
    InferenceParams,
    RolloutMetadata,
    RolloutPayload,
    RolloutStatus,
    TrajectoryState,
    UpdateRewardBody,
)
from agent_kit.driver.dataset import Dataset
from agent_kit.driver.invokers import Invoker, InvokeResult
from agent_kit.driver.trainer_side import CONTRACTS, TrainerSide, processing_key, read_result
from agent_kit.emulator.chaos import parse_chaos
from agent_kit.emulator.core import Emulator
from agent_kit.errors import AgentKitError, RunStoreError, UsageError
from agent_kit.store import INVOCATION_EVENT, RunStore, TrajectoryRow
from agent_kit.store.events import (
    FAILED_REASON,
    JOB_FAILURE_EVENT,
    LIMIT_REASON,
    NO_REWARD_REASON,
    NO_SAMPLE_REASON,
    REFUSED_REASON,
    RESUMED_REASON,
    RETRY_EVENT,
    ROLLOUT_DONE_EVENT,
    STOPPED_REASON,
)

__all__ = [
    "FAILED_REASON",
    "LIMIT_REASON",
    "MAX_BATCH_SIZE",
    "NOT_PROCESSING_REASON",
    "NO_REWARD_REASON",
    "NO_SAMPLE_REASON",
    "REFUSED_REASON",
    "RESUMED_REASON",
    "STOPPED_REASON",
    "JobConfig",
    "Progress",
    "ProgressHook",
    "RolloutLoop",
    "RolloutStats",
    "StepHook",
    "default_job_name",
    "free_retry",
    "session_id_for",
    "trajectory_id_for",
]

#: The service's largest global batch; the default batch (all prompts) is capped here.
MAX_BATCH_SIZE: Final = 128
#: Upper bounds of a local job (the service allows at most 96 rollouts in flight).
MAX_CONCURRENCY: Final = 1024
MAX_STEPS: Final = 100_000
_NAME_RE: Final = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
#: The job failure of an agent that does not answer the rl-toolkit contract's first answer.
NOT_PROCESSING_REASON: Final = (
    'The agent did not answer {"status": "processing", "result_key": ...} '
    "(agentcore-rl-toolkit contract)"
)
#: Client errors that may pass (a timeout, a throttle): other 4xx answers refuse the rollout.
_TRANSIENT_4XX: Final = frozenset({408, 429})


# -- configuration -----------------------------------------------------------------------------


@dataclass(frozen=True)
class JobConfig:
    """Job settings, named like the service's hyper-parameters; :meth:`validated` checks them.

    ``batch_size`` None means "every prompt" (capped at :data:`MAX_BATCH_SIZE`); ``report_grace``
    is how long, after the agent's answer, the driver waits for CompleteRollout/UpdateReward
    (bounded by what is left of ``rollout_timeout``).
    """

    name: str | None = None
    policy: str = "random"
    group_size: int = 8
    batch_size: int | None = None
    steps: int = 1
    concurrency: int = 32
    rollout_timeout: float = 600.0
    max_retries: int = 3
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 4096
    success_threshold: float = 1.0
    fail_fast: bool = True
    seed: int = 0
    report_grace: float = 30.0
    region: str = "us-west-2"
    #: ``--chaos SPEC``: faults the emulator injects (agent_kit.emulator.chaos); None for none.
    chaos: str | None = None
    #: ``--contract``: ``mtrl`` (the service's payload) or ``rl-toolkit`` (agentcore-rl-toolkit's
    #: ``_rollout`` payload, result objects in S3; see agent_kit.driver.trainer_side).
    contract: str = "mtrl"

    def validated(self, n_prompts: int) -> JobConfig:
        """A copy with ``batch_size`` resolved; UsageError naming the first bad setting by its
        ``agent-kit run`` flag."""
        checks: list[tuple[bool, str]] = [
            (2 <= self.group_size <= 32, f"--group-size must be 2..32, got {self.group_size}"),
            (1 <= self.steps <= MAX_STEPS, f"--steps must be 1..{MAX_STEPS}, got {self.steps}"),
            (
                1 <= self.concurrency <= MAX_CONCURRENCY,
                f"--concurrency must be 1..{MAX_CONCURRENCY}, got {self.concurrency}",
            ),
            (
                0 < self.rollout_timeout <= 86_400,
                f"--rollout-timeout must be > 0 and ≤ 86400 seconds, got {self.rollout_timeout}",
            ),
            (0 <= self.max_retries <= 10, f"--max-retries must be 0..10, got {self.max_retries}"),
            (0 <= self.temperature <= 2, f"--temperature must be 0..2, got {self.temperature}"),
            (0 < self.top_p <= 1, f"--top-p must be in (0, 1], got {self.top_p}"),
            (self.max_tokens >= 1, f"--max-tokens must be ≥ 1, got {self.max_tokens}"),
            (
                0 <= self.report_grace <= 3600,
                f"--report-grace must be 0..3600 seconds, got {self.report_grace}",
            ),
            (n_prompts >= 1, "the dataset has no prompts"),
            (
                self.contract in CONTRACTS,
                f"--contract must be one of {', '.join(CONTRACTS)}, got {self.contract!r}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
        if self.chaos is not None:
            parse_chaos(self.chaos, seed=self.seed)  # UsageError naming the bad item
        if self.name is not None and not _NAME_RE.match(self.name):
            raise UsageError(
                f"job name {self.name!r} is not valid: 1..63 letters, digits and hyphens, "
                "starting and ending with a letter or digit"
            )
        batch = self.batch_size
        if batch is None:
            batch = min(n_prompts, MAX_BATCH_SIZE)
        elif not 1 <= batch <= 1024:
            raise UsageError(f"--batch-size must be 1..1024, got {batch}")
        return replace(self, batch_size=batch)

    def inference_params(self) -> dict[str, Any]:
        """``payload.inferenceParams`` (docs/contract.md §2 names)."""
        return {"temperature": self.temperature, "topP": self.top_p, "maxTokens": self.max_tokens}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (stored in the job row)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobConfig:
        """The inverse of :meth:`to_dict`; unknown keys are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def default_job_name(entrypoint: str) -> str:
    """``<entrypoint stem>-<UTC timestamp>``, reduced to the characters a job name allows.

    A generic file name (``agent.py``, ``main.py``, ``app.py``) takes its directory's name, so
    ``examples/wordle/agent.py`` runs as ``wordle-…``.
    """
    path = Path(entrypoint)
    stem = path.stem if entrypoint.endswith(".py") else "agent"
    if entrypoint.endswith(".py") and stem in ("agent", "main", "app") and path.parent.name:
        stem = path.resolve().parent.name
    stem = re.sub(r"[^a-zA-Z0-9]+", "-", stem).strip("-")[:40] or "agent"
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"


def trajectory_id_for(job: str, step: int, prompt: int, sample: int, attempt: int) -> str:
    """The deterministic trajectory id of one rollout attempt."""
    return f"{job}-s{step}-p{prompt}-g{sample}-a{attempt}"


def session_id_for(trajectory_id: str) -> str:
    """A unique AgentCore session id (≥ 33 characters) derived from the trajectory id."""
    return "agent-kit-" + hashlib.sha256(trajectory_id.encode()).hexdigest()[:48]


# -- progress and results -----------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """A snapshot of a running job, handed to the progress hook after every change."""

    total: int
    done: int
    succeeded: int
    failed: int
    retried: int
    in_flight: int
    reward_mean: float | None
    elapsed: float
    rate: float
    eta: float | None
    step: int
    steps: int
    job_failures: int


ProgressHook = Callable[[Progress], None]


@dataclass
class RolloutStats:
    """Live counters of a job's slots (``done`` includes slots finished before a resume)."""

    total: int = 0
    done: int = 0
    done_this_run: int = 0
    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    in_flight: int = 0
    reward_sum: float = 0.0
    reward_n: int = 0
    job_failures: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    step: int = 0


@dataclass(frozen=True)
class _Attempt:
    kind: str  # "rewarded" | "job_failure" | "retry" | "limit"
    trajectory_id: str
    reason: str | None = None
    reward: float | None = None
    result: InvokeResult | None = None


# -- the loop ------------------------------------------------------------------------------------


def _payload(
    trajectory_id: str, job_arn: str, prompt: str, endpoint: str, config: JobConfig
) -> dict[str, Any]:
    """The MTRL payload of one rollout attempt (docs/contract.md §2), as the agent receives it."""
    return RolloutPayload(
        prompt=prompt,
        metadata=RolloutMetadata(
            job_arn=job_arn, rollout_id=trajectory_id, endpoint=endpoint, region=config.region
        ),
        inference_params=InferenceParams.model_validate(config.inference_params()),
    ).wire()


StepHook = Callable[[int], Awaitable[None]]
"""Awaited at every step boundary of :meth:`RolloutLoop.play`: with ``s`` before step ``s``
starts, and with ``config.steps`` once the last step is over (what a trainer needs to update the
policy between steps: the next step samples the updated policy)."""


class RolloutLoop:
    """Plays slots of one job to their final outcome (shared by ``run_job`` and ``invoke_once``).

    ``stop_reason`` becomes the first job-killing failure when ``config.fail_fast``; ``stats``
    counts slots; ``last`` is the most recent attempt (used by ``invoke_once``); ``on_step``, if
    set, is awaited at every step boundary (see :data:`StepHook`).
    """

    def __init__(
        self,
        *,
        emu: Emulator,
        store: RunStore,
        invoker: Invoker,
        job_arn: str,
        job_name: str,
        endpoint: str,
        dataset: Dataset,
        config: JobConfig,
        progress: ProgressHook | None,
        trainer: TrainerSide | None = None,
    ) -> None:
        self.emu = emu
        #: The trainer's side (``--contract rl-toolkit``), None for the MTRL contract.
        self.trainer = trainer
        self.store = store
        self.invoker = invoker
        self.job_arn = job_arn
        self.job_name = job_name
        self.endpoint = endpoint
        self.dataset = dataset
        self.config = config
        self.progress = progress
        self.stats = RolloutStats()
        self.stop_reason: str | None = None
        #: Set by :meth:`drain`: no new attempt starts; in-flight ones may finish.
        self.draining = False
        self.sem = asyncio.Semaphore(config.concurrency)
        self.last: _Attempt | None = None
        self.on_step: StepHook | None = None

    def drain(self) -> None:
        """Start no new rollout attempt from now on (a graceful stop: Ctrl-C, SIGTERM)."""
        self.draining = True

    # progress
    def emit(self) -> None:
        """Hand a :class:`Progress` snapshot to the progress hook (if any)."""
        if self.progress is None:
            return
        s = self.stats
        elapsed = time.monotonic() - s.started
        rate = s.done_this_run / elapsed if elapsed > 0 else 0.0
        remaining = s.total - s.done
        self.progress(
            Progress(
                total=s.total,
                done=s.done,
                succeeded=s.succeeded,
                failed=s.failed,
                retried=s.retried,
                in_flight=s.in_flight,
                reward_mean=s.reward_sum / s.reward_n if s.reward_n else None,
                elapsed=elapsed,
                rate=rate,
                eta=remaining / rate if rate > 0 else None,
                step=s.step,
                steps=self.config.steps,
                job_failures=len(s.job_failures),
            )
        )

    def _job_failure(self, reason: str, trajectory_id: str, slot: tuple[int, int, int]) -> None:
        detail = {
            "reason": reason,
            "trajectory_id": trajectory_id,
            "step": slot[0],
            "prompt_index": slot[1],
            "sample_index": slot[2],
        }
        self.store.add_event(JOB_FAILURE_EVENT, detail, trajectory_id=trajectory_id)
        self.stats.job_failures.append(detail)
        if self.config.fail_fast and self.stop_reason is None:
            self.stop_reason = reason

    def _slot_done(
        self, slot: tuple[int, int, int], trajectory_id: str, outcome: str, reason: str | None
    ) -> None:
        self.store.add_event(
            ROLLOUT_DONE_EVENT,
            {
                "step": slot[0],
                "prompt_index": slot[1],
                "sample_index": slot[2],
                "outcome": outcome,
                "reason": reason,
            },
            trajectory_id=trajectory_id,
        )
        self.stats.done += 1
        self.stats.done_this_run += 1
        if outcome == "rewarded":
            self.stats.succeeded += 1
        else:
            self.stats.failed += 1
        self.emit()

    async def _attempt(
        self,
        slot: tuple[int, int, int],
        attempt: int,
        retry_of: str | None,
    ) -> _Attempt:
        failure = self.store.write_failure
        if failure is not None:  # e.g. a full disk: start nothing the store cannot record
            raise RunStoreError(str(failure))
        step, p_idx, k = slot
        config = self.config
        tid = trajectory_id_for(self.job_name, step, p_idx, k, attempt)
        prompt = self.dataset[p_idx]
        trainer = self.trainer
        if trainer is None:
            payload = recorded = _payload(tid, self.job_arn, prompt, self.endpoint, config)
        else:
            params = InferenceParams.model_validate(config.inference_params()).to_openai()
            payload = trainer.payload(prompt, tid, self.job_name, p_idx, params)
            recorded = trainer.recorded(payload)
        self.emu.open_trajectory(
            self.job_arn,
            prompt,
            step=step,
            prompt_index=p_idx,
            sample_index=k,
            attempt=attempt,
            retry_of=retry_of,
            trajectory_id=tid,
            payload=recorded,
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + config.rollout_timeout
        self.stats.in_flight += 1
        self.emit()
        try:
            result = await self.invoker.invoke(payload, session_id_for(tid), config.rollout_timeout)
            # What the agent answered (reward breakdown, failure reason): replay compares it.
            self.store.add_event(
                INVOCATION_EVENT,
                {
                    "status": result.status,
                    "http_status": result.http_status,
                    "body": result.body,
                    "error": result.error,
                },
                trajectory_id=tid,
            )
            if trainer is None:
                outcome = await self._classify(tid, result, deadline)
            else:
                outcome = await self._classify_trainer(trainer, tid, result, deadline)
        except asyncio.CancelledError:
            why = self.stop_reason or ("interrupted" if self.draining else "cancelled")
            with contextlib.suppress(AgentKitError):
                self.emu.expire(tid, f"{STOPPED_REASON}: {why}")
            raise
        finally:
            self.stats.in_flight -= 1
        if outcome.kind == "retry":
            self.store.add_event(
                RETRY_EVENT,
                {"reason": outcome.reason, "attempt": attempt, "invoke_status": result.status},
                trajectory_id=tid,
            )
        return outcome

    async def _classify(self, tid: str, result: InvokeResult, deadline: float) -> _Attempt:
        emu = self.emu
        loop = asyncio.get_running_loop()
        if result.limit is not None:
            return await self._over_limit(tid, result, deadline)
        if result.status in ("timeout", "unreachable"):
            return self._no_answer(tid, result)
        final = self._final_at_once(tid, result)
        if final is not None:
            return final
        grace = max(0.0, min(deadline - loop.time(), self.config.report_grace))
        state = await emu.wait_state(tid, TrajectoryState.finished(), grace)
        if state is TrajectoryState.REWARDED:
            return self._rewarded(tid, result)
        if state is TrajectoryState.FAILED:
            return _Attempt("job_failure", tid, FAILED_REASON, result=result)
        if state is TrajectoryState.TIMED_OUT:
            return _Attempt("retry", tid, "expired while waiting for the reward", result=result)
        if state is TrajectoryState.READY:
            return self._ended(tid, result, "job_failure", NO_REWARD_REASON)
        # still OPEN after the agent answered
        if emu.turn_count(tid) == 0:
            return self._ended(tid, result, "job_failure", _no_sample_reason(result))
        if loop.time() >= deadline:
            reason = "The rollout did not finish within rollout_timeout"
        else:
            reason = "The agent answered without completing the rollout"
            if result.error:
                reason += f" ({result.error})"
        return self._ended(tid, result, "retry", reason)

    async def _classify_trainer(
        self, trainer: TrainerSide, tid: str, result: InvokeResult, deadline: float
    ) -> _Attempt:
        """The trainer's side of an attempt: the agent answers ``processing`` + ``result_key``,
        the result object is polled from S3 until ``deadline``, the session is stopped, and its
        rewards are recorded through the emulator (see agent_kit.driver.trainer_side)."""
        if result.status in ("timeout", "unreachable"):
            return self._no_answer(tid, result)
        final = self._final_at_once(tid, result)
        if final is not None:
            return final
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
        doc = await trainer.s3.wait_for(key, deadline)
        stop = getattr(self.invoker, "stop_session", None)
        if stop is not None:
            await stop(session_id_for(tid))
        if doc is None:
            where = f"s3://{trainer.s3.bucket}/{key}"
            reason = f"The rollout did not finish within rollout_timeout (no object at {where})"
            return self._ended(tid, result, "retry", reason)
        verdict = read_result(doc)
        detail = {"status": "ok", "http_status": result.http_status, "body": verdict.body}
        self.store.add_event(INVOCATION_EVENT, {**detail, "error": None}, trajectory_id=tid)
        try:
            if verdict.rewards is None:
                if not verdict.failed:
                    reason = f"{NO_REWARD_REASON} ({verdict.failure})"
                    return self._ended(tid, result, "job_failure", reason)
                body = CompleteRolloutBody(trajectory_id=tid, status=RolloutStatus.FAILED)
                self.emu.complete_rollout(self.job_arn, body)
                return _Attempt("job_failure", tid, f"{FAILED_REASON} ({verdict.failure})")
            turns = self.emu.turn_count(tid)
            if turns == 0:
                return self._ended(tid, result, "job_failure", NO_SAMPLE_REASON)
            rewards = verdict.rewards
            if len(rewards) not in (1, turns):
                rewards = [math.fsum(rewards)]
            self.emu.complete_rollout(self.job_arn, CompleteRolloutBody(trajectory_id=tid))
            self.emu.update_reward(
                self.job_arn, UpdateRewardBody(trajectory_id=tid, rewards=rewards)
            )
        except AgentKitError as exc:  # the trajectory was sealed meanwhile (expired, stopped)
            return self._ended(tid, result, "retry", f"the result could not be recorded: {exc}")
        return self._rewarded(tid, result)

    async def _over_limit(self, tid: str, result: InvokeResult, deadline: float) -> _Attempt:
        """The invocation ran into a limit of the driver's (``result.limit``: an answer too
        large to read, an agent killed for its memory): final, never retried. A rollout the
        agent had completed keeps what it reports within the report grace (while the agent
        lives); one it rewarded stays rewarded."""
        state = self.emu.state(tid)
        if state is TrajectoryState.READY and result.status != "unreachable":
            grace = max(
                0.0, min(deadline - asyncio.get_running_loop().time(), self.config.report_grace)
            )
            state = await self.emu.wait_state(tid, TrajectoryState.finished(), grace)
        if state is TrajectoryState.REWARDED:
            return self._rewarded(tid, result)
        return self._ended(tid, result, "limit", f"{LIMIT_REASON}: {result.limit}")

    def _no_answer(self, tid: str, result: InvokeResult) -> _Attempt:
        """No answer (timeout) or no agent (unreachable): retried, unless the rollout had
        already run into its turn cap (a limit is final)."""
        if self.emu.state(tid) is TrajectoryState.REWARDED:
            return self._rewarded(tid, result)
        limit = self.emu.limit_reached(tid)
        if limit is not None:
            return self._ended(tid, result, "limit", f"{LIMIT_REASON}: {limit}")
        if result.status == "timeout":
            reason = f"The rollout did not finish within rollout_timeout ({result.error})"
        else:
            reason = f"The agent could not be reached or crashed: {result.error}"
        return self._ended(tid, result, "retry", reason)

    def _final_at_once(self, tid: str, result: InvokeResult) -> _Attempt | None:
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

    def _ended(self, tid: str, result: InvokeResult, kind: str, reason: str) -> _Attempt:
        """Expire the trajectory with ``reason`` and return the attempt of ``kind`` — or the
        outcome that raced the expiry (a reward, or the agent's ``Status: failed``)."""
        state = self.emu.expire(tid, reason)
        if state is TrajectoryState.REWARDED:
            return self._rewarded(tid, result)
        if state is TrajectoryState.FAILED:
            return _Attempt("job_failure", tid, FAILED_REASON, result=result)
        return _Attempt(kind, tid, reason, result=result)

    def _rewarded(self, tid: str, result: InvokeResult) -> _Attempt:
        reward = self.store.get_reward(tid)
        return _Attempt(
            "rewarded", tid, reward=None if reward is None else reward.total, result=result
        )

    async def play_slot(self, slot: tuple[int, int, int], prior: list[TrajectoryRow]) -> None:
        """Play one (step, prompt, sample) slot to its final outcome, retrying as needed."""
        attempt = max((t.attempt for t in prior), default=-1) + 1
        retries_used = sum(1 for t in prior if not free_retry(t.reason))
        retry_of = prior[-1].id if prior else None
        last_reason = prior[-1].reason if prior else None
        while self.stop_reason is None and not self.draining:
            if retries_used > self.config.max_retries:
                reason = f"Rollout failed after {retries_used} attempts: {last_reason}"
                failed_id = retry_of or trajectory_id_for(self.job_name, *slot, 0)
                self._job_failure(reason, failed_id, slot)
                self._slot_done(slot, failed_id, "failed", reason)
                return
            async with self.sem:
                if self.stop_reason is not None or self.draining:
                    return
                outcome = await self._attempt(slot, attempt, retry_of)
            self.last = outcome
            if outcome.kind == "rewarded":
                if outcome.reward is not None:
                    self.stats.reward_sum += outcome.reward
                    self.stats.reward_n += 1
                self._slot_done(slot, outcome.trajectory_id, "rewarded", None)
                return
            if outcome.kind == "limit":  # an outcome, not a transient failure: no retry
                self._slot_done(slot, outcome.trajectory_id, "limit", outcome.reason)
                return
            if outcome.kind == "job_failure":
                reason = outcome.reason or "job failure (no reason given)"
                self._job_failure(reason, outcome.trajectory_id, slot)
                self._slot_done(slot, outcome.trajectory_id, "failed", reason)
                return
            retries_used += 1
            attempt += 1
            retry_of = outcome.trajectory_id
            last_reason = outcome.reason
            if retries_used <= self.config.max_retries:
                self.stats.retried += 1
                self.emit()

    async def play(self, plan: list[tuple[tuple[int, int, int], list[TrajectoryRow]]]) -> None:
        """Play the slots step by step (a step starts when the previous one is finished), with
        :attr:`on_step` awaited at every step boundary."""
        by_step: dict[int, list[tuple[tuple[int, int, int], list[TrajectoryRow]]]] = {}
        for item in plan:
            by_step.setdefault(item[0][0], []).append(item)
        for step in sorted(by_step):
            if self.stop_reason is not None or self.draining:
                break
            if self.on_step is not None:
                await self.on_step(step)
                if self.stop_reason is not None or self.draining:
                    break
            self.stats.step = step
            self.emit()
            tasks = [
                asyncio.create_task(self.play_slot(slot, prior)) for slot, prior in by_step[step]
            ]
            try:
                await self._until_done_or_stopped(tasks)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        if self.on_step is not None and self.stop_reason is None and not self.draining:
            await self.on_step(self.config.steps)

    async def _until_done_or_stopped(self, tasks: list[asyncio.Task[None]]) -> None:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # a bug in the driver must surface, not vanish
            if self.stop_reason is not None:
                return


def _no_sample_reason(result: InvokeResult) -> str:
    """The service's reason for a rollout without a policy call, with the agent's HTTP status
    when it answered an error (its message is the agent-side failure, listed once)."""
    if result.status == "error" and result.http_status is not None:
        return f"{NO_SAMPLE_REASON} (the agent answered HTTP {result.http_status})"
    return NO_SAMPLE_REASON


def free_retry(reason: str | None) -> bool:
    """Attempts cut short by a stopped or resumed run do not use up the slot's retries."""
    return reason is not None and (reason == RESUMED_REASON or reason.startswith(STOPPED_REASON))
