"""Agent-side failures are data you can see: summary.json names every reason with its ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import SAY_AGENT, SAY_POLICY, SAY_RAISES_AT

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.local import run_local
from agent_kit.store.records import agent_failure_of

pytestmark = pytest.mark.e2e


async def test_reward_that_raises_or_is_nan_is_listed_by_reason(tmp_path: Path) -> None:
    """Half the rollouts' rewards raise or are NaN: summary.json counts each reason with ids,
    and a raising reward names its file and line (summary.json, report.html)."""
    tasks = [{"bad": "raise"}, {"bad": "nan"}, {"ok": 1}, {"ok": 2}]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": json.dumps(t)}) + "\n" for t in tasks))
    config = JobConfig(name="faults", group_size=2, concurrency=4, policy=SAY_POLICY)
    result = await run_local(
        RunConfig(entrypoint=str(SAY_AGENT), dataset=data, job=config, out=tmp_path)
    )
    assert result.status == "completed"
    summary = json.loads((result.run_dir / "summary.json").read_text())
    failures = {f["reason"]: f for f in summary["agent_failures"]}
    raised = [r for r in failures if "the reward function broke on purpose" in r]
    assert len(raised) == 1
    assert raised[0].startswith("reward: ")
    where = SAY_RAISES_AT
    assert raised[0].endswith(where), raised[0]
    assert where in (result.run_dir / "report.html").read_text()
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


def test_where_names_the_users_frames_only_and_is_bounded(tmp_path: Path) -> None:
    """where_of keeps the last frames outside agent_kit and libraries, innermost last, as
    file:line in function, at most three of them and 300 characters."""
    from agent_kit.agent_turns import where_of

    code = "def inner():\n    raise ValueError('x')\n" + "".join(
        f"def f{i}():\n    {'inner' if i == 0 else f'f{i - 1}'}()\n" for i in range(5)
    )
    path = tmp_path / "user_code.py"
    path.write_text(code)
    scope: dict[str, object] = {}
    exec(compile(code, str(path), "exec"), scope)  # noqa: S102 - the test's own code
    try:
        scope["f4"]()  # type: ignore[operator]
    except ValueError as exc:
        where = where_of(exc)
    assert where is not None
    assert where.endswith("user_code.py:2 in inner")
    assert where.count("→") == 2
    assert len(where) <= 300
    try:
        json.loads("{")
    except ValueError as exc:
        only_ours = where_of(exc)  # json's own frames are a library's: left out
    assert only_ours is not None
    assert only_ours.startswith("test_agent_failures.py:")
    assert "json" not in only_ours


def test_invoke_names_where_the_reward_raised(capsys: pytest.CaptureFixture[str]) -> None:
    """`agent-kit invoke` on a rollout whose reward raises exits 6 naming the reward's file and
    line, not only "ValueError: …"."""
    from agent_kit.cli import main

    code = main(["invoke", str(SAY_AGENT), "--prompt", '{"bad": "raise"}', "--policy", SAY_POLICY])
    captured = capsys.readouterr()
    assert code == 6
    assert SAY_RAISES_AT in captured.err + captured.out
