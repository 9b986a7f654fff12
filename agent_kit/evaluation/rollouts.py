"""What a cell's rollouts say beside their rewards: the figures a training run's holdout line and
the grid's table read from the store (docs/eval.md, "The table").

- **tool-call rate**: the share of the rollouts' turns whose answer called a tool;
- **token limit**: the slots whose rollout hit ``max_tokens`` (a turn that ended with
  ``finish_reason: length``, or a failure reason that names the limit, e.g. Strands'
  ``MaxTokensReachedException``);
- **cut**: how many rewarded rollouts the agent ended early (a limit, an error it scored
  anyway), with the most frequent reason; **failure**: why a cell failed as a whole (no rollout
  got a real reward), from its rollouts' most frequent failure reason;
- **task figures**: the environment's own figures (``Environment.metrics()``: Wordle's
  ``solved``, ``valid_guess_rate``), each the mean over prompts of each prompt's mean over the
  rollouts that recorded it.

All are pure functions of :class:`~agent_kit.store.Rollout` records (loaded ``with_turns`` for
the tool-call rate and the token limit).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Final

from agent_kit.reporting.metrics import GroupResult
from agent_kit.reporting.words import first_line
from agent_kit.store import Rollout, TurnRow

__all__ = [
    "hit_token_limit",
    "holdout_cuts",
    "holdout_failure",
    "task_figures",
    "token_limited",
    "tool_call_rate",
]

#: A failure reason that says the policy's answer was cut at ``--max-tokens``.
_TOKEN_LIMIT: Final = re.compile(r"MaxTokensReached|max_tokens|token limit", re.IGNORECASE)
#: An exception's name within a failure reason (``policy: MaxTokensReachedException: …``).
_EXCEPTION: Final = re.compile(r"\b[A-Z]\w*(?:Exception|Error)\b")


def _answer(row: TurnRow) -> tuple[Mapping[str, Any] | None, Any]:
    """The first choice's message and finish reason of a recorded turn's chat answer."""
    choices = row.response.get("choices") if isinstance(row.response, dict) else None
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    message = first.get("message")
    return (message if isinstance(message, dict) else None), first.get("finish_reason")


def tool_call_rate(records: Sequence[Rollout]) -> float | None:
    """The share of the rollouts' turns whose answer called a tool (None: no turn)."""
    turns = [row for r in records for row in r.turn_rows]
    if not turns:
        return None
    calls = sum(bool(message and message.get("tool_calls")) for message, _ in map(_answer, turns))
    return calls / len(turns)


def hit_token_limit(record: Rollout) -> bool:
    """True when a turn of the rollout ended at the token limit (``finish_reason: length``) or
    its failure reason names the limit."""
    if _TOKEN_LIMIT.search(record.agent_failure or record.reason or ""):
        return True
    return any(finish == "length" for _, finish in map(_answer, record.turn_rows))


def token_limited(records: Sequence[Rollout]) -> int:
    """How many slots hit the token limit (:func:`hit_token_limit`): each slot by the rollout
    the figures count (its highest rewarded attempt, else its last one)."""
    slots: dict[tuple[int, int, int], list[Rollout]] = defaultdict(list)
    for record in records:
        slots[record.slot].append(record)
    count = 0
    for attempts in slots.values():
        ordered = sorted(attempts, key=lambda r: (r.attempt, r.started_at))
        rewarded = [r for r in ordered if r.rewarded]
        count += hit_token_limit((rewarded or ordered)[-1])
    return count


def _most_frequent(reasons: Counter[str]) -> tuple[str, int]:
    """The most frequent reason and its count (ties: the first in sorted order)."""
    return min(reasons.items(), key=lambda item: (-item[1], item[0]))


def holdout_failure(records: Sequence[Rollout], max_tokens: int | None) -> str | None:
    """Why a cell failed as a whole, in one phrase, from its rollouts' most frequent failure
    reason (the agent's own for a floor reward, the rollout's for a lost one); it names
    ``--max-tokens`` when that reason is the token limit. None when some rollout got a real
    reward (or there is none)."""
    if not records or any(r.rewarded and not r.floor_reward for r in records):
        return None
    reasons = Counter(
        first_line(r.agent_failure or r.reason or "no reason recorded").removeprefix("agent: ")
        for r in records
    )
    reason, count = _most_frequent(reasons)
    named = _EXCEPTION.search(reason)
    name = named.group(0) if named else reason
    if _TOKEN_LIMIT.search(reason) and count * 2 > len(records):
        which = "every" if count == len(records) else f"{count} of {len(records)}"
        return (
            f"{which} rollout ended at the token limit (--max-tokens {max_tokens}: {name} "
            f"×{count}); raise --max-tokens"
        )
    return f"every rollout failed; most often: {reason} ×{count} of {len(records)}"


def holdout_cuts(records: Sequence[Rollout]) -> str | None:
    """How many of a cell's rewarded rollouts the agent ended early (a limit, an error it
    scored anyway), with the most frequent reason, in one phrase; for the wall-clock budget it
    names the remedy (the rollouts in flight share the machine). None when none was."""
    reasons = Counter(
        first_line(r.agent_failure).removeprefix("agent: ")
        for r in records
        if r.rewarded and not r.floor_reward and r.agent_failure
    )
    if not reasons:
        return None
    reason, count = _most_frequent(reasons)
    text = f"{sum(reasons.values())} of {len(records)} rollouts ended early; most often: {reason}"
    text += f" ×{count}"
    if "wall-clock budget" in reason:
        text += " (the rollouts in flight share the machine: lower --concurrency"
        text += " or raise --rollout-timeout)"
    return text


def task_figures(groups: Sequence[GroupResult]) -> dict[str, float]:
    """Each task figure's mean over prompts of its per-prompt mean over the groups' rewarded
    rollouts that recorded it (see the module docstring), names in first-seen order."""
    per_prompt: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for group in groups:
        for rollout in group.rollouts:
            for name, value in rollout.task_metrics.items():
                per_prompt[name][group.prompt_index].append(value)
    out: dict[str, float] = {}
    for name, prompts in per_prompt.items():
        means = [math.fsum(values) / len(values) for values in prompts.values()]
        out[name] = math.fsum(means) / len(means)
    return out
