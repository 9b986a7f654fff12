"""Auxiliary calls recorded and replayed deterministically (real processes, loopback).

Two judges awaited together (``asyncio.gather``) against an auxiliary model with latency are
in flight at once: each gets its own auxiliary index, and ``agent-kit replay`` answers each from
the recording by content, so every episode replays identical. A judge whose rubric changed
since the recording shows where its call diverged (which judge, the first differing field, the
diff), not only "reward changed".
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_kit.emulator.aux_replies import judge_reply
from agent_kit.emulator.schemas import PolicyReply, PolicyRequest
from agent_kit.store import RunStore

pytest.importorskip("strands_evals")
pytestmark = pytest.mark.e2e

CLI = shutil.which("agent-kit", path=str(Path(sys.executable).parent)) or "agent-kit"
HERE = Path(__file__).resolve()

ENTRYPOINT = """
import asyncio
from agent_kit import Environment, Judge, Reward, RolloutApp

RESOLUTION = Judge("RUBRIC-A: was the case resolved?", name="resolution")
TONE = Judge("RUBRIC-B: was the agent courteous?", name="tone")


class Case(Environment):
    def reset(self, task: dict) -> str:
        return task["ask"]


async def reward(env, episode) -> Reward:
    resolution, tone = await asyncio.gather(
        RESOLUTION.score(env, episode), TONE.score(env, episode)
    )
    return Reward.weighted(resolution=resolution, tone=tone)


app = RolloutApp(Case, reward=reward, system_prompt="Help.", max_turns=2)
if __name__ == "__main__":
    app.run()
"""


def answer(request: PolicyRequest) -> str:
    """The agent's one answer."""
    return "Your refund is on its way. Thank you for waiting."


async def slow_judge(request: PolicyRequest) -> PolicyReply:
    """Judge A answers after judge B: the two calls are in flight together and finish in the
    other order than they were asked."""
    prompt = str(request.messages[-1].get("content") or "")
    if "RUBRIC-A" in prompt:
        await asyncio.sleep(0.3)
        return judge_reply(0.9, "resolved")
    return judge_reply(0.6, "courteous")


def _agent_kit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_KIT_AUX")}
    return subprocess.run(
        [CLI, *args], capture_output=True, text=True, timeout=600, check=False, cwd=cwd, env=env
    )


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the recorded run, its entrypoint): 2 cases × 2, both judges gathered per episode."""
    tmp = tmp_path_factory.mktemp("aux-replay")
    entry = tmp / "agent.py"
    entry.write_text(ENTRYPOINT, encoding="utf-8")
    data = tmp / "cases.jsonl"
    rows = [{"prompt": json.dumps({"ask": f"Refund order {n}, please."})} for n in (1, 2)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    proc = _agent_kit(
        "run", str(entry), "--dataset", str(data), "--group-size", "2",
        "--policy", f"scripted:{HERE}:answer", "--aux-policy", f"scripted:{HERE}:slow_judge",
        "--out", str(tmp / "runs"), "--name", "gathered", "--json",
        cwd=tmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (run_dir,) = (tmp / "runs").glob("*/")
    return run_dir, entry


def test_two_gathered_judges_get_their_own_index_and_replay_identical(
    judged: tuple[Path, Path],
) -> None:
    """Every episode's two judge calls are recorded under two indexes, the slower judge's
    second (finish order), and the replay answers each by content: all identical."""
    run_dir, entry = judged
    with RunStore.open(run_dir, readonly=True) as store:
        (job,) = store.list_jobs()
        calls = store.job_aux_turns(job.arn)
    assert len(calls) == 4
    for rows in calls.values():
        assert [r.idx for r in rows] == [0, 1]
        assert "RUBRIC-A" in json.dumps(rows[1].request)  # the slow judge finished last
    proc = _agent_kit("replay", str(run_dir), "--json", cwd=entry.parent)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {e["status"] for e in report["episodes"]} == {"identical"}, report
    assert proc.returncode == 0


def test_a_changed_rubric_shows_the_auxiliary_divergence(judged: tuple[Path, Path]) -> None:
    """Replayed through an entrypoint whose judge's rubric changed, each episode is reported
    diverged at that judge's auxiliary call, naming the judge, with the rubric in the diff."""
    run_dir, entry = judged
    edited = entry.with_name("agent_edited.py")
    edited.write_text(
        entry.read_text(encoding="utf-8").replace("RUBRIC-B: was", "RUBRIC-C: was"),
        encoding="utf-8",
    )
    proc = _agent_kit(
        "replay", str(run_dir), "--entrypoint", str(edited), "--json", cwd=entry.parent
    )
    assert proc.returncode == 10, proc.stderr[-2000:]
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    for episode in report["episodes"]:
        assert episode["status"] == "diverged", episode
        assert episode["where"].startswith("auxiliary call "), episode
        assert "(judge 'tone')" in episode["where"]
        assert "RUBRIC-C" in episode["diff"]
    text = _agent_kit("replay", str(run_dir), "--entrypoint", str(edited), cwd=entry.parent)
    assert "diverged at auxiliary call" in text.stdout + text.stderr
