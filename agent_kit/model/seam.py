"""agent_kit's one seam with the internals of TRL and transformers.

Pinned: **trl 1.16.0, transformers 5.25.0, peft 0.21.2** (:data:`PINNED`, as constraints.txt pins
them). Everywhere else agent_kit uses these libraries through their public API (configs,
trainers and callbacks, ``from_pretrained``, PEFT's adapters, ``DynamicCache``, the logging
switches); every use of what they do not publish is here, one sentence each on why, and
``tests/model/test_seam.py`` checks each against the installed versions (:func:`missing`), so
an upgrade that renames one fails there, loudly, before training breaks silently. PEFT is used
through its public API only.

TRL
  - ``trl.kernels.chunked_logprob.TOKEN_CHUNK_SIZE`` and
    ``trl.trainer.utils._CHUNKED_LOGPROB_CHUNK_SIZE`` (module constants, no setting): the fused
    LM head's tile (tokens × vocabulary entries); a CPU's small tiles bound a long pass's memory
    (:func:`set_lm_head_tiles`, called by the CLI's process door, never by the library).
  - ``GRPOTrainer.compute_loss`` overridden (:func:`pass_split_trainer`): TRL's micro-batch size
    is fixed when the trainer is built, while a step's padded width is known only when its
    rollouts are in, so only a split at run time keeps a pass under a padded-token budget while
    short rows still share one pass. It reads TRL's micro-batch layout (``prompt_ids`` and
    ``completion_ids`` padded to one width; per-row tensors and lists sliced by row, whole-batch
    values such as ``num_items_in_batch`` kept: :func:`_rows`); it relies on
    ``loss_is_scaled_for_ga`` being True (transformers' documented class attribute: the ``dapo``
    loss TRL returns is already normalised over the step, so a pass's loss is backwarded as it
    is, as ``Trainer.training_step`` does with the last) and calls ``accelerator.backward`` on
    each pass but the last (what frees its activations before the next pass runs).
  - TRL's own features serve the rest, through its public API: the ``rollout_func`` hook and its
    ``env_mask`` (the environment's tokens out of the loss), the fused LM head's chunked
    log-probabilities, gradient accumulation over a step's micro-batches
    (``gradient_accumulation_steps``), activation checkpointing's arguments; the warm start's
    ``SFTTrainer`` uses nothing else (it shares the LM head tiles above).

transformers
  - ``transformers.modeling_gguf_pytorch_utils.tqdm``: the GGUF de-quantising loop calls tqdm
    directly, past ``disable_progress_bar()``; it is a pass-through while a GGUF model loads
    (:func:`quiet_gguf_load`).
  - A ``DynamicCache``'s ``layers`` (``transformers.cache_utils.DynamicLayer``) and their
    ``keys``/``values`` tensors, rewritten in place: continuous batching left-pads a newcomer's
    cache onto the running batch's, cuts the columns no row needs and zeroes the padding's NaN,
    which no public method does (:func:`plain_cache`, :func:`zero_padding`,
    :func:`merge_caches`, :func:`cut_caches`); the prefix store reads one row's last columns
    out of them (:func:`row_states`) and builds a cache from kept ones with the public
    ``DynamicCache(ddp_cache_data=...)`` (:func:`cache_of`).

torch and PEFT
  - A tensor's ``_version`` (its in-place write counter: ``copy_`` or a loaded state bumps it;
    a fused optimiser step does not, hence the step count below) and PEFT tuner layers'
    ``disable_adapters`` and ``active_adapters`` properties: no public API says whether a
    model's weights changed since a key/value cache was computed, which the prefix store must
    know (:func:`weights_version`, with the optimiser steps counted by torch's public global
    post-step hook while a sampler watches: :func:`watch_optimizer_steps`).

Nothing here imports torch, transformers or TRL at import time.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, Final

__all__ = [
    "PINNED",
    "cache_of",
    "cut_caches",
    "lm_head_tiles",
    "merge_caches",
    "missing",
    "pass_split_trainer",
    "plain_cache",
    "quiet_gguf_load",
    "row_states",
    "set_lm_head_tiles",
    "unwatch_optimizer_steps",
    "watch_optimizer_steps",
    "weights_version",
    "zero_padding",
]

#: The versions this seam was written and tested against (constraints.txt).
PINNED: Final = {"trl": "1.16.0", "transformers": "5.25.0", "peft": "0.21.2"}

#: Module attributes used here: (module, attribute).
_ATTRIBUTES: Final = (
    ("trl.kernels.chunked_logprob", "TOKEN_CHUNK_SIZE"),
    ("trl.trainer.utils", "_CHUNKED_LOGPROB_CHUNK_SIZE"),
    ("transformers.modeling_gguf_pytorch_utils", "tqdm"),
    ("transformers.cache_utils", "DynamicLayer"),
)

Plan = Callable[[int, int], Sequence[tuple[Sequence[int], bool]]]
"""``(rows, padded width) -> [(row indices, checkpointed), ...]``: a micro-batch's passes."""


def missing() -> list[str]:
    """The internals named in the module docstring that the installed libraries lack (empty:
    the seam holds)."""
    gone: list[str] = []
    for module_name, attribute in _ATTRIBUTES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            gone.append(module_name)
            continue
        if not hasattr(module, attribute):
            gone.append(f"{module_name}.{attribute}")
    trl = importlib.import_module("trl")
    if getattr(trl.GRPOTrainer, "loss_is_scaled_for_ga", None) is not True:
        gone.append("trl.GRPOTrainer.loss_is_scaled_for_ga is True")
    layer = importlib.import_module("transformers.cache_utils").DynamicLayer()
    gone += [f"DynamicLayer.{a}" for a in ("keys", "values") if not hasattr(layer, a)]
    if not isinstance(getattr(importlib.import_module("torch").zeros(1), "_version", None), int):
        gone.append("torch.Tensor._version")
    return gone


# --- TRL ------------------------------------------------------------------------------------


def lm_head_tiles() -> tuple[int, int] | None:
    """TRL's fused LM head tile, ``(tokens, vocabulary entries)``; None where this TRL has none."""
    try:
        from trl.kernels import chunked_logprob
        from trl.trainer import utils
    except ImportError:
        return None
    tokens = getattr(chunked_logprob, "TOKEN_CHUNK_SIZE", None)
    vocabulary = getattr(utils, "_CHUNKED_LOGPROB_CHUNK_SIZE", None)
    if not isinstance(tokens, int) or not isinstance(vocabulary, int):
        return None
    return tokens, vocabulary


def set_lm_head_tiles(tiles: tuple[int, int]) -> tuple[int, int] | None:
    """Make TRL's fused LM head (used by its GRPO and SFT trainers) work in ``tiles``; return
    the tiles it had (None, nothing changed, where this TRL has none). The tile changes the
    memory, not the figures."""
    previous = lm_head_tiles()
    if previous is None:
        return None
    from trl.kernels import chunked_logprob
    from trl.trainer import utils

    chunked_logprob.TOKEN_CHUNK_SIZE, utils._CHUNKED_LOGPROB_CHUNK_SIZE = tiles
    return previous


def _rows(inputs: dict[str, Any], rows: Sequence[int], batch: int) -> dict[str, Any]:
    """The ``rows`` (consecutive) of a micro-batch's inputs: tensors and lists of ``batch`` rows
    sliced, the rest (such as ``num_items_in_batch``) as they are."""
    out: dict[str, Any] = {}
    for key, value in inputs.items():
        shape = getattr(value, "shape", None)
        rowed = isinstance(value, list) and len(value) == batch
        if rowed or (shape is not None and len(shape) >= 1 and shape[0] == batch):
            out[key] = value[rows[0] : rows[-1] + 1]
        else:
            out[key] = value
    return out


def pass_split_trainer(trl: Any, plan: Plan, checkpointing: Callable[[Any, bool], None]) -> Any:
    """A ``GRPOTrainer`` subclass whose micro-batch runs as the passes ``plan`` gives for its
    rows and padded width, ``checkpointing(model, on)`` switching the model's activation
    checkpointing before each pass (and off after the last one's forward). The ``dapo`` loss
    is a token sum over the step divided by its token count, so the passes' gradients add up
    to the micro-batch's. See the module docstring for what this relies on."""
    if getattr(trl.GRPOTrainer, "loss_is_scaled_for_ga", None) is not True:
        raise RuntimeError(
            "this TRL's GRPOTrainer does not scale its loss for gradient accumulation itself "
            f"(loss_is_scaled_for_ga); agent_kit's pass split is written for trl {PINNED['trl']}"
        )

    class PassTrainer(trl.GRPOTrainer):  # type: ignore[misc]
        def compute_loss(
            self,
            model: Any,
            inputs: Any,
            return_outputs: bool = False,
            num_items_in_batch: Any = None,
        ) -> Any:
            batch = inputs["completion_ids"].shape[0]
            width = inputs["prompt_ids"].shape[1] + inputs["completion_ids"].shape[1]
            passes = plan(batch, width)
            done = None  # the earlier passes' losses (their backward is done)
            for index, (rows, long) in enumerate(passes):
                checkpointing(self.model, long)
                part = inputs if len(passes) == 1 else _rows(inputs, rows, batch)
                loss = super().compute_loss(model, part, return_outputs, num_items_in_batch)
                if index == len(passes) - 1:
                    # off again once its forward ran (its backward recomputes all the same):
                    # TRL's next scoring pass would turn it off through a deprecated call
                    checkpointing(self.model, False)
                    return loss if done is None else loss + done
                # the backward training_step gives the returned loss, now: frees the activations
                self.accelerator.backward(loss)
                done = loss.detach() if done is None else done + loss.detach()
            return done

    return PassTrainer


# --- transformers ---------------------------------------------------------------------------


@contextlib.contextmanager
def quiet_gguf_load(gguf: bool) -> Iterator[None]:
    """Keep transformers' GGUF de-quantising bar off the terminal while a GGUF file loads (its
    module's ``tqdm`` a pass-through meanwhile, put back after)."""
    if not gguf:
        yield
        return
    gguf_utils: Any = importlib.import_module("transformers.modeling_gguf_pytorch_utils")

    def passthrough(iterable: Any, *_: Any, **__: Any) -> Any:
        return iterable

    saved = gguf_utils.tqdm
    gguf_utils.tqdm = passthrough
    try:
        yield
    finally:
        gguf_utils.tqdm = saved


def plain_cache(model: Any) -> bool:
    """Whether ``model``'s cache is plain growing key/value layers (what re-aligning needs)."""
    import transformers

    try:
        cache = transformers.DynamicCache(config=model.config)
        layer_type = transformers.cache_utils.DynamicLayer
    except (AttributeError, TypeError, ValueError):
        return False
    return all(type(layer) is layer_type for layer in cache.layers)


def zero_padding(cache: Any) -> None:
    """Replace the NaN a padding query leaves in ``cache`` (it attends to nothing; masked
    anyway) by zeros."""
    import torch

    for layer in cache.layers:
        layer.keys = torch.nan_to_num(layer.keys, nan=0.0)
        layer.values = torch.nan_to_num(layer.values, nan=0.0)


def merge_caches(mine: Any, theirs: Any, old: int, new: int) -> None:
    """Append ``theirs``'s rows to ``mine``, ``mine`` left-padded by ``old`` columns and
    ``theirs`` by ``new`` (so both are as wide)."""
    import torch

    pad = torch.nn.functional.pad
    for one, two in zip(mine.layers, theirs.layers, strict=True):
        one.keys = torch.cat([pad(one.keys, (0, 0, old, 0)), pad(two.keys, (0, 0, new, 0))])
        one.values = torch.cat([pad(one.values, (0, 0, old, 0)), pad(two.values, (0, 0, new, 0))])


def cut_caches(cache: Any, cut: int) -> None:
    """Drop the ``cut`` leading columns of every layer of ``cache``."""
    for layer in cache.layers:
        layer.keys = layer.keys[:, :, cut:]
        layer.values = layer.values[:, :, cut:]


def row_states(cache: Any, row: int, length: int) -> tuple[tuple[Any, Any], ...]:
    """Each layer's ``(keys, values)`` of ``cache``'s batch row ``row``, its last ``length``
    columns, copied (one row: they outlive the batch's tensors)."""
    return tuple(
        (
            layer.keys[row : row + 1, :, -length:].clone(),
            layer.values[row : row + 1, :, -length:].clone(),
        )
        for layer in cache.layers
    )


def cache_of(model: Any, states: Sequence[tuple[Any, Any]], length: int) -> Any:
    """A ``DynamicCache`` for ``model`` holding the first ``length`` columns of ``states`` (one
    row's keys and values per layer); the kept tensors are never written (the cache grows by
    concatenation)."""
    import transformers

    kept = [(keys[:, :, :length], values[:, :, :length]) for keys, values in states]
    return transformers.DynamicCache(ddp_cache_data=kept, config=model.config)


class _StepCount:
    """The optimiser steps taken in this process while a sampler watches (torch's global
    post-step hook, registered while :attr:`watchers` > 0)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.steps = 0
        self.watchers = 0
        self.handle: Any = None

    def count(self, *_: Any) -> None:
        self.steps += 1


_STEPS: Final = _StepCount()


def watch_optimizer_steps() -> None:
    """Count every optimiser step of this process from now on (for :func:`weights_version`),
    until as many :func:`unwatch_optimizer_steps` calls as calls to this one."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    with _STEPS.lock:
        _STEPS.watchers += 1
        if _STEPS.handle is None:
            _STEPS.handle = register_optimizer_step_post_hook(_STEPS.count)


def unwatch_optimizer_steps() -> None:
    """One watcher less; the hook goes with the last (the process as it was)."""
    with _STEPS.lock:
        _STEPS.watchers = max(0, _STEPS.watchers - 1)
        if _STEPS.watchers == 0 and _STEPS.handle is not None:
            _STEPS.handle.remove()
            _STEPS.handle = None


def weights_version(model: Any) -> Hashable:
    """What identifies ``model``'s weights as they are now: the optimiser steps taken while
    watched (:func:`watch_optimizer_steps`), each parameter's identity and in-place version,
    and each PEFT adapter layer's switch and active adapters (``disable_adapter()``,
    ``set_adapter()``). Equal values: the same weights."""
    params = tuple((id(p), p._version) for p in model.parameters())
    adapters = []
    for module in model.modules():
        disabled = getattr(module, "disable_adapters", None)
        if isinstance(disabled, bool):  # a PEFT tuner layer (a model's method is not a bool)
            active = getattr(module, "active_adapters", ())
            adapters.append((disabled, tuple(active) if isinstance(active, list | tuple) else ()))
    return hash((_STEPS.steps, params, tuple(adapters)))
