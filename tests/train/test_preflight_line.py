"""The preflight's verdict fits the run: a solved task is said to be solved, and a run that has
a warm start is not told to add one."""

from __future__ import annotations

from agent_kit.train.preflight import Preflight


def _probe(low: float, high: float, *, warm: bool = False) -> Preflight:
    return Preflight(
        groups=2,
        equal_groups=2,
        rollouts=8,
        reward_min=low,
        reward_max=high,
        tool_call_rate=1.0,
        success_threshold=1.0,
        warm=warm,
    )


def test_every_rollout_succeeding_is_a_solved_task_not_a_call_for_a_warm_start() -> None:
    """All groups equal because all succeed: solved at this size, harder prompts or reward."""
    line = _probe(1.2, 1.55, warm=True).line()
    assert "solved at this size" in line
    assert "harder prompts or a stricter reward" in line
    assert "--warm-start" not in line
    assert "--force" in line


def test_a_run_with_a_warm_start_is_not_told_to_add_one() -> None:
    """Every group on the floor after a warm start: better episodes or epochs, not --warm-start."""
    line = _probe(-1.5, -1.5, warm=True).line()
    assert "nothing to learn" in line
    assert "solved" not in line
    assert "--warm-start " not in line
    assert "--warm-start-epochs" in line
    assert "graded reward" in line


def test_a_run_without_one_is_offered_the_warm_start() -> None:
    """The base model on the floor: the warm start is the first remedy."""
    line = _probe(-1.5, -1.5).line()
    assert "--warm-start RUN_DIR" in line
    assert "solved" not in line
