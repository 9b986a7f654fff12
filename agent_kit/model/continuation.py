"""The turn-continuation rule: when a turn's prompt continues its rollout's tokens, and how.

Token-in, token-out: when a turn's history is the previous turn's history plus the assistant
message the model produced and what followed it (the tool results, a user message: what an agent
sends back), the turn's prompt is the rollout's ids so far — the previous prompt and its sampled
completion, closed with the end-of-turn token if the completion was cut — then the rendered tail
(:func:`continuation`: the text the chat format adds after that end-of-turn token, up to the next
assistant header). The ids of a rollout's turns then chain exactly: no re-tokenisation drift
between what was sampled and what is trained. A history that was rewritten (a conversation
manager trimmed it), or a template that does not render the conversation as an extension of
itself, is rendered afresh and does not chain.

One :class:`Chain` (a rollout's ids so far and the conversation they render) serves the three
users of the rule alike:

- the ``hf`` sampler (:class:`~agent_kit.model.sampler.ChatSampler`) prompts a turn with
  :meth:`Chain.next_prompt` and keeps each rollout's chain in :class:`Chains`;
- the warm start (``agent_kit.train.warm_data``) builds an episode's example the same way from
  the recorded turns, so it trains on the ids the policy would have sampled after;
- GRPO's samples (``agent_kit.train.samples``) merge a rollout's recorded turns while
  :meth:`Chain.continued_by` holds (a turn's prompt starts with the chain's ids).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent_kit.model.chat import ChatFormat, render

__all__ = ["KEPT_CHAINS", "Chain", "Chains", "continuation", "encode", "history_key"]

#: How many rollouts' chains :class:`Chains` keeps (the least recently used go first).
KEPT_CHAINS: Final = 4096

Messages = Sequence[dict[str, Any]]


def encode(tokenizer: Any, text: str) -> list[int]:
    """The ids of ``text`` as the chat format's text is tokenised (no special tokens added)."""
    ids: list[int] = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids


def history_key(messages: Messages, tools: Sequence[dict[str, Any]]) -> str:
    """A conversation's identity (messages and tools, canonical JSON): two turns chain when the
    later one's history up to its last assistant message has the earlier one's key."""
    return json.dumps([list(messages), list(tools)], sort_keys=True, default=str)


def _last_assistant(messages: Messages) -> int:
    return max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)


def continuation(
    tokenizer: Any, fmt: ChatFormat, messages: Messages, tools: Sequence[dict[str, Any]]
) -> str | None:
    """The text a turn's prompt adds after the previous assistant message's end-of-turn token
    (its tool results and the next assistant header); None when ``messages`` has no assistant
    message or the template does not render the conversation as an extension of it."""
    last = _last_assistant(messages)
    if last < 0:
        return None
    head = render(tokenizer, fmt, messages[: last + 1], tools, gen=False)
    full = render(tokenizer, fmt, messages, tools, gen=True)
    ended = head.rstrip()
    if not (full.startswith(head) and ended.endswith(fmt.end_token)):
        return None
    return head[len(ended) :] + full[len(head) :]


@dataclass(frozen=True)
class Chain:
    """A rollout's tokens so far: ``ids`` (its last turn's prompt and completion) and ``key``,
    the :func:`history_key` of the conversation that turn was prompted with."""

    ids: tuple[int, ...]
    key: str = ""

    @classmethod
    def after(
        cls, messages: Messages, tools: Sequence[dict[str, Any]], ids: Sequence[int]
    ) -> Chain:
        """The chain after a turn prompted with ``messages`` and ``tools``, ``ids`` its prompt
        and completion."""
        return cls(tuple(ids), history_key(messages, tools))

    def extended_by(self, messages: Messages, tools: Sequence[dict[str, Any]]) -> bool:
        """Whether ``messages`` are this chain's conversation plus one assistant message and
        what followed it (the message-level half of the rule)."""
        last = _last_assistant(messages)
        return last >= 0 and history_key(messages[:last], tools) == self.key

    def next_prompt(
        self,
        tokenizer: Any,
        fmt: ChatFormat,
        messages: Messages,
        tools: Sequence[dict[str, Any]],
        end_id: Any,
    ) -> tuple[int, ...] | None:
        """The prompt ids of the turn ``messages`` asks for, continued from this chain (its ids,
        ``end_id`` where the last completion did not end with it, the rendered tail); None when
        the history does not chain (see the module docstring)."""
        if not self.extended_by(messages, tools):
            return None
        tail = continuation(tokenizer, fmt, messages, tools)
        if tail is None:
            return None
        closing = () if self.ids and self.ids[-1] == end_id else (end_id,)
        return (*self.ids, *closing, *encode(tokenizer, tail))

    def continued_by(self, prompt_ids: Sequence[int]) -> bool:
        """Whether a turn's prompt starts with this chain's ids (the token-level half: what a
        recorded turn shows when its prompt was continued)."""
        return tuple(prompt_ids[: len(self.ids)]) == self.ids


class Chains:
    """The chains of the rollouts in flight, by trajectory id (at most :data:`KEPT_CHAINS`, the
    least recently used dropped first). Not thread-safe: one thread uses it (the ``hf``
    policy's preparing thread)."""

    def __init__(self, kept: int = KEPT_CHAINS) -> None:
        self.kept = kept
        self._chains: OrderedDict[str, Chain] = OrderedDict()

    def get(self, trajectory_id: str) -> Chain | None:
        """The chain of a rollout, if one is kept."""
        return self._chains.get(trajectory_id)

    def keep(self, trajectory_id: str, chain: Chain) -> None:
        """Keep ``chain`` as the rollout's latest."""
        self._chains[trajectory_id] = chain
        self._chains.move_to_end(trajectory_id)
        while len(self._chains) > self.kept:
            self._chains.popitem(last=False)

    def drop(self, trajectory_id: str) -> None:
        """Forget a rollout's chain (it ended)."""
        self._chains.pop(trajectory_id, None)

    def clear(self) -> None:
        """Forget every chain."""
        self._chains.clear()

    def __len__(self) -> int:
        return len(self._chains)
