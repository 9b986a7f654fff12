"""The warm start's supervised examples: recorded rollouts as token sequences with a loss mask.

An example is one token sequence and a mask (1 on the tokens the loss covers: the assistant's
replies; 0 on system, user and tool tokens), built from the run store's turn rows through
:mod:`agent_kit.model.chat`: the request's messages and tools rendered as the
``hf`` policy renders a prompt, and the recorded response written as the policy would emit it
(tool calls in the model's syntax, then its end-of-turn token).

**An episode is one example** (``per_episode``, the default): when a turn's history is the
previous turn's plus the assistant's reply (what an agent sends back), the turn continues the
same sequence by the rule the policy continues a rollout with, token-in, token-out
(:mod:`agent_kit.model.continuation`): the previous sequence, the rendered tail (tool results,
the next assistant header, masked), then the turn's reply (trained). A six-turn episode is one
sequence with the loss on six spans, where one example a turn would process six ever-longer
copies of its start. A turn whose history was
rewritten (a conversation manager that trims it) starts a new example. ``per_episode=False``
gives one example a turn (the older rendering, kept for comparison: ``bench/warm_tokens.py``).

Every example is cut to ``max_tokens`` (the model's context, at most :data:`MAX_TOKENS`): a
longer one keeps its first ``max_tokens`` tokens, and one with no reply token left is skipped;
either way a line names it (:attr:`WarmExamples.notes`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from agent_kit.emulator.chat_request import flatten_content
from agent_kit.errors import UsageError
from agent_kit.model.chat import ChatFormat, chat_format, completion_text
from agent_kit.model.continuation import Chain, encode
from agent_kit.reporting.summary_schema import flat_config
from agent_kit.store import RunStore, load_rollouts
from agent_kit.store.rows import TurnRow
from agent_kit.train.checks import RecordedRun, recorded_run

__all__ = [
    "MAX_TOKENS",
    "WarmExample",
    "WarmExamples",
    "cut_example",
    "rollout_examples",
    "warm_examples",
]

#: The longest example trained whole, in tokens (a longer one is cut): the bound on one pass's
#: activations on a CPU, well above a Wordle episode (≈ 1,300 tokens).
MAX_TOKENS: Final = 4096


@dataclass(frozen=True)
class WarmExample:
    """One supervised sequence: ``input_ids``, ``mask`` (1 where the loss applies), the
    ``turns`` (assistant replies) it holds and a ``name`` for messages."""

    input_ids: tuple[int, ...]
    mask: tuple[int, ...]
    turns: int
    name: str

    def __len__(self) -> int:
        return len(self.input_ids)


@dataclass
class WarmExamples:
    """The examples of a warm start, per source run what was taken (``run``, ``min_reward``,
    ``rollouts`` taken of ``rewarded``, ``turns``, ``examples``) and a line per example that
    was cut or skipped (``notes``)."""

    examples: list[WarmExample] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.examples)

    @property
    def tokens(self) -> int:
        """Tokens one epoch processes."""
        return sum(len(e) for e in self.examples)

    @property
    def turns(self) -> int:
        """Assistant replies trained."""
        return sum(e.turns for e in self.examples)


def _threshold(rewards: Sequence[float], recorded: Any, given: float | None) -> float:
    """The minimum reward taken: ``given``, else the run's success threshold, else its top
    quarter (the 75th percentile of its rewards)."""
    if given is not None:
        return given
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool):
        return float(recorded)
    ordered = sorted(rewards)
    return ordered[min(len(ordered) - 1, math.floor(0.75 * len(ordered)))]


def _reply(row: TurnRow) -> dict[str, Any] | None:
    """The assistant message a turn row's response holds, or None (no answer recorded)."""
    choices = row.response.get("choices") if isinstance(row.response, dict) else None
    if not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message") or {}
    reply: dict[str, Any] = {
        "role": "assistant",
        "content": flatten_content(message.get("content")),
    }
    if message.get("tool_calls"):
        reply["tool_calls"] = message["tool_calls"]
    return reply


def _request(row: TurnRow) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """A turn row's messages (contents flattened to text) and tools, or None."""
    messages = row.request.get("messages") if isinstance(row.request, dict) else None
    if not isinstance(messages, list):
        return None
    flat = [{**m, "content": flatten_content(m.get("content"))} for m in messages]
    return flat, list(row.request.get("tools") or [])


class _Builder:
    """The examples of one rollout, turn by turn (see the module docstring)."""

    def __init__(self, tokenizer: Any, fmt: ChatFormat, name: str, per_episode: bool) -> None:
        self.tokenizer, self.fmt, self.name, self.per_episode = tokenizer, fmt, name, per_episode
        self.end_id = tokenizer.convert_tokens_to_ids(fmt.end_token)
        self.done: list[WarmExample] = []
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.first = self.turns = 0
        self.chain: Chain | None = None  # the example so far, as the policy would continue it

    def _close(self) -> None:
        if self.turns:
            last = self.first + self.turns - 1
            span = f"turn {self.first}" if self.turns == 1 else f"turns {self.first}-{last}"
            example = WarmExample(
                tuple(self.ids), tuple(self.mask), self.turns, f"{self.name} {span}"
            )
            self.done.append(example)
        self.ids, self.mask, self.turns = [], [], 0

    def add(self, index: int, row: TurnRow) -> None:
        reply, request = _reply(row), _request(row)
        pair = None
        if reply is not None and request is not None:
            pair = completion_text(self.tokenizer, self.fmt, request[0], request[1], reply)
        if pair is None or request is None:
            self._close()
            self.chain = None
            return
        messages, tools = request
        continued = None
        if self.per_episode and self.turns and self.chain is not None:
            continued = self.chain.next_prompt(
                self.tokenizer, self.fmt, messages, tools, self.end_id
            )
        if continued is None:
            self._close()
            self.first = index
            head = encode(self.tokenizer, pair[0])
        else:
            head = list(continued[len(self.ids) :])
        reply_ids = encode(self.tokenizer, pair[1])
        self.ids += head + reply_ids
        self.mask += [0] * len(head) + [1] * len(reply_ids)
        self.turns += 1
        self.chain = Chain.after(messages, tools, self.ids)

    def finish(self) -> list[WarmExample]:
        self._close()
        return self.done


def rollout_examples(
    tokenizer: Any, rows: Sequence[TurnRow], name: str, *, per_episode: bool = True
) -> list[WarmExample]:
    """The examples of one rollout's turn rows (see the module docstring), named ``name``."""
    builder = _Builder(tokenizer, chat_format(tokenizer), name, per_episode)
    for index, row in enumerate(rows):
        builder.add(index, row)
    return builder.finish()


def cut_example(example: WarmExample, max_tokens: int) -> tuple[WarmExample | None, str | None]:
    """``example`` cut to ``max_tokens`` (or None: no reply token left) and a line saying so
    (None when it fits)."""
    if len(example) <= max_tokens:
        return example, None
    mask = example.mask[:max_tokens]
    if not any(mask):
        return None, (
            f"warm start: skipped {example.name}: {len(example)} tokens, its first reply "
            f"starts after the {max_tokens}-token limit"
        )
    cut = WarmExample(example.input_ids[:max_tokens], mask, example.turns, example.name)
    return cut, (
        f"warm start: cut {example.name} from {len(example)} to {max_tokens} tokens "
        "(the rest is not trained)"
    )


def _good_rollouts(recorded: RecordedRun, min_reward: float | None) -> tuple[list[Any], int, float]:
    """The rollouts of the checked ``recorded`` run's job whose reward reaches the minimum, how
    many were rewarded, and the minimum; a UsageError names a run with no such rollout."""
    run, job = recorded.path, recorded.job
    with RunStore.open(run, readonly=True) as store:
        rollouts = [
            r for r in load_rollouts(store, job.arn, with_turns=True) if r.reward is not None
        ]
    rewards = [float(r.reward) for r in rollouts if r.reward is not None]
    if not rewards:
        raise UsageError(f"--warm-start {run}: the run has no rewarded rollout")
    threshold = _threshold(rewards, flat_config(job.config).get("success_threshold"), min_reward)
    good = [r for r in rollouts if r.reward is not None and r.reward >= threshold]
    if not good:
        raise UsageError(
            f"--warm-start {run}: no rollout reaches reward {threshold:g} (best "
            f"{max(rewards):g}); lower --warm-start-min-reward"
        )
    return good, len(rollouts), threshold


def warm_examples(
    runs: Sequence[Path | RecordedRun],
    tokenizer: Any,
    *,
    min_reward: float | None = None,
    per_episode: bool = True,
    max_tokens: int = MAX_TOKENS,
) -> WarmExamples:
    """The examples of the runs' good rollouts (see the module docstring); a UsageError names a
    run that is not one, or one no rollout of which reaches the minimum. A run is checked
    (:func:`~agent_kit.train.checks.recorded_run`) unless it comes checked."""
    fmt = chat_format(tokenizer)
    out = WarmExamples()
    for given in runs:
        recorded = given if isinstance(given, RecordedRun) else recorded_run(given)
        run = recorded.path
        good, rewarded, threshold = _good_rollouts(recorded, min_reward)
        before, turns = len(out), 0
        for rollout in good:
            builder = _Builder(tokenizer, fmt, f"{run.name}/{rollout.id}", per_episode)
            for index, row in enumerate(rollout.turn_rows):
                builder.add(index, row)
            for example in builder.finish():
                kept, note = cut_example(example, max_tokens)
                out.notes += [note] if note else []
                if kept is not None:
                    out.examples.append(kept)
                    turns += kept.turns
        out.sources.append(
            {
                "run": str(run),
                "min_reward": threshold,
                "rollouts": len(good),
                "rewarded": rewarded,
                "turns": turns,
                "examples": len(out) - before,
            }
        )
    if not out.examples and out.notes:
        raise UsageError(
            f"--warm-start: every example is longer than {max_tokens} tokens before their first "
            "reply; raise --max-length (up to the model's context) or record shorter episodes"
        )
    if not out.examples:
        raise UsageError("--warm-start: the chosen rollouts hold no recorded assistant turn")
    return out
