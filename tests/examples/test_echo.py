"""examples/echo, the task `agent-kit train` learns on a CPU: its graded reward, played
in-process through the real entrypoint with scripted replies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
