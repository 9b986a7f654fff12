"""The job driver: play a dataset against an agent the way the MTRL service does (docs/contract.md
§1).

:func:`run_job` runs a whole local job, one :class:`~agent_kit.driver.config.RunConfig` with the
caller's :class:`~agent_kit.driver.hooks.JobHooks`, in the current event loop:

1. the run directory ``OUT/<job-name>/`` gets its store (``run.sqlite``) and ``logs/``;
2. its :class:`~agent_kit.driver.session.Session` (the one every runner has) serves the
   emulator (:func:`~agent_kit.emulator.local_service.local_service`, uvicorn on 127.0.0.1
   and an ephemeral port, inside this process) and creates the job;
3. the session makes and starts the agent's :mod:`~agent_kit.driver.invokers` invoker (for an
   entrypoint file: local processes whose environment points at the emulator);
4. each of ``steps`` steps plays ``batch_size`` prompts × ``group_size`` rollouts, at most
   ``concurrency`` at once. A rollout is one trajectory id
   (``{job}-s{step}-p{prompt}-g{sample}-a{attempt}``, so runs are reproducible) and the full
   payload of docs/contract.md §2, played through :mod:`~agent_kit.driver.attempt` (the one
   attempt path, shared with replay);
5. the driver stores its own figures (:class:`~agent_kit.store.run_figures.RunFigures`) with
   the job and calls ``hooks.finish`` (if given), which writes the run's outputs and returns the
   :class:`~agent_kit.reporting.summary_schema.Summary`: :func:`agent_kit.driver.local.run_local`
   passes the writer of ``summary.json`` and ``report.html``. The driver itself never imports
   the reporting half at run time (only the summary's type, for the type checker).

``advertise_url`` (``agent-kit run --advertise-url``) is for a *deployed* agent that reaches this
machine through a tunnel: the emulator still binds 127.0.0.1 (``emulator_port`` fixes its port
for the tunnel), a random path token is drawn per run, the emulator serves its routes only under
``/<token>/…`` and payloads carry ``metadata.endpoint`` = ``<advertise_url>/<token>`` (see
:mod:`agent_kit.driver.tunnel`). The job config records the URL and port, never the token.

How each rollout attempt ends, and what the job does with it, is the outcome table of
:mod:`~agent_kit.driver.attempt`.

A job failure stops the job (``fail_fast=True``, the service's behaviour: in-flight rollouts are
expired with reason "job stopped") or is only flagged (``fail_fast=False``). Every failure is an
event ``job_failure`` in the store; every finished rollout slot an event ``rollout_done``.

``resume`` reopens a run directory: slots with a REWARDED or FAILED trajectory (or a
``rollout_done`` event) are kept, trajectories left OPEN/READY by the dead run are marked
TIMED_OUT with reason "resumed", and the remaining slots are played under the same job ARN.

This module is the job's lifecycle (serve, play, stop, finalize: one ``AsyncExitStack``); its
neighbours hold the rest: :mod:`~agent_kit.driver.config` the settings,
:mod:`~agent_kit.driver.hooks` the caller's hooks, :mod:`~agent_kit.driver.job_setup` opens a
new or resumed run directory and plans the slots left, :mod:`~agent_kit.driver.session` serves
the emulator and starts the agents, :mod:`~agent_kit.driver.rollouts` plays the slots and
:mod:`~agent_kit.driver.attempt` one attempt, :mod:`~agent_kit.driver.job_stats` counts the
figures from the store, and :mod:`~agent_kit.driver.one_rollout` is ``agent-kit invoke``'s
single rollout. Callers import each name from the module that defines it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kit.driver.attempt import Attempts
from agent_kit.driver.config import (
    RunConfig,
)
from agent_kit.driver.hooks import (
    JobHooks,
    StepBoundary,
)
from agent_kit.driver.invokers import Invoker
from agent_kit.driver.job_setup import (
    OpenedRun,
    expire_stale,
    job_config,
    open_run,
    plan_slots,
    refuse_untrained_resume,
)
from agent_kit.driver.job_stats import driver_stats, redact_summary, rollouts_verdict
from agent_kit.driver.rollouts import RolloutLoop
from agent_kit.driver.session import Session
from agent_kit.driver.trainer_side import LocalS3, TrainerSide
from agent_kit.driver.tunnel import advertised_endpoint, new_route_token, redact
from agent_kit.emulator.chaos import parse_chaos
from agent_kit.emulator.local_service import LocalService
from agent_kit.emulator.policies import PolicyBackend, check_policy
from agent_kit.errors import AgentKitError, JobFailed, RunStoreError, UsageError
from agent_kit.store.events import (
    AGENTS_READY_EVENT,
    DRIVER_ERROR_EVENT,
    JOB_RESUMED_EVENT,
)
from agent_kit.store.run_figures import ROLLOUTS_FAILED, RunFigures

if TYPE_CHECKING:
    from agent_kit.reporting.summary_schema import Summary

logger = logging.getLogger("agent_kit.driver.job")

__all__ = ["JobResult", "run_job"]

#: Seconds the emulator's shutdown waits for the requests in flight as the job ends.
_STOP_S = 10.0
#: The same when the gate already waited its full time for them (a hung policy call).
_HUNG_STOP_S = 1.0


@dataclass(frozen=True)
class JobResult:
    """What a finished (or stopped) job left behind: its status, slot counts, the driver's
    figures, and the summary the run's finisher wrote (None when the job ran without one)."""

    job_arn: str
    run_dir: Path
    status: str
    failure: str | None
    summary: Summary | None
    total: int
    succeeded: int
    failed: int
    #: The driver's own figures, as stored with the job (the summary's ``run`` section).
    figures: RunFigures

    def raise_for_status(self) -> None:
        """Raise :class:`JobFailed` if the job failed."""
        if self.status == "failed":
            raise JobFailed(f"job {self.job_arn} failed: {self.failure}")

    def written_summary(self) -> Summary:
        """The summary the run's finisher wrote; :class:`AgentKitError` when the job ran
        without a finisher (no ``hooks.finish``)."""
        if self.summary is None:
            raise AgentKitError(f"job {self.job_arn} ran without writing a summary")
        return self.summary


@dataclass
class _Outcome:
    status: str = "failed"
    failure: str | None = None
    loop: RolloutLoop | None = None
    figures: RunFigures | None = None
    summary: Summary | None = None
    #: Set once the agent is up and the first rollout may start.
    playing: bool = False
    #: The agents' shutdown, started as the play ends; it runs beside the writing of the
    #: outputs and is awaited before the run's store and lock are released.
    closing: asyncio.Task[None] | None = None


async def run_job(
    config: RunConfig,
    hooks: JobHooks | None = None,
    *,
    invoker: Invoker | None = None,
    policy: PolicyBackend | None = None,
) -> JobResult:
    """Run (or, with ``config.resume``, continue) a local job; see the module docstring.

    ``config.entrypoint`` is an invoker target (``.py`` file, URL, AgentCore or Lambda ARN);
    with ``resume`` it, the dataset, the job's settings, ``advertise_url`` and ``emulator_port``
    default to what the run recorded. ``advertise_url`` is the public URL of a tunnel to this
    machine's emulator (token-guarded, see the module docstring). ``hooks`` (see
    :class:`~agent_kit.driver.hooks.JobHooks`): ``finish`` writes the run's outputs as the job
    ends (without it the result has the driver's figures and no summary); setting ``stop``
    stops the job gracefully (``config.grace`` seconds for in-flight rollouts) and the result
    has status ``interrupted``; ``on_step`` is awaited at every step boundary. A job that plays
    every slot but whose rollouts all failed, or where more than ``config.max_floor_rate`` of
    them got the floor reward, has status :data:`ROLLOUTS_FAILED`. ``invoker`` reaches the
    agent instead of the one the entrypoint names; ``policy`` is a backend object to serve
    instead of loading the job's spec (its owner closes it; the spec is still what the job
    records). Raises :class:`UsageError` for bad settings, :class:`PolicyError` when the policy
    cannot answer at all (checked before anything is recorded) and :class:`InvokerError` when
    the agent cannot be started; a failing *job* is not an exception: see
    :attr:`JobResult.status` and :meth:`JobResult.raise_for_status`. Agent processes the driver
    starts (a ``.py`` entrypoint) get the run's own AWS keys and must sign with them (a bad
    signature is 403); ``config.lenient_auth`` checks only the shape of credentials instead.
    """
    started = time.monotonic()
    hooks = hooks or JobHooks()
    refuse_untrained_resume(config, trained=hooks.on_step is not None)
    run = open_run(config, hooks.lock)
    job = _Job(config, hooks, invoker, policy, run, started)
    try:
        return await job.run()
    except BaseException:
        if run.created and not job.outcome.playing:
            # It failed before it started (bad policy, agent that cannot start, …): a new run
            # leaves no directory behind; the error itself says why.
            shutil.rmtree(run.run_dir, ignore_errors=True)
        raise


class _Job:
    """One invocation of :func:`run_job` on its opened run: serve, play, finalize."""

    def __init__(
        self,
        config: RunConfig,
        hooks: JobHooks,
        invoker: Invoker | None,
        policy: PolicyBackend | None,
        run: OpenedRun,
        started: float,
    ) -> None:
        self.config, self.hooks, self.policy = config, hooks, policy
        self.run_, self.started = run, started
        agents = replace(config, extra_env=run.agent_env or None)  # recorded, given over it
        self.session = Session(
            run.store, run.run_dir, run.entrypoint, run.config, agents, invoker=invoker
        )
        self.workers = self.session.workers
        self.outcome = _Outcome()
        self.token = new_route_token() if run.advertise_url is not None else None
        self.job_arn = ""

    async def run(self) -> JobResult:
        """Serve, play and finalize the opened run."""
        run, outcome = self.run_, self.outcome
        async with contextlib.AsyncExitStack() as stack:
            if run.owns_lock:
                stack.callback(run.lock.release)  # the very last thing to go
            stack.callback(run.store.close)
            trainer_key, s3 = await self._trainer_s3(stack)
            # Bound now, served once _play starts it; on exit it stops, then the policy closes.
            svc = await stack.enter_async_context(self._service(trainer_key))
            # An unreachable upstream or an unloadable model fails here, before the job is
            # recorded (a new run then leaves no directory, a resumed one is unchanged).
            await check_policy(svc.emulator.policy)
            stack.push_async_callback(self._agents_closed)  # after the outputs are written
            self.job_arn = self.session.create_job(run.job_name, job_config(run, self.workers))
            stack.push_async_callback(self._finalize, svc)  # the first exit step, always
            trainer = None
            if s3 is not None and trainer_key is not None:
                trainer = TrainerSide(s3, trainer_key, svc.endpoint)
            await self._play_recording_the_ending(svc, trainer)
        loop = outcome.loop
        if loop is None or outcome.figures is None:  # _play returned, so both are set
            raise AgentKitError(f"job {self.job_arn} ended without a result")
        return JobResult(
            job_arn=self.job_arn,
            run_dir=run.run_dir,
            status=outcome.status,
            failure=outcome.failure,
            summary=outcome.summary,
            total=loop.stats.total,
            succeeded=loop.stats.succeeded,
            failed=loop.stats.failed,
            figures=outcome.figures,
        )

    async def _trainer_s3(
        self, stack: contextlib.AsyncExitStack
    ) -> tuple[str | None, LocalS3 | None]:
        """``--contract rl-toolkit``: the local S3 (stopped with the job) and the trainer key."""
        if self.run_.config.contract != "rl-toolkit":
            return None, None
        if self.run_.advertise_url is not None:
            raise UsageError(
                "--contract rl-toolkit keeps its S3 on loopback: --advertise-url cannot "
                "be combined with it"
            )
        s3 = await asyncio.to_thread(LocalS3(self.config.settings.max_result_bytes).start)
        stack.callback(s3.stop)
        return secrets.token_urlsafe(24), s3

    def _service(self, trainer_key: str | None) -> contextlib.AbstractAsyncContextManager[Any]:
        run = self.run_
        chaos = run.config.chaos
        return self.session.service(
            self.policy if self.policy is not None else run.config.policy,
            advertised=run.advertise_url is not None,
            path_prefix=self.token,
            trainer_key=trainer_key,
            port=run.emulator_port or 0,
            gate=True,
            start=False,
            chaos=parse_chaos(chaos, seed=run.config.seed) if chaos else None,
            own_policy=self.policy is None,
        )

    async def _play_recording_the_ending(
        self, svc: LocalService, trainer: TrainerSide | None
    ) -> None:
        """Play; whatever ends the job sets the outcome's status and failure."""
        run, outcome = self.run_, self.outcome
        try:
            outcome.loop = await self._play(svc, trainer)
            if run.store.write_failure is not None:  # something the run did was not recorded
                raise RunStoreError(str(run.store.write_failure))
        except (asyncio.CancelledError, KeyboardInterrupt):
            outcome.status, outcome.failure = "interrupted", "interrupted"
            raise
        except RunStoreError as exc:
            # The store cannot be written (a full disk): not the job's failure, and what it
            # holds stays resumable; nothing more is written (the finish will say it again).
            outcome.status, outcome.failure = "stopped", str(exc)
            raise
        except AgentKitError as exc:
            outcome.status, outcome.failure = "failed", str(exc)
            raise
        except Exception as exc:
            # A fault of agent_kit itself (a store conflict, a bug) is not the job's failure:
            # the run stays resumable and the error surfaces as a tool error.
            outcome.status, outcome.failure = "stopped", f"agent-kit error: {type(exc).__name__}"
            run.store.add_event(DRIVER_ERROR_EVENT, {"error": f"{type(exc).__name__}: {exc}"})
            raise

    async def _finalize(self, svc: LocalService) -> None:
        """Close the gate, then write the outputs in a thread while the service stops."""
        hung = 0
        if svc.gate is not None:
            hung = await svc.gate.close()  # no turn lands while the figures are taken
        # The writes run in a thread, so that uvicorn's own shutdown and the agents' (see
        # _play) go on beside them in this loop; an interrupt waits for the writes. Requests
        # the gate already waited for in vain (a hung policy call) get no second wait.
        stopping = asyncio.create_task(svc.stop(_HUNG_STOP_S if hung else _STOP_S))
        writing = asyncio.ensure_future(asyncio.to_thread(self._write_outputs))
        try:
            await asyncio.shield(writing)
        except asyncio.CancelledError:
            await asyncio.wait({writing})
            raise
        finally:
            await stopping

    def _write_outputs(self) -> None:
        """Store the driver's figures with the job, then call the finisher (if any)."""
        run, outcome, token, job_arn = self.run_, self.outcome, self.token, self.job_arn
        run.store.check_file()  # a deleted or replaced run directory: RunStoreError
        elapsed = time.monotonic() - self.started
        failure = outcome.failure
        stats = driver_stats(run, job_arn, outcome.status, failure, outcome.loop, elapsed)
        if outcome.status == "completed":
            failure = rollouts_verdict(run, job_arn, stats, self.config.max_floor_rate)
            if failure is not None:
                outcome.status = ROLLOUTS_FAILED
                update = {"status": ROLLOUTS_FAILED, "failure_reason": failure}
                stats = stats.model_copy(update=update)
        outcome.figures = redact_summary(stats, token)
        self.session.finish_job(outcome.status, {"run": outcome.figures.stored()})
        outcome.failure = None if failure is None else redact(failure, token)
        if self.hooks.finish is not None:
            outcome.summary = self.hooks.finish(run.store, job_arn, run.run_dir, token)

    async def _agents_closed(self) -> None:
        """Wait for the agents' shutdown that :meth:`_play` started (if it got that far)."""
        if self.outcome.closing is not None:
            await self.outcome.closing

    async def _play(self, svc: LocalService, trainer: TrainerSide | None) -> RolloutLoop:
        """Serve the emulator, start the agent, play every remaining slot; sets the outcome.
        With ``trainer`` the rollouts speak agentcore-rl-toolkit's contract (its S3 reaches the
        agent processes through ``AWS_ENDPOINT_URL_S3``)."""
        run, outcome, store = self.run_, self.outcome, self.run_.store
        endpoint = local_endpoint = await svc.start()  # with the route token, if any
        if self.token is not None and run.advertise_url is not None:
            endpoint = advertised_endpoint(run.advertise_url, self.token)
        if self.config.resume is not None:
            detail: dict[str, Any] = {
                "stale_trajectories": expire_stale(svc.emulator, store, self.job_arn)
            }
            if run.advertise_url is not None:
                detail["advertise_url"] = run.advertise_url
            store.add_event(JOB_RESUMED_EVENT, detail)
        plan, total, counts = plan_slots(
            store, self.job_arn, run.job_name, run.config, len(run.data)
        )
        s3_env = {"AWS_ENDPOINT_URL_S3": trainer.s3.url} if trainer is not None else None
        invoker = self.session.agents(
            local_endpoint, extra_env=s3_env, stop_sessions=trainer is None
        )
        loop = self._loop(svc, invoker, endpoint, trainer)
        outcome.loop = loop
        loop.stats.total, loop.stats.done = total, counts["done"]
        loop.stats.succeeded, loop.stats.failed = counts["succeeded"], counts["failed"]
        await self.session.start_agents()
        store.add_event(AGENTS_READY_EVENT, {"workers": self.workers})  # cold start
        outcome.playing = True
        loop.stats.started = time.monotonic()  # rates count the rollout phase, not start-up
        try:
            loop.emit()
            await loop.play_until_stopped(plan, self.hooks.stop, self.config.grace)
        finally:
            # The agents stop while the outputs are written; run() awaits it.
            outcome.closing = asyncio.create_task(self.session.close_agents())
        if loop.draining:
            outcome.status, outcome.failure = "interrupted", "interrupted"
        elif loop.stop_reason is not None:
            outcome.status, outcome.failure = "failed", loop.stop_reason
        else:
            outcome.status = "completed"
        return loop

    def _loop(
        self, svc: LocalService, invoker: Invoker, endpoint: str, trainer: TrainerSide | None
    ) -> RolloutLoop:
        run = self.run_
        attempts = Attempts(
            emu=svc.emulator,
            store=run.store,
            invoker=invoker,
            job_arn=self.job_arn,
            job_name=run.job_name,
            endpoint=endpoint,
            config=run.config,
            trainer=trainer,
        )
        loop = RolloutLoop(attempts, dataset=run.data, progress=self.hooks.progress)
        hook = self.hooks.on_step
        if hook is not None:
            store, job_arn, run_dir, steps = run.store, self.job_arn, run.run_dir, run.config.steps

            async def on_step(step: int) -> None:
                await hook(StepBoundary(store, job_arn, run_dir, step, steps))

            loop.on_step = on_step
        return loop
