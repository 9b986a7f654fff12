"""Golden episode: known tool calls give known tool answers and a known reward.

Two checks of the same episode: one drives the environment and the reward directly (no agent,
no policy), the other runs the real entrypoint (``agent.app``: Strands agent, tool calls,
reward) with a scripted policy through ``agent_kit.testing.run_episode``.

TODO: when you change the task, the tool or the reward weights, update GOLDEN_* below.
"""

from __future__ import annotations

import pytest
from agent_kit import Episode
from agent_kit.emulator import PolicyReply, PolicyRequest, ToolCall
from agent_kit.testing import run_episode

import agent
from agent import {{ cookiecutter.environment_class }}, reward

GOLDEN_TASK = {"id": "golden", "low": 1, "high": 100, "max_guesses": 7, "secret": 37}
GOLDEN_CALLS = [(50, "lower"), (25, "higher"), (37, "correct")]
GOLDEN_REWARD = 1.1142857142857143  # outcome 1.0 + efficiency 0.2 * 4 unused of 7 guesses


def test_golden_episode_direct() -> None:
    """Driving the environment with the golden calls yields the golden answers and reward."""
    env = {{ cookiecutter.environment_class }}()
    prompt = env.reset(GOLDEN_TASK)
    for number, answer in GOLDEN_CALLS:
        assert not env.done
        assert env.{{ cookiecutter.tool_name }}(number).startswith(answer)
    assert env.done
    scored = reward(env, Episode(task=GOLDEN_TASK, prompt=prompt))
    assert scored.total == pytest.approx(GOLDEN_REWARD)
    assert scored.breakdown()["outcome"]["value"] == 1.0


def golden_policy(request: PolicyRequest) -> PolicyReply:
    """Make the golden calls in order, one per turn."""
    turn = len(request.tool_results())
    if turn >= len(GOLDEN_CALLS):
        return PolicyReply(content="Done.")
    call = ToolCall("{{ cookiecutter.tool_name }}", {"number": GOLDEN_CALLS[turn][0]})
    return PolicyReply(tool_calls=(call,))


def test_golden_episode_through_the_app() -> None:
    """The real entrypoint plays the golden calls in three turns and returns the golden reward."""
    body = run_episode(agent.app, GOLDEN_TASK, policy=golden_policy)
    assert "failure" not in body, body
    assert body["reward"] == pytest.approx(GOLDEN_REWARD)
    assert body["turns"] == len(GOLDEN_CALLS)
    assert body["tool_calls"] == len(GOLDEN_CALLS)
    assert body["reward_breakdown"]["outcome"]["value"] == 1.0
