"""The one LoRA configuration: which layers the adapter wraps and how, for the warm start
(:mod:`agent_kit.train.warm`) and GRPO (:mod:`agent_kit.train.grpo`) alike, so that the adapter
the warm start saves is the adapter GRPO goes on training."""

from __future__ import annotations

from typing import Any, Final

from agent_kit.errors import UsageError
from agent_kit.model.loading import TRAIN_HINT

__all__ = ["LORA_TARGETS", "lora_config"]

#: The attention projections the adapter wraps (Llama-style module names).
LORA_TARGETS: Final = ("q_proj", "k_proj", "v_proj", "o_proj")


def lora_config(rank: int, alpha: int | None = None) -> Any:
    """A PEFT ``LoraConfig`` of ``rank`` on :data:`LORA_TARGETS` for a causal LM; ``alpha``
    defaults to twice the rank; no dropout. UsageError naming the install when peft is
    missing."""
    try:
        import peft
    except ImportError as exc:
        raise UsageError(f"LoRA needs peft: {TRAIN_HINT} ({exc})") from None
    return peft.LoraConfig(
        r=rank,
        lora_alpha=alpha or 2 * rank,
        lora_dropout=0.0,
        target_modules=list(LORA_TARGETS),
        task_type="CAUSAL_LM",
    )
