"""A recorded run as prompt groups, and the predictive band of a sum of planned groups.

The statistics of :mod:`agent_kit.reporting.plan` (its docstring and docs/plan.md give the
method): :func:`read_recorded` turns a run's rollouts into slots grouped by prompt,
:func:`group_unit` the expected value and spread of one planned group drawn from a recorded
one, and :func:`sum_band` the p10/p50/p90 of the sum of many planned groups.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from agent_kit.contract import TrajectoryState
from agent_kit.errors import UsageError
from agent_kit.store.records import Rollout

__all__ = [
    "Band",
    "RecordedRun",
    "Slot",
    "all_equal",
    "combined",
    "group_unit",
    "mean",
    "pvar",
    "quantile",
    "read_recorded",
    "recorded_figures",
    "session_seconds",
    "sum_band",
    "t90",
]


@dataclass(frozen=True)
class Band:
    """A planned quantity's 10th, 50th and 90th percentiles (p10 ≤ p50 ≤ p90)."""

    p10: float
    p50: float
    p90: float

    def scaled(self, factor: float) -> Band:
        """The band times a non-negative ``factor``."""
        return Band(self.p10 * factor, self.p50 * factor, self.p90 * factor)

    def plus(self, amount: float) -> Band:
        """The band moved by ``amount`` (a fixed cost added to a planned one)."""
        return Band(self.p10 + amount, self.p50 + amount, self.p90 + amount)

    def contains(self, value: float) -> bool:
        """True when ``p10 ≤ value ≤ p90``."""
        return self.p10 <= value <= self.p90


@dataclass(frozen=True)
class Slot:
    """One recorded slot: all its attempts' prefill and sample tokens and session seconds,
    the chosen rollout's tokens (0 when lost) and its reward (None when lost)."""

    prefill: float
    sample: float
    chosen: float
    reward: float | None
    busy: float


@dataclass(frozen=True)
class RecordedRun:
    """A recorded run as the plan reads it: prompt groups of slots, session seconds of every
    attempt, turns, the longest turn's completion, and whether any usage was estimated."""

    groups: list[list[Slot]]
    durations: list[float]
    turns: list[int]
    max_turn_completion: int
    estimated: bool
    attempts: int
    latency_recorded: bool


def session_seconds(rollout: Rollout, turn_latency_s: float | None, agent_scale: float) -> float:
    """The rollout's session time in the real job: agent time × ``agent_scale`` + policy time
    (recorded, or ``turns × turn_latency_s``)."""
    policy = sum(t.latency_ms for t in rollout.turn_rows) / 1000.0
    agent = max(0.0, rollout.duration_s - policy)
    if turn_latency_s is not None:
        policy = rollout.turns * turn_latency_s
    return agent * agent_scale + policy


def read_recorded(
    rollouts: Sequence[Rollout], turn_latency_s: float | None = None, agent_scale: float = 1.0
) -> RecordedRun:
    """The finished rollouts as prompt groups of slots (:class:`UsageError` without a reward)."""
    finished = [r for r in rollouts if r.state in TrajectoryState.finished()]
    if not any(r.rewarded for r in finished):
        raise UsageError("the run has no rewarded rollout to plan from")
    by_slot: dict[tuple[int, int, int], list[Rollout]] = defaultdict(list)
    for r in finished:
        by_slot[r.slot].append(r)
    groups: dict[tuple[int, int], list[Slot]] = defaultdict(list)
    durations: list[float] = []
    for slot in sorted(by_slot):
        attempts = by_slot[slot]
        seconds = [session_seconds(r, turn_latency_s, agent_scale) for r in attempts]
        durations.extend(seconds)
        rewarded = sorted((r for r in attempts if r.rewarded), key=lambda r: r.attempt)
        chosen = rewarded[-1] if rewarded else None
        groups[slot[:2]].append(
            Slot(
                prefill=float(sum(r.prefill_tokens for r in attempts)),
                sample=float(sum(r.sample_tokens for r in attempts)),
                chosen=float(chosen.tokens) if chosen else 0.0,
                reward=chosen.reward if chosen else None,
                busy=math.fsum(seconds),
            )
        )
    return RecordedRun(
        groups=[groups[key] for key in sorted(groups)],
        durations=durations,
        turns=[r.turns for r in finished],
        max_turn_completion=max(
            (t.completion_tokens for r in finished for t in r.turn_rows), default=0
        ),
        estimated=any(r.estimated_turns for r in finished),
        attempts=len(finished),
        latency_recorded=any(t.latency_ms > 0 for r in finished for t in r.turn_rows),
    )


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean (``values`` not empty)."""
    return math.fsum(values) / len(values)


def pvar(values: Sequence[float]) -> float:
    """The population variance (``values`` not empty)."""
    centre = mean(values)
    return math.fsum((v - centre) ** 2 for v in values) / len(values)


def all_equal(count: int, n: int, size: int) -> float:
    """Chance that a planned group of ``size`` lands wholly in a reward class holding ``count``
    of a recorded group's ``n`` slots: unbiased ``C(count, size) / C(n, size)`` when
    ``size ≤ n``, else the plug-in ``(count / n) ** size``."""
    if size <= n:
        return math.comb(count, size) / math.comb(n, size)
    return (count / n) ** size


def group_unit(group: Sequence[Slot], size: int) -> dict[str, tuple[float, float]]:
    """Per quantity, (expected value, variance) of one planned group of ``size`` slots drawn
    with replacement from a recorded group."""
    out: dict[str, tuple[float, float]] = {}
    for name in ("prefill", "sample", "busy"):
        values = [float(getattr(s, name)) for s in group]
        out[name] = (size * mean(values), size * pvar(values))
    chosen = [s.chosen for s in group]
    classes: dict[float | None, list[float]] = defaultdict(list)
    for s in group:
        classes[s.reward].append(s.chosen)
    n = len(group)
    degenerate = math.fsum(all_equal(len(c), n, size) * mean(c) for c in classes.values())
    out["train"] = (size * (mean(chosen) - degenerate), size * pvar(chosen))
    return out


def quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted, non-empty values (linear interpolation)."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def t90(df: int) -> float:
    """The 90th percentile of Student's t with ``df`` degrees of freedom (Cornish-Fisher
    expansion around the normal's; within 1 % of the exact value for df ≥ 2)."""
    z = NormalDist().inv_cdf(0.9)
    terms = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
    )
    return z + math.fsum(term / df ** (i + 1) for i, term in enumerate(terms))


def sum_band(units: Sequence[tuple[float, float]], count: int) -> Band:
    """The predictive band of the sum of ``count`` groups, given per recorded group its
    expected value and spread (module docstring)."""
    k = len(units)
    means = [u[0] for u in units]
    average = mean(means)
    between = pvar(means) * k / (k - 1) if k > 1 else 0.0
    spread = math.sqrt(count * (between + mean([u[1] for u in units])) + count**2 * between / k)
    half = t90(max(1, k - 1)) * spread
    centre = count * average
    return Band(max(0.0, centre - half), centre, centre + half)


def combined(
    units: Sequence[Mapping[str, tuple[float, float]]], weights: Mapping[str, float]
) -> list[tuple[float, float]]:
    """Per group, the weighted sum of the token categories (spread: fully correlated)."""
    return [
        (
            math.fsum(u[name][0] * w for name, w in weights.items()),
            math.fsum(math.sqrt(u[name][1]) * w for name, w in weights.items()) ** 2,
        )
        for u in units
    ]


def recorded_figures(recorded: RecordedRun) -> dict[str, Any]:
    """The recorded run's figures in the plan's ``source.recorded`` (JSON-ready)."""
    ordered = sorted(recorded.durations)
    turns = sorted(float(t) for t in recorded.turns)
    slots = sum(len(g) for g in recorded.groups)
    return {
        "groups": len(recorded.groups),
        "slots": slots,
        "attempts": recorded.attempts,
        "attempts_per_slot": recorded.attempts / slots,
        "estimated_tokens": recorded.estimated,
        "turns": {"p50": quantile(turns, 0.5), "p90": quantile(turns, 0.9), "max": turns[-1]},
        "session_s": {
            "p50": quantile(ordered, 0.5),
            "p90": quantile(ordered, 0.9),
            "p99": quantile(ordered, 0.99),
            "max": ordered[-1],
        },
        "max_completion_tokens_per_turn": recorded.max_turn_completion,
    }
