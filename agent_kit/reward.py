"""Episode rewards: named, weighted components with a kept breakdown.

A reward function receives the finished environment and the :class:`~agent_kit.episode.Episode`
record and returns a :class:`Reward` (or a plain number). Components are split into *outcome*
terms (did the task succeed) and *strategy* terms (how it was played), so reports can show what
drove a score. Every value is checked finite; a non-finite reward never reaches the service.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agent_kit.errors import RewardError

__all__ = ["Component", "Reward", "RewardKind"]

RewardKind = Literal["outcome", "strategy"]


def _finite(name: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise RewardError(f"reward component {name!r} is not a number: {value!r}") from None
    if not math.isfinite(number):
        raise RewardError(f"reward component {name!r} is not finite: {number!r}")
    return number


@dataclass(frozen=True)
class Component:
    """One named reward term: ``weight × value``, tagged as outcome or strategy.

    ``reason`` is why the term has its value, when someone said (an LLM judge's reason); it is
    kept in the breakdown. ``judged`` marks a term scored by an LLM judge
    (:class:`agent_kit.judge.Judge`), which ``agent-kit doctor reward`` audits.
    """

    value: float
    weight: float = 1.0
    kind: RewardKind = "strategy"
    reason: str | None = None
    judged: bool = False

    @property
    def contribution(self) -> float:
        """``weight × value``: what this term adds to the total."""
        return self.weight * self.value


@dataclass(frozen=True)
class Reward:
    """The reward of one episode: total, breakdown by component, optional per-turn values.

    Guarantees: ``total`` and every component are finite floats; when ``per_turn`` is given its
    values are finite too (its length is checked against the episode's turns when reported).
    """

    total: float
    components: Mapping[str, Component] = field(default_factory=dict)
    per_turn: Sequence[float] | None = None
    floor: bool = False
    reason: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", _finite("total", self.total))
        for name, comp in self.components.items():
            _finite(name, comp.value)
            _finite(f"{name}.weight", comp.weight)
        if self.per_turn is not None:
            values = [_finite(f"per_turn[{i}]", v) for i, v in enumerate(self.per_turn)]
            if not values:
                raise RewardError("per_turn rewards must not be empty")
            if abs(math.fsum(values) - self.total) > 1e-6 * max(1.0, abs(self.total)):
                raise RewardError(
                    f"per_turn rewards sum to {math.fsum(values)!r} but the total is {self.total!r}"
                )
            object.__setattr__(self, "per_turn", values)

    @classmethod
    def weighted(
        cls,
        per_turn: Sequence[float] | None = None,
        **components: tuple[float, float] | Component | float,
    ) -> Reward:
        """Sum named ``(value, weight)`` terms; names starting with ``outcome`` are outcome terms.

        >>> Reward.weighted(outcome=(1.0, 1.0), efficiency=(-0.3, 0.1)).total
        0.97
        """
        built: dict[str, Component] = {}
        for name, spec in components.items():
            kind: RewardKind = "outcome" if name.startswith("outcome") else "strategy"
            if isinstance(spec, Component):
                built[name] = spec
            elif isinstance(spec, tuple):
                if len(spec) != 2:
                    raise RewardError(f"reward component {name!r} must be (value, weight)")
                built[name] = Component(
                    _finite(name, spec[0]), _finite(f"{name}.weight", spec[1]), kind
                )
            else:
                built[name] = Component(_finite(name, spec), 1.0, kind)
        total = math.fsum(c.contribution for c in built.values())
        return cls(total=round(total, 12), components=built, per_turn=per_turn)

    @classmethod
    def of(cls, value: float | Reward) -> Reward:
        """Coerce what a reward function returned (a number or a Reward) into a Reward."""
        if isinstance(value, Reward):
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RewardError(
                f"reward function must return a Reward or a number, got {type(value).__name__}"
            )
        return cls(total=_finite("total", value))

    @classmethod
    def floor_reward(cls, value: float, reason: str) -> Reward:
        """The configured floor, used when the episode failed on the agent's side."""
        return cls(total=_finite("floor", value), floor=True, reason=reason)

    def breakdown(self) -> dict[str, dict[str, float | str]]:
        """JSON-ready ``{name: {value, weight, contribution, kind}}``, plus ``reason`` and
        ``judged`` (true) for a term that has them."""
        out: dict[str, dict[str, float | str]] = {}
        for name, c in self.components.items():
            entry: dict[str, float | str] = {
                "value": c.value,
                "weight": c.weight,
                "contribution": c.contribution,
                "kind": c.kind,
            }
            if c.reason is not None:
                entry["reason"] = c.reason
            if c.judged:
                entry["judged"] = True
            out[name] = entry
        return out

    def wire_values(self, turns: int) -> list[float]:
        """The ``Rewards`` list for UpdateReward: per-turn when it matches ``turns``, else total."""
        if self.per_turn is not None and len(self.per_turn) == turns and turns > 0:
            return [float(v) for v in self.per_turn]
        return [self.total]
