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
  for SmolLM2-135M: a one-arena Wordle run, below, peaked at the 1.3 GB of a 737-token episode
  kept whole when the bound was 1,024);
- on a CPU, TRL's fused LM head works in smaller tiles (:func:`small_lm_head_tiles`): its
  default tile, 4,096 tokens × 32,768 vocabulary entries in float32 (512 MB, with temporaries
  of its size), was most of a long pass's peak. Measured on SmolLM2-135M, one 3,000-token
  sequence, forward and backward with LoRA r 16: 7.6 GB peak RSS as it was, 6.9 GB with
  checkpointing, **3.9 GB** with checkpointing and the small tiles (2.2 GB of it is the model
  as loaded).

And one bound of the process: the training runs in several threads (the model loads and the
warm start trains in worker threads, the ``hf`` sampler in its own), and glibc gives each
thread that allocates its own heap (arena): what the warm start freed stayed resident in its
arena while the sampler and the GRPO step grew theirs. :func:`one_malloc_arena` makes them
share one, so a phase reuses what the last one freed. Measured on a reduced Wordle run (warm
start on 4 episodes, holdouts, one GRPO step): 4.8 GB peak RSS with an arena a thread, 3.2 GB
with one, no slower.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Sequence
from typing import Final

__all__ = [
    "CHECKPOINT_FROM",
    "LM_HEAD_TILE",
    "PASS_TOKENS",
    "checkpoint_pass",
    "one_malloc_arena",
    "pass_rows",
    "small_lm_head_tiles",
]

#: The most padded tokens (rows × the longest row) one forward/backward pass holds.
PASS_TOKENS: Final = 4096
#: A pass of more padded tokens than this recomputes its activations (gradient checkpointing).
CHECKPOINT_FROM: Final = 512
#: The fused LM head's tile on a CPU: (tokens, vocabulary entries), 16 MB in float32.
LM_HEAD_TILE: Final = (512, 8192)


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


def small_lm_head_tiles() -> bool:
    """Make TRL's fused LM head (log-probabilities without the full logits, used by its GRPO and
    SFT trainers) work in :data:`LM_HEAD_TILE` tiles; False (nothing changed) where this TRL has
    no such tiles. The tile size changes the memory, not the figures."""
    try:
        from trl.kernels import chunked_logprob
        from trl.trainer import utils
    except ImportError:
        return False
    if not hasattr(chunked_logprob, "TOKEN_CHUNK_SIZE") or not hasattr(
        utils, "_CHUNKED_LOGPROB_CHUNK_SIZE"
    ):
        return False
    chunked_logprob.TOKEN_CHUNK_SIZE, utils._CHUNKED_LOGPROB_CHUNK_SIZE = LM_HEAD_TILE
    return True


#: glibc's ``mallopt`` parameter for the most heaps (arenas) the threads may have.
_M_ARENA_MAX: Final = -8


def one_malloc_arena() -> bool:
    """Make the threads that allocate from now on share the C heap's one arena (glibc on Linux;
    False, nothing changed, elsewhere or where ``MALLOC_ARENA_MAX`` is set: the user's own
    choice stands). Call it before the threads that load and train the model start."""
    if not sys.platform.startswith("linux") or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, 1))
