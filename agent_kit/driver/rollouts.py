"""The rollout loop of a local job: slots, retries, counters and progress.

:class:`RolloutLoop` plays (step, prompt, sample) *slots* of one job: each slot's attempts go
through :class:`~agent_kit.driver.attempt.Attempts` (the one attempt path, shared with replay)
until one is final, retrying what the service retries (see :mod:`agent_kit.driver.attempt` for
the outcome table); :meth:`RolloutLoop.play_until_stopped` plays a plan under a graceful stop.
:func:`~agent_kit.driver.job.run_job` builds one around a served emulator and an agent; this
module knows nothing about run directories, summaries or servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agent_kit.contract import InferenceParams
from agent_kit.driver.attempt import Attempt, Attempts, AttemptSpec, trajectory_id_for
from agent_kit.driver.config import JobConfig
from agent_kit.driver.dataset import Dataset
from agent_kit.driver.hooks import Progress, ProgressHook
from agent_kit.errors import AgentKitError, RunStoreError
from agent_kit.store import TrajectoryRow
from agent_kit.store.events import (
    JOB_FAILURE_EVENT,
    JOB_INTERRUPT_EVENT,
    RESUMED_REASON,
    RETRY_EVENT,
    ROLLOUT_DONE_EVENT,
    STOPPED_REASON,
)
from agent_kit.store.rows import fields_from

__all__ = ["RolloutLoop", "RolloutStats", "StepHook", "free_retry"]


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
        self, attempts: Attempts, *, dataset: Dataset, progress: ProgressHook | None
    ) -> None:
        #: The one attempt path (its job's emulator, store, agent and :class:`JobConfig`).
        self.attempts = attempts
        self.emu, self.store, self.job_name = attempts.emu, attempts.store, attempts.job_name
        self.dataset = dataset
        self.config: JobConfig = attempts.config
        self.progress = progress
        self.stats = RolloutStats()
        self.stop_reason: str | None = None
        #: Set by :meth:`drain`: no new attempt starts; in-flight ones may finish.
        self.draining = False
        self.sem = asyncio.Semaphore(self.config.concurrency)
        self.last: Attempt | None = None
        self.params: InferenceParams = self.config.inference
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
            fields_from(
                Progress,
                s,
                reward_mean=s.reward_sum / s.reward_n if s.reward_n else None,
                elapsed=elapsed,
                rate=rate,
                eta=remaining / rate if rate > 0 else None,
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
    ) -> Attempt:
        failure = self.store.write_failure
        if failure is not None:  # e.g. a full disk: start nothing the store cannot record
            raise RunStoreError(str(failure))
        step, p_idx, k = slot
        tid = trajectory_id_for(self.job_name, step, p_idx, k, attempt)
        spec = AttemptSpec(
            trajectory_id=tid,
            prompt=self.dataset[p_idx],
            step=step,
            prompt_index=p_idx,
            sample_index=k,
            inference_params=self.params,
            attempt=attempt,
            retry_of=retry_of,
        )
        payload = self.attempts.open(spec)
        self.stats.in_flight += 1
        self.emit()
        try:
            outcome = await self.attempts.play(spec, payload)
        except asyncio.CancelledError:
            why = self.stop_reason or ("interrupted" if self.draining else "cancelled")
            with contextlib.suppress(AgentKitError):
                self.emu.expire(tid, f"{STOPPED_REASON}: {why}")
            raise
        finally:
            self.stats.in_flight -= 1
        if outcome.kind == "retry":
            status = outcome.result.status if outcome.result is not None else None
            self.store.add_event(
                RETRY_EVENT,
                {"reason": outcome.reason, "attempt": attempt, "invoke_status": status},
                trajectory_id=tid,
            )
        return outcome

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

    async def play_until_stopped(
        self,
        plan: list[tuple[tuple[int, int, int], list[TrajectoryRow]]],
        stop: asyncio.Event | None,
        grace: float,
    ) -> None:
        """:meth:`play` the plan; when ``stop`` is set, start nothing new, give in-flight
        rollouts ``grace`` seconds to finish, then cut the rest (they are expired as
        interrupted, and a resume plays them again without counting a retry)."""
        if stop is None:
            await self.play(plan)
            return
        play = asyncio.create_task(self.play(plan))
        stopped = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({play, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not play.done():
                self.drain()
                detail = {"grace_s": grace, "in_flight": self.stats.in_flight}
                self.store.add_event(JOB_INTERRUPT_EVENT, detail)
                try:
                    await asyncio.wait_for(asyncio.shield(play), grace)
                except asyncio.TimeoutError:
                    play.cancel()
                    await asyncio.gather(play, return_exceptions=True)
                    return
            play.result()
        finally:
            stopped.cancel()
            if not play.done():
                play.cancel()
                await asyncio.gather(play, return_exceptions=True)

    async def _until_done_or_stopped(self, tasks: list[asyncio.Task[None]]) -> None:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # a bug in the driver must surface, not vanish
            if self.stop_reason is not None:
                return


def free_retry(reason: str | None) -> bool:
    """Attempts cut short by a stopped or resumed run do not use up the slot's retries."""
    return reason is not None and (reason == RESUMED_REASON or reason.startswith(STOPPED_REASON))
