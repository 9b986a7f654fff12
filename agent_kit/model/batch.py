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

A model whose cache is not a plain growing key/value cache (sliding-window or hybrid layers)
cannot be re-aligned this way: it samples one turn at a time through the same path.
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
from agent_kit.model.seam import cut_caches, merge_caches, plain_cache, zero_padding
from agent_kit.settings import DEFAULTS

__all__ = [
    "DEFAULT_CACHE_MB",
    "DEFAULT_MAX_BATCH",
    "PREFILL_TOKENS",
    "BatchSampler",
    "Pick",
    "SampleJob",
    "cache_bytes_per_token",
]

#: How many turns sample together by default (``AGENT_KIT_HF_BATCH``).
DEFAULT_MAX_BATCH: Final = DEFAULTS.hf_batch
#: The key/value cache the running batch may hold by default, in MiB (``AGENT_KIT_HF_CACHE_MB``).
DEFAULT_CACHE_MB: Final = DEFAULTS.hf_cache_mb
#: The most padded prompt tokens one prefill pass holds (bounds its attention memory); a prompt
#: longer than this is prefilled alone.
PREFILL_TOKENS: Final = 4096

Pick = Callable[[Any, float, float, Any], tuple[int, float]]
"""``(logits row, temperature, top_p, generator) -> (token, log-probability)``: one draw."""

Sampled = tuple[list[int], list[float]]


@dataclass
class SampleJob:
    """One turn to sample: its prompt ids and settings; ``future`` gets ``(ids, logprobs)``.

    Setting ``stop`` ends the turn at its next token (what was sampled so far is its result).
    """

    prompt: tuple[int, ...]
    temperature: float
    top_p: float
    max_new_tokens: int
    seed: int
    stop: threading.Event = field(default_factory=threading.Event)
    future: Future[Sampled] = field(default_factory=Future)


class _Row:
    """A turn in the running batch: its draws so far and its real length in the cache."""

    __slots__ = ("generator", "ids", "job", "length", "logprobs")

    def __init__(self, job: SampleJob, generator: Any) -> None:
        self.job = job
        self.generator = generator
        self.ids: list[int] = []
        self.logprobs: list[float] = []
        self.length = len(job.prompt)  # tokens of this row held by the cache


class BatchSampler:
    """Samples the submitted turns in one continuous batch (see the module docstring).

    ``pick`` draws one token from a row's logits (the same function one-at-a-time sampling
    uses); ``stop_ids`` end a turn (kept in its ids); ``max_rows`` caps the batch, and
    ``cache_mb`` its key/value cache (rows × the widest row's prompt and token cap).
    """

    def __init__(
        self,
        loaded: LoadedModel,
        *,
        pick: Pick,
        stop_ids: Iterable[int],
        max_rows: int,
        cache_mb: int = DEFAULT_CACHE_MB,
    ) -> None:
        import torch  # present: the model was loaded
        import transformers

        self._torch = torch
        self._cache_type = transformers.DynamicCache
        self.loaded = loaded
        self._pick = pick
        self._stop_ids = frozenset(stop_ids)
        self.max_rows = max_rows if plain_cache(loaded.model) else 1
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
        #: The most turns that were ever sampled together (a figure for benchmarks and tests).
        self.peak_rows = 0
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
        """Finish the turns submitted so far, then end the worker thread (blocking)."""
        with self._wake:
            self._closed = True
            self._wake.notify()
            thread = self._thread
        if thread is not None:
            thread.join()

    # -- the worker

    def _run(self) -> None:
        while True:
            with self._wake:
                while not (self._pending or self._rows or self._closed):
                    self._wake.wait()
                if not (self._pending or self._rows):
                    return
                newcomers = self._take()
            try:
                self._step(newcomers)
            except Exception as exc:  # noqa: BLE001 - handed to every turn in flight
                self._fail([*(r.job for r in self._rows), *newcomers], exc)

    def _take(self) -> list[SampleJob]:
        """The waiting turns that join now: room in the batch, in its cache budget (each row
        counted at the widest row's prompt and token cap) and in one prefill pass."""
        jobs: list[SampleJob] = []
        longest = 0
        widest = max((r.length + r.job.max_new_tokens - len(r.ids) for r in self._rows), default=0)
        while self._pending and len(self._rows) + len(jobs) < self.max_rows:
            head = self._pending[0]
            wider = max(longest, len(head.prompt))
            if jobs and wider * (len(jobs) + 1) > PREFILL_TOKENS:
                break
            width = max(widest, len(head.prompt) + head.max_new_tokens)
            rows = len(self._rows) + len(jobs) + 1
            if rows > 1 and rows * width > self.cache_tokens:
                break
            self._pending.popleft()
            if head.future.set_running_or_notify_cancel():
                jobs.append(head)
                longest, widest = wider, width
        return jobs

    def _fail(self, jobs: Sequence[SampleJob], exc: BaseException) -> None:
        for job in jobs:
            if not job.future.done():
                job.future.set_exception(exc)
        self._rows, self._cache, self._mask = [], None, None
        self._restore_mode()

    def _step(self, newcomers: list[SampleJob]) -> None:
        model = self.loaded.model
        if not self._rows and model.training:
            self._was_training = True
            model.eval()
        with self._torch.no_grad():
            if newcomers:
                self._admit(newcomers)
            if self._rows:
                self._decode()
        if not self._rows:
            self._restore_mode()

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

    def _admit(self, jobs: list[SampleJob]) -> None:
        """Prefill the newcomers together, draw their first tokens, merge the rest in."""
        torch, device = self._torch, self.loaded.device
        self.peak_rows = max(self.peak_rows, len(self._rows) + len(jobs))
        width = max(len(job.prompt) for job in jobs)
        ids = torch.full((len(jobs), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(jobs), width), dtype=torch.long)
        for i, job in enumerate(jobs):
            ids[i, width - len(job.prompt) :] = torch.tensor(job.prompt, dtype=torch.long)
            mask[i, width - len(job.prompt) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache: Any = self._cache_type(config=self.loaded.model.config)
        logits = self._forward(ids, mask, positions, cache)
        if any(len(job.prompt) < width for job in jobs):
            zero_padding(cache)
        rows = [_Row(job, torch.Generator(device=device).manual_seed(job.seed)) for job in jobs]
        going = self._draw(rows, logits)
        if not going:
            return
        keep = torch.tensor(going, device=device)
        cache.batch_select_indices(keep)
        self._merge([rows[i] for i in going], cache, mask[keep])

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
        going = self._draw(rows, logits)
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

    def _draw(self, rows: list[_Row], logits: Any) -> list[int]:
        """Draw each row's next token; resolve the rows that ended; the indices still going."""
        going: list[int] = []
        for i, row in enumerate(rows):
            job = row.job
            token, logprob = self._pick(
                logits[i].float(), job.temperature, job.top_p, row.generator
            )
            row.ids.append(token)
            row.logprobs.append(logprob)
            if token in self._stop_ids or len(row.ids) >= job.max_new_tokens or job.stop.is_set():
                if not job.future.done():
                    job.future.set_result((row.ids, row.logprobs))
            else:
                going.append(i)
        return going


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
