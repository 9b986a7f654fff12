"""Agent-side failures are data you can see: summary.json names every reason with its ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_kit.driver.job import JobConfig
from agent_kit.driver.local import run_local
from agent_kit.reporting.summary import agent_failure_of

pytestmark = pytest.mark.e2e

AGENTS = Path(__file__).parents[1] / "agents"

ENTRY = '''
import math

from agent_kit import Environment, Reward, RolloutApp, tool


class Env(Environment):
    def reset(self, task):
        self.task = task
        return "say something"

    @tool
    def say(self, n: int) -> str:
        """Say a number.

        Args:
            n: the number
        """
        self.finish()
        return "ok"


def reward(env, episode):
    if env.task.get("bad") == "raise":
        raise ValueError("the reward function broke on purpose")
    if env.task.get("bad") == "nan":
        return Reward.weighted(outcome=(math.nan, 1.0))
    return Reward.weighted(outcome=(1.0, 1.0))


app = RolloutApp(Env, reward=reward, max_turns=4)
if __name__ == "__main__":
    app.run()
'''

POLICY = """
def policy(request):
    if not request.tool_results():
        return {"tool_calls": [{"name": "say", "arguments": {"n": 1}}]}
    return "done"
"""


async def test_reward_that_raises_or_is_nan_is_listed_by_reason(tmp_path: Path) -> None:
    """Half the rollouts' rewards raise or are NaN: summary.json counts each reason with ids."""
    (tmp_path / "agent.py").write_text(ENTRY)
    (tmp_path / "pol.py").write_text(POLICY)
    tasks = [{"bad": "raise"}, {"bad": "nan"}, {"ok": 1}, {"ok": 2}]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": json.dumps(t)}) + "\n" for t in tasks))
    config = JobConfig(
        name="faults", group_size=2, concurrency=4, policy=f"scripted:{tmp_path / 'pol.py'}:policy"
    )
    result = await run_local(str(tmp_path / "agent.py"), data, config, out_dir=tmp_path)
    assert result.status == "completed"
    summary = json.loads((result.run_dir / "summary.json").read_text())
    failures = {f["reason"]: f for f in summary["agent_failures"]}
    raised = [r for r in failures if "the reward function broke on purpose" in r]
    assert len(raised) == 1
    assert raised[0].startswith("reward: ")
    assert failures[raised[0]]["count"] == 2
    assert failures[raised[0]]["floor_rewards"] == 2
    assert all("-p0-" in t for t in failures[raised[0]]["trajectory_ids"])
    nan = [r for r in failures if r.startswith("reward: ") and "finite" in r]
    assert len(nan) == 1
    assert failures[nan[0]]["count"] == 2
    assert summary["floor_rewards"] == 4
    assert sum(f["count"] for f in summary["agent_failures"]) == 4


def test_foreign_agent_error_answer_is_its_failure() -> None:
    """A foreign agent's error answer is recorded as its failure; a clean answer is none."""
    failed = {"status": "error", "http_status": 500, "error": "agent answered HTTP 500: boom"}
    assert agent_failure_of(failed) == ("agent: agent answered HTTP 500: boom", False)
    assert agent_failure_of({"status": "ok", "body": {"reward": 1.0}}) == (None, False)
    app_failure = {
        "status": "ok",
        "body": {"failure": {"boundary": "policy", "reason": "HTTP 500"}, "floor_reward": True},
    }
    assert agent_failure_of(app_failure) == ("policy: HTTP 500", True)
