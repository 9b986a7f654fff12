"""examples/echo, the task `agent-kit train` learns on a CPU: its graded reward, played
in-process through the real entrypoint with scripted replies."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent_kit.emulator.schemas import PolicyRequest
from agent_kit.replay import replay_in_process, replay_run
from agent_kit.replay.helpers import record
from agent_kit.testing import run_episode

ECHO = Path(__file__).resolve().parents[2] / "examples" / "echo"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("musty", 1.0),  # exactly the word
        ("Musty.", 1.0),  # case and punctuation do not count
        ("Sure, I can repeat it: musty.", 0.6),  # the word, not alone
        ("Bridge.", 0.4),  # one word, not the one asked for
        ("It seems like you are asking about a very important subject.", 0.0),
    ],
)
def test_echo_reward_is_graded_so_a_group_differs(reply: str, expected: float) -> None:
    """The word is worth 0.6 and a one-word reply 0.4: exact echoes score 1, chatter less."""
    body = run_episode(ECHO / "agent.py", {"word": "musty"}, policy=lambda request: reply)
    assert body["reward"] == pytest.approx(expected)


def test_echo_datasets_are_disjoint_mtrl_rows() -> None:
    """train.jsonl and holdout.jsonl are MTRL rows whose words never overlap."""
    words = {}
    for name in ("train", "holdout"):
        rows = [json.loads(line) for line in (ECHO / f"{name}.jsonl").read_text().splitlines()]
        words[name] = {json.loads(row["prompt"])["word"] for row in rows}
        assert len(words[name]) == len(rows)
    assert not words["train"] & words["holdout"]


def say_the_word(request: PolicyRequest) -> str:
    """A scripted echo policy: the word the user named, alone."""
    return str(request.messages[-1].get("content") or "").rsplit(" ", 1)[-1]


@pytest.mark.e2e
def test_in_process_replay_agrees_with_the_subprocess_replay(tmp_path: Path) -> None:
    """A recorded echo run (a tool-less agent: its requests carry ``tools: []``) replays
    identical both in-process and through agent subprocesses, episode by episode."""
    rows = (ECHO / "holdout.jsonl").read_text().splitlines()[:2]
    run_dir = record(
        ECHO / "agent.py",
        [json.loads(r)["prompt"] for r in rows],
        policy=f"scripted:{Path(__file__).resolve()}:say_the_word",
        out_dir=tmp_path,
        name="echo",
    )
    inproc = replay_in_process(run_dir)
    sub = asyncio.run(replay_run(run_dir, out_dir=tmp_path / "replays"))
    verdicts = {e.trajectory_id: e.status for e in inproc.episodes}
    assert verdicts == {e.trajectory_id: e.status for e in sub.episodes}
    assert set(verdicts.values()) == {"identical"}, inproc.episodes[0]
