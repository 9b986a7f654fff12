"""``agent-kit train``: rollouts through the job driver, updates through TRL, step by step.

:func:`play_train` runs one training run in its own event loop, stopped gracefully by the first
SIGINT/SIGTERM (as ``agent-kit run``):

1. the model loads (:mod:`~agent_kit.model.loading`) and TRL's trainer wraps it with
   a LoRA adapter (:class:`~agent_kit.train.grpo.GRPOSession`); the ``hf`` policy backend samples
   that very model, so every step samples the policy as updated so far;
2. with ``eval``, the holdout is played with the adapter switched off (``eval/base``) and,
   after a warm start, with the warm adapter (``eval/warm``): cells of the run's holdout grid
   (:mod:`~agent_kit.train.evaluate`);
3. the training job is an ordinary local job (:func:`~agent_kit.driver.local.run_local`: the
   emulator, the agent processes, the entrypoint unchanged, CompleteRollout/UpdateReward, the
   store, summary.json and report.html) with ``steps`` steps of ``batch_size`` prompts ×
   ``group_size`` rollouts. At every step boundary the driver awaits the trainer: the finished
   step's rollouts become samples (:mod:`~agent_kit.train.samples`), TRL makes one update, the
   adapter is saved as ``adapters/step-NNNN`` and the step's train metrics are stored (event
   ``train_step``); with ``eval_every`` N, every Nth step's checkpoint plays the holdout then
   (``eval/step-NNNN``); the next step starts only then;
4. with ``eval``, the holdout is played again with the trained adapter (``eval/adapter``);
5. the holdout's table (``eval/table.json``, ``eval/eval.html``: the grid's, with the paired
   differences) is written, its cells stored in the run (event ``train_eval``) and its
   summary.json and report.html written again, so the report's Training section shows them
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
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from agent_kit.driver.config import RunConfig, default_job_name
from agent_kit.driver.dataset import Dataset, load_dataset
from agent_kit.driver.hooks import JobHooks
from agent_kit.driver.job import JobResult
from agent_kit.driver.local import run_local
from agent_kit.driver.stop import StopHook, play_stoppable
from agent_kit.emulator import HFPolicyBackend
from agent_kit.errors import WarmStartStopped
from agent_kit.evaluation.checkpoints import BASE_LABEL, WARM_LABEL
from agent_kit.evaluation.holdout import ADAPTER_LABEL
from agent_kit.model.loading import LoadedModel, load_model, parse_model_spec
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
from agent_kit.train.evaluate import HoldoutPlayer, holdout_of
from agent_kit.train.grpo import GRPOSession, last_adapter
from agent_kit.train.outputs import write_train_outputs
from agent_kit.train.preflight import preflight_or_stop
from agent_kit.train.prompt_filter import filter_prompts
from agent_kit.train.provenance import tag_run
from agent_kit.train.steps import TrainSteps
from agent_kit.train.warm import prepare_warm_start

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


async def train(
    config: TrainConfig,
    stop: asyncio.Event | None = None,
    echo: Echo = print,
    *,
    between_phases: Phases = None,
    warming: threading.Event | None = None,
) -> TrainResult:
    """Run (or resume) one training run; see the module docstring. ``warming`` is set while
    the warm start runs (what a signal's line says then is the warm start's). Its settings, dataset,
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
        return await _train_locked(
            config, run_dir, inputs, lock, stop, echo, between_phases, warming
        )
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
    warming: threading.Event | None = None,
) -> TrainResult:
    """The training run, its ``inputs`` checked and its run directory locked (``lock``)."""
    job = config.job
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
    if warming is not None and config.warm_start:
        warming.set()
    try:
        warm, extra = await _warm_start(config, loaded, run_dir, echo, stop, inputs.warm_start)
    finally:
        if warming is not None:
            warming.clear()
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
    start = resumed[1].name if resumed is not None else WARM_LABEL if warm else BASE_LABEL
    trained = LoadedModel(session.model, loaded.tokenizer, loaded.device, loaded.name)
    backend = HFPolicyBackend(
        trained,
        name=f"hf:{spec.name}",
        max_tokens=job.max_tokens,
        max_batch=settings.hf_batch,
        cache_mb=settings.hf_cache_mb,
        prefix_cache=settings.hf_prefix_cache,
    )
    holdout = holdout_of(config, run_dir)
    player = None if holdout is None else HoldoutPlayer(holdout, backend, echo, phases)
    try:
        data = _train_data(run_dir, inputs.data)
        if config.run.resume is None:
            data, extra = await _before_training(config, backend, run_dir, data, extra, start, echo)
        if player is not None:
            await _holdout_before(player, session, first_step)
        session.start()
        hook = TrainSteps(
            config, session, backend, data, first_step=first_step, start_label=start, echo=echo,
            stop=stop, holdout=player,
        )  # fmt: skip
        hooks = JobHooks(on_step=hook, stop=stop, lock=lock)
        run = _run_config(config, backend.name, data)
        result = await run_local(run, hooks, policy=backend)
        backend.recorder = None
        if player is not None and result.status == "completed":
            await player.play(ADAPTER_LABEL, "the trained adapter", adapter=hook.ledger.latest)
        elif player is not None:
            echo(f"trained adapter holdout: not played (the training job ended {result.status})")
    finally:
        await asyncio.to_thread(session.close)
        await backend.aclose()
    document = await asyncio.to_thread(write_train_outputs, run_dir, config, result, holdout, extra)
    return TrainResult(job=result, document=document)


def _train_data(run_dir: Path, data: Dataset) -> Dataset:
    """The prompts the training job plays: the dataset, or the ones the prompt filter kept."""
    kept = RunLayout(run_dir).train_prompts
    return load_dataset(kept) if kept.is_file() else data


async def _before_training(
    config: TrainConfig,
    backend: HFPolicyBackend,
    run_dir: Path,
    data: Dataset,
    warm: dict[str, Any],
    start: str,
    echo: Echo,
) -> tuple[Dataset, dict[str, Any]]:
    """A new run's preflight (recorded with the adapter it probed) and, with
    ``--filter-prompts``, its prompt filter; the dataset to train on and train.json's figures
    (the warm start's, the preflight's, the filter's)."""
    run = _run_config(config, backend.name, data)
    extra: dict[str, Any] = {"warm_start": warm}
    extra["preflight"] = await preflight_or_stop(
        run,
        backend,
        run_dir,
        force=config.force,
        echo=echo,
        warm=start == WARM_LABEL,
        outcome_gate=config.outcome_gate,
    )
    _tag(RunLayout(run_dir).preflight, start)
    if config.filter_prompts:
        data, extra["prompt_filter"] = await filter_prompts(config, backend, run_dir, data, echo)
        _tag(RunLayout(run_dir).prompt_filter, start)
    return data, extra


def _tag(run_dir: Path, label: str) -> None:
    """Record the adapter of a side run's rollouts (a holdout, the preflight, the filter), when
    the run is there."""
    if RunLayout(run_dir).store.is_file():
        tag_run(run_dir, label)


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


async def _holdout_before(player: HoldoutPlayer, session: GRPOSession, first_step: int) -> None:
    """The holdout before GRPO: the base model (adapter off) and, after a warm start, the warm
    adapter (played only before the first step: later the warm state is gone). A resumed run's
    model holds the last saved step's adapter: its checkpoint plays now when a stop cut it
    short (``--eval-every``)."""
    with session.model.disable_adapter():
        await player.play(BASE_LABEL, "the base model")
    if first_step == 0:
        await player.play(WARM_LABEL, "the warm start")
    else:
        await player.checkpoint(first_step - 1)


def _run_config(config: TrainConfig, policy: str, data: Dataset) -> RunConfig:
    """The training job's run on ``data`` (the dataset, or the prompts the filter kept): a new
    one plays the settled job with the ``hf`` policy; a resumed one plays with the settings it
    recorded."""
    if config.run.resume is not None:
        return replace(config.run, job=None, dataset=data.path)
    return replace(config.run, dataset=data.path, job=replace(config.job, policy=policy))


def play_train(
    config: TrainConfig,
    *,
    on_stop: StopHook | None = None,
    echo: Echo = print,
    between_phases: Phases = None,
    on_warm_stop: StopHook | None = None,
) -> TrainResult:
    """:func:`train` in a new event loop under a graceful stop (the first signal stops the run
    after the rollouts in flight, a second aborts); returns the signal in the result. A signal
    during the warm start stops it at its next step: :class:`WarmStartStopped`, with the
    signal and the run directory (kept, with the run's settings: ``resume`` starts it over).
    ``between_phases`` as for :func:`train`; the graceful stop's signal handlers are the
    process's while it runs, and put back after. The first signal calls ``on_warm_stop`` while
    the warm start runs (no rollout has started: the run's "no new rollouts" would be wrong),
    ``on_stop`` otherwise."""
    warming = threading.Event()

    async def job(stopped: asyncio.Event) -> TrainResult:
        return await train(config, stopped, echo, between_phases=between_phases, warming=warming)

    received: list[Any] = []

    def noted(signum: Any) -> None:
        received.append(signum)
        hook = on_warm_stop if warming.is_set() and on_warm_stop is not None else on_stop
        if hook is not None:
            hook(signum)

    try:
        result, first = play_stoppable(job, noted)
    except WarmStartStopped as exc:
        exc.signum = received[0] if received else None
        raise
    return replace(result, stopped_by=first)
