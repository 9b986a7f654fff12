"""What a GRPO group can teach: its rollouts' outcomes, the group's signal, a step's shares.

A group teaches through the differences between its rewards. Three kinds of group:

- **all equal** (``equal``): every reward alike (or fewer than two): every advantage is 0, the
  group adds nothing to the gradient;
- **shaping only** (``shaping``): the rewards differ, but every rollout has the same *outcome*:
  the advantages push the policy along the reward's shaping terms alone (an all-failed group of
  a shaped reward still has spread: "phantom advantages", verl-recipe PR #125);
- **outcome** (``outcome``): the outcomes differ: the group says what succeeds.

A rollout's **outcome** is the reward's outcome terms where the :class:`~agent_kit.reward.Reward`
declares them (the breakdown's components of kind ``outcome``: ``Reward.weighted(outcome=…)``,
summed by contribution) — when every rollout of the group that is not on the agent's floor
declares one; a floor reward's outcome is then its total (the floor is the worst outcome).
Otherwise the outcome is binary: 1 when the reward reaches the job's success threshold, else 0.

:func:`signal_shares` gives a step's shares (terminal line, train.json, MLflow, the report's
Training section: ``train/signal/all_equal``, ``train/signal/shaping_only``);
:func:`gated_advantages` are the outcome gate's advantages (``--advantage outcome``): the
service's ``group_based`` estimator over the outcomes instead of the rewards, so a group that
differs only by shaping carries none.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from agent_kit.reporting.metrics import GroupResult, group_advantages, is_degenerate
from agent_kit.store import Rollout

__all__ = [
    "ALL_EQUAL_KEY",
    "SHAPING_ONLY_KEY",
    "SignalKind",
    "SignalShares",
    "gated_advantages",
    "group_outcomes",
    "group_signal",
    "outcome_terms",
    "signal_shares",
]

SignalKind = Literal["equal", "shaping", "outcome"]
#: The step metrics of the shares (train.json's steps, MLflow, the report).
ALL_EQUAL_KEY: Final = "train/signal/all_equal"
SHAPING_ONLY_KEY: Final = "train/signal/shaping_only"


def outcome_terms(rollout: Rollout) -> float | None:
    """The sum of the contributions of the reward's outcome terms, or None when its breakdown
    declares none (a plain number, a floor reward, an agent that sends no breakdown)."""
    breakdown = rollout.reward_breakdown or {}
    parts = [
        float(entry.get("contribution", 0.0))
        for entry in breakdown.values()
        if entry.get("kind") == "outcome"
        and isinstance(entry.get("contribution"), int | float)
        and math.isfinite(float(entry["contribution"]))
    ]
    return math.fsum(parts) if parts else None


def group_outcomes(rollouts: Sequence[Rollout], threshold: float) -> list[float]:
    """Each rollout's outcome (see the module docstring), in order; rollouts without a reward
    are left out."""
    scored = [(r, float(r.reward)) for r in rollouts if r.reward is not None]
    declared = [outcome_terms(r) for r, _ in scored]
    own = [d for (r, _), d in zip(scored, declared, strict=True) if not r.floor_reward]
    if own and all(d is not None for d in own):
        return [
            reward if r.floor_reward or d is None else d
            for (r, reward), d in zip(scored, declared, strict=True)
        ]
    return [1.0 if reward >= threshold else 0.0 for _, reward in scored]


def group_signal(group: GroupResult, threshold: float) -> SignalKind:
    """Whether the group is all equal, differs only by shaping, or differs in outcome."""
    if group.degenerate:
        return "equal"
    return "shaping" if is_degenerate(group_outcomes(group.rollouts, threshold)) else "outcome"


def gated_advantages(group: GroupResult, threshold: float) -> tuple[float, ...]:
    """The outcome gate's advantages of a group's rollouts (in its order): ``group_based`` over
    the outcomes; all 0 when the outcomes are alike."""
    return tuple(group_advantages(group_outcomes(group.rollouts, threshold)))


@dataclass(frozen=True)
class SignalShares:
    """How many of a step's scored ``groups`` were all equal and how many differed only by
    shaping (the rest differed in outcome)."""

    groups: int
    equal: int
    shaping: int

    @property
    def outcome(self) -> int:
        """Groups whose outcomes differ."""
        return self.groups - self.equal - self.shaping

    def share(self, count: int) -> float | None:
        """``count`` as a share of the groups (None without groups)."""
        return count / self.groups if self.groups else None

    def metrics(self) -> dict[str, float]:
        """``train/signal/all_equal`` and ``train/signal/shaping_only`` (none without groups)."""
        if not self.groups:
            return {}
        return {
            ALL_EQUAL_KEY: self.equal / self.groups,
            SHAPING_ONLY_KEY: self.shaping / self.groups,
        }

    def phrase(self) -> str:
        """``signal: 1 of 4 groups all equal, 2 shaping only`` for a step line."""
        return (
            f"signal: {self.equal} of {self.groups} groups all equal, {self.shaping} shaping only"
        )

    def __add__(self, other: SignalShares) -> SignalShares:
        return SignalShares(
            self.groups + other.groups, self.equal + other.equal, self.shaping + other.shaping
        )


def signal_shares(groups: Sequence[GroupResult], threshold: float) -> SignalShares:
    """The shares of the scored groups (those with a reward) by kind."""
    kinds = [group_signal(g, threshold) for g in groups if g.rewards]
    return SignalShares(len(kinds), kinds.count("equal"), kinds.count("shaping"))
