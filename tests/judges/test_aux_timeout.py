"""A rollout that times out while its judge waits on a hung auxiliary model names that model.

Real processes on loopback (``agent-kit run``): the agent's judge calls the emulator's auxiliary
route, whose ``--aux-policy`` answers only long after the rollout timeout. The rollout ends
at its ``--rollout-timeout``, and its reason names the waiting judge and the auxiliary policy,
not only "no answer from the agent".
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_kit.emulator.schemas import PolicyReply, PolicyRequest
from agent_kit.store import RunStore

pytest.importorskip("strands_evals")
pytestmark = pytest.mark.e2e

CLI = shutil.which("agent-kit", path=str(Path(sys.executable).parent)) or "agent-kit"
HERE = Path(__file__).resolve()
#: The rollout timeout, and how long the hung judge holds its call (longer: it starts later).
TIMEOUT_S = 8
HUNG_S = TIMEOUT_S + 5

ENTRYPOINT = """
from agent_kit import Environment, Judge, Reward, RolloutApp

VERDICT = Judge("Was the case resolved?", name="verdict")


class Case(Environment):
    def reset(self, task: dict) -> str:
        return task["ask"]


async def reward(env, episode) -> Reward:
    return Reward.weighted(verdict=await VERDICT.score(env, episode))


app = RolloutApp(Case, reward=reward, system_prompt="Help.", max_turns=2)
if __name__ == "__main__":
    app.run()
"""


def answer(request: PolicyRequest) -> str:
    """The agent's one answer."""
    return "Your refund is on its way."


async def hung_judge(request: PolicyRequest) -> PolicyReply:
    """An auxiliary model that answers :data:`HUNG_S` s after the judge's call, which starts
    after the rollout does: still waiting when the rollout times out (5 s of margin), and not
    holding the emulator's shutdown long after."""
    await asyncio.sleep(HUNG_S)
    raise AssertionError("answered too late to matter")


def test_a_timeout_names_the_auxiliary_call_still_waiting(tmp_path: Path) -> None:
    entry = tmp_path / "agent.py"
    entry.write_text(ENTRYPOINT, encoding="utf-8")
    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps({"prompt": json.dumps({"ask": "Refund, please."})}) + "\n")
    aux = f"scripted:{HERE}:hung_judge"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_KIT_AUX")}
    proc = subprocess.run(
        [
            CLI, "run", str(entry), "--dataset", str(data), "--group-size", "2",
            "--policy", f"scripted:{HERE}:answer", "--aux-policy", aux,
            "--rollout-timeout", str(TIMEOUT_S), "--max-retries", "0", "--workers", "1",
            "--out", str(tmp_path / "runs"), "--name", "hung",
        ],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode != 0, proc.stderr[-3000:]
    with RunStore.open(tmp_path / "runs" / "hung", readonly=True) as store:
        reasons = [t.reason or "" for t in store.list_trajectories(states=["TIMED_OUT"])]
    assert len(reasons) == 2, (reasons, proc.stderr[-3000:])
    for reason in reasons:
        assert f"no answer from the agent within {TIMEOUT_S} s" in reason
        assert "its auxiliary call (judge 'verdict') was still waiting" in reason
        assert f"--aux-policy {aux}" in reason
