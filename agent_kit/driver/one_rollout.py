"""One debugging rollout (``agent-kit invoke``): no job loop, no retries, a transcript left behind.

:func:`invoke_once` serves an emulator for a one-prompt job, starts the agent through its
invoker, plays slot (0, 0, 0) once and returns an :class:`InvokeOutcome` (state, reason, reward,
what the agent answered); ``run_dir/run.sqlite`` keeps the turns for ``agent-kit show``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent_kit.driver.attempt import Attempt, trajectory_id_for
from agent_kit.driver.config import JobConfig
from agent_kit.driver.dataset import Dataset
from agent_kit.driver.invokers import InvokeResult, agent_env, make_invoker
from agent_kit.driver.rollouts import RolloutLoop
from agent_kit.emulator.local_service import local_service
from agent_kit.errors import UsageError
from agent_kit.store import RUN_FILE, RunStore
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


async def invoke_once(
    entrypoint: str,
    prompt: str,
    *,
    policy: str = "random",
    run_dir: str | Path,
    rollout_timeout: float = 120.0,
    report_grace: float = 10.0,
    temperature: float = 1.0,
    seed: int = 0,
    endpoint_url: str | None = None,
    lenient_auth: bool = False,
    aux_policy: str | None = None,
) -> InvokeOutcome:
    """Run a single rollout (no retries) and leave its transcript in ``run_dir/run.sqlite``.
    ``aux_policy`` answers the agent's judge and simulated-user calls (docs/judges.md).

    A ``.py`` entrypoint gets the run's own AWS keys and must sign with them, unless
    ``lenient_auth``."""
    run = Path(run_dir)
    if (run / RUN_FILE).exists():
        raise UsageError(f"{run} already holds a run")
    config = JobConfig(
        name="invoke",
        policy=policy,
        group_size=2,
        batch_size=1,
        concurrency=1,
        rollout_timeout=rollout_timeout,
        max_retries=0,
        temperature=temperature,
        seed=seed,
        fail_fast=False,
        report_grace=report_grace,
        aux_policy=aux_policy,
    ).validated(1)
    data = Dataset(path=Path("<prompt>"), column="prompt", prompts=(prompt,))
    store = RunStore.open(run)
    try:
        async with local_service(
            store,
            policy,
            seed=seed,
            base_dir=Path.cwd(),
            aux_policy=aux_policy,
            region=config.region,
            verify_auth=entrypoint.endswith(".py") and not lenient_auth,
        ) as svc:
            emu, endpoint = svc.emulator, svc.endpoint
            job_arn = emu.create_job(
                "invoke", {"job": config.to_dict(), "entrypoint": entrypoint}
            ).arn
            invoker = make_invoker(
                entrypoint,
                env=agent_env(endpoint, config.region, credentials=svc.keys.agent_env()),
                log_dir=RunLayout(run).logs,
                concurrency=1,
                endpoint_url=endpoint_url,
                on_event=lambda kind, detail: store.add_event(kind, detail),
            )
            job = RolloutLoop(
                emu=emu,
                store=store,
                invoker=invoker,
                job_arn=job_arn,
                job_name="invoke",
                endpoint=endpoint,
                dataset=data,
                config=config,
                progress=None,
            )
            await invoker.start()
            try:
                await job.play_slot((0, 0, 0), [])
            finally:
                await invoker.aclose()
        store.update_job(job_arn, status="completed")
        return _outcome(store, job_arn, job.last)
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
