"""The token draw and the one-sequence reference sampler.

:func:`pick` draws one token from a row of logits: greedy at temperature 0, else from the
temperature-scaled distribution, cut to the top-p nucleus, with the row's own generator; it
returns the token and its log-probability under the sampling temperature (what a trainer's
importance ratio compares with). The draw is one uniform number from the generator placed on the
distribution's running total, in vocabulary order and double precision (:func:`draw_index`):
``torch.multinomial`` draws the same distribution but took 1.1 ms a draw over a 49k-token
vocabulary on a CPU, twenty times the rest of the draw (an echo training step draws 768). The
continuous batch (:class:`~agent_kit.model.batch.BatchSampler`) and :func:`sample_alone` both
draw with it, so a turn samples the same tokens whichever samples it.

:func:`sample_alone` samples one sequence token by token with a key/value cache: the reference
the batched sampler is tested against (its tokens, and its log-probabilities up to float
rounding). torch is imported when a function runs (the model was loaded, so it is there).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

from agent_kit.model.batch import Pick
from agent_kit.model.loading import LoadedModel

__all__ = ["draw_index", "pick", "sample_alone"]


def pick(logits: Any, temperature: float, top_p: float, generator: Any) -> tuple[int, float]:
    """One draw from a row of ``logits`` (see the module docstring): ``(token, log-prob)``."""
    import torch

    if temperature <= 0:
        token = int(torch.argmax(logits))
        return token, float(torch.log_softmax(logits, -1)[token])
    logp = torch.log_softmax(logits / temperature, -1)
    probs = logp.exp()
    if top_p < 1.0:
        # the nucleus is cut in sorted order but drawn from in vocabulary order, so that
        # float noise reordering near-equal probabilities cannot change the draw
        sorted_probs, order = torch.sort(probs, descending=True)
        keep = (torch.cumsum(sorted_probs, 0) - sorted_probs) < top_p
        probs = torch.zeros_like(probs).index_put_((order[keep],), sorted_probs[keep])
    token = draw_index(probs, generator)
    return token, float(logp[token])


def draw_index(probs: Any, generator: Any) -> int:
    """An index of ``probs`` (non-negative weights, not all zero) drawn in proportion to them:
    the first whose running total exceeds a uniform draw from ``generator`` times the total. A
    zero weight is never drawn; float rounding of the weights moves a draw only when it falls
    within that rounding of a boundary between two indices."""
    import torch

    totals = torch.cumsum(probs, 0, dtype=torch.float64)
    point = torch.rand(1, generator=generator, dtype=torch.float64, device=probs.device)
    index = int(torch.searchsorted(totals, point * totals[-1], right=True))
    if index >= probs.shape[0]:  # the draw rounded up to the total: the last weighted index
        index = int(torch.nonzero(probs)[-1])
    return index


def sample_alone(
    loaded: LoadedModel,
    prompt_ids: Sequence[int],
    *,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    seed: int,
    stop_ids: Iterable[int],
    stop: threading.Event | None = None,
    draw: Pick = pick,
) -> tuple[list[int], list[float]]:
    """Sample a completion of ``prompt_ids`` (ids and their log-probabilities) token by token,
    from a generator seeded with ``seed``; it ends at a token of ``stop_ids`` (kept), after
    ``max_new_tokens`` or once ``stop`` is set. The model is put in eval mode meanwhile.
    Blocking: call it off the event loop."""
    import torch
    import transformers

    model, device = loaded.model, loaded.device
    ends = frozenset(stop_ids)
    generator = torch.Generator(device=device).manual_seed(seed)
    was_training = model.training
    model.eval()
    ids: list[int] = []
    logprobs: list[float] = []
    try:
        with torch.no_grad():
            cache = transformers.DynamicCache(config=model.config)
            out = model(
                input_ids=torch.tensor([list(prompt_ids)], device=device),
                cache=cache,
                use_cache=True,
            )
            for _ in range(max_new_tokens):
                logits = out.logits[0, -1].float()
                token, logprob = draw(logits, temperature, top_p, generator)
                ids.append(token)
                logprobs.append(logprob)
                if token in ends or (stop is not None and stop.is_set()):
                    break
                out = model(
                    input_ids=torch.tensor([[token]], device=device),
                    cache=cache,
                    use_cache=True,
                )
    finally:
        if was_training:
            model.train()
    return ids, logprobs
