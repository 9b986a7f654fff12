"""The warm start: supervised fine-tuning of the LoRA adapter on good recorded episodes, before
GRPO.

A base model that never calls a tool scores every rollout alike: GRPO has no gradient. The warm
start teaches it the agent's moves first, from runs recorded with any policy (``scripted:`` an
expert, ``openai:`` a teacher, ``hf:`` the model's own best-of-n):

1. **Examples** (:mod:`agent_kit.train.warm_data`): every rewarded rollout of each
   ``--warm-start RUN_DIR`` whose reward reaches the minimum (``--warm-start-min-reward``;
   default: the run's success threshold where its job recorded one, else its top quarter) gives
   one token sequence an episode (the turns that extend one another), the loss on every
   assistant reply, cut to ``--max-length`` tokens (default: the model's context, at most
   4,096).
2. **Fine-tuning** (:func:`fine_tune`): TRL's ``SFTTrainer`` on those sequences with their
   labels (-100 outside the replies) and the same PEFT LoRA adapter GRPO trains (rank, alpha,
   ``q/k/v/o_proj``); ``--warm-start-epochs`` epochs at ``--warm-start-lr``. About as many
   replies an optimiser step as a GRPO micro-batch has rollouts; short examples share a pass
   (grouped by length, padded) up to :data:`~agent_kit.train.passes.PASS_TOKENS` padded
   tokens. It prints a progress line (epoch, loss, time left) about ten times, and stops at
   the next step when ``stop()`` turns true (the first Ctrl-C): :class:`WarmStartStopped`, no
   adapter saved.
3. The adapter is saved as ``adapters/warm``, whole or not at all (a disk that fills is a
   ``RunStoreError``, exit 14: :func:`~agent_kit.train.checks.save_adapter`), the trainer's
   scratch folder ``trainer/warm`` removed and the model's LoRA layers removed again; GRPO
   then continues from that adapter. A run that already holds ``adapters/warm`` (``--resume``)
   does not fine-tune again.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from agent_kit.errors import WarmStartStopped
from agent_kit.evaluation.checkpoints import WARM_LABEL
from agent_kit.model.loading import LoadedModel
from agent_kit.model.lora import lora_config
from agent_kit.reporting.words import plural
from agent_kit.store.layout import RunLayout
from agent_kit.train.checks import RecordedRun, save_adapter
from agent_kit.train.config import TrainConfig
from agent_kit.train.passes import PASS_TOKENS, checkpoint_pass, trainer_args
from agent_kit.train.warm_data import WarmExamples, warm_examples

__all__ = [
    "PROGRESS_EVERY_S",
    "batch_shape",
    "estimate_seconds",
    "fine_tune",
    "prepare_warm_start",
]

#: The longest wait between two progress lines of the warm start.
PROGRESS_EVERY_S: float = 60.0
#: The estimate's reference: SmolLM2-135M's warm start trained ≈ 144 tokens/s on 2 quiet cores
#: (47,516 tokens an epoch in 5.5 minutes, bench/train_wordle.py, 2026-12-07).
_TOKENS_PER_S: Final = 144.0
_REFERENCE_PARAMS: Final = 135_000_000
#: What to do when the warm adapter cannot be saved (a new run leaves no directory).
_SAVE_FAILED: Final = "nothing was kept; make room and run the same command again"

Echo = Callable[[str], None]
Stop = Callable[[], bool]


def batch_shape(examples: WarmExamples, replies_per_step: int) -> tuple[int, int]:
    """``(examples a pass, passes a step)``: about ``replies_per_step`` assistant replies an
    optimiser step (at least one example), as many examples a pass as fit :data:`PASS_TOKENS`
    padded tokens with the longest example."""
    n = len(examples)
    per_example = examples.turns / n if n else 1.0
    per_step = max(1, min(n, round(replies_per_step / max(per_example, 1.0))))
    longest = max((len(e) for e in examples.examples), default=1)
    per_pass = max(1, min(per_step, PASS_TOKENS // max(longest, 1)))
    return per_pass, math.ceil(per_step / per_pass)


def _dataset(examples: WarmExamples, datasets: Any) -> Any:
    """Tokenised rows (``input_ids``, ``labels``: -100 where the mask is 0)."""
    rows: dict[str, list[list[int]]] = {"input_ids": [], "labels": []}
    for example in examples.examples:
        rows["input_ids"].append(list(example.input_ids))
        rows["labels"].append(
            [t if m else -100 for t, m in zip(example.input_ids, example.mask, strict=True)]
        )
    return datasets.Dataset.from_dict(rows)


def estimate_seconds(tokens: int, epochs: int, params: int, device: str) -> float | None:
    """A first guess of a CPU warm start's seconds, before it measures itself: the tokens it
    trains at :data:`_TOKENS_PER_S` (SmolLM2-135M's on 2 cores), scaled by the model's size
    and the usable cores; None on an accelerator."""
    if device != "cpu" or tokens <= 0:
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    rate = _TOKENS_PER_S * max(1, cores or 1) / 2 * _REFERENCE_PARAMS / max(params, 1)
    return tokens * epochs / rate


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _progress_callback(
    transformers: Any, echo: Echo, stop: Stop | None, guess: float | None = None
) -> Any:
    """A TrainerCallback: before the first step, the steps to come and ``guess`` (the estimate
    of :func:`estimate_seconds`); then a progress line (step, epoch, loss, time spent and left)
    after the first step, at least every :data:`PROGRESS_EVERY_S` seconds and after the last;
    ``should_training_stop`` at the next step once ``stop()``."""

    class Progress(transformers.TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.started = self.last = time.monotonic()
            self.loss: float | None = None
            self.stopped_at: int | None = None
            self.shown = 0  # the last step a line was printed for (the end logs twice)

        def on_train_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            self.started = self.last = time.monotonic()
            about = f", about {_minutes(guess)} (a first guess" if guess is not None else ""
            about += "; the lines below measure it)" if guess is not None else ""
            echo(
                f"warm start: {plural(int(state.max_steps or 0), 'optimiser step')} over "
                f"{plural(int(args.num_train_epochs), 'epoch')}{about}"
            )

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any) -> None:
            if logs and "loss" in logs:
                self.loss = float(logs["loss"])
            total, step = int(state.max_steps or 0), int(state.global_step)
            now = time.monotonic()
            due = step == 1 or step == total or now - self.last >= PROGRESS_EVERY_S
            if step <= self.shown or not due or self.loss is None:
                return
            self.shown, self.last = step, now
            spent = now - self.started
            left = spent / step * (total - step)
            echo(
                f"warm start: step {step} of {total} (epoch {float(state.epoch or 0):.1f}), "
                f"loss {self.loss:.4f}, {spent:.0f}s, about {left:.0f}s left"
            )

        def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            if stop is not None and stop() and self.stopped_at is None:
                self.stopped_at = int(state.global_step)
                echo(f"warm start: stopping after step {state.global_step} of {state.max_steps}")
                control.should_training_stop = True

    return Progress()


def _sft_config(
    trl: Any, config: TrainConfig, out: Path, shape: tuple[int, int], longest: int, use_cpu: bool
) -> Any:
    per_pass, passes = shape
    # a long pass recomputes its activations (a 3,000-token episode keeps 5.4 GB otherwise)
    checkpointing = checkpoint_pass(per_pass, longest, forced=config.gradient_checkpointing)
    return trl.SFTConfig(
        output_dir=str(RunLayout(out.parent.parent).trainer / WARM_LABEL),
        use_cpu=use_cpu,
        per_device_train_batch_size=per_pass,
        gradient_accumulation_steps=passes,
        # short examples share a pass with others of about their length (less padding)
        train_sampling_strategy="group_by_length" if per_pass > 1 else "random",
        num_train_epochs=config.warm_start_epochs,
        learning_rate=config.warm_start_lr,
        dataset_kwargs={"skip_prepare_dataset": True},
        activation_checkpointing=checkpointing,
        **trainer_args(config.job.seed),
    )


def fine_tune(
    config: TrainConfig,
    loaded: LoadedModel,
    examples: WarmExamples,
    out: Path,
    *,
    echo: Echo = print,
    stop: Stop | None = None,
) -> dict[str, Any]:
    """Fine-tune a LoRA adapter of ``loaded.model`` on ``examples`` with TRL's SFTTrainer, save
    it to ``out`` and take the LoRA layers off the model again; return the figures (examples,
    turns, tokens an epoch, epochs, steps, first and last loss, seconds). Raises
    :class:`WarmStartStopped` (nothing saved, the LoRA layers removed) when ``stop()`` ended it."""
    from agent_kit.train.grpo import trainer_libraries

    trl, _, datasets, transformers = trainer_libraries()
    started = time.monotonic()
    shape = batch_shape(examples, config.micro())
    longest = max((len(e) for e in examples.examples), default=1)
    args = _sft_config(trl, config, out, shape, longest, loaded.device == "cpu")
    lora = lora_config(config.lora_r, config.lora_alpha)
    trainer = trl.SFTTrainer(
        model=loaded.model,
        args=args,
        train_dataset=_dataset(examples, datasets),
        processing_class=loaded.tokenizer,
        peft_config=lora,
    )
    trainer.remove_callback(transformers.PrinterCallback)
    params = sum(int(p.numel()) for p in loaded.model.parameters())
    guess = estimate_seconds(examples.tokens, config.warm_start_epochs, params, loaded.device)
    progress = _progress_callback(transformers, echo, stop, guess)
    trainer.add_callback(progress)
    try:
        trainer.train()
        if progress.stopped_at is None:  # whole or not at all; a full disk is one line, exit 14
            save_adapter(trainer.model, out, out.parent.parent, then=_SAVE_FAILED)
    finally:
        loaded.model = trainer.model.unload()  # the base model again, without LoRA layers
        loaded.model.eval()
        shutil.rmtree(args.output_dir, ignore_errors=True)  # the trainer's scratch folder
    if progress.stopped_at is not None:
        raise WarmStartStopped(
            f"the warm start was stopped after step {progress.stopped_at} of "
            f"{trainer.state.max_steps}; no adapter was saved"
        )
    losses = [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]
    return {
        "examples": len(examples),
        "turns": examples.turns,
        "tokens": examples.tokens,
        "epochs": config.warm_start_epochs,
        "steps": int(trainer.state.global_step),
        "examples_per_pass": shape[0],
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "seconds": time.monotonic() - started,
    }


def _max_tokens(loaded: LoadedModel, stated: int | None = None) -> int:
    """The longest example trained: ``--max-length`` (``stated``), else MAX_TOKENS; never more
    than the model's context."""
    from agent_kit.train.warm_data import MAX_TOKENS

    limit = stated or MAX_TOKENS
    context = getattr(getattr(loaded.model, "config", None), "max_position_embeddings", None)
    return min(limit, int(context)) if isinstance(context, int) else limit


def prepare_warm_start(
    config: TrainConfig,
    loaded: LoadedModel,
    run_dir: Path,
    echo: Echo,
    stop: Stop | None = None,
    recorded: Sequence[RecordedRun] = (),
) -> tuple[Path | None, dict[str, Any]]:
    """The warm adapter of a run, fine-tuned now unless the run already has it; ``(None, {})``
    without ``--warm-start``. ``recorded`` are its runs as
    :func:`~agent_kit.train.checks.check_inputs` checked them (else they are checked here).
    Returns the adapter folder and the warm start's figures."""
    if not config.warm_start:
        return None, {}
    out = RunLayout(run_dir).warm_adapter
    if (out / "adapter_config.json").is_file():
        echo(f"warm start: {out.relative_to(run_dir)} is already trained; GRPO continues from it")
        return out, {"reused": True}
    examples = warm_examples(
        recorded or config.warm_start,
        loaded.tokenizer,
        min_reward=config.warm_start_min_reward,
        max_tokens=_max_tokens(loaded, config.max_length),
    )
    for source in examples.sources:
        echo(
            f"warm start: {source['turns']} turns as {source['examples']} examples, of "
            f"{source['rollouts']} of the {source['rewarded']} rewarded rollouts of "
            f"{source['run']} (reward ≥ {source['min_reward']:g})"
        )
    for note in examples.notes:
        echo(note)
    figures = fine_tune(config, loaded, examples, out, echo=echo, stop=stop)
    first, last = figures["loss_first"], figures["loss_last"]
    loss = f"loss {first:.4f} → {last:.4f}" if first is not None and last is not None else "no loss"
    echo(
        f"warm start: {figures['examples']} examples ({figures['tokens']} tokens) × "
        f"{figures['epochs']} epochs, {loss}, {figures['seconds']:.1f}s, adapter "
        f"{out.relative_to(run_dir)}"
    )
    return out, {**figures, "sources": examples.sources}
