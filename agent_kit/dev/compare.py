"""What a change did to the rewards: one grid against the previous one or against a baseline.

:class:`Played` is what a run played, read from its store (:class:`~agent_kit.reporting.
breakdown.RunData`: each slot's rewarded rollout, a slot without one *lost*), keyed by prompt
text so that two runs of different datasets pair only the prompts they share. Its figures are
the evaluation room's (:func:`~agent_kit.evaluation.figures.reward_figures`: the mean of the
per-prompt mean rewards ± SE, the success rate; a lost slot counts 0 and fails).

:func:`compare` says what moved from ``before`` to ``after``:

- the difference of the means, **paired by prompt** (:func:`~agent_kit.reporting.paired.
  difference`: per-prompt differences when both played the same prompts, else unpaired);
- the success rates before and after;
- the reward **terms** whose mean contribution moved (from each rollout's reward breakdown);
- the **rollouts** whose reward changed, slot by slot (same prompt, step and sample; with a
  scripted policy and the same seed a slot plays the same game, so a changed reward is the
  change's doing).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from agent_kit.contract import TrajectoryState
from agent_kit.evaluation.figures import RewardFigures, reward_figures
from agent_kit.reporting.breakdown import RunData
from agent_kit.reporting.paired import Difference, difference
from agent_kit.store import Rollout

__all__ = ["Comparison", "Move", "Played", "Slot", "compare"]

#: Two rewards closer than this are the same reward (float sums in another order).
_SAME: Final = 1e-9
#: How many changed rollouts a verdict names.
SHOWN: Final = 4


@dataclass(frozen=True)
class Slot:
    """One slot of a run: its label (``p<prompt>-g<sample>``, ``s<step>-`` first past step 0),
    its reward (None: lost) and its reward terms' contributions."""

    label: str
    reward: float | None
    terms: Mapping[str, float] = field(default_factory=dict)


def _contributions(breakdown: Mapping[str, Any] | None) -> dict[str, float]:
    terms: dict[str, float] = {}
    for name, part in (breakdown or {}).items():
        value = part.get("contribution") if isinstance(part, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            terms[str(name)] = float(value)
    return terms


@dataclass(frozen=True)
class Played:
    """What a run played (module docstring): its slots keyed (prompt, step, sample)."""

    run_dir: Path
    threshold: float
    slots: Mapping[tuple[str, int, int], Slot]

    @classmethod
    def from_run(cls, data: RunData, run_dir: Path) -> Played:
        """The slots of a run read into ``data`` (its groups' chosen rollouts; lost slots)."""
        prompts = data.prompts
        chosen = {r.slot: r for g in data.groups for r in g.rollouts}
        latest: dict[tuple[int, int, int], Rollout] = {}
        for r in data.records:
            if r.slot not in latest or r.attempt > latest[r.slot].attempt:
                latest[r.slot] = r
        slots: dict[tuple[str, int, int], Slot] = {}
        for (step, p, g), last in sorted(latest.items()):
            rollout = chosen.get((step, p, g))
            if rollout is None and last.state not in TrajectoryState.unrewarded():
                continue  # still playing (a stopped run): neither rewarded nor lost
            label = f"p{p}-g{g}" if step == 0 else f"s{step}-p{p}-g{g}"
            if rollout is None:
                slots[(prompts[p], step, g)] = Slot(label, None)
            else:
                terms = _contributions(rollout.reward_breakdown)
                slots[(prompts[p], step, g)] = Slot(label, rollout.reward, terms)
        return cls(run_dir, data.threshold, slots)

    def only(self, prompts: Collection[str]) -> Played:
        """The slots of the given prompts only."""
        return replace(self, slots={k: v for k, v in self.slots.items() if k[0] in prompts})

    def matching(self, grid: Played) -> Played:
        """This run's slots to compare ``grid`` with: its slots of the grid's prompts, and only
        the grid's own slots (prompt, step, sample) when this run played them all (like for
        like: a baseline of 4 samples a prompt against a grid of 2)."""
        mine = self.only(set(grid.prompts))
        same = {k: v for k, v in mine.slots.items() if k in grid.slots}
        return replace(mine, slots=same) if len(same) == len(grid.slots) else mine

    @property
    def prompts(self) -> list[str]:
        """The prompts played, in slot order."""
        return list(dict.fromkeys(k[0] for k in self.slots))

    def per_prompt(self) -> dict[str, list[float | None]]:
        """Each prompt's slot rewards (None: lost)."""
        out: dict[str, list[float | None]] = defaultdict(list)
        for (prompt, _, _), slot in self.slots.items():
            out[prompt].append(slot.reward)
        return dict(out)

    def means(self) -> dict[str, float]:
        """Each prompt's mean reward, a lost slot counting 0 (the figures' rule)."""
        return {
            p: math.fsum(0.0 if r is None else r for r in rs) / len(rs)
            for p, rs in self.per_prompt().items()
        }

    def figures(self) -> RewardFigures:
        """Mean ± SE over prompts and the success rate (the evaluation room's figures)."""
        indexed = dict(enumerate(self.per_prompt().values()))
        return reward_figures(indexed, self.threshold, [1])

    def term_means(self) -> dict[str, float]:
        """Each reward term's mean contribution over the rewarded slots."""
        sums: dict[str, list[float]] = defaultdict(list)
        for slot in self.slots.values():
            for name, value in slot.terms.items():
                sums[name].append(value)
        return {name: math.fsum(vs) / len(vs) for name, vs in sums.items()}

    @property
    def rewarded(self) -> int:
        """Slots with a reward."""
        return sum(s.reward is not None for s in self.slots.values())


@dataclass(frozen=True)
class Move:
    """A figure that moved: a reward term's mean contribution, or one rollout's reward."""

    name: str
    before: float | None
    after: float | None

    def text(self) -> str:
        """``name before → after``."""
        return f"{self.name} {_num(self.before)} → {_num(self.after)}"


def _num(value: float | None) -> str:
    return "lost" if value is None else f"{value:.3f}"


def _moved(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is not b
    return not math.isclose(a, b, rel_tol=_SAME, abs_tol=_SAME)


@dataclass(frozen=True)
class Comparison:
    """``after`` against ``before`` (module docstring); ``against`` names ``before`` (``#3``,
    ``baseline``)."""

    against: str
    before: RewardFigures
    after: RewardFigures
    difference: Difference | None
    terms: tuple[Move, ...]
    rollouts: tuple[Move, ...]
    compared: int

    @property
    def changed(self) -> bool:
        """True when the mean, a term or a rollout's reward moved."""
        moved = self.difference is not None and abs(self.difference.mean) > _SAME
        return moved or bool(self.terms) or bool(self.rollouts)

    def text(self) -> str:
        """One line: the difference ± SE, success before → after, the terms that moved, the
        rollouts whose reward changed (the first few)."""
        d = self.difference
        if not self.changed:
            return f"vs {self.against}: no change ({self.compared} rollouts compared)"
        parts = []
        if d is not None:
            se = "" if d.se is None else f" ± {d.se:.3f}"
            kind = "paired" if d.paired else "unpaired"
            parts.append(f"Δ {d.mean:+.3f}{se} ({kind}, {d.prompts} prompts)")
        parts.append(f"success {_pct(self.before.success_rate)} → {_pct(self.after.success_rate)}")
        if self.terms:
            parts.append("terms " + ", ".join(m.text() for m in self.terms))
        if self.rollouts:
            shown = ", ".join(m.text() for m in self.rollouts[:SHOWN])
            more = len(self.rollouts) - SHOWN
            parts.append(
                f"{len(self.rollouts)} of {self.compared} rollouts changed: {shown}"
                + (f" (+{more} more)" if more > 0 else "")
            )
        return f"vs {self.against}: " + "; ".join(parts)

    def document(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "against": self.against,
            "before": asdict(self.before),
            "after": asdict(self.after),
            "difference": None if self.difference is None else asdict(self.difference),
            "terms": [asdict(m) for m in self.terms],
            "rollouts": [asdict(m) for m in self.rollouts],
            "compared": self.compared,
        }


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def compare(after: Played, before: Played, against: str, *, slots: bool = True) -> Comparison:
    """What moved from ``before`` to ``after`` (module docstring); ``slots=False`` leaves the
    rollouts out (a baseline's replay says which of its episodes changed)."""
    terms_before, terms_after = before.term_means(), after.term_means()
    terms = tuple(
        Move(name, terms_before.get(name), terms_after.get(name))
        for name in dict.fromkeys([*terms_before, *terms_after])
        if _moved(terms_before.get(name), terms_after.get(name))
    )
    shared = [k for k in after.slots if k in before.slots] if slots else []
    rollouts = tuple(
        Move(after.slots[k].label, before.slots[k].reward, after.slots[k].reward)
        for k in shared
        if _moved(before.slots[k].reward, after.slots[k].reward)
    )
    return Comparison(
        against=against,
        before=before.figures(),
        after=after.figures(),
        difference=difference(after.means(), before.means()),
        terms=terms,
        rollouts=rollouts,
        compared=len(shared) if slots else len(after.slots),
    )
