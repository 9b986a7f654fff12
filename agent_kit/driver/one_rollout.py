"""One debugging rollout (``agent-kit invoke``): no job loop, no retries, a transcript left behind.

:func:`invoke_once` opens a :class:`~agent_kit.driver.session.Session` (the emulator, a
one-prompt job, the agent's invoker) under the run's settings record, plays slot (0, 0, 0)
once and returns an :class:`InvokeOutcome` (state, reason, reward, what the agent answered);
``run_dir/run.sqlite`` keeps the turns for ``agent-kit show``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from agent_kit.driver.attempt import Attempt, Attempts, trajectory_id_for
from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.dataset import Dataset
from agent_kit.driver.invokers import InvokeResult
from agent_kit.driver.job_setup import job_record
from agent_kit.driver.rollouts import RolloutLoop
from agent_kit.driver.session import Session, open_session
from agent_kit.errors import UsageError
from agent_kit.store import RunStore
from agent_kit.store.layout import RunLayout

__all__ = ["InvokeOutcome", "invoke_once"]


@dataclass(frozen=True)
class InvokeOutcome:
    """One debugging rollout: its trajectory, what the agent returned, and the run store path."""

    trajectory_id: str
    job_arn: str
    state: str
    reason: str | None
    reward: float | None
    result: InvokeResult | None
    store_path: Path


#: What makes ``invoke``'s job a single debugging rollout, whatever the record says.
_ONE_ROLLOUT: Final[dict[str, Any]] = {
    "name": "invoke",
    "group_size": 2,
    "batch_size": 1,
    "concurrency": 1,
    "max_retries": 0,
    "fail_fast": False,
}


async def invoke_once(config: RunConfig, prompt: str, *, run_dir: str | Path) -> InvokeOutcome:
    """Run a single rollout of ``prompt`` (no retries) and leave its transcript in
    ``run_dir/run.sqlite``.

    ``config`` is the one settings record of a run: ``entrypoint`` the agent, ``job`` the
    settings it plays with (:class:`JobConfig`'s defaults when None: policy, auxiliary policy
    for judge and simulated-user calls (docs/judges.md), sampling, seed, ``rollout_timeout``,
    ``report_grace``, region), ``endpoint_url`` / ``rate`` / ``agent_memory`` /
    ``lenient_auth`` how the agent is reached. The job is always one prompt, one slot, one
    attempt, not fail-fast. A ``.py`` entrypoint gets the run's own AWS keys and must sign
    with them, unless ``lenient_auth``."""
    entrypoint = config.entrypoint
    if entrypoint is None:
        raise UsageError("give the ENTRYPOINT to invoke")
    run = Path(run_dir)
    if RunLayout(run).store.exists():
        raise UsageError(f"{run} already holds a run")
    job = replace(config.job or JobConfig(), **_ONE_ROLLOUT).validated(1)
    data = Dataset(path=Path("<prompt>"), column="prompt", prompts=(prompt,))
    store = RunStore.open(run)
    try:
        session = Session(store, run, entrypoint, job, config)
        record = job_record(job.to_dict(), entrypoint)
        async with open_session(session, job.policy, "invoke", record):
            svc, invoker = session.svc, session.agents()
            attempts = Attempts(
                emu=svc.emulator,
                store=store,
                invoker=invoker,
                job_arn=session.job_arn,
                job_name="invoke",
                endpoint=svc.endpoint,
                config=job,
            )
            loop = RolloutLoop(attempts, dataset=data, progress=None)
            await loop.play_slot((0, 0, 0), [])
        session.finish_job("completed")
        return _outcome(store, session.job_arn, loop.last)
    finally:
        store.close()


def _outcome(store: RunStore, job_arn: str, last: Attempt | None) -> InvokeOutcome:
    """The debugging rollout's outcome, read back from its store."""
    tid = last.trajectory_id if last else trajectory_id_for("invoke", 0, 0, 0, 0)
    row = store.get_trajectory(tid)
    reward = store.get_reward(tid)
    return InvokeOutcome(
        trajectory_id=tid,
        job_arn=job_arn,
        state=row.state if row else "UNKNOWN",
        reason=row.reason if row else None,
        reward=None if reward is None else reward.total,
        result=last.result if last else None,
        store_path=Path(store.path),
    )
