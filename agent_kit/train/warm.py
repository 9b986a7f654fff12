"""The warm start: supervised fine-tuning of the LoRA adapter on good recorded episodes, before
GRPO.

A base model that never calls a tool scores every rollout alike: GRPO has no gradient. The warm
start teaches it the agent's moves first, from runs recorded with any policy (``scripted:`` an
expert, ``openai:`` a teacher, ``hf:`` the model's own best-of-n):

1. **Examples** (:func:`warm_examples`): every rewarded rollout of each ``--warm-start RUN_DIR``
   whose reward reaches the minimum (``--warm-start-min-reward``; default: the run's success
   threshold where its job recorded one, else its top quarter: the 75th percentile of its
   rewards) gives one example per turn, from the run store's turn rows: the request's messages
   and tools rendered as the ``hf`` policy renders a prompt, and the recorded response written
   as the policy would emit it (tool calls in the model's syntax, then the end-of-turn token),
   both through :mod:`agent_kit.model.chat`.
2. **Fine-tuning** (:func:`fine_tune`): TRL's ``SFTTrainer`` on the tokenised examples with a
   completion mask (``completion_only_loss``: system, user and tool tokens are masked; the loss
   covers the assistant's tokens only) and the same PEFT LoRA adapter GRPO trains (rank, alpha,
   ``q/k/v/o_proj``); ``--warm-start-epochs`` epochs at ``--warm-start-lr``.
3. The adapter is saved as ``adapters/warm`` and the model's LoRA layers are removed again; GRPO
   then continues from that adapter. A run that already holds ``adapters/warm`` (``--resume``)
   does not fine-tune again.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from agent_kit.emulator.chat_request import flatten_content
from agent_kit.errors import UsageError
from agent_kit.model.chat import ChatFormat, chat_format, completion_text
from agent_kit.model.loading import LoadedModel
from agent_kit.model.lora import lora_config
from agent_kit.reporting.summary_schema import flat_config
from agent_kit.store import RunStore, load_rollouts
from agent_kit.store.layout import RunLayout
from agent_kit.store.rows import TurnRow
from agent_kit.train.config import TrainConfig

__all__ = ["WARM_LABEL", "WarmExamples", "fine_tune", "prepare_warm_start", "warm_examples"]

#: The warm start's name: its adapter folder (``adapters/warm``) and its holdout evaluation.
WARM_LABEL: Final = "warm"

Echo = Callable[[str], None]


@dataclass
class WarmExamples:
    """The supervised examples of a warm start: prompt and completion texts, one per recorded
    assistant turn, and per source run what was taken (``run``, ``min_reward``, ``rollouts``
    taken of ``rewarded``, ``examples``)."""

    prompts: list[str] = field(default_factory=list)
    completions: list[str] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.prompts)


def _threshold(rewards: Sequence[float], recorded: Any, given: float | None) -> float:
    """The minimum reward taken (see the module docstring)."""
    if given is not None:
        return given
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool):
        return float(recorded)
    ordered = sorted(rewards)
    return ordered[min(len(ordered) - 1, math.floor(0.75 * len(ordered)))]


def _reply(row: TurnRow) -> dict[str, Any] | None:
    """The assistant message a turn row's response holds, or None (no answer recorded)."""
    choices = row.response.get("choices") if isinstance(row.response, dict) else None
    if not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message") or {}
    reply: dict[str, Any] = {
        "role": "assistant",
        "content": flatten_content(message.get("content")),
    }
    if message.get("tool_calls"):
        reply["tool_calls"] = message["tool_calls"]
    return reply


def _turn_example(tokenizer: Any, fmt: ChatFormat, row: TurnRow) -> tuple[str, str] | None:
    reply = _reply(row)
    messages = row.request.get("messages") if isinstance(row.request, dict) else None
    if reply is None or not isinstance(messages, list):
        return None
    flat = [{**m, "content": flatten_content(m.get("content"))} for m in messages]
    tools = row.request.get("tools") or []
    return completion_text(tokenizer, fmt, flat, tools, reply)


def warm_examples(
    runs: Sequence[Path], tokenizer: Any, *, min_reward: float | None = None
) -> WarmExamples:
    """The examples of the runs' good rollouts (see the module docstring); a UsageError names a
    run that is not one, or one no rollout of which reaches the minimum."""
    fmt = chat_format(tokenizer)
    examples = WarmExamples()
    for run in runs:
        if not RunLayout(run).store.is_file():
            raise UsageError(f"--warm-start {run}: not a run directory (no run.sqlite)")
        store = RunStore.open(run, readonly=True)
        try:
            job = store.list_jobs()[-1]
            rollouts = [
                r for r in load_rollouts(store, job.arn, with_turns=True) if r.reward is not None
            ]
        finally:
            store.close()
        rewards = [float(r.reward) for r in rollouts if r.reward is not None]
        if not rewards:
            raise UsageError(f"--warm-start {run}: the run has no rewarded rollout")
        recorded = flat_config(job.config).get("success_threshold")
        threshold = _threshold(rewards, recorded, min_reward)
        good = [r for r in rollouts if r.reward is not None and r.reward >= threshold]
        if not good:
            raise UsageError(
                f"--warm-start {run}: no rollout reaches reward {threshold:g} (best "
                f"{max(rewards):g}); lower --warm-start-min-reward"
            )
        before = len(examples)
        for rollout in good:
            for row in rollout.turn_rows:
                pair = _turn_example(tokenizer, fmt, row)
                if pair is not None:
                    examples.prompts.append(pair[0])
                    examples.completions.append(pair[1])
        examples.sources.append(
            {
                "run": str(run),
                "min_reward": threshold,
                "rollouts": len(good),
                "rewarded": len(rollouts),
                "examples": len(examples) - before,
            }
        )
    if not examples.prompts:
        raise UsageError("--warm-start: the chosen rollouts hold no recorded assistant turn")
    return examples


def _dataset(tokenizer: Any, examples: WarmExamples, datasets: Any) -> Any:
    """Tokenised rows (``input_ids``, ``completion_mask``, ``labels``): the prompt masked (label
    -100), the reply not."""
    rows: dict[str, list[list[int]]] = {"input_ids": [], "completion_mask": [], "labels": []}
    for prompt, completion in zip(examples.prompts, examples.completions, strict=True):
        head = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        tail = tokenizer(completion, add_special_tokens=False)["input_ids"]
        rows["input_ids"].append([*head, *tail])
        rows["completion_mask"].append([0] * len(head) + [1] * len(tail))
        rows["labels"].append([-100] * len(head) + list(tail))
    return datasets.Dataset.from_dict(rows)


def fine_tune(
    config: TrainConfig, loaded: LoadedModel, examples: WarmExamples, out: Path
) -> dict[str, Any]:
    """Fine-tune a LoRA adapter of ``loaded.model`` on ``examples`` with TRL's SFTTrainer, save
    it to ``out`` and take the LoRA layers off the model again; return the figures (examples,
    epochs, first and last loss, seconds)."""
    from agent_kit.train.grpo import quiet_trainer_libraries

    trl, _, datasets, transformers = quiet_trainer_libraries()
    started = time.monotonic()
    data = _dataset(loaded.tokenizer, examples, datasets)
    args = trl.SFTConfig(
        output_dir=str(RunLayout(out.parent.parent).trainer / WARM_LABEL),
        use_cpu=loaded.device == "cpu",
        # One example a pass, gradients accumulated over the micro-batch: a long multi-turn
        # prompt's full-vocabulary logits are what bounds the memory (Wordle: 9 GB at 4 a pass).
        per_device_train_batch_size=1,
        gradient_accumulation_steps=min(config.micro(), len(examples)),
        num_train_epochs=config.warm_start_epochs,
        learning_rate=config.warm_start_lr,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=config.job.seed,
        disable_tqdm=True,
        bf16=False,
        completion_only_loss=True,
        dataset_kwargs={"skip_prepare_dataset": True},
        remove_unused_columns=False,
        dataloader_num_workers=0,
        activation_checkpointing=config.gradient_checkpointing,
    )
    lora = lora_config(config.lora_r, config.lora_alpha)
    trainer = trl.SFTTrainer(
        model=loaded.model,
        args=args,
        train_dataset=data,
        processing_class=loaded.tokenizer,
        peft_config=lora,
    )
    trainer.remove_callback(transformers.PrinterCallback)
    trainer.train()
    trainer.model.save_pretrained(str(out))
    losses = [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]
    loaded.model = trainer.model.unload()  # the base model again, without LoRA layers
    loaded.model.eval()
    return {
        "examples": len(examples),
        "epochs": config.warm_start_epochs,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "seconds": time.monotonic() - started,
    }


def prepare_warm_start(
    config: TrainConfig, loaded: LoadedModel, run_dir: Path, echo: Echo
) -> tuple[Path | None, dict[str, Any]]:
    """The warm adapter of a run, fine-tuned now unless the run already has it; ``(None, {})``
    without ``--warm-start``. Returns the adapter folder and the warm start's figures."""
    if not config.warm_start:
        return None, {}
    out = RunLayout(run_dir).warm_adapter
    if (out / "adapter_config.json").is_file():
        echo(f"warm start: {out.relative_to(run_dir)} is already trained; GRPO continues from it")
        return out, {"reused": True}
    examples = warm_examples(
        config.warm_start, loaded.tokenizer, min_reward=config.warm_start_min_reward
    )
    for source in examples.sources:
        echo(
            f"warm start: {source['examples']} turns of {source['rollouts']} of the "
            f"{source['rewarded']} rewarded rollouts of {source['run']} "
            f"(reward ≥ {source['min_reward']:g})"
        )
    figures = fine_tune(config, loaded, examples, out)
    echo(
        f"warm start: {figures['examples']} examples × {figures['epochs']} epochs, loss "
        f"{figures['loss_first']:.4f} → {figures['loss_last']:.4f}, {figures['seconds']:.1f}s, "
        f"adapter {out.relative_to(run_dir)}"
    )
    return out, {**figures, "sources": examples.sources}
