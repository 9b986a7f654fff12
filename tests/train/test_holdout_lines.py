"""What a holdout row says about rollouts the agent ended early (``holdout_cuts``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from agent_kit.cli.train import _fmt
from agent_kit.train.evaluate import holdout_cuts

BUDGET = "agent: limit: the episode's wall-clock budget (420 s) ran out"


def _rollout(agent_failure: str | None, *, floor: bool = False) -> Any:
    """The fields holdout_cuts reads of a stored rollout (a stand-in, not a mock of a boundary:
    the function only reads these three)."""
    return SimpleNamespace(rewarded=True, floor_reward=floor, agent_failure=agent_failure)


def test_rollouts_cut_by_the_wall_clock_budget_are_counted_with_the_remedy() -> None:
    records = [_rollout(BUDGET)] * 3 + [_rollout("agent: limit: the turn limit (6) ran out")]
    records += [_rollout(None)] * 4 + [_rollout(BUDGET, floor=True)]
    cut = holdout_cuts(records)
    assert cut is not None
    assert cut.startswith("4 of 9 rollouts ended early; most often: limit: the episode's")
    assert "(420 s) ran out ×3" in cut
    assert cut.endswith("lower --concurrency or raise --rollout-timeout)")


def test_no_cut_says_nothing_and_a_turn_limit_names_no_remedy() -> None:
    assert holdout_cuts([_rollout(None)] * 3) is None
    only_turns = holdout_cuts([_rollout("agent: limit: the turn limit (6) ran out")])
    assert (
        only_turns
        == "1 of 1 rollouts ended early; most often: limit: the turn limit (6) ran out ×1"
    )


def test_the_holdout_line_carries_the_cut_after_the_figures() -> None:
    line = _fmt({"mean": -0.9, "se": 0.05, "tool_call_rate": 1.0, "cut": "24 of 32 rollouts …"})
    assert line == "-0.900 ± se 0.050, tool-call rate 100% (24 of 32 rollouts …)"
