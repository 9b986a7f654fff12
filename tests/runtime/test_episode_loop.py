"""The episode runner, driven in-process by scripted policies through a real Strands agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_kit import Environment, Reward, RolloutApp, TextToolCall, tool
from agent_kit.emulator import PolicyReply, PolicyRequest, ToolCall
from agent_kit.testing import ScriptedModel, load_app, run_episode

EXAMPLE = Path(__file__).parents[1] / "example_counter.py"


def add_until(target: int) -> Any:
    """A policy that calls add(1) until the tool says the target is reached."""

    def policy(request: PolicyRequest) -> PolicyReply | str:
        results = request.tool_results()
        if results and results[-1] == f"value={target}":
            return "done"
        return PolicyReply(tool_calls=(ToolCall("add", {"n": 1}),))

    return policy


def test_example_episode_finishes_without_an_extra_policy_call() -> None:
    """finish() inside a tool ends the loop: 3 add calls are 3 turns, not 4."""
    body = run_episode(EXAMPLE, {"target": 3}, policy=add_until(3))
    assert body["turns"] == 3
    assert body["tool_calls"] == 3
    assert body["stop_reason"] == "finished"
    assert body["reward"] == pytest.approx(1.0 - 0.03)
    assert body["reward_breakdown"]["outcome"]["value"] == 1.0
    assert body["usage"]["input_tokens"] > 0
    assert body["usage"]["output_tokens"] > 0
    assert "failure" not in body


def test_fresh_environment_per_rollout() -> None:
    """Two episodes on one app never share environment state."""
    app = load_app(EXAMPLE)
    first = run_episode(app, {"target": 2}, policy=add_until(2))
    second = run_episode(app, {"target": 2}, policy=add_until(2))
    assert first["turns"] == second["turns"] == 2


def test_hidden_task_fields_never_reach_the_policy() -> None:
    """Only reset()'s message reaches the policy, not the other fields of the task JSON."""
    seen: list[PolicyRequest] = []

    def policy(request: PolicyRequest) -> PolicyReply:
        seen.append(request)
        return PolicyReply(tool_calls=(ToolCall("add", {"n": 5}),))

    run_episode(EXAMPLE, {"target": 5, "secret": "zebra-answer"}, policy=policy)
    assert seen
    assert all("zebra-answer" not in json.dumps(r.raw) for r in seen)


def test_turn_limit_cuts_the_episode_and_it_is_still_scored() -> None:
    """A policy that never finishes is stopped at max_turns and scored by the reward function."""
    body = run_episode(EXAMPLE, {"target": 100}, policy=add_until(100))
    assert body["turns"] == 8
    assert body["stop_reason"] == "limit_turns"
    assert body["reward_breakdown"]["outcome"]["value"] == 0.0


def test_malformed_tool_arguments_are_the_policys_fault_not_a_crash() -> None:
    """Arguments that fail the tool schema give the policy an error result; the episode goes on."""
    calls = iter([{"n": "many"}, {"n": 1}])

    def policy(request: PolicyRequest) -> PolicyReply | str:
        if request.tool_results() and request.tool_results()[-1] == "value=1":
            return "ok"
        return PolicyReply(tool_calls=(ToolCall("add", next(calls)),))

    body = run_episode(EXAMPLE, {"target": 1}, policy=policy)
    assert "failure" not in body
    assert body["tool_calls"] == 2
    assert body["stop_reason"] == "finished"


class Exploding(Environment):
    """An environment whose tool raises: a broken environment, not a bad move."""

    def reset(self, task: dict[str, Any]) -> str:
        return "call boom"

    @tool
    def boom(self) -> str:
        """Explode."""
        raise RuntimeError("disk on fire")


def test_environment_exception_gives_the_floor_reward_with_the_reason() -> None:
    """A tool that raises ends the episode with the floor reward and records the boundary."""
    app = RolloutApp(Exploding, reward=lambda env, ep: 1.0, floor_reward=-2.0)
    body = run_episode(
        app, {"x": 1}, policy=lambda r: PolicyReply(tool_calls=(ToolCall("boom", {}),))
    )
    assert body["reward"] == -2.0
    assert body["floor_reward"] is True
    assert body["failure"]["boundary"] == "environment"
    assert "disk on fire" in body["failure"]["reason"]


def test_nan_reward_gives_the_floor_reward() -> None:
    """A reward function returning NaN is replaced by the floor, with the reason recorded."""
    app = load_app(EXAMPLE)
    saved = app.reward_fn
    app.reward_fn = lambda env, ep: float("nan")
    try:
        body = run_episode(app, {"target": 1}, policy=add_until(1))
    finally:
        app.reward_fn = saved
    assert body["reward"] == app.settings.floor_reward
    assert body["failure"]["boundary"] == "reward"
    assert "finite" in body["failure"]["reason"]


def test_policy_exception_gives_the_floor_reward() -> None:
    """A failing policy call is recorded at the policy boundary and floored."""

    def policy(request: PolicyRequest) -> PolicyReply:
        raise ConnectionError("endpoint unreachable")

    body = run_episode(EXAMPLE, {"target": 1}, policy=policy)
    assert body["failure"]["boundary"] == "policy"
    assert "endpoint unreachable" in body["failure"]["reason"]
    assert body["turns"] == 0
    assert body["reward"] == -1.0


class TextGuess(Environment):
    """Recovers `press(N)` written as text."""

    def reset(self, task: dict[str, Any]) -> str:
        self.pressed: list[int] = []
        return "press 7"

    @tool
    def press(self, n: int) -> str:
        """Press a button.

        Args:
            n: button number
        """
        self.pressed.append(n)
        if n == 7:
            self.finish()
        return f"pressed {n}"

    def parse_text_tool_calls(self, text: str) -> list[TextToolCall]:
        if text.startswith("press(") and text.endswith(")"):
            return [TextToolCall("press", {"n": int(text[6:-1])}, text)]
        return []


def test_tool_calls_written_as_text_are_executed_and_flagged() -> None:
    """A call the policy wrote as text runs the tool and is marked recovered for the reward."""

    def reward(env: TextGuess, episode: Any) -> Reward:
        return Reward.weighted(
            outcome=(float(7 in env.pressed), 1.0),
            format=(-len(episode.recovered_calls), 0.1),
        )

    app = RolloutApp(TextGuess, reward=reward)
    body = run_episode(app, {}, policy=lambda r: "press(7)")
    assert body["recovered_tool_calls"] == 1
    assert body["stop_reason"] == "finished"
    assert body["reward"] == pytest.approx(0.9)


def test_bad_task_for_the_environment_is_a_contract_error() -> None:
    """A prompt the environment cannot play (missing field) is refused as a bad payload."""
    from agent_kit.errors import ContractError

    with pytest.raises(ContractError, match="cannot play this task"):
        run_episode(EXAMPLE, {"nothing": 1}, policy=add_until(1))


def test_scripted_model_passes_sampling_parameters_to_the_policy() -> None:
    """The temperature of the payload reaches the policy request."""
    model = ScriptedModel(lambda r: "hi", temperature=0.25)
    request = model._request([{"role": "user", "content": [{"text": "x"}]}], [], "sys")
    assert request.temperature == 0.25
    assert request.messages[0] == {"role": "system", "content": "sys"}
    assert request.messages[1]["content"] == "x"


class _Loud(Environment):
    """Every tool call answers a long text."""

    def reset(self, task: dict[str, Any]) -> str:
        return "shout"

    @tool
    def shout(self, word: str) -> str:
        """Shout a word.

        Args:
            word: the word
        """
        return word * 5000


def test_answer_carries_the_final_tool_results_bounded() -> None:
    """The answer's tool_log holds the results of the last turn's tool calls (no later request
    shows them), at most 8 of them, each output clipped to 2000 characters, long inputs to 500."""
    app = RolloutApp(_Loud, reward=lambda env, ep: 1.0, max_turns=1)
    calls = tuple(ToolCall("shout", {"word": "ab" * (300 if i == 9 else 1)}) for i in range(10))
    body = run_episode(app, {}, policy=lambda r: PolicyReply(tool_calls=calls))
    log = body["tool_log"]
    assert body["turns"] == 1
    assert len(log) == 8
    assert {e["turn"] for e in log} == {0}
    assert all(e["name"] == "shout" and e["status"] == "success" for e in log)
    assert all(len(e["output"]) <= 2000 for e in log)
    assert log[0]["output"].startswith("abab")
    assert log[0]["input"] == {"word": "ab"}
    assert isinstance(log[-1]["input"], str)
    assert len(log[-1]["input"]) == 500
    assert len(json.dumps(log)) < 8 * 2700


class Counted(Environment):
    """One tool; the environment declares its own figures (good ones, and ones left out)."""

    def reset(self, task: dict[str, Any]) -> str:
        self.calls = 0
        self.broken = bool(task.get("broken"))
        return "go"

    @tool
    def step(self) -> str:
        """Count one step and finish."""
        self.calls += 1
        self.finish()
        return "done"

    def metrics(self) -> dict[str, Any]:
        if self.broken:
            raise RuntimeError("no figures today")
        return {"solved": True, "calls": self.calls, "bad": float("nan"), "word": "x"}


def test_the_environments_own_figures_are_recorded_with_the_answer() -> None:
    """metrics() goes into the answer as finite floats (a bool as 1.0; nan and text left
    out); one that raises leaves the episode scored, without figures."""
    app = RolloutApp(Counted, reward=lambda env, ep: 1.0)
    step = PolicyReply(tool_calls=(ToolCall("step", {}),))
    body = run_episode(app, {}, policy=lambda r: step)
    assert body["metrics"] == {"solved": 1.0, "calls": 1.0}
    broken = run_episode(app, {"broken": True}, policy=lambda r: step)
    assert broken["reward"] == 1.0
    assert "metrics" not in broken
