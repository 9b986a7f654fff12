"""What a holdout row says: rollouts the agent ended early (``holdout_cuts``), rollouts that hit
the token limit, the task's own figures, and the paired differences at its end."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from agent_kit.cli.train import _fmt
from agent_kit.evaluation.rollouts import holdout_cuts
from agent_kit.reporting.train_view import difference_line

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


def test_the_holdout_line_names_token_limited_rollouts_and_the_task_figures() -> None:
    """A row whose rollouts hit the token limit says how many, with the cell's name; the
    task's shares are percentages."""
    figures = {
        "mean": 0.25,
        "se": 0.1,
        "pass_at_k": {"1": 0.2, "4": 0.5},
        "tool_call_rate": 0.5,
        "task": {"solved": 0.25, "valid_guess_rate": 0.875},
        "token_limited": 5,
        "n": 8,
    }
    assert _fmt(figures, "base") == (
        "0.250 ± se 0.100, pass@k 0.500, tool-call rate 50%, solved 25%, valid_guess_rate 88% "
        "(5 of 8 base rollouts hit the token limit)"
    )


def test_a_difference_line_says_paired_and_its_verdict() -> None:
    """Each difference reads a − b, its SE, what it is paired over, and the verdict."""
    within = {"a": "adapter", "b": "warm", "difference": 0.05, "se": 0.09, "paired": True,
              "prompts": 8, "beyond_2se": False}  # fmt: skip
    assert difference_line(within) == (
        "adapter − warm: +0.050 ± se 0.090 (paired over 8 prompts): within two SE (noise)"
    )
    beyond = {**within, "difference": -0.3, "se": 0.1, "paired": False, "beyond_2se": True}
    assert difference_line(beyond) == "adapter − warm: -0.300 ± se 0.100 (unpaired): beyond two SE"
