"""How many sequences one forward/backward pass holds, from their lengths, and when a pass
recomputes its activations (gradient checkpointing) instead of keeping them.

TRL computes the log-probabilities of a pass through a fused LM head (only the scored positions,
in tiles: the ``(batch, length, vocabulary)`` logits are never materialised), so what a pass
keeps for the backward is the model's activations: about 1.8 MB a token for SmolLM2-135M in
float32 (one 3,000-token Wordle rollout: 5.4 GB). Two bounds follow:

- a pass holds at most :data:`PASS_TOKENS` padded tokens (rows × the longest row): the rows of a
  micro-batch are split, in order, into passes that fit (:func:`pass_rows`); a row longer than
  the budget passes alone;
- a pass of more than :data:`CHECKPOINT_FROM` padded tokens recomputes its activations in the
  backward (gradient checkpointing: it keeps each layer's input, ≈ 70 kB a token, at about a
  third more compute); shorter passes (a one-turn task) keep them, as before (at most ≈ 0.9 GB
  for SmolLM2-135M: a one-arena Wordle run, docs/train.md, peaked at the 1.3 GB of a 737-token
  episode kept whole when the bound was 1,024);
- on a CPU, ``agent-kit train`` gives TRL's fused LM head smaller tiles (:data:`LM_HEAD_TILE`,
  set at the command's door through :func:`agent_kit.model.seam.set_lm_head_tiles`): its
  default tile, 4,096 tokens × 32,768 vocabulary entries in float32 (512 MB, with temporaries
  of its size), was most of a long pass's peak. Measured on SmolLM2-135M, one 3,000-token
  sequence, forward and backward with LoRA r 16: 7.6 GB peak RSS as it was, 6.9 GB with
  checkpointing, **3.9 GB** with checkpointing and the small tiles (2.2 GB of it is the model
  as loaded).

The process's own settings that bear on memory (the C heap's arenas and their free pages, the
LM head's tiles) are set by the command at its door (:mod:`agent_kit.cli.process`), never here:
a library caller's process is left as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

__all__ = [
    "CHECKPOINT_FROM",
    "CHECKPOINT_KWARGS",
    "LM_HEAD_TILE",
    "PASS_TOKENS",
    "checkpoint_pass",
    "pass_rows",
    "trainer_args",
]

#: The most padded tokens (rows × the longest row) one forward/backward pass holds.
PASS_TOKENS: Final = 4096
#: A pass of more padded tokens than this recomputes its activations (gradient checkpointing).
CHECKPOINT_FROM: Final = 512
#: How a checkpointed pass recomputes (``torch.utils.checkpoint``'s ``use_reentrant``): the
#: reentrant form keeps far less. Measured on SmolLM2-135M with LoRA r 16, one 2,000-token
#: sequence forward and backward: 0.35 GB above the loaded model reentrant, 1.3 GB not (4,000
#: tokens not reentrant: 2.2–2.9 GB, what pushed a Wordle GRPO step past 5 GB); the LoRA
#: gradients are the same (tests/train/test_passes.py).
CHECKPOINT_KWARGS: Final = {"use_reentrant": True}
#: The fused LM head's tile on a CPU: (tokens, vocabulary entries), 16 MB in float32.
LM_HEAD_TILE: Final = (512, 8192)


def trainer_args(seed: int) -> dict[str, Any]:
    """The TRL trainer arguments GRPO and the warm start share: a constant learning rate, a log
    line a step, no checkpoints, reports or progress bars, float32, every column kept, no
    loader workers, reentrant checkpointing (:data:`CHECKPOINT_KWARGS`), and ``seed``."""
    return {
        "lr_scheduler_type": "constant",
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "seed": seed,
        "disable_tqdm": True,
        "bf16": False,
        "remove_unused_columns": False,
        "dataloader_num_workers": 0,
        "activation_checkpointing_kwargs": dict(CHECKPOINT_KWARGS),
    }


def pass_rows(lengths: Sequence[int], budget: int = PASS_TOKENS) -> list[list[int]]:
    """The row indices of a micro-batch split, in order, into passes of at most ``budget``
    padded tokens each (rows × the longest row of the pass); a row longer than ``budget``
    passes alone. Every row is in exactly one pass."""
    passes: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for index, length in enumerate(lengths):
        wider = max(longest, int(length))
        if current and wider * (len(current) + 1) > budget:
            passes.append(current)
            current, wider = [], int(length)
        current.append(index)
        longest = wider
    if current:
        passes.append(current)
    return passes


def checkpoint_pass(rows: int, longest: int, *, forced: bool = False) -> bool:
    """Whether a pass of ``rows`` rows padded to ``longest`` tokens recomputes its activations:
    always when ``forced`` (``gradient_checkpointing`` asked for), else above
    :data:`CHECKPOINT_FROM` padded tokens."""
    return forced or rows * longest > CHECKPOINT_FROM
