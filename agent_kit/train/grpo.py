"""TRL's ``GRPOTrainer`` driven one step at a time by agent_kit's rollouts.

TRL owns the loss, the optimiser and the LoRA update (PEFT); agent_kit owns the rollouts. The
trainer runs ``trainer.train()`` in a thread of its own. Its ``rollout_func`` does not generate:
it waits for the samples of the next step, which the job driver hands over at the step boundary
(:meth:`GRPOSession.train_step`, awaited by the driver's step hook), and returns them with their
``env_mask``. TRL then computes the loss (advantages are agent_kit's: each sample's reward is its
advantage and ``scale_rewards="none"``; a group's advantages sum to zero, so TRL's group centring
leaves them unchanged), steps the optimiser, logs, and the session saves the adapter (PEFT format)
as ``adapters/step-NNNN`` before the next step's rollouts start sampling the updated model.

One step: ``gradient_accumulation_steps`` micro-batches of ``micro`` rollouts each, and a
micro-batch is split into passes of at most :data:`~agent_kit.train.passes.PASS_TOKENS` padded
tokens, a long pass recomputing its activations (:mod:`agent_kit.train.passes`): peak memory
follows the pass, not the step (TRL's fused LM head already scores only the completion tokens,
in tiles). TRL's own gradient accumulation cannot do this split (its micro-batch size is fixed
when the trainer is built, a step's padded width known only when its rollouts are in), so the
split overrides TRL's ``compute_loss``: that override, like every use of TRL's internals, is in
:mod:`agent_kit.model.seam`. The learning rate is constant (a resumed run continues
with the same rate; the optimiser's moments restart from zero).
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent_kit.errors import AgentKitError, RunStoreError, UsageError
from agent_kit.model.loading import TRAIN_HINT, LoadedModel
from agent_kit.model.lora import lora_config
from agent_kit.model.seam import pass_split_trainer
from agent_kit.store.layout import RunLayout
from agent_kit.train.checks import save_adapter
from agent_kit.train.config import TrainConfig
from agent_kit.train.passes import (
    CHECKPOINT_KWARGS,
    PASS_TOKENS,
    checkpoint_pass,
    pass_rows,
    trainer_args,
)
from agent_kit.train.samples import StepBatch

__all__ = ["GRPOSession", "StepUpdate", "adapter_dir", "last_adapter", "trainer_libraries"]

#: TRL's log keys kept in the run's train metrics (as ``train/<name>``).
_KEPT: Final = {
    "loss": "loss",
    "grad_norm": "grad_norm",
    "kl": "kl",
    "entropy": "entropy",
    "learning_rate": "learning_rate",
    "clip_ratio/region_mean": "clip_ratio",
    "step_time": "step_time_s",
}


def adapter_dir(run_dir: Path, step: int) -> Path:
    """The adapter saved after ``step`` (0-based)."""
    return RunLayout(run_dir).step_adapter(step)


def last_adapter(run_dir: Path) -> tuple[int, Path] | None:
    """The latest complete adapter of a run: ``(step, folder)``, or None."""
    found = [
        (int(p.name.split("-", 1)[1]), p)
        for p in RunLayout(run_dir).adapters.glob("step-*")
        if p.name.split("-", 1)[1].isdigit() and (p / "adapter_config.json").is_file()
    ]
    return max(found) if found else None


@dataclass(frozen=True)
class StepUpdate:
    """What one training step did: TRL's metrics under ``train/*`` and the adapter it saved."""

    step: int
    metrics: dict[str, float]
    adapter: Path


class _Stopped(Exception):
    """The session closed: ends ``trainer.train()`` in its thread."""


def trainer_libraries() -> tuple[Any, Any, Any, Any]:
    """``(trl, peft, datasets, transformers)``, imported now (their settings untouched: the
    command quiets them at its door, :mod:`agent_kit.cli.process`); UsageError with the
    install command if missing."""
    try:
        import datasets
        import peft
        import transformers
        import trl
    except ImportError as exc:
        raise UsageError(f"agent-kit train needs TRL and PEFT: {TRAIN_HINT} ({exc})") from None
    return trl, peft, datasets, transformers


class GRPOSession:
    """One ``GRPOTrainer`` fed step by step (see the module docstring).

    ``resume_from`` is an adapter folder to continue training; ``steps`` how many updates this
    session makes; ``first_step`` the number of the first one (for the adapter names);
    ``after_step`` is called after each update is saved, before the next step samples (the
    command hands the heap's free pages back there).
    """

    def __init__(
        self,
        config: TrainConfig,
        loaded: LoadedModel,
        run_dir: Path,
        *,
        steps: int,
        first_step: int = 0,
        resume_from: Path | None = None,
        after_step: Callable[[], object] | None = None,
    ) -> None:
        trl, peft, datasets, transformers = trainer_libraries()
        self.run_dir = run_dir
        self._after_step = after_step
        self._batches: queue.Queue[StepBatch | None] = queue.Queue()
        self._updates: queue.Queue[StepUpdate | BaseException] = queue.Queue()
        self._step = first_step
        self._logged: dict[str, float] = {}
        model = loaded.model
        peft_config = None
        if resume_from is not None:
            model = _load_adapter(peft, model, resume_from)
        else:
            peft_config = lora_config(config.lora_r, config.lora_alpha)
        accumulate = config.rollouts_per_step // config.micro()
        args = trl.GRPOConfig(
            output_dir=str(RunLayout(run_dir).trainer),
            use_cpu=loaded.device == "cpu",
            per_device_train_batch_size=config.micro(),
            gradient_accumulation_steps=accumulate,
            steps_per_generation=accumulate,
            num_generations=config.job.group_size,
            max_steps=steps,
            learning_rate=config.learning_rate,
            beta=config.beta,
            scale_rewards="none",
            temperature=config.job.temperature,
            activation_checkpointing=False,  # per pass: see _passes
            loss_type="dapo",  # a token sum over the step: exact when a micro-batch is split
            **trainer_args(config.job.seed),
        )
        prompts = datasets.Dataset.from_dict(
            {"prompt": [str(i) for i in range(config.job.batch_size or 1)]}
        )
        session = self

        class _Saver(transformers.TrainerCallback):  # type: ignore[misc,name-defined]
            def on_log(
                self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any
            ) -> None:
                if logs and "loss" in logs:
                    session._finish_step(dict(logs))

        plan = functools.partial(_passes, forced=config.gradient_checkpointing)
        self.trainer = pass_split_trainer(trl, plan, _checkpointing)(
            model=model,
            args=args,
            train_dataset=prompts,
            processing_class=loaded.tokenizer,
            peft_config=peft_config,
            reward_funcs=[agent_kit_advantage],
            rollout_func=self._rollout,
            callbacks=[_Saver()],
        )
        self.trainer.remove_callback(transformers.PrinterCallback)  # no log dicts on stdout
        self._thread = threading.Thread(target=self._train, name="agent-kit-grpo", daemon=True)

    @property
    def model(self) -> Any:
        """The PEFT-wrapped model being trained (what the policy samples)."""
        return self.trainer.model

    def start(self) -> None:
        """Start ``trainer.train()`` in its thread (it waits for the first step's samples)."""
        self._thread.start()

    def _train(self) -> None:
        try:
            self.trainer.train()
        except _Stopped:
            return
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting step
            self._updates.put(exc)

    def _rollout(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        del prompts, trainer  # the samples come from the driver's rollouts
        batch = self._batches.get()
        if batch is None:
            raise _Stopped
        return batch.rollout_output()

    def _finish_step(self, logs: dict[str, Any]) -> None:
        metrics = {
            f"train/{name}": float(logs[key])
            for key, name in _KEPT.items()
            if isinstance(logs.get(key), int | float)
        }
        folder = adapter_dir(self.run_dir, self._step)
        save_adapter(self.trainer.model, folder, self.run_dir)  # RunStoreError: not written
        if self._after_step is not None:
            self._after_step()  # the step's activations, before the next step samples
        self._updates.put(StepUpdate(self._step, metrics, folder))
        self._step += 1

    def train_step(self, batch: StepBatch) -> StepUpdate:
        """Hand one step's samples to the trainer and wait for its update (blocking: call it
        off the event loop). Raises :class:`AgentKitError` if the trainer failed, the
        :class:`~agent_kit.errors.RunStoreError` of an adapter that could not be saved as it
        is (the run stops resumably)."""
        self._batches.put(batch)
        update = self._updates.get()
        if isinstance(update, RunStoreError):
            raise update
        if isinstance(update, BaseException):
            raise AgentKitError(
                f"the trainer failed: {type(update).__name__}: {update}"
            ) from update
        return update

    def close(self) -> None:
        """Stop the trainer's thread (after the update in progress, if any)."""
        self._batches.put(None)
        if self._thread.is_alive():
            self._thread.join()


def _passes(rows: int, width: int, *, forced: bool = False) -> list[tuple[list[int], bool]]:
    """A micro-batch's passes (:func:`~agent_kit.model.seam.pass_split_trainer`'s plan): its
    ``rows``, all padded to ``width``, in passes of at most :data:`PASS_TOKENS` padded tokens,
    each with whether it recomputes its activations (always when ``forced``)."""
    split = pass_rows([width] * rows, PASS_TOKENS)
    return [(part, checkpoint_pass(len(part), width, forced=forced)) for part in split]


def _checkpointing(model: Any, on: bool) -> None:
    """Turn gradient checkpointing of ``model`` (PEFT-wrapped) on or off for the next pass.
    On is always set anew with :data:`CHECKPOINT_KWARGS`: a model may come with checkpointing
    already on in another form (the warm start's trainer leaves it on; TRL turns it back on
    with its own, non-reentrant, arguments around its scoring), which kept 3 GB more a step."""
    if on:
        model.activation_checkpointing_enable(dict(CHECKPOINT_KWARGS))
    elif bool(getattr(model, "is_activation_checkpointing", False)):
        model.activation_checkpointing_disable()


def _load_adapter(peft: Any, model: Any, folder: Path) -> Any:
    """``model`` with the saved adapter of ``folder``, trainable; one PEFT cannot load is a
    RunStoreError naming the folder (one line, not PEFT's traceback)."""
    try:
        return peft.PeftModel.from_pretrained(model, str(folder), is_trainable=True)
    except Exception as exc:  # noqa: BLE001 - PEFT, safetensors and torch raise many types
        why = (str(exc).strip().splitlines() or [""])[0]
        raise RunStoreError(
            f"adapter {folder} cannot be loaded ({type(exc).__name__}: {why}); the run cannot "
            "be resumed from it"
        ) from None


def agent_kit_advantage(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    """TRL reward function: each sample's agent_kit advantage (see the module docstring)."""
    del prompts, completions
    return [float(a) for a in kwargs["agent_kit_advantage"]]
