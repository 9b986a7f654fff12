"""Chat turns sampled from a loaded model: what the ``hf`` policy plays with, below the emulator.

A :class:`ChatSampler` takes a turn as a conversation (OpenAI-style messages and tools, and the
rollout's trajectory id) and:

1. **prompts** it: the conversation rendered in the model's chat format
   (:mod:`~agent_kit.model.chat`), or continued from the rollout's previous turn by the
   continuation rule (:mod:`~agent_kit.model.continuation`), so a rollout's ids chain exactly;
   the turn's token cap is what still fits the model's context;
2. **samples** it in the running batch (:class:`~agent_kit.model.batch.BatchSampler`: the turns
   in flight share one forward pass a token), each turn from a generator seeded by its caller;
   :meth:`ChatSampler.sample` is the one-sequence reference
   (:func:`~agent_kit.model.sampling.sample_alone`);
3. **reads** the reply back: the decoded text split into content and tool calls in the
   format's syntax (:mod:`~agent_kit.model.tool_calls`), and whether the turn ended with an
   end-of-turn token (else its cap cut it).

The per-rollout state is :attr:`ChatSampler.chains` (each rollout's ids so far) and the batch's
kept prefixes (each rollout's keys and values between its turns,
:mod:`~agent_kit.model.prefix`); :meth:`ChatSampler.forget` drops both when a rollout ends.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from agent_kit.errors import ValidationError
from agent_kit.model.batch import (
    DEFAULT_CACHE_MB,
    DEFAULT_MAX_BATCH,
    DEFAULT_PREFIX_CACHE,
    BatchSampler,
    SampleJob,
)
from agent_kit.model.chat import chat_format, render
from agent_kit.model.continuation import Chain, Chains, encode
from agent_kit.model.loading import LoadedModel
from agent_kit.model.sampling import pick, sample_alone
from agent_kit.model.tool_calls import ParsedCall, parse_tool_calls

__all__ = ["ChatSampler", "Reply"]

Messages = Sequence[dict[str, Any]]
Tools = Sequence[dict[str, Any]]


@dataclass(frozen=True)
class Reply:
    """A sampled turn read back: its ``content`` (None when empty), its tool ``calls``, and
    whether it ``ended`` with an end-of-turn token (False: the token cap cut it)."""

    content: str | None
    calls: tuple[ParsedCall, ...]
    ended: bool


class ChatSampler:
    """Samples chat turns from ``loaded`` (see the module docstring): at most ``max_batch``
    turns together, holding at most ``cache_mb`` MiB of key/value cache, each rollout's kept
    between its turns unless ``prefix_cache`` is False."""

    def __init__(
        self,
        loaded: LoadedModel,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        cache_mb: int = DEFAULT_CACHE_MB,
        prefix_cache: bool = DEFAULT_PREFIX_CACHE,
    ) -> None:
        self.loaded = loaded
        tokenizer = loaded.tokenizer
        self.chat = chat_format(tokenizer)
        #: The id of the chat format's end-of-turn token.
        self.end_id = tokenizer.convert_tokens_to_ids(self.chat.end_token)
        ends = {tokenizer.eos_token_id, self.end_id}
        #: The ids that end a turn (kept as its last token).
        self.stop_ids = frozenset(i for i in ends if isinstance(i, int) and i >= 0)
        #: Each rollout's ids so far, by trajectory id.
        self.chains = Chains()
        self.batcher = BatchSampler(
            loaded,
            pick=pick,
            stop_ids=self.stop_ids,
            max_rows=max_batch,
            cache_mb=cache_mb,
            prefix_cache=prefix_cache,
        )

    # -- prompts

    def render(self, messages: Messages, tools: Tools, *, gen: bool) -> str:
        """The chat text of ``messages`` and ``tools`` (with the assistant header when ``gen``)
        in this model's chat format."""
        return render(self.loaded.tokenizer, self.chat, messages, tools, gen=gen)

    def prompt_ids(self, trajectory_id: str, messages: Messages, tools: Tools) -> tuple[int, ...]:
        """A turn's prompt: continued from the rollout's chain when its history chains, else the
        rendered conversation."""
        chain = self.chains.get(trajectory_id)
        if chain is not None:
            tokenizer = self.loaded.tokenizer
            ids = chain.next_prompt(tokenizer, self.chat, messages, tools, self.end_id)
            if ids is not None:
                return ids
        return tuple(encode(self.loaded.tokenizer, self.render(messages, tools, gen=True)))

    def prepare(
        self, trajectory_id: str, messages: Messages, tools: Tools, cap: int
    ) -> tuple[tuple[int, ...], int]:
        """A turn's prompt ids and its token cap: ``cap``, or what fits the model's context if
        less; a ValidationError when the prompt alone does not fit."""
        prompt = self.prompt_ids(trajectory_id, messages, tools)
        context = getattr(self.loaded.model.config, "max_position_embeddings", 8192)
        room = int(context) - len(prompt)
        if room < 1:
            raise ValidationError(
                f"the prompt ({len(prompt)} tokens) does not fit the model's context"
            )
        return prompt, max(1, min(cap, room))

    def remember(
        self, trajectory_id: str, messages: Messages, tools: Tools, ids: Sequence[int]
    ) -> None:
        """Keep a turn's prompt and completion ``ids`` as its rollout's chain, so that the next
        turn continues them."""
        self.chains.keep(trajectory_id, Chain.after(messages, tools, ids))

    def forget(self, trajectory_id: str) -> None:
        """A rollout ended: its chain and kept prefix go, its waiting turns are answered with
        no tokens and its turn in flight stops at the next token. Call it from the thread that
        keeps the chains (:class:`Chains` is not thread-safe)."""
        self.chains.drop(trajectory_id)
        self.batcher.forget(trajectory_id)

    # -- sampling

    def submit(self, job: SampleJob) -> Future[tuple[list[int], list[float]]]:
        """Sample one turn in the running batch; the future gets ``(ids, logprobs)``."""
        return self.batcher.submit(job)

    def sample(
        self,
        prompt_ids: Sequence[int],
        *,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        seed: int,
        stop: threading.Event | None = None,
    ) -> tuple[list[int], list[float]]:
        """The one-sequence reference: a completion of ``prompt_ids`` sampled alone, ending at
        an end-of-turn token (kept) or after ``max_new_tokens``; temperature 0 is greedy.
        Blocking: call it off the event loop."""
        return sample_alone(
            self.loaded,
            prompt_ids,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=max_new_tokens,
            seed=seed,
            stop_ids=self.stop_ids,
            stop=stop,
        )

    # -- replies

    def reply(self, completion_ids: Sequence[int]) -> Reply:
        """A sampled completion read back (see the module docstring)."""
        text = self.loaded.tokenizer.decode(list(completion_ids), skip_special_tokens=True)
        content, calls = parse_tool_calls(text, self.chat.syntax)
        ended = bool(completion_ids) and completion_ids[-1] in self.stop_ids
        return Reply(content, calls, ended)

    def close(self) -> None:
        """Finish the turns in flight and end the batch's thread (blocking)."""
        self.batcher.close()
