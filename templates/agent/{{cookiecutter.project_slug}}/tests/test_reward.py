"""The reward ranks episodes the way training should: solved fast > solved slow > unsolved."""

from __future__ import annotations

from typing import Any

import pytest
from agent_kit import Episode

from agent import {{ cookiecutter.environment_class }}, reward

# TODO: when you change the task, rewrite these cases with episodes of your own task.
TASK = {"id": "reward_case", "low": 1, "high": 100, "max_guesses": 7, "secret": 37}


def play(guesses: list[int], task: dict[str, Any] = TASK) -> float:
    """Play ``guesses`` (stopping when the game ends) and return the episode's total reward."""
    env = {{ cookiecutter.environment_class }}()
    prompt = env.reset(task)
    for number in guesses:
        if env.done:
            break
        env.{{ cookiecutter.tool_name }}(number)
    return reward(env, Episode(task=task, prompt=prompt)).total


def test_solving_beats_not_solving() -> None:
    """A solved episode, even the slowest, scores above any unsolved one."""
    slowest_solve = play([1, 2, 3, 4, 5, 6, 37])
    assert slowest_solve >= 1.0
    assert slowest_solve > play([1, 2, 3, 4, 5, 6, 7])
    assert slowest_solve > play([])


def test_fewer_guesses_score_higher() -> None:
    """Among solved episodes, the one with fewer guesses gets the higher reward."""
    assert play([37]) > play([50, 25, 37]) > play([50, 25, 30, 35, 37])


def test_unsolved_and_idle_episodes_score_zero() -> None:
    """Running out of guesses and never guessing both score exactly 0."""
    assert play([1, 2, 3, 4, 5, 6, 7]) == 0.0
    assert play([]) == 0.0


def test_guessing_stops_after_the_budget() -> None:
    """After max_guesses the game is over and further guesses are refused."""
    env = {{ cookiecutter.environment_class }}()
    env.reset(TASK)
    for number in range(1, 8):
        env.{{ cookiecutter.tool_name }}(number)
    assert env.done
    assert env.{{ cookiecutter.tool_name }}(37) == "The game is over."
    assert not env.solved


def test_first_message_hides_the_secret(train_tasks: list[dict[str, Any]]) -> None:
    """The user message depends on the range and budget only, never on the hidden number."""
    for task in train_tasks:
        message = {{ cookiecutter.environment_class }}().reset(task)
        other = {**task, "secret": task["low"] if task["secret"] != task["low"] else task["high"]}
        assert {{ cookiecutter.environment_class }}().reset(other) == message


@pytest.mark.parametrize("split", ["train", "holdout"])
def test_dataset_tasks_are_solvable_by_halving(split: str, request: pytest.FixtureRequest) -> None:
    """Every dataset task can be solved within its budget by halving the range."""
    tasks: list[dict[str, Any]] = request.getfixturevalue(f"{split}_tasks")
    assert tasks
    for task in tasks:
        low, high, guesses = task["low"], task["high"], []
        while low <= high and len(guesses) < task["max_guesses"]:
            mid = (low + high) // 2
            guesses.append(mid)
            if mid == task["secret"]:
                break
            low, high = (mid + 1, high) if task["secret"] > mid else (low, mid - 1)
        assert play(guesses, task) >= 1.0, task["id"]
