"""Each rollout's key/value cache kept between its turns: the ``hf`` sampler's prefix store.

A multi-turn rollout's next prompt starts with its previous prompt and sampled tokens, token for
token (the continuation rule, :mod:`~agent_kit.model.continuation`). When a turn ends, the
batch (:class:`~agent_kit.model.batch.BatchSampler`) keeps its ids and their keys and values
(the prompt and the sampled tokens but the last, which was drawn and never fed) here as a
:class:`Prefix`, under the rollout's trajectory id; the rollout's next turn then prefills only
the tokens after it. A prompt that does not extend its rollout's prefix reuses the longest prefix
it shares with any kept one (its own rollout's first: a rewritten history keeps its start, and
rollouts of one prompt share their system prompt and tools), or prefills from scratch.

The store is bounded by the batch's key/value budget, together with the running batch: it holds
what the budget leaves, its least recently used prefix evicted first (:meth:`PrefixStore.
shrink`), and it never keeps a turn waiting (the batch evicts before it refuses a newcomer).
A rollout's prefix is taken out when its next turn joins the batch (its tokens are the batch's
then), and dropped when the rollout ends (:meth:`PrefixStore.pop`, through the policy's
``end_trajectory`` hook); every prefix goes when the model's weights change
(:func:`~agent_kit.model.seam.weights_version`: a training step, an adapter switched on
or off).

Plain data and a lock-free structure: the batch calls it under its own lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Prefix", "PrefixStore", "shared_length"]


@dataclass(frozen=True)
class Prefix:
    """A rollout's tokens so far as the model saw them: ``ids``, and ``states``, each layer's
    ``(keys, values)`` of those ids (one row, ``len(ids)`` positions), computed by the weights
    of ``version`` (:func:`~agent_kit.model.seam.weights_version`)."""

    key: str
    ids: tuple[int, ...]
    states: tuple[tuple[Any, Any], ...]
    version: Hashable

    def __len__(self) -> int:
        return len(self.ids)


def shared_length(one: Sequence[int], two: Sequence[int]) -> int:
    """How many leading ids ``one`` and ``two`` share (slices compared, bisecting)."""
    n = min(len(one), len(two))
    if one[:n] == two[:n]:
        return n
    low, high = 0, n  # one[:low] == two[:low]; one[:high] != two[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if one[:middle] == two[:middle]:
            low = middle
        else:
            high = middle
    return low


class PrefixStore:
    """The kept prefixes by trajectory id, least recently used first (module docstring)."""

    def __init__(self) -> None:
        self._prefixes: OrderedDict[str, Prefix] = OrderedDict()
        #: The tokens the kept prefixes hold together.
        self.tokens = 0
        #: The weights the kept prefixes were computed by (``seam.weights_version``).
        self.version: Hashable = None
        #: Prefixes evicted to make room (a figure for benchmarks and tests).
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._prefixes)

    def __contains__(self, key: object) -> bool:
        return key in self._prefixes

    def keys(self) -> list[str]:
        """The kept trajectory ids, least recently used first."""
        return list(self._prefixes)

    def match(self, key: str | None, prompt: Sequence[int]) -> tuple[Prefix | None, int]:
        """The kept prefix that shares the most leading ids with ``prompt`` (on a tie ``key``'s
        own, else the most recently used) and how many it shares, at most ``len(prompt) - 1``
        (the prompt's last id is fed for its logits); ``(None, 0)`` when none shares any. The
        match counts as a use."""
        best: Prefix | None = None
        reuse = 0
        own = self._prefixes.get(key) if key is not None else None
        for prefix in ([own] if own is not None else []) + list(reversed(self._prefixes.values())):
            if prefix is own and best is not None:
                continue
            length = min(shared_length(prefix.ids, prompt), len(prompt) - 1)
            if length > reuse:
                best, reuse = prefix, length
        if best is not None:
            self._prefixes.move_to_end(best.key)
        return best, reuse

    def put(self, prefix: Prefix, room: int) -> bool:
        """Keep ``prefix`` (replacing its rollout's), the least recently used others evicted
        until all fit in ``room`` tokens; False (nothing kept) when it alone does not fit or it
        was computed by other weights than the kept ones."""
        self.pop(prefix.key)
        if len(prefix) > room or prefix.version != self.version:
            return False
        self.shrink(room - len(prefix))
        self._prefixes[prefix.key] = prefix
        self.tokens += len(prefix)
        return True

    def pop(self, key: str) -> Prefix | None:
        """Take a rollout's prefix out (its turn is in the batch, or the rollout ended)."""
        prefix = self._prefixes.pop(key, None)
        if prefix is not None:
            self.tokens -= len(prefix)
        return prefix

    def shrink(self, room: int) -> None:
        """Evict the least recently used prefixes until the rest hold at most ``room`` tokens."""
        while self._prefixes and self.tokens > max(0, room):
            _, prefix = self._prefixes.popitem(last=False)
            self.tokens -= len(prefix)
            self.evicted += 1

    def renew(self, version: Hashable) -> None:
        """The weights are ``version`` now: every prefix computed by others goes."""
        if version != self.version:
            self.clear()
            self.version = version

    def clear(self) -> None:
        """Drop every prefix."""
        self._prefixes.clear()
        self.tokens = 0
