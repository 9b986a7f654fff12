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

And the process's heap: the training runs in several threads (the model loads and the warm
start trains in worker threads, the ``hf`` sampler samples in its own, TRL steps in another),
and glibc gives each thread that allocates its own heap (arena): what the warm start freed
stayed resident in its arena while the sampler and the GRPO step grew theirs. And a heap keeps
the pages a phase freed: the sampler's caches and a step's activations, interleaved, left the
resting size of a Wordle run at 4 GB after a few steps. :func:`bound_malloc` makes the threads
share one arena; :func:`release_free_memory` hands the free pages back to the system between
phases (after the warm start, a holdout, a step). Measured in ``bench/train_memory.py``.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Sequence
from typing import Any, Final

from agent_kit.settings import DEFAULTS

__all__ = [
    "CHECKPOINT_FROM",
    "CHECKPOINT_KWARGS",
    "LM_HEAD_TILE",
    "PASS_TOKENS",
    "bound_malloc",
    "checkpoint_pass",
    "pass_rows",
    "release_free_memory",
    "small_lm_head_tiles",
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


def _glibc(malloc: str) -> Any:
    """The process's C library where it is glibc on Linux and ``malloc`` is not ``"glibc"``
    (``AGENT_KIT_MALLOC=glibc`` leaves the C library's defaults: a bench's reference), else
    None."""
    if not sys.platform.startswith("linux") or malloc == "glibc":
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt, libc.malloc_trim  # noqa: B018 - both or neither
    except (OSError, AttributeError):
        return None
    return libc


def bound_malloc(malloc: str = DEFAULTS.malloc) -> bool:
    """Make the threads that allocate from now on share the C heap's one arena (glibc on Linux;
    False, nothing changed, elsewhere, where ``MALLOC_ARENA_MAX`` is set — the user's own
    choice stands — or ``malloc`` is ``"glibc"``: ``AGENT_KIT_MALLOC``). Call it before the
    threads that load and train the model start."""
    libc = _glibc(malloc)
    if libc is None or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    return bool(libc.mallopt(_M_ARENA_MAX, 1))


def release_free_memory(malloc: str = DEFAULTS.malloc) -> bool:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``): the resting size
    of the process falls to what it holds. False where nothing was released or can be (``malloc``
    as :func:`bound_malloc`'s)."""
    libc = _glibc(malloc)
    return libc is not None and bool(libc.malloc_trim(0))
