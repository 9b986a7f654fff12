"""``agent-kit train``: rollouts through the job driver, updates through TRL, step by step.

:func:`play_train` runs one training run in its own event loop, stopped gracefully by the first
SIGINT/SIGTERM (as ``agent-kit run``):

1. the model loads (:mod:`~agent_kit.model.loading`) and TRL's trainer wraps it with
   a LoRA adapter (:class:`~agent_kit.train.grpo.GRPOSession`); the ``hf`` policy backend samples
   that very model, so every step samples the policy as updated so far;
2. with ``eval``, the holdout is played with the adapter switched off (``eval/base``);
3. the training job is an ordinary local job (:func:`~agent_kit.driver.local.run_local`: the
   emulator, the agent processes, the entrypoint unchanged, CompleteRollout/UpdateReward, the
   store, summary.json and report.html) with ``steps`` steps of ``batch_size`` prompts ×
   ``group_size`` rollouts. At every step boundary the driver awaits the trainer: the finished
   step's rollouts become samples (:mod:`~agent_kit.train.samples`), TRL makes one update, the
   adapter is saved as ``adapters/step-NNNN`` and the step's train metrics are stored (event
   ``train_step``); the next step starts only then;
4. with ``eval``, the holdout is played again with the trained adapter (``eval/adapter``);
5. the evaluations are stored in the run (event ``train_eval``) and its summary.json and
   report.html written again, so the report's Training section shows them
   (:mod:`~agent_kit.reporting.train_view`); ``train.json`` and ``train.html``
   (:mod:`~agent_kit.train.outputs`) sum it up.

``resume`` continues a run directory: the job driver plays the slots left, and the trainer
starts from the last saved adapter (steps already trained are not trained again). A run stopped
before its job was recorded (a signal in its warm start) records its settings all the same and
keeps its directory: its ``resume`` starts it over in place, warm start included (its finished
``adapters/warm`` reused), as a new run with the recorded settings.

Nothing is written and the model is not loaded until the settings, the dataset,
the holdout and the run directory are checked (:mod:`~agent_kit.train.checks`); the run
directory's lock is taken first and the driver plays under it (``JobHooks.lock``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from agent_kit.driver.config import RunConfig, default_job_name
from agent_kit.driver.hooks import JobHooks, StepBoundary
from agent_kit.driver.job import JobResult
from agent_kit.driver.job_setup import step_prompts
from agent_kit.driver.local import run_local
from agent_kit.driver.stop import StopHook, play_stoppable
from agent_kit.emulator import HFPolicyBackend
from agent_kit.errors import WarmStartStopped
from agent_kit.model.loading import LoadedModel, load_model, parse_model_spec
from agent_kit.model.turns import TurnTokens
from agent_kit.store import RunStore
from agent_kit.store.events import TRAIN_STEP_EVENT, TRAIN_TOKENS_EVENT
from agent_kit.store.layout import TRAIN_CONFIG_FILE, RunLayout
from agent_kit.store.runlock import RunLock
from agent_kit.train.checks import (
    Inputs,
    RecordedRun,
    check_adapter,
    check_inputs,
    claim,
    drop_unstarted,
    holds_job,
    recorded_config,
)
from agent_kit.train.config import TrainConfig
from agent_kit.train.evaluate import eval_figures, run_eval
from agent_kit.train.grpo import GRPOSession, StepUpdate, last_adapter
from agent_kit.train.outputs import write_train_outputs
from agent_kit.train.preflight import preflight_or_stop
from agent_kit.train.samples import no_gradient_note, step_batch
from agent_kit.train.warm import WARM_LABEL, prepare_warm_start

__all__ = ["CONFIG_FILE", "TrainResult", "play_train", "train"]

CONFIG_FILE: Final = TRAIN_CONFIG_FILE

Echo = Callable[[str], None]
#: A hook called between a run's phases (after the warm start, each holdout, each step).
Phases = Callable[[], object] | None


@dataclass(frozen=True)
class TrainResult:
    """A finished (or stopped) training run: the training job's result, the run's summary
    document (``train.json``) and the signal that stopped it, if any."""

    job: JobResult
    document: dict[str, Any]
    stopped_by: Any = None

    @property
    def run_dir(self) -> Path:
        """The run directory."""
        return self.job.run_dir


def _settle(config: TrainConfig, echo: Echo) -> tuple[TrainConfig, Path]:
    """The settings to train with and the run directory (a resume reads its recorded ones; a
    run stopped before its job was recorded starts over in its directory, as a new run)."""
    resume = config.run.resume
    if resume is not None:
        settled = recorded_config(
            resume,
            device=config.device,
            resume=resume,
            workers=config.run.workers,
            settings=config.run.settings,
        )
        if holds_job(resume):
            return settled, resume
        echo(f"{resume} was stopped before its training job started: it starts over in place")
        run = replace(settled.run, resume=None, out=resume.parent)
        return replace(settled, run=run).with_job(name=resume.name), resume
    config = config.check()
    name = config.job.name or default_job_name(config.run.entrypoint or "agent")
    return config.with_job(name=name), config.run.out / name


class _Steps:
    """The driver's step hook: trains every finished, untrained step before the next starts."""

    def __init__(
        self,
        config: TrainConfig,
        session: GRPOSession,
        backend: HFPolicyBackend,
        n_prompts: int,
        first_step: int,
        echo: Echo,
    ) -> None:
        self.config, self.session, self.backend = config, session, backend
        self.n_prompts, self.first_step, self.echo = n_prompts, first_step, echo
        tokenizer = backend.loaded.tokenizer
        self.pad_id = int(tokenizer.pad_token_id or tokenizer.eos_token_id or 0)
        self.started = time.monotonic()

    def prompts(self, step: int) -> list[int]:
        """The dataset indices of a step's prompts, in the driver's plan order."""
        return step_prompts(step, self.config.job.batch_size or 1, self.n_prompts)

    async def __call__(self, boundary: StepBoundary) -> None:
        store = boundary.store
        if self.backend.recorder is None:

            def record(tokens: TurnTokens) -> None:
                store.add_event(TRAIN_TOKENS_EVENT, tokens.to_dict(), tokens.trajectory_id)

            self.backend.recorder = record
        done = {int(e.detail["step"]) for e in store.list_events(kind=TRAIN_STEP_EVENT)}
        for step in range(self.first_step, boundary.step):
            if step not in done:
                await self._train(store, boundary.job_arn, step, boundary.steps)

    async def _train(self, store: RunStore, job_arn: str, step: int, steps: int) -> None:
        batch = await asyncio.to_thread(
            step_batch,
            store,
            job_arn,
            step,
            group_size=self.config.job.group_size,
            prompts=self.prompts(step),
            pad_id=self.pad_id,
        )
        update: StepUpdate = await asyncio.to_thread(self.session.train_step, batch)
        seconds = time.monotonic() - self.started
        self.started = time.monotonic()
        detail = {
            "step": step,
            **update.metrics,
            "train/tokens": float(batch.trained_tokens),
            "train/missing_samples": float(batch.missing),
            "train/dropped_turns": float(batch.dropped_turns),
            "timing_s/train_step": seconds,
            "adapter": str(update.adapter.relative_to(self.session.run_dir)),
        }
        store.add_event(TRAIN_STEP_EVENT, detail)
        rewards = [r for r in batch.rewards if r is not None]
        mean = sum(rewards) / len(rewards) if rewards else float("nan")
        self.echo(
            f"step {step} (of 0-{steps - 1}): reward {mean:.3f}, "
            f"loss {update.metrics.get('train/loss', float('nan')):.4f}, "
            f"grad norm {update.metrics.get('train/grad_norm', float('nan')):.3g}, {seconds:.1f}s, "
            f"{detail['adapter']}{no_gradient_note(batch)}"
        )


async def train(
    config: TrainConfig,
    stop: asyncio.Event | None = None,
    echo: Echo = print,
    *,
    between_phases: Phases = None,
) -> TrainResult:
    """Run (or resume) one training run; see the module docstring. Its settings, dataset,
    holdout and run directory (the store and the last adapter of a resume) are checked before
    anything is written and before the model loads; the run directory's lock is taken first and
    held to the end (:class:`~agent_kit.errors.RunInUse` while another process plays it).
    ``between_phases`` is called after the warm start, each holdout and each step
    (``agent-kit train`` hands the heap's free pages back there: :mod:`agent_kit.cli.process`).

    It leaves the calling process's settings as it found them (the environment, the C heap,
    torch's threads, TRL's and transformers' constants and log levels: ``agent-kit train`` sets
    those at its door). What it does change: the model it loads, and the global random
    generators of Python, NumPy and torch, which TRL's trainers seed with the job's seed."""
    config, run_dir = _settle(config, echo)
    inputs = check_inputs(config, echo)
    lock, created = claim(run_dir, resume=config.run.resume is not None)
    try:
        return await _train_locked(config, run_dir, inputs, lock, stop, echo, between_phases)
    except WarmStartStopped as exc:  # resumable: its directory and settings are kept
        exc.run_dir = run_dir
        raise
    except asyncio.CancelledError:  # a second signal: kept, resumable as well
        raise
    except BaseException:
        if created:
            drop_unstarted(run_dir)
        raise
    finally:
        lock.release()


async def _train_locked(
    config: TrainConfig,
    run_dir: Path,
    inputs: Inputs,
    lock: RunLock,
    stop: asyncio.Event | None,
    echo: Echo,
    phases: Phases,
) -> TrainResult:
    """The training run, its ``inputs`` checked and its run directory locked (``lock``)."""
    job, n_prompts = config.job, len(inputs.data)
    spec = parse_model_spec(config.model)
    settings = config.run.settings  # AGENT_KIT_*, read at the CLI's door
    if config.run.resume is None:  # first: a run stopped from here on is resumable
        text = json.dumps(config.to_dict(), indent=2)
        RunLayout(run_dir).train_config.write_text(text + "\n", encoding="utf-8")
    resumed = last_adapter(run_dir) if config.run.resume is not None else None
    if resumed is not None:
        check_adapter(resumed[1])  # a damaged one is one line before the model loads
    first_step = resumed[0] + 1 if resumed is not None else 0
    loaded = await asyncio.to_thread(load_model, spec, config.device)
    warm, extra = await _warm_start(config, loaded, run_dir, echo, stop, inputs.warm_start)
    if phases is not None:
        phases()
    session = GRPOSession(
        config,
        loaded,
        run_dir,
        steps=max(1, job.steps - first_step),
        first_step=first_step,
        resume_from=resumed[1] if resumed is not None else warm,
        after_step=phases,
    )
    trained = LoadedModel(session.model, loaded.tokenizer, loaded.device, loaded.name)
    backend = HFPolicyBackend(
        trained,
        name=f"hf:{spec.name}",
        max_tokens=job.max_tokens,
        max_batch=settings.hf_batch,
        cache_mb=settings.hf_cache_mb,
        prefix_cache=settings.hf_prefix_cache,
    )
    evals: dict[str, Any] = {}
    try:
        if config.run.resume is None:
            run = _run_config(config, backend.name)
            extra = {
                "warm_start": extra,
                "preflight": await preflight_or_stop(
                    run, backend, run_dir, force=config.force, echo=echo, warm=warm is not None
                ),
            }
        before = _evals_before(config, session, backend, run_dir, first_step, echo, phases)
        evals.update(await before)
        session.start()
        hook = _Steps(config, session, backend, n_prompts, first_step, echo)
        hooks = JobHooks(on_step=hook, stop=stop, lock=lock)
        result = await run_local(_run_config(config, backend.name), hooks, policy=backend)
        backend.recorder = None
        if config.eval is not None and result.status == "completed":
            echo("evaluating the trained adapter on the holdout")
            evals["adapter"] = await run_eval(
                config, backend, run_dir, "adapter", echo, after=phases
            )
        elif config.eval is not None:
            echo(f"trained adapter holdout: not played (the training job ended {result.status})")
    finally:
        await asyncio.to_thread(session.close)
        await backend.aclose()
    document = await asyncio.to_thread(write_train_outputs, run_dir, config, result, evals, extra)
    return TrainResult(job=result, document=document)


async def _warm_start(
    config: TrainConfig,
    loaded: LoadedModel,
    run_dir: Path,
    echo: Echo,
    stop: asyncio.Event | None,
    recorded: Sequence[RecordedRun],
) -> tuple[Path | None, dict[str, Any]]:
    """The warm start (of the ``recorded`` runs, checked) in a worker thread, stopped at its
    next step by ``stop`` (the first signal). A second signal cancels this coroutine: it still
    waits for the thread to end (at its next step, ``stop`` being set), so that no caller
    removes the run directory under it."""
    future = asyncio.get_running_loop().run_in_executor(
        None,
        functools.partial(
            prepare_warm_start,
            config,
            loaded,
            run_dir,
            echo,
            stop.is_set if stop is not None else None,
            recorded,
        ),
    )
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if stop is not None:
            stop.set()
        with contextlib.suppress(BaseException):
            await future
        raise


async def _evals_before(
    config: TrainConfig,
    session: GRPOSession,
    backend: HFPolicyBackend,
    run_dir: Path,
    first_step: int,
    echo: Echo,
    phases: Phases,
) -> dict[str, Any]:
    """The holdout before GRPO: the base model (adapter off) and, after a warm start, the warm
    adapter (evaluated only before the first step; a resumed run reads a finished one back)."""
    evals: dict[str, Any] = {}
    if config.eval is None:
        return evals
    echo("evaluating the base model on the holdout")
    with session.model.disable_adapter():
        evals["base"] = await run_eval(config, backend, run_dir, "base", echo, after=phases)
    if config.warm_start and first_step == 0:
        echo("evaluating the warm start on the holdout")
        evals[WARM_LABEL] = await run_eval(config, backend, run_dir, WARM_LABEL, echo, after=phases)
    elif config.warm_start and (RunLayout(run_dir).evals / WARM_LABEL).is_dir():
        with contextlib.suppress(Exception):  # an unfinished one cannot be played again now
            evals[WARM_LABEL] = eval_figures(
                RunLayout(run_dir).evals / WARM_LABEL, config.eval_samples
            )
    return evals


def _run_config(config: TrainConfig, policy: str) -> RunConfig:
    """The training job's run: a new one plays the settled job with the ``hf`` policy; a
    resumed one plays with the settings it recorded."""
    if config.run.resume is not None:
        return replace(config.run, job=None)
    return replace(config.run, job=replace(config.job, policy=policy))


def play_train(
    config: TrainConfig,
    *,
    on_stop: StopHook | None = None,
    echo: Echo = print,
    between_phases: Phases = None,
) -> TrainResult:
    """:func:`train` in a new event loop under a graceful stop (the first signal stops the run
    after the rollouts in flight, a second aborts); returns the signal in the result. A signal
    during the warm start stops it at its next step: :class:`WarmStartStopped`, with the
    signal and the run directory (kept, with the run's settings: ``resume`` starts it over).
    ``between_phases`` as for :func:`train`; the graceful stop's signal handlers are the
    process's while it runs, and put back after."""

    async def job(stopped: asyncio.Event) -> TrainResult:
        return await train(config, stopped, echo, between_phases=between_phases)

    received: list[Any] = []

    def noted(signum: Any) -> None:
        received.append(signum)
        if on_stop is not None:
            on_stop(signum)

    try:
        result, first = play_stoppable(job, noted)
    except WarmStartStopped as exc:
        exc.signum = received[0] if received else None
        raise
    return replace(result, stopped_by=first)
