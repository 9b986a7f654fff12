"""Opening a run directory for the job driver: a new run or a resumed one, and what is left to
play.

:func:`open_run` opens the run directory a :class:`~agent_kit.driver.config.RunConfig` names
(refusing, with :func:`refuse_untrained_resume`, to play a training run without its trainer);
:func:`open_new` / :func:`open_resume` lock the run directory (:class:`~agent_kit.store.runlock.
RunLock`), open its store and settle the job's settings into an :class:`OpenedRun`;
:func:`plan_slots` reads the store to list the slots still to play (so a resumed run plays
only what is missing, and counts what is done); :func:`expire_stale` seals what a dead driver
left open. :func:`job_record` is the one shape of what a job records about itself (every
runner's record is one; the session writes it, :class:`~agent_kit.driver.session.Session`),
:func:`job_config` the run's. Used by
:mod:`agent_kit.driver.job` (which plays the plan) and
:mod:`agent_kit.driver.job_stats` (which counts it).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeAlias

from agent_kit.contract import TrajectoryState
from agent_kit.driver.config import (
    AGENT_ENV_KEY,
    JobConfig,
    RunConfig,
    default_job_name,
    recorded_agent_env,
)
from agent_kit.driver.dataset import Dataset, load_dataset
from agent_kit.driver.tunnel import validate_advertise_url
from agent_kit.emulator.core import Emulator
from agent_kit.errors import RunStoreError, UsageError
from agent_kit.store import RUN_FILE, RunStore, TrajectoryRow
from agent_kit.store.events import RESUMED_REASON, ROLLOUT_DONE_EVENT
from agent_kit.store.layout import RunLayout
from agent_kit.store.run_figures import run_figures_of
from agent_kit.store.runlock import RunLock
from agent_kit.store.store_file import verify

__all__ = [
    "OpenedRun",
    "Plan",
    "dataset_digest",
    "default_workers",
    "expire_stale",
    "file_digest",
    "job_config",
    "job_record",
    "open_new",
    "open_resume",
    "open_run",
    "plan_slots",
    "refuse_untrained_resume",
    "step_prompts",
]


Plan: TypeAlias = list[tuple[tuple[int, int, int], list[TrajectoryRow]]]
"""Slots ``(step, prompt_index, sample_index)`` still to play, each with its earlier attempts."""


def refuse_untrained_resume(config: RunConfig, *, trained: bool) -> None:
    """A training run (``agent-kit train``'s, see :meth:`RunLayout.is_training`) is resumed
    only by its trainer (``trained``: a step hook): played without one, its remaining steps
    would be sampled but never trained. UsageError naming the command that continues it."""
    if config.resume is None or trained:
        return
    layout = RunLayout(Path(config.resume))
    if layout.is_training():
        raise UsageError(
            f"{config.resume} is a training run: continue it with {layout.resume_command()} "
            "(run --resume would play its remaining steps without training them)"
        )


def open_run(config: RunConfig, held: RunLock | None = None) -> OpenedRun:
    """The run directory to play: a new one, or the resumed one with the tunnel settings
    given now (else the recorded ones) and the recorded agent environment under the one given
    now; ``held`` is the run's lock when the caller took it."""
    advertise_url = config.advertise_url
    if advertise_url is not None:
        advertise_url = validate_advertise_url(advertise_url)
    port = config.emulator_port
    if port is not None and not 0 <= port <= 65535:
        raise UsageError(f"emulator port must be 0..65535, got {port}")
    if config.resume is not None:
        run = open_resume(Path(config.resume), config.entrypoint, config.dataset, held)
        run.advertise_url = advertise_url or run.advertise_url
        run.emulator_port = port if port is not None else run.emulator_port
    else:
        run = open_new(config.entrypoint, config.dataset, config.job, Path(config.out), held)
        run.advertise_url, run.emulator_port = advertise_url, port
    run.agent_env = {**run.agent_env, **(config.extra_env or {})}
    run.run_dir.mkdir(parents=True, exist_ok=True)
    return run


def plan_slots(
    store: RunStore, job_arn: str, job_name: str, config: JobConfig, n_prompts: int
) -> tuple[Plan, int, dict[str, int]]:
    """Slots still to play (with their earlier attempts), the total, and what was already done
    (``counts``: total, done, succeeded, failed) — read from the store, so a resume plays only
    what is missing."""
    if config.batch_size is None:
        raise UsageError("the job config was not validated against its dataset (no batch size)")
    existing: dict[tuple[int, int, int], list[TrajectoryRow]] = {}
    for row in store.list_trajectories(job_arn=job_arn):
        existing.setdefault((row.step, row.prompt_index, row.sample_index), []).append(row)
    done_events = {
        (int(e.detail["step"]), int(e.detail["prompt_index"]), int(e.detail["sample_index"])): e
        for e in store.list_events(kind=ROLLOUT_DONE_EVENT)
        if e.trajectory_id is not None and e.trajectory_id.startswith(f"{job_name}-")
    }
    plan: Plan = []
    counts = {"total": 0, "done": 0, "succeeded": 0, "failed": 0}
    for step in range(config.steps):
        for p_idx in step_prompts(step, config.batch_size, n_prompts):
            for k in range(config.group_size):
                slot = (step, p_idx, k)
                counts["total"] += 1
                rows = sorted(existing.get(slot, []), key=lambda r: r.attempt)
                states = {r.state for r in rows}
                if slot in done_events or states & TrajectoryState.settled():
                    counts["done"] += 1
                    if TrajectoryState.REWARDED.value in states:
                        counts["succeeded"] += 1
                    else:
                        counts["failed"] += 1
                    continue
                plan.append((slot, rows))
    return plan, counts["total"], counts


def step_prompts(step: int, batch_size: int, n_prompts: int) -> list[int]:
    """The dataset indices of a step's prompts, in plan order: the dataset read in a cycle,
    ``batch_size`` prompts a step (the service's global batch)."""
    return [(step * batch_size + i) % n_prompts for i in range(batch_size)]


def expire_stale(emu: Emulator, store: RunStore, job_arn: str) -> int:
    """Mark TIMED_OUT (reason "resumed") what a dead driver left OPEN/READY; return how many."""
    stale = store.list_trajectories(job_arn=job_arn, states=TrajectoryState.unfinished())
    for row in stale:
        emu.expire(row.id, RESUMED_REASON)
    return len(stale)


def _absolute(path: str | Path) -> str:
    return str(Path(path).resolve())


def file_digest(path: Path) -> str | None:
    """SHA-256 of a file's bytes (the entrypoint a job records: a warm start compares it), or
    None when it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def dataset_digest(dataset: Dataset) -> str:
    """SHA-256 of the dataset's prompts (a resume refuses a dataset that changed)."""
    h = hashlib.sha256()
    for prompt in dataset.prompts:
        h.update(prompt.encode())
        h.update(b"\0")
    return h.hexdigest()


@dataclass
class OpenedRun:
    """A run directory ready to play: its store, settings and data (new or resumed)."""

    run_dir: Path
    lock: RunLock
    store: RunStore
    config: JobConfig
    data: Dataset
    job_name: str
    entrypoint: str
    dataset: str | Path
    advertise_url: str | None
    emulator_port: int | None
    #: True when this command made the run directory (a new run, not a resume).
    created: bool = False
    #: False when the caller holds :attr:`lock` (``JobHooks.lock``) and releases it itself.
    owns_lock: bool = True
    #: The agent processes' extra environment (recorded, with the run's ``extra_env`` over it).
    agent_env: dict[str, str] = field(default_factory=dict)


def open_new(
    entrypoint: str | None,
    dataset: str | Path | None,
    config: JobConfig | None,
    out_dir: Path,
    held: RunLock | None = None,
) -> OpenedRun:
    """A new run ``out_dir/<job name>``: the config validated against the dataset, the run
    directory locked (RunInUse if another driver holds it; ``held`` is its lock when the
    caller took it already), its store created."""
    if entrypoint is None or dataset is None:
        raise UsageError("an entrypoint and a dataset are required")
    data = load_dataset(dataset)
    config = (config or JobConfig()).validated(len(data))
    job_name = config.name or default_job_name(entrypoint)
    config = replace(config, name=job_name)
    run_dir = out_dir / job_name
    created = not run_dir.exists()
    lock = held or RunLock.acquire(run_dir)  # RunInUse while another driver plays this run
    try:
        existed = RunLayout(run_dir).store.exists()
        store = RunStore.open(run_dir)
        if existed and store.list_jobs():
            store.close()
            raise UsageError(f"run directory {run_dir} already holds a run; use --resume or --name")
        # A store with no job is what a driver killed before it recorded its job leaves: there
        # is nothing to resume, so the new run takes it over (we hold the lock).
    except BaseException:
        if held is None:
            lock.release()
        raise
    return OpenedRun(
        run_dir,
        lock,
        store,
        config,
        data,
        job_name,
        entrypoint,
        dataset,
        None,
        None,
        created,
        owns_lock=held is None,
    )


def _check_before_resuming(run_dir: Path) -> None:
    """Refuse an empty, damaged, foreign or newer store before the writable open touches it
    (the same error class, saying nothing was changed); the caller holds the run's lock."""
    try:
        verify(run_dir)
    except (RunStoreError, UsageError) as exc:
        raise type(exc)(f"{exc.message}; nothing was changed, the run was not resumed") from None


def open_resume(
    run_dir: Path,
    entrypoint: str | None,
    dataset: str | Path | None,
    held: RunLock | None = None,
) -> OpenedRun:
    """An existing run to continue: locked (``held``: the lock the caller took already), its
    store opened, settings read from its job (entrypoint and dataset may be overridden);
    UsageError for a failed job, a missing record or a dataset that changed."""
    if not RunLayout(run_dir).store.is_file():
        raise UsageError(f"nothing to resume: no {RUN_FILE} in {run_dir}")
    lock = held or RunLock.acquire(run_dir)  # RunInUse while another driver plays this run

    def let_go() -> None:
        if held is None:
            lock.release()

    try:
        _check_before_resuming(run_dir)
        store = RunStore.open(run_dir)
    except BaseException:
        let_go()
        raise
    try:
        jobs = store.list_jobs()
        if not jobs:
            raise UsageError(f"nothing to resume: {run_dir} holds no job")
        job_row = jobs[-1]
        recorded = job_row.config
        if job_row.status == "failed":
            figures = run_figures_of(job_row)
            reason = figures.failure_reason if figures is not None else None
            raise UsageError(f"job {job_row.arn} failed ({reason}); a failed job is not resumed")
        config = JobConfig.from_record(recorded, run_dir)
        entrypoint = entrypoint or recorded.get("entrypoint")
        dataset = dataset or recorded.get("dataset")
        if not entrypoint or not dataset:
            raise UsageError(f"{run_dir} does not record its entrypoint and dataset")
        data = load_dataset(dataset)
        if recorded.get("dataset_sha256") not in (None, dataset_digest(data)):
            raise UsageError(f"dataset {dataset} changed since the run started; cannot resume")
    except BaseException:
        store.close()
        let_go()
        raise
    advertise = recorded.get("advertise_url")
    port = recorded.get("emulator_port")
    return OpenedRun(
        run_dir,
        lock,
        store,
        config.validated(len(data)),
        data,
        job_row.name,
        entrypoint,
        dataset,
        validate_advertise_url(str(advertise)) if advertise else None,
        int(port) if port is not None else None,
        owns_lock=held is None,
        agent_env=recorded_agent_env(recorded),
    )


def default_workers(concurrency: int) -> int:
    """Agent processes to start when the user names none: one per core the driver can use
    (an agent process is single-threaded Python, the usual bottleneck), never more than the
    rollouts that can be in flight."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, concurrency))


def job_record(
    settings: Mapping[str, Any],
    entrypoint: str,
    *,
    agent_env: Mapping[str, str] | None = None,
    **details: Any,
) -> dict[str, Any]:
    """What a job records about itself, in the one shape its readers know
    (:meth:`~agent_kit.driver.config.JobConfig.from_record`, the replay's recording, the
    summaries): its settings under ``"job"``, the ``entrypoint``, the runner's ``details``
    (dataset and digest, the source a replay replays, …) and, when there is one, the agent's
    own environment under :data:`~agent_kit.driver.config.AGENT_ENV_KEY` (a replay needs it).
    Never the route token."""
    record: dict[str, Any] = {"job": dict(settings), "entrypoint": entrypoint, **details}
    if agent_env:
        record[AGENT_ENV_KEY] = dict(agent_env)
    return record


def job_config(run: OpenedRun, workers: int) -> dict[str, Any]:
    """What the run's job records about itself (a :func:`job_record`;
    shown in summaries: never the route token)."""
    entry = run.entrypoint
    details: dict[str, Any] = {
        "dataset": _absolute(run.dataset),
        "dataset_sha256": dataset_digest(run.data),
        "prompt_column": run.data.column,
        "workers": workers,
        "cwd": str(Path.cwd()),
    }
    if entry.endswith(".py") and (digest := file_digest(Path(entry))) is not None:
        details["entrypoint_sha256"] = digest
    if run.advertise_url is not None:
        details["advertise_url"] = run.advertise_url
    if run.emulator_port:
        details["emulator_port"] = run.emulator_port
    return job_record(
        run.config.to_dict(),
        _absolute(entry) if entry.endswith(".py") else entry,
        agent_env=run.agent_env,  # the agent's own settings (``--grid env.NAME=…``)
        **details,
    )
