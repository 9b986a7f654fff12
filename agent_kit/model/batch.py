"""Continuous batching for the ``hf`` policy: the turns in flight share one forward pass a token.

A :class:`BatchSampler` owns one worker thread. A turn is submitted as a :class:`SampleJob` and
joins the running batch at the next token: the newcomers' prompts are prefilled together
(left-padded, at most :data:`PREFILL_TOKENS` padded tokens at a time), their key/value caches are
left-padded onto the running batch's, and every step decodes one token for every row. A row
leaves the batch when it samples an end-of-turn token, reaches its token cap or is stopped (its
caller went away); the leading cache columns no row needs any more are cut off. Up to
``max_rows`` turns are sampled together, and no more than the key/value cache budget holds
(``cache_tokens``: rows × the widest row's prompt and token cap, :data:`DEFAULT_CACHE_MB` of
cache by default; a turn alone always runs); the others wait their turn in arrival order.
SmolLM2-135M's cache takes 45 kB a token in float32: 32 Wordle turns of 850 tokens would hold
1.2 GB, the default budget holds 13 of them (on 2 cores the forward pass is compute-bound well
before that, so the bound costs little speed).

Exactness: padding is masked out and every row keeps its own positions, so a row's logits are
those of its sequence alone up to float rounding (≈ 1e-6), and its recorded log-probabilities
match a teacher-forced forward pass of that sequence. Reproducibility: every row samples with
its own generator seeded by its turn, making the same draws in the same order as sampling it
alone, so a turn samples the same tokens whatever it is batched with, unless float rounding
flips a near-tie (a draw within ≈ 1e-6 of a boundary between two tokens).

Prefix reuse (``prefix_cache``, on by default; ``AGENT_KIT_HF_PREFIX_CACHE``): a turn that ends
leaves its ids and their keys and values (the rightmost ``length`` columns of its batch row) in
a :class:`~agent_kit.model.prefix.PrefixStore` under its ``key`` (the rollout's trajectory id).
A newcomer whose prompt shares a kept prefix (its rollout's previous turn, else the longest any
kept one shares; at least :data:`REUSE_FROM` tokens) is prefilled alone over the rest of its
prompt, positions continuing, then joins the batch as the others do: a multi-turn rollout's
later turns prefill their new tokens only. The kept prefixes count in the cache budget together
with the running batch (the least recently used evicted first, before a newcomer waits); a
rollout's prefix goes when it ends (:meth:`BatchSampler.forget`) and every one when the model's
weights change. Its tokens and log-probabilities are a fresh prefill's, up to float rounding.

A model whose cache is not a plain growing key/value cache (sliding-window or hybrid layers)
cannot be re-aligned this way: it samples one turn at a time through the same path, without
prefix reuse.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Final

from agent_kit.errors import PolicyError
from agent_kit.model.loading import LoadedModel
from agent_kit.model.prefix import Prefix, PrefixStore
from agent_kit.model.seam import (
    cache_of,
    cut_caches,
    merge_caches,
    plain_cache,
    row_states,
    unwatch_optimizer_steps,
    watch_optimizer_steps,
    weights_version,
    zero_padding,
)
from agent_kit.settings import DEFAULTS

__all__ = [
    "DEFAULT_CACHE_MB",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_PREFIX_CACHE",
    "PREFILL_TOKENS",
    "REUSE_FROM",
    "BatchSampler",
    "Pick",
    "SampleJob",
    "cache_bytes_per_token",
]

#: How many turns sample together by default (``AGENT_KIT_HF_BATCH``).
DEFAULT_MAX_BATCH: Final = DEFAULTS.hf_batch
#: The key/value cache the running batch may hold by default, in MiB (``AGENT_KIT_HF_CACHE_MB``).
DEFAULT_CACHE_MB: Final = DEFAULTS.hf_cache_mb
#: Whether turns reuse their rollout's kept prefix by default (``AGENT_KIT_HF_PREFIX_CACHE``).
DEFAULT_PREFIX_CACHE: Final = DEFAULTS.hf_prefix_cache
#: The most padded prompt tokens one prefill pass holds (bounds its attention memory); a prompt
#: longer than this is prefilled alone.
PREFILL_TOKENS: Final = 4096
#: The fewest prompt tokens a kept prefix must spare to serve a newcomer: it is prefilled alone,
#: and a pass of its own costs more than a few tokens prefilled with the other newcomers.
REUSE_FROM: Final = 32

Pick = Callable[[Any, float, float, Any], tuple[int, float]]
"""``(logits row, temperature, top_p, generator) -> (token, log-probability)``: one draw."""

Sampled = tuple[list[int], list[float]]


@dataclass
class SampleJob:
    """One turn to sample: its prompt ids and settings; ``future`` gets ``(ids, logprobs)``.

    Setting ``stop`` ends the turn at its next token (what was sampled so far is its result).
    ``key`` (the rollout's trajectory id) names the prefix the turn leaves for the rollout's
    next turn; None keeps none.
    """

    prompt: tuple[int, ...]
    temperature: float
    top_p: float
    max_new_tokens: int
    seed: int
    key: str | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    future: Future[Sampled] = field(default_factory=Future)


@dataclass(frozen=True)
class _Join:
    """A turn joining the batch, with the kept prefix it reuses (``reuse`` of its ids), if any,
    and the weights it is sampled by."""

    job: SampleJob
    prefix: Prefix | None
    reuse: int
    version: Any


class _Row:
    """A turn in the running batch: its draws so far and its real length in the cache."""

    __slots__ = ("generator", "ids", "job", "length", "logprobs", "version")

    def __init__(self, join: _Join, generator: Any) -> None:
        self.job = join.job
        self.version = join.version
        self.generator = generator
        self.ids: list[int] = []
        self.logprobs: list[float] = []
        self.length = len(join.job.prompt)  # tokens of this row held by the cache


class BatchSampler:
    """Samples the submitted turns in one continuous batch (see the module docstring).

    ``pick`` draws one token from a row's logits (the same function one-at-a-time sampling
    uses); ``stop_ids`` end a turn (kept in its ids); ``max_rows`` caps the batch, and
    ``cache_mb`` its key/value cache (rows × the widest row's prompt and token cap, and the
    kept prefixes); ``prefix_cache`` False keeps no prefix (every prompt prefilled whole).
    """

    def __init__(
        self,
        loaded: LoadedModel,
        *,
        pick: Pick,
        stop_ids: Iterable[int],
        max_rows: int,
        cache_mb: int = DEFAULT_CACHE_MB,
        prefix_cache: bool = DEFAULT_PREFIX_CACHE,
    ) -> None:
        import torch  # present: the model was loaded
        import transformers

        self._torch = torch
        self._cache_type = transformers.DynamicCache
        self.loaded = loaded
        self._pick = pick
        self._stop_ids = frozenset(stop_ids)
        plain = plain_cache(loaded.model)
        self.max_rows = max_rows if plain else 1
        #: Whether ended turns leave their prefix for their rollout's next turn.
        self.prefix_cache = prefix_cache and plain
        #: The kept prefixes (guarded by the batch's lock).
        self.prefixes = PrefixStore()
        if self.prefix_cache:
            watch_optimizer_steps()  # a training step changes the weights: see weights_version
        #: The most cache tokens (rows × the widest row) the running batch may come to hold.
        self.cache_tokens = max(1, cache_mb * 2**20 // cache_bytes_per_token(loaded.model))
        tokenizer = loaded.tokenizer
        self._pad = int(tokenizer.pad_token_id or tokenizer.eos_token_id or 0)
        self._pending: deque[SampleJob] = deque()
        self._wake = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        # the running batch: touched only by the worker thread
        self._rows: list[_Row] = []
        self._cache: Any = None
        self._mask: Any = None
        self._was_training = False
        self._ended: list[tuple[_Row, Sampled, Prefix | None]] = []  # resolved after a step
        #: The most turns that were ever sampled together (a figure for benchmarks and tests).
        self.peak_rows = 0
        #: Prompt tokens prefilled, and prompt tokens a kept prefix spared (likewise).
        self.prefilled_tokens = self.reused_tokens = 0
        #: The most cache tokens (rows × cache width) the running batch ever held (likewise).
        self.peak_cache_tokens = 0

    def submit(self, job: SampleJob) -> Future[Sampled]:
        """Queue a turn; its future resolves when the turn ends (or fails with the error)."""
        return self.submit_together([job])[0]

    def submit_together(self, jobs: Sequence[SampleJob]) -> list[Future[Sampled]]:
        """Queue turns that start together (one prefill, as far as the batch has room)."""
        with self._wake:
            if self._closed:
                raise PolicyError("the hf policy is closed")
            self._pending.extend(jobs)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="agent-kit-hf-batch", daemon=True
                )
                self._thread.start()
            self._wake.notify()
        return [job.future for job in jobs]

    def close(self) -> None:
        """Finish the turns submitted so far, then end the worker thread (blocking) and drop
        the kept prefixes."""
        with self._wake:
            closing, self._closed = not self._closed, True
            self._wake.notify()
            thread = self._thread
        if thread is not None:
            thread.join()
        with self._wake:
            self.prefixes.clear()
        if closing and self.prefix_cache:
            unwatch_optimizer_steps()

    def forget(self, key: str) -> None:
        """A rollout ended: drop its kept prefix, drop its turns still waiting (each answered
        with no tokens) and stop its turn in the batch at the next token. Non-blocking."""
        with self._wake:
            self.prefixes.pop(key)
            dropped = [job for job in self._pending if job.key == key]
            for job in dropped:
                self._pending.remove(job)
            for row in self._rows:
                if row.job.key == key:
                    row.job.stop.set()
        for job in dropped:
            if job.future.set_running_or_notify_cancel():
                job.future.set_result(([], []))

    # -- the worker

    def _run(self) -> None:
        while True:
            with self._wake:
                while not (self._pending or self._rows or self._closed):
                    self._wake.wait()
                if not (self._pending or self._rows):
                    return
                joins = self._take()
            try:
                self._step(joins)
            except Exception as exc:  # noqa: BLE001 - handed to every turn in flight
                self._settle(keep=False)
                self._fail([*(r.job for r in self._rows), *(j.job for j in joins)], exc)

    def _widest(self) -> int:
        """The widest running row at its token cap (its prompt and every token it may draw)."""
        return max((r.length + r.job.max_new_tokens - len(r.ids) for r in self._rows), default=0)

    def _take(self) -> list[_Join]:
        """The waiting turns that join now: room in the batch, in its cache budget (each row
        counted at the widest row's prompt and token cap; kept prefixes evicted to make room)
        and in one prefill pass (a turn that reuses a kept prefix is prefilled alone)."""
        joins: list[_Join] = []
        longest = fresh = 0
        widest = self._widest()
        store = self.prefixes
        if self._pending and self.prefix_cache and not self._rows:
            store.renew(weights_version(self.loaded.model))  # weights change between batches
        while self._pending and len(self._rows) + len(joins) < self.max_rows:
            head = self._pending[0]
            prefix, reuse = (None, 0)
            if self.prefix_cache:
                prefix, reuse = store.match(head.key, head.prompt)
                if reuse < REUSE_FROM:
                    prefix, reuse = None, 0
            wider = longest if prefix is not None else max(longest, len(head.prompt))
            if prefix is None and fresh and wider * (fresh + 1) > PREFILL_TOKENS:
                break
            width = max(widest, len(head.prompt) + head.max_new_tokens)
            rows = len(self._rows) + len(joins) + 1
            if rows > 1 and rows * width > self.cache_tokens:
                break
            self._pending.popleft()
            if head.key is not None:
                store.pop(head.key)  # its tokens are the batch's now (or it diverged)
            store.shrink(self.cache_tokens - rows * width)
            if head.future.set_running_or_notify_cancel():
                joins.append(_Join(head, prefix, reuse, store.version))
                longest, widest, fresh = wider, width, fresh + (prefix is None)
        return joins

    def _fail(self, jobs: Sequence[SampleJob], exc: BaseException) -> None:
        for job in jobs:
            if not job.future.done():
                job.future.set_exception(exc)
        self._rows, self._cache, self._mask = [], None, None
        self._restore_mode()

    def _step(self, joins: list[_Join]) -> None:
        model = self.loaded.model
        if not self._rows and model.training:
            self._was_training = True
            model.eval()
        with self._torch.no_grad():
            if joins:
                self._admit(joins)
            if self._rows:
                self._decode()
        self._settle(keep=True)
        if not self._rows:
            self._restore_mode()

    def _settle(self, *, keep: bool) -> None:
        """Keep the prefixes of the turns that ended (``keep``: in what the running batch leaves
        of the budget), then resolve those turns: a caller that learns its turn ended finds
        its prefix kept."""
        ended, self._ended = self._ended, []
        if keep and any(prefix is not None for _, _, prefix in ended):
            room = self.cache_tokens - len(self._rows) * self._widest()
            with self._wake:
                for row, _, prefix in ended:
                    if prefix is not None and not row.job.stop.is_set():
                        self.prefixes.put(prefix, room)
        for row, result, _ in ended:
            if not row.job.future.done():
                row.job.future.set_result(result)

    def _restore_mode(self) -> None:
        if self._was_training:
            self._was_training = False
            self.loaded.model.train()

    def _forward(self, ids: Any, mask: Any, positions: Any, cache: Any) -> Any:
        out = self.loaded.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1]

    def _admit(self, joins: list[_Join]) -> None:
        """Prefill the newcomers (those without a kept prefix together, each other alone over
        the rest of its prompt), draw their first tokens, merge the rest in."""
        self.peak_rows = max(self.peak_rows, len(self._rows) + len(joins))
        fresh = [join for join in joins if join.prefix is None]
        parts = [self._prefill(fresh)] if fresh else []
        parts += [self._extend(j, j.prefix) for j in joins if j.prefix is not None]
        for rows, cache, mask, logits in parts:
            going = self._draw(rows, logits, cache)
            if not going:
                continue
            keep = self._torch.tensor(going, device=self.loaded.device)
            cache.batch_select_indices(keep)
            self._merge([rows[i] for i in going], cache, mask[keep])

    def _generator(self, job: SampleJob) -> Any:
        return self._torch.Generator(device=self.loaded.device).manual_seed(job.seed)

    def _prefill(self, joins: list[_Join]) -> tuple[list[_Row], Any, Any, Any]:
        """Prefill whole prompts together (left-padded): their rows, cache, mask and logits."""
        torch, device = self._torch, self.loaded.device
        prompts = [join.job.prompt for join in joins]
        width = max(len(prompt) for prompt in prompts)
        ids = torch.full((len(prompts), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, prompt in enumerate(prompts):
            ids[i, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            mask[i, width - len(prompt) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache: Any = self._cache_type(config=self.loaded.model.config)
        logits = self._forward(ids, mask, positions, cache)
        if any(len(prompt) < width for prompt in prompts):
            zero_padding(cache)
        self.prefilled_tokens += sum(len(prompt) for prompt in prompts)
        rows = [_Row(join, self._generator(join.job)) for join in joins]
        return rows, cache, mask, logits

    def _extend(self, join: _Join, prefix: Prefix) -> tuple[list[_Row], Any, Any, Any]:
        """Prefill one prompt over its kept ``prefix``: the rest of its ids only, positions
        continuing; its row, cache, mask and logits."""
        torch, device = self._torch, self.loaded.device
        prompt, reuse = join.job.prompt, join.reuse
        cache = cache_of(self.loaded.model, prefix.states, reuse)
        ids = torch.tensor([prompt[reuse:]], dtype=torch.long, device=device)
        mask = torch.ones((1, len(prompt)), dtype=torch.long, device=device)
        positions = torch.arange(reuse, len(prompt), device=device).unsqueeze(0)
        logits = self._forward(ids, mask, positions, cache)
        self.prefilled_tokens += len(prompt) - reuse
        self.reused_tokens += reuse
        return [_Row(join, self._generator(join.job))], cache, mask, logits

    def _merge(self, rows: list[_Row], cache: Any, mask: Any) -> None:
        if not self._rows:
            self._rows, self._cache, self._mask = rows, cache, mask
            return
        torch = self._torch
        pad = torch.nn.functional.pad
        width = max(self._mask.shape[1], mask.shape[1])
        old, new = width - self._mask.shape[1], width - mask.shape[1]
        merge_caches(self._cache, cache, old, new)
        self._mask = torch.cat([pad(self._mask, (old, 0)), pad(mask, (new, 0))])
        self._rows = self._rows + rows

    def _decode(self) -> None:
        """One token for every row; the rows that ended leave the batch."""
        torch, device = self._torch, self.loaded.device
        rows = self._rows
        ids = torch.tensor([[row.ids[-1]] for row in rows], dtype=torch.long, device=device)
        positions = torch.tensor([[row.length] for row in rows], dtype=torch.long, device=device)
        mask = torch.cat(
            [self._mask, torch.ones((len(rows), 1), dtype=torch.long, device=device)], 1
        )
        logits = self._forward(ids, mask, positions, self._cache)
        self._mask = mask
        self.peak_cache_tokens = max(self.peak_cache_tokens, mask.shape[0] * mask.shape[1])
        for row in rows:
            row.length += 1
        going = self._draw(rows, logits, self._cache)
        if len(going) == len(rows):
            return
        if not going:
            self._rows, self._cache, self._mask = [], None, None
            return
        keep = torch.tensor(going, device=device)
        self._cache.batch_select_indices(keep)
        self._rows = [rows[i] for i in going]
        self._mask = self._mask[keep]
        cut = int((self._mask.sum(0) == 0).long().cumprod(0).sum())
        if cut:
            cut_caches(self._cache, cut)
            self._mask = self._mask[:, cut:]

    def _draw(self, rows: list[_Row], logits: Any, cache: Any) -> list[int]:
        """Draw each row's next token; the rows that ended are noted (with the prefix each
        leaves, from ``cache``) for :meth:`_settle`; the indices still going."""
        going: list[int] = []
        for i, row in enumerate(rows):
            job = row.job
            token, logprob = self._pick(
                logits[i].float(), job.temperature, job.top_p, row.generator
            )
            row.ids.append(token)
            row.logprobs.append(logprob)
            if token in self._stop_ids or len(row.ids) >= job.max_new_tokens or job.stop.is_set():
                self._ended.append((row, (row.ids, row.logprobs), self._prefix(row, cache, i)))
            else:
                going.append(i)
        return going

    def _prefix(self, row: _Row, cache: Any, index: int) -> Prefix | None:
        """What an ended row leaves for its rollout's next turn: its ids but the last drawn
        (never fed) and their keys and values, the rightmost columns of its batch row."""
        job = row.job
        if not self.prefix_cache or job.key is None or job.stop.is_set():
            return None
        ids = (*job.prompt, *row.ids[:-1])
        return Prefix(job.key, ids, row_states(cache, index, row.length), row.version)


def cache_bytes_per_token(model: Any) -> int:
    """The key/value cache one token of one row takes in ``model`` (keys and values of every
    layer, in the model's dtype); a model whose config does not say counts as 64 kB."""
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    try:
        layers = int(text.num_hidden_layers)
        heads = int(getattr(text, "num_key_value_heads", None) or text.num_attention_heads)
        head_dim = int(
            getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        )
        size = int(next(model.parameters()).element_size())
    except (AttributeError, TypeError, ValueError, StopIteration, ZeroDivisionError):
        return 64 * 1024
    return max(1, 2 * layers * heads * head_dim * size)
