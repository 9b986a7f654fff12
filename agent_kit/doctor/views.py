"""The episodes a reward audit judges: one :class:`~agent_kit.doctor.invariants.EpisodeView`
per scored slot of a run.

:func:`episode_views` turns a run's chosen rollouts (the ones the metrics use, from
:func:`~agent_kit.reporting.breakdown.load_run_data`) into views, with the reward, outcome
(``succeeded``/``unsolved``/``floor``/``failed``) and reward components each check reads —
the re-scored ones where the run was re-scored with the entrypoint
(:mod:`agent_kit.doctor.rescore`). :func:`view_reward` is a scored view's reward.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from agent_kit.doctor.invariants import EpisodeView
from agent_kit.doctor.rescore import Rescored
from agent_kit.reporting.breakdown import RunData

__all__ = ["SHOWN", "episode_views", "view_reward"]

#: How many trajectory ids (or examples) a finding shows.
SHOWN: Final = 5


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(float(value)) else None


def _parts(
    breakdown: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[dict[str, float], dict[str, float], dict[str, float], dict[str, str]]:
    values: dict[str, float] = {}
    contributions: dict[str, float] = {}
    weights: dict[str, float] = {}
    kinds: dict[str, str] = {}
    for name, part in (breakdown or {}).items():
        value, weight = _number(part.get("value")), _number(part.get("weight"))
        contribution = _number(part.get("contribution"))
        values[name] = value if value is not None else 0.0
        weights[name] = weight if weight is not None else 1.0
        contributions[name] = (
            contribution if contribution is not None else values[name] * weights[name]
        )
        kinds[name] = str(part.get("kind", ""))
    return values, contributions, weights, kinds


def _outcome(reward: float | None, floor: bool, threshold: float) -> str:
    if reward is None:
        return "failed"
    if floor:
        return "floor"
    return "succeeded" if reward >= threshold else "unsolved"


def episode_views(
    data: RunData, rescored: Mapping[str, Rescored] | None = None
) -> list[EpisodeView]:
    """One view per chosen (scored or floor-scored) slot, re-scored ones when given."""
    views: list[EpisodeView] = []
    for record in data.chosen:
        reward, floor, breakdown, result = (
            record.reward,
            record.floor_reward,
            record.reward_breakdown,
            None,
        )
        again = (rescored or {}).get(record.id)
        if again is not None and again.reward is not None:
            reward, floor, breakdown, result = (
                again.reward,
                again.floor,
                again.breakdown,
                again.result,
            )
        values, contributions, weights, kinds = _parts(breakdown)
        views.append(
            EpisodeView(
                rollout=record,
                reward=reward,
                outcome=_outcome(reward, floor, data.threshold),
                floor=floor,
                components=values,
                contributions=contributions,
                weights=weights,
                kinds=kinds,
                result=result,
            )
        )
    return views


def view_reward(view: EpisodeView) -> float:
    """The reward of a view the caller knows is scored (its reward is not None)."""
    assert view.reward is not None
    return view.reward
