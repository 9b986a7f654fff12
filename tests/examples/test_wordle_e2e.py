"""The Wordle example end to end: `agent-kit run` → emulator → agent subprocess → Strands → reward.

Real processes and sockets on loopback, nothing mocked: the CLI starts the emulator, the agent
(``examples/wordle/agent.py``) as a subprocess, and plays the dataset with the scripted policies.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_kit.store import RunStore

ROOT = Path(__file__).resolve().parents[2]
WORDLE = ROOT / "examples" / "wordle"

pytestmark = pytest.mark.e2e


def agent_kit_run(
    tmp_path: Path, dataset: Path, policy: str, *extra: str
) -> tuple[dict[str, Any], RunStore]:
    """Run ``agent-kit run`` on the Wordle agent; return the summary JSON and the run store."""
    cli = shutil.which("agent-kit", path=str(Path(sys.executable).parent)) or "agent-kit"
    out = tmp_path / "runs"
    cmd = [
        cli, "run", str(WORDLE / "agent.py"), "--dataset", str(dataset),
        "--policy", f"scripted:{WORDLE / 'policies.py'}:{policy}",
        "--json", "--out", str(out), "--name", f"wordle-e2e-{policy.lower()}", *extra,
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    (store_path,) = out.glob("*/run.sqlite")
    return summary, RunStore.open(store_path, readonly=True)


def policy_view(request: dict[str, Any]) -> str:
    """Everything in a chat request the policy reads: message texts, tool calls and tool specs."""
    parts: list[str] = []
    for message in request.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            parts += [str(p.get("text", "")) for p in content if isinstance(p, dict)]
        elif content is not None:
            parts.append(str(content))
        for call in message.get("tool_calls") or []:
            parts.append(json.dumps(call.get("function", {})))
    parts.append(json.dumps(request.get("tools", [])))
    return "\n".join(parts)


def test_solver_holdout_run_every_trajectory_rewarded(tmp_path: Path) -> None:
    """The README's `make run` command completes: 32 words × 4 rollouts, all REWARDED, answers never
    in any request the policy received, and (nearly) every rollout solved."""
    summary, store = agent_kit_run(
        tmp_path, WORDLE / "holdout.jsonl", "Solver", "--group-size", "4", "--temperature", "0.7"
    )
    with store:
        trajectories = store.list_trajectories()
        assert len(trajectories) == 128
        assert {t.state for t in trajectories} == {"REWARDED"}
        assert summary["run"]["rewarded"] == 128
        requests = solved = 0
        for t in trajectories:
            answer = json.loads(t.prompt)["answer"]
            word = re.compile(rf"\b{answer}\b", re.IGNORECASE)
            turns = store.list_turns(t.id)
            assert 1 <= len(turns) <= 6
            for turn in turns:
                assert not word.search(policy_view(turn.request)), (t.id, turn.idx)
                requests += 1
            reward = store.get_reward(t.id)
            assert reward is not None
            solved += reward.total >= 1.0
        assert requests == summary["run"]["turns"]
        assert solved >= 0.95 * len(trajectories)


def test_sloppy_text_guesses_are_recovered_through_the_real_agent(tmp_path: Path) -> None:
    """Guesses Sloppy writes as text are executed by the real agent loop: the next request carries
    their feedback, and every trajectory still ends REWARDED."""
    dataset = tmp_path / "few.jsonl"
    dataset.write_text(
        "".join((WORDLE / "holdout.jsonl").read_text().splitlines(keepends=True)[:8])
    )
    _, store = agent_kit_run(tmp_path, dataset, "Sloppy", "--group-size", "2", "--seed", "3")
    recovered = 0
    with store:
        trajectories = store.list_trajectories()
        assert len(trajectories) == 16
        assert {t.state for t in trajectories} == {"REWARDED"}
        for t in trajectories:
            turns = store.list_turns(t.id)
            for before, after in itertools.pairwise(turns):
                choice = before.response["choices"][0]
                if choice["message"].get("tool_calls"):
                    continue
                last = after.request["messages"][-1]
                text = (
                    last["content"]
                    if isinstance(last["content"], str)
                    else json.dumps(last["content"])
                )
                assert last["role"] == "user"
                assert "Result of the tool call written in your message" in text
                assert re.search(r"Guess \d of 6: [A-Z]{5}|\"[a-z]+\" is not", text)
                recovered += 1
    assert recovered > 0
