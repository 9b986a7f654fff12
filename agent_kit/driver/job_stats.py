"""The job driver's own figures, counted from the store.

:func:`driver_stats` is the ``run`` section of a job's summary
(:class:`~agent_kit.store.run_figures.RunFigures`): trajectories by state, slots
done/succeeded/failed, retries, rewards, turns and tokens — every figure read from the store, so
a resumed run reports the same totals as an uninterrupted one; only ``slots_per_s`` is of
this invocation (:func:`rollout_rate`). :func:`rollouts_verdict` says why a completed job's
rollouts failed as a whole (none got a real reward, or too many got the agent's floor reward),
which makes its status :data:`ROLLOUTS_FAILED`. :func:`redact_summary` takes the per-run route
token out of anything written.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TypeVar

from pydantic import BaseModel

from agent_kit.contract import TrajectoryState
from agent_kit.driver.config import DEFAULT_MAX_FLOOR_RATE
from agent_kit.driver.job_setup import OpenedRun, plan_slots
from agent_kit.driver.rollouts import RolloutLoop, RolloutStats, free_retry
from agent_kit.driver.tunnel import redact
from agent_kit.store import TrajectoryRow, load_rollouts
from agent_kit.store.events import JOB_FAILURE_EVENT
from agent_kit.store.run_figures import JobFailureNote, RunFigures

__all__ = ["counted_retries", "driver_stats", "redact_summary", "rollout_rate", "rollouts_verdict"]

_Model = TypeVar("_Model", bound=BaseModel)


def driver_stats(
    run: OpenedRun,
    job_arn: str,
    status: str,
    failure: str | None,
    job: RolloutLoop | None,
    elapsed: float,
) -> RunFigures:
    """The driver's figures, counted from the store (so a resumed run reports the same totals
    as an uninterrupted one); only the rate is of this invocation."""
    store = run.store
    rows = store.list_trajectories(job_arn=job_arn)
    _, total, counts = plan_slots(store, job_arn, run.job_name, run.config, len(run.data))
    by_state = dict(Counter(row.state for row in rows))
    sums = store.turn_totals(job_arn).values()
    totals = store.reward_totals(job_arn)
    rewards = [totals[row.id] for row in rows if row.id in totals]  # in creation order
    failures = [
        JobFailureNote.model_validate(e.detail) for e in store.list_events(kind=JOB_FAILURE_EVENT)
    ]
    stats = job.stats if job is not None else None
    return RunFigures(
        job_arn=job_arn,
        status=status,
        failure_reason=failure,
        trajectories=len(rows),
        trajectories_by_state=by_state,
        slots_total=total,
        slots_succeeded=counts["succeeded"],
        slots_failed=counts["failed"],
        retries=counted_retries(rows),
        rewarded=len(rewards),
        reward_mean=sum(rewards) / len(rewards) if rewards else None,
        turns=sum(s.turns for s in sums),
        prompt_tokens=sum(s.prompt_tokens for s in sums),
        completion_tokens=sum(s.completion_tokens for s in sums),
        job_failures=failures,
        elapsed_s=round(elapsed, 3),
        slots_per_s=rollout_rate(stats),
    )


def rollouts_verdict(
    run: OpenedRun, job_arn: str, figures: RunFigures, max_floor_rate: float | None
) -> str | None:
    """Why the job's finished rollouts failed as a whole, or None when they did not.

    They failed when none got a real reward (every finished slot lost, or scored with the
    agent's floor reward after a failure on its side), or when more than ``max_floor_rate``
    (None: :data:`DEFAULT_MAX_FLOOR_RATE`) of them got the floor reward. With a rate of 1 floor
    rewards are accepted: only a job where no slot got any reward fails.
    """
    rewarded, lost = figures.slots_succeeded or 0, figures.slots_failed or 0
    finished = rewarded + lost
    if not finished:
        return None
    rate = DEFAULT_MAX_FLOOR_RATE if max_floor_rate is None else max_floor_rate
    floored = [
        r
        for r in load_rollouts(run.store, job_arn, states=[TrajectoryState.REWARDED])
        if r.floor_reward
    ]
    floors = len(floored)
    reasons = Counter(r.agent_failure for r in floored if r.agent_failure)
    ranked = sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
    top = f"; most often: {ranked[0][0]}" if ranked else ""
    if rewarded == floors and (rewarded == 0 or rate < 1):
        return (
            f"every rollout failed: none of the {finished} finished rollouts got a reward from "
            f"the reward function ({floors} floor rewards, {lost} without a reward){top}"
        )
    if floors / finished > rate:
        option = f"--max-floor-rate {rate:g}" + (", the default" if max_floor_rate is None else "")
        return (
            f"{floors} of {finished} finished rollouts got the floor reward "
            f"({floors / finished:.1%} > {option}){top}"
        )
    return None


def counted_retries(rows: list[TrajectoryRow]) -> int:
    """Attempts that retried a failed one (not those replaying a rollout cut by a stop or a
    resume: those are free, so an interrupted-then-resumed run counts as an uninterrupted one)."""
    by_id = {row.id: row for row in rows}
    return sum(
        1
        for row in rows
        if row.retry_of is not None
        and not free_retry(by_id[row.retry_of].reason if row.retry_of in by_id else None)
    )


def rollout_rate(stats: RolloutStats | None) -> float | None:
    """Rollouts finished per second of the rollout phase (agent start-up excluded)."""
    if stats is None:
        return None
    seconds = time.monotonic() - stats.started
    return round(stats.done_this_run / seconds, 3) if seconds > 0 else None


def redact_summary(summary: _Model, token: str | None) -> _Model:
    """``summary`` (a summary or the driver's figures) with the route ``token`` replaced
    wherever a string quotes it; the same object when no string does."""
    if not token:
        return summary
    text = summary.model_dump_json(by_alias=True)
    if token not in text:
        return summary
    return type(summary).model_validate_json(redact(text, token))
