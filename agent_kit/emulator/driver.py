"""The job driver: play a dataset against an agent the way the MTRL service does (docs/contract.md
§1).

:func:`run_job` runs a whole local job in the current event loop:

1. the run directory ``OUT/<job-name>/`` gets its store (``run.sqlite``) and ``logs/``;
2. the emulator (:class:`~agent_kit.emulator.core.Emulator` + the server of
   :func:`~agent_kit.emulator.server.create_app`) is served by uvicorn on 127.0.0.1 and an
   ephemeral port, inside this process;
3. the agent is reached through an :mod:`~agent_kit.emulator.invokers` invoker (for an
   entrypoint file: local processes whose environment points at the emulator);
4. each of ``steps`` steps plays ``batch_size`` prompts × ``group_size`` rollouts, at most
   ``concurrency`` at once. A rollout is one trajectory id
   (``{job}-s{step}-p{prompt}-g{sample}-a{attempt}``, so runs are reproducible) and the full
   payload of docs/contract.md §2;
5. the driver stores its own figures with the job and calls ``finish`` (if given), which writes
   the run's outputs: :func:`agent_kit.runs.local.run_local` passes the writer of
   ``summary.json`` and ``report.html``. The driver itself never imports the reporting half.

``advertise_url`` (``agent-kit run --advertise-url``) is for a *deployed* agent that reaches this
machine through a tunnel: the emulator still binds 127.0.0.1 (``emulator_port`` fixes its port
for the tunnel), a random path token is drawn per run, the emulator serves its routes only under
``/<token>/…`` and payloads carry ``metadata.endpoint`` = ``<advertise_url>/<token>`` (see
:mod:`agent_kit.emulator.tunnel`). The job config records the URL and port, never the token.

Outcome of one rollout attempt, in the service's words (docs/contract.md §1):

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

A job failure stops the job (``fail_fast=True``, the service's behaviour: in-flight rollouts are
expired with reason "job stopped") or is only flagged (``fail_fast=False``). Every failure is an
event ``job_failure`` in the store; every finished rollout slot an event ``rollout_done``.

``resume`` reopens a run directory: slots with a REWARDED or FAILED trajectory (or a
``rollout_done`` event) are kept, trajectories left OPEN/READY by the dead run are marked
TIMED_OUT with reason "resumed", and the remaining slots are played under the same job ARN.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from agent_kit.emulator.core import FAILED_REASON, Emulator
from agent_kit.emulator.dataset import Dataset, load_dataset
from agent_kit.emulator.invokers import Invoker, InvokeResult, agent_env, make_invoker
from agent_kit.emulator.rollouts import (
    MAX_BATCH_SIZE,
    NO_REWARD_REASON,
    NO_SAMPLE_REASON,
    RESUMED_REASON,
    JobConfig,
    Progress,
    ProgressHook,
    RolloutLoop,
    RolloutStats,
    default_job_name,
    free_retry,
    session_id_for,
    trajectory_id_for,
)
from agent_kit.emulator.runlock import RunLock
from agent_kit.emulator.serving import EmbeddedServer
from agent_kit.emulator.store import RUN_FILE, RunStore, TrajectoryRow
from agent_kit.emulator.tunnel import (
    advertised_endpoint,
    new_route_token,
    redact,
    validate_advertise_url,
)
from agent_kit.errors import AgentKitError, JobFailed, UsageError

logger = logging.getLogger("agent_kit.emulator.driver")

#: Seconds in-flight rollouts get to finish after a graceful stop (``agent-kit run --grace``).
DEFAULT_STOP_GRACE_S: Final = 5.0

__all__ = [
    "DEFAULT_STOP_GRACE_S",
    "FAILED_REASON",
    "MAX_BATCH_SIZE",
    "NO_REWARD_REASON",
    "NO_SAMPLE_REASON",
    "InvokeOutcome",
    "JobConfig",
    "JobResult",
    "Progress",
    "ProgressHook",
    "RunFinisher",
    "default_workers",
    "invoke_once",
    "redact_summary",
    "run_job",
    "session_id_for",
    "trajectory_id_for",
]


@dataclass(frozen=True)
class JobResult:
    """What a finished (or stopped) job left behind."""

    job_arn: str
    run_dir: Path
    status: str
    failure: str | None
    summary: dict[str, Any]
    total: int
    succeeded: int
    failed: int

    def raise_for_status(self) -> None:
        """Raise :class:`JobFailed` if the job failed."""
        if self.status == "failed":
            raise JobFailed(f"job {self.job_arn} failed: {self.failure}")


def _plan(
    store: RunStore, job_arn: str, job_name: str, config: JobConfig, n_prompts: int
) -> tuple[list[tuple[tuple[int, int, int], list[TrajectoryRow]]], int, dict[str, int]]:
    """Slots still to play (with their earlier attempts), the total, and what was already done."""
    if config.batch_size is None:
        raise UsageError("the job config was not validated against its dataset (no batch size)")
    existing: dict[tuple[int, int, int], list[TrajectoryRow]] = {}
    for row in store.list_trajectories(job_arn=job_arn):
        existing.setdefault((row.step, row.prompt_index, row.sample_index), []).append(row)
    done_events = {
        (int(e.detail["step"]), int(e.detail["prompt_index"]), int(e.detail["sample_index"])): e
        for e in store.list_events(kind="rollout_done")
        if e.trajectory_id is not None and e.trajectory_id.startswith(f"{job_name}-")
    }
    plan: list[tuple[tuple[int, int, int], list[TrajectoryRow]]] = []
    counts = {"total": 0, "done": 0, "succeeded": 0, "failed": 0}
    for step in range(config.steps):
        for i in range(config.batch_size):
            p_idx = (step * config.batch_size + i) % n_prompts
            for k in range(config.group_size):
                slot = (step, p_idx, k)
                counts["total"] += 1
                rows = sorted(existing.get(slot, []), key=lambda r: r.attempt)
                states = {r.state for r in rows}
                if slot in done_events or states & {"REWARDED", "FAILED"}:
                    counts["done"] += 1
                    if "REWARDED" in states:
                        counts["succeeded"] += 1
                    else:
                        counts["failed"] += 1
                    continue
                plan.append((slot, rows))
    return plan, counts["total"], counts


def _expire_stale(emu: Emulator, store: RunStore, job_arn: str) -> int:
    stale = store.list_trajectories(job_arn=job_arn, states=["OPEN", "READY"])
    for row in stale:
        emu.expire(row.id, RESUMED_REASON)
    return len(stale)


def _absolute(path: str | Path) -> str:
    return str(Path(path).resolve())


def _dataset_digest(dataset: Dataset) -> str:
    h = hashlib.sha256()
    for prompt in dataset.prompts:
        h.update(prompt.encode())
        h.update(b"\0")
    return h.hexdigest()


def _driver_stats(
    run: _OpenedRun,
    job_arn: str,
    status: str,
    failure: str | None,
    job: RolloutLoop | None,
    elapsed: float,
) -> dict[str, Any]:
    """The driver's figures, counted from the store (so a resumed run reports the same totals
    as an uninterrupted one); only the rate is of this invocation."""
    store = run.store
    rows = store.list_trajectories(job_arn=job_arn)
    _, total, counts = _plan(store, job_arn, run.job_name, run.config, len(run.data))
    by_state: dict[str, int] = {}
    prompt_tokens = completion_tokens = turns = 0
    for row in rows:
        by_state[row.state] = by_state.get(row.state, 0) + 1
        for turn in store.list_turns(row.id):
            turns += 1
            prompt_tokens += turn.prompt_tokens
            completion_tokens += turn.completion_tokens
    rewards = [r.total for r in (store.get_reward(t.id) for t in rows) if r is not None]
    failures = [e.detail for e in store.list_events(kind="job_failure")]
    stats = job.stats if job is not None else None
    return {
        "job_arn": job_arn,
        "status": status,
        "failure_reason": failure,
        "trajectories": len(rows),
        "trajectories_by_state": by_state,
        "rollouts_total": total,
        "rollouts_succeeded": counts["succeeded"],
        "rollouts_failed": counts["failed"],
        "retries": _counted_retries(rows),
        "rewarded": len(rewards),
        "reward_mean": sum(rewards) / len(rewards) if rewards else None,
        "turns": turns,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "job_failures": failures,
        "elapsed_s": round(elapsed, 3),
        "rollouts_per_s": _rate(stats),
    }


def _counted_retries(rows: list[TrajectoryRow]) -> int:
    """Attempts that retried a failed one (not those replaying a rollout cut by a stop or a
    resume: those are free, so an interrupted-then-resumed run counts as an uninterrupted one)."""
    by_id = {row.id: row for row in rows}
    return sum(
        1
        for row in rows
        if row.retry_of is not None
        and not free_retry(by_id[row.retry_of].reason if row.retry_of in by_id else None)
    )


def _rate(stats: RolloutStats | None) -> float | None:
    """Rollouts finished per second of the rollout phase (agent start-up excluded)."""
    if stats is None:
        return None
    seconds = time.monotonic() - stats.started
    return round(stats.done_this_run / seconds, 3) if seconds > 0 else None


def redact_summary(summary: dict[str, Any], token: str | None) -> dict[str, Any]:
    """``summary`` with the route ``token`` replaced wherever a string quotes it."""
    if not token:
        return summary
    text = json.dumps(summary, default=str)
    return summary if token not in text else dict(json.loads(redact(text, token)))


RunFinisher = Callable[[RunStore, str, Path, "str | None"], dict[str, Any]]
"""Called once as a job ends, before its store closes: ``(store, job_arn, run_dir, token) ->
summary``. The driver has stored its own figures (the ``run`` section) with the job first; the
finisher writes the run's outputs (summary.json, report.html) and returns the summary. The
route ``token``, if any, must not appear in what it writes (:func:`redact_summary`)."""


@dataclass
class _OpenedRun:
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


def _open_new(
    entrypoint: str | None, dataset: str | Path | None, config: JobConfig | None, out_dir: Path
) -> _OpenedRun:
    if entrypoint is None or dataset is None:
        raise UsageError("an entrypoint and a dataset are required")
    data = load_dataset(dataset)
    config = (config or JobConfig()).validated(len(data))
    job_name = config.name or default_job_name(entrypoint)
    config = replace(config, name=job_name)
    run_dir = out_dir / job_name
    created = not run_dir.exists()
    lock = RunLock.acquire(run_dir)  # RunInUse while another driver plays this run
    try:
        if (run_dir / RUN_FILE).exists():
            raise UsageError(f"run directory {run_dir} already holds a run; use --resume or --name")
        store = RunStore.open(run_dir)
    except BaseException:
        lock.release()
        raise
    return _OpenedRun(
        run_dir, lock, store, config, data, job_name, entrypoint, dataset, None, None, created
    )


def _open_resume(run_dir: Path, entrypoint: str | None, dataset: str | Path | None) -> _OpenedRun:
    if not (run_dir / RUN_FILE).is_file():
        raise UsageError(f"nothing to resume: no {RUN_FILE} in {run_dir}")
    lock = RunLock.acquire(run_dir)  # RunInUse while another driver plays this run
    try:
        store = RunStore.open(run_dir)
    except BaseException:
        lock.release()
        raise
    try:
        jobs = store.list_jobs()
        if not jobs:
            raise UsageError(f"nothing to resume: {run_dir} holds no job")
        job_row = jobs[-1]
        recorded = job_row.config
        if job_row.status == "failed":
            reason = (job_row.summary or {}).get("run", {}).get("failure_reason")
            raise UsageError(f"job {job_row.arn} failed ({reason}); a failed job is not resumed")
        config = JobConfig.from_dict(recorded.get("job", {}))
        entrypoint = entrypoint or recorded.get("entrypoint")
        dataset = dataset or recorded.get("dataset")
        if not entrypoint or not dataset:
            raise UsageError(f"{run_dir} does not record its entrypoint and dataset")
        data = load_dataset(dataset)
        if recorded.get("dataset_sha256") not in (None, _dataset_digest(data)):
            raise UsageError(f"dataset {dataset} changed since the run started; cannot resume")
    except BaseException:
        store.close()
        lock.release()
        raise
    advertise = recorded.get("advertise_url")
    port = recorded.get("emulator_port")
    return _OpenedRun(
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


def _job_config(run: _OpenedRun, workers: int) -> dict[str, Any]:
    """What the job records about itself (shown in summaries: never the route token)."""
    entry = run.entrypoint
    config: dict[str, Any] = {
        "job": run.config.to_dict(),
        "entrypoint": _absolute(entry) if entry.endswith(".py") else entry,
        "dataset": _absolute(run.dataset),
        "dataset_sha256": _dataset_digest(run.data),
        "prompt_column": run.data.column,
        "workers": workers,
    }
    if run.advertise_url is not None:
        config["advertise_url"] = run.advertise_url
    if run.emulator_port:
        config["emulator_port"] = run.emulator_port
    return config


async def _close_policy(policy: Any, job: str) -> None:
    try:
        await policy.aclose()
    except Exception as exc:  # noqa: BLE001 - closing must not mask the job's own outcome
        logger.debug("closing the policy of job %s failed: %s: %s", job, type(exc).__name__, exc)


@dataclass
class _Outcome:
    status: str = "failed"
    failure: str | None = None
    loop: RolloutLoop | None = None
    summary: dict[str, Any] | None = None
    #: Set once the agent is up and the first rollout may start.
    playing: bool = False


async def run_job(
    entrypoint: str | None,
    dataset: str | Path | None,
    config: JobConfig | None = None,
    *,
    out_dir: str | Path = "runs",
    resume: str | Path | None = None,
    workers: int | None = None,
    progress: ProgressHook | None = None,
    invoker: Invoker | None = None,
    endpoint_url: str | None = None,
    rate: float | None = None,
    advertise_url: str | None = None,
    emulator_port: int | None = None,
    finish: RunFinisher | None = None,
    stop: asyncio.Event | None = None,
    stop_grace: float = DEFAULT_STOP_GRACE_S,
) -> JobResult:
    """Run (or, with ``resume``, continue) a local job; see the module docstring.

    ``entrypoint`` is an invoker target (``.py`` file, URL, AgentCore or Lambda ARN); with
    ``resume`` it, the dataset, the config, ``advertise_url`` and ``emulator_port`` default to
    what the run recorded. ``advertise_url`` is the public URL of a tunnel to this machine's
    emulator (token-guarded, see the module docstring); ``emulator_port`` its fixed loopback
    port (default: ephemeral). ``workers`` is the number of agent processes for a ``.py``
    entrypoint (None: :func:`default_workers`). ``finish`` writes the run's outputs as the job
    ends (see :data:`RunFinisher`; :func:`agent_kit.runs.local.run_local` passes the summary
    and report writer); without it the result's summary holds only the driver's ``run``
    figures. Setting
    ``stop`` stops the job gracefully (see :func:`_play_until_stopped`; ``stop_grace`` seconds
    for in-flight rollouts) and the result has status ``interrupted``. Raises
    :class:`UsageError` for bad settings and :class:`InvokerError` when the agent cannot be
    started; a failing *job* is not an exception: see :attr:`JobResult.status` and
    :meth:`JobResult.raise_for_status`.
    """
    started = time.monotonic()
    if advertise_url is not None:
        advertise_url = validate_advertise_url(advertise_url)
    if emulator_port is not None and not 0 <= emulator_port <= 65535:
        raise UsageError(f"emulator port must be 0..65535, got {emulator_port}")
    if resume is not None:
        run = _open_resume(Path(resume), entrypoint, dataset)
        run.advertise_url = advertise_url or run.advertise_url
        run.emulator_port = emulator_port if emulator_port is not None else run.emulator_port
    else:
        run = _open_new(entrypoint, dataset, config, Path(out_dir))
        run.advertise_url, run.emulator_port = advertise_url, emulator_port
    run.run_dir.mkdir(parents=True, exist_ok=True)
    if workers is None:
        workers = default_workers(run.config.concurrency)
    outcome = _Outcome()
    try:
        return await _run_opened(
            run,
            outcome,
            started,
            resumed=resume is not None,
            invoker=invoker,
            workers=workers,
            progress=progress,
            rate=rate,
            endpoint_url=endpoint_url,
            finish=finish,
            stop=stop,
            stop_grace=stop_grace,
        )
    except BaseException:
        if run.created and not outcome.playing:
            # It failed before it started (bad policy, agent that cannot start, …): a new run
            # leaves no directory behind; the error itself says why.
            shutil.rmtree(run.run_dir, ignore_errors=True)
        raise


async def _run_opened(
    run: _OpenedRun,
    outcome: _Outcome,
    started: float,
    *,
    resumed: bool,
    invoker: Invoker | None,
    workers: int,
    progress: ProgressHook | None,
    rate: float | None,
    endpoint_url: str | None,
    finish: RunFinisher | None,
    stop: asyncio.Event | None,
    stop_grace: float,
) -> JobResult:
    """Serve, play and finalize an opened run (see :func:`run_job`)."""
    from agent_kit.emulator.policies import load_policy
    from agent_kit.emulator.server import create_app

    async with contextlib.AsyncExitStack() as stack:
        stack.callback(run.lock.release)  # the very last thing to go
        stack.callback(run.store.close)
        policy = load_policy(run.config.policy, seed=run.config.seed, base_dir=Path.cwd())
        stack.push_async_callback(_close_policy, policy, run.job_name)
        emu = Emulator(run.store, policy, region=run.config.region, seed=run.config.seed)
        token = new_route_token() if run.advertise_url is not None else None
        server = EmbeddedServer(create_app(emu, path_prefix=token), port=run.emulator_port or 0)
        stack.push_async_callback(server.stop)  # releases the bound port
        job_arn = emu.create_job(run.job_name, _job_config(run, workers)).arn
        run.store.update_job(job_arn, status="running")

        async def finalize() -> None:
            await server.stop()  # no turn lands while the figures are taken
            elapsed = time.monotonic() - started
            failure = outcome.failure
            stats = _driver_stats(run, job_arn, outcome.status, failure, outcome.loop, elapsed)
            stats = redact_summary(stats, token)
            run.store.update_job(job_arn, status=outcome.status, summary={"run": stats})
            outcome.failure = None if failure is None else redact(failure, token)
            outcome.summary = {"run": stats}
            if finish is not None:
                outcome.summary = finish(run.store, job_arn, run.run_dir, token)

        stack.push_async_callback(finalize)  # the first exit step, whatever ends the job
        try:
            outcome.loop = await _play(
                run,
                emu,
                server,
                job_arn,
                token,
                resumed=resumed,
                invoker=invoker,
                workers=workers,
                progress=progress,
                rate=rate,
                endpoint_url=endpoint_url,
                outcome=outcome,
                stop=stop,
                stop_grace=stop_grace,
            )
        except (asyncio.CancelledError, KeyboardInterrupt):
            outcome.status, outcome.failure = "interrupted", "interrupted"
            raise
        except AgentKitError as exc:
            outcome.status, outcome.failure = "failed", str(exc)
            raise
        except Exception as exc:
            # A fault of agent_kit itself (a store conflict, a bug) is not the job's failure:
            # the run stays resumable and the error surfaces as a tool error.
            outcome.status, outcome.failure = "stopped", f"agent-kit error: {type(exc).__name__}"
            run.store.add_event("driver_error", {"error": f"{type(exc).__name__}: {exc}"})
            raise
    loop = outcome.loop
    if loop is None or outcome.summary is None:  # _play returned, so both are set
        raise AgentKitError(f"job {job_arn} ended without a result")
    return JobResult(
        job_arn=job_arn,
        run_dir=run.run_dir,
        status=outcome.status,
        failure=outcome.failure,
        summary=outcome.summary,
        total=loop.stats.total,
        succeeded=loop.stats.succeeded,
        failed=loop.stats.failed,
    )


async def _play(
    run: _OpenedRun,
    emu: Emulator,
    server: EmbeddedServer,
    job_arn: str,
    token: str | None,
    *,
    resumed: bool,
    invoker: Invoker | None,
    workers: int,
    progress: ProgressHook | None,
    rate: float | None,
    endpoint_url: str | None,
    outcome: _Outcome,
    stop: asyncio.Event | None,
    stop_grace: float,
) -> RolloutLoop:
    """Serve the emulator, start the agent, play every remaining slot; sets ``outcome``."""
    store, config = run.store, run.config
    endpoint = local_endpoint = await server.start()
    if token is not None and run.advertise_url is not None:
        endpoint = advertised_endpoint(run.advertise_url, token)
        local_endpoint = advertised_endpoint(local_endpoint, token)
    if resumed:
        detail: dict[str, Any] = {"stale_trajectories": _expire_stale(emu, store, job_arn)}
        if run.advertise_url is not None:
            detail["advertise_url"] = run.advertise_url
        store.add_event("job_resumed", detail)
    plan, total, counts = _plan(store, job_arn, run.job_name, config, len(run.data))
    if invoker is None:
        invoker = make_invoker(
            run.entrypoint,
            env=agent_env(local_endpoint, config.region),
            workers=workers,
            log_dir=run.run_dir / "logs",
            concurrency=config.concurrency,
            rate=rate,
            endpoint_url=endpoint_url,
            on_event=store.add_event,
        )
    loop = RolloutLoop(
        emu=emu,
        store=store,
        invoker=invoker,
        job_arn=job_arn,
        job_name=run.job_name,
        endpoint=endpoint,
        dataset=run.data,
        config=config,
        progress=progress,
    )
    outcome.loop = loop
    loop.stats.total = total
    loop.stats.done = counts["done"]
    loop.stats.succeeded = counts["succeeded"]
    loop.stats.failed = counts["failed"]
    await invoker.start()
    store.add_event("agents_ready", {"workers": workers})  # the cold start ends here
    outcome.playing = True
    loop.stats.started = time.monotonic()  # rates count the rollout phase, not start-up
    try:
        loop.emit()
        await _play_until_stopped(loop, plan, stop, stop_grace, store)
    finally:
        await invoker.aclose()
    if loop.draining:
        outcome.status, outcome.failure = "interrupted", "interrupted"
    elif loop.stop_reason is not None:
        outcome.status, outcome.failure = "failed", loop.stop_reason
    else:
        outcome.status = "completed"
    return loop


async def _play_until_stopped(
    loop: RolloutLoop,
    plan: list[tuple[tuple[int, int, int], list[TrajectoryRow]]],
    stop: asyncio.Event | None,
    grace: float,
    store: RunStore,
) -> None:
    """Play the plan; when ``stop`` is set, start nothing new, give in-flight rollouts
    ``grace`` seconds to finish, then cut the rest (they are expired as interrupted, and a
    resume plays them again without counting a retry)."""
    if stop is None:
        await loop.play(plan)
        return
    play = asyncio.create_task(loop.play(plan))
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({play, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not play.done():
            loop.drain()
            store.add_event("job_interrupt", {"grace_s": grace, "in_flight": loop.stats.in_flight})
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


# -- one rollout, for `agent-kit invoke` -----------------------------------------------------------


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
) -> InvokeOutcome:
    """Run a single rollout (no retries) and leave its transcript in ``run_dir/run.sqlite``."""
    from agent_kit.emulator.policies import load_policy
    from agent_kit.emulator.server import create_app

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
    ).validated(1)
    data = Dataset(path=Path("<prompt>"), column="prompt", prompts=(prompt,))
    store = RunStore.open(run)
    try:
        backend = load_policy(policy, seed=seed, base_dir=Path.cwd())
        emu = Emulator(store, backend, region=config.region, seed=seed)
        job_arn = emu.create_job("invoke", {"job": config.to_dict(), "entrypoint": entrypoint}).arn
        server = EmbeddedServer(create_app(emu))
        endpoint = await server.start()
        try:
            invoker = make_invoker(
                entrypoint,
                env=agent_env(endpoint, config.region),
                log_dir=run / "logs",
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
        finally:
            await server.stop()
            await _close_policy(backend, "invoke")
        last = job.last
        tid = last.trajectory_id if last else trajectory_id_for("invoke", 0, 0, 0, 0)
        row = store.get_trajectory(tid)
        reward = store.get_reward(tid)
        store.update_job(job_arn, status="completed")
        return InvokeOutcome(
            trajectory_id=tid,
            job_arn=job_arn,
            state=row.state if row else "UNKNOWN",
            reason=row.reason if row else None,
            reward=None if reward is None else reward.total,
            result=last.result if last else None,
            store_path=Path(store.path),
        )
    finally:
        store.close()
