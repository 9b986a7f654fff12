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
  third more compute); shorter passes (a one-turn task) keep them, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

__all__ = ["CHECKPOINT_FROM", "PASS_TOKENS", "checkpoint_pass", "pass_rows"]

#: The most padded tokens (rows × the longest row) one forward/backward pass holds.
PASS_TOKENS: Final = 4096
#: A pass of more padded tokens than this recomputes its activations (gradient checkpointing).
CHECKPOINT_FROM: Final = 1024


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
