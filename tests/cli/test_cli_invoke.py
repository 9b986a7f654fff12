"""`agent-kit invoke`'s turn-by-turn view of one Wordle rollout (a real agent subprocess)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_kit.cli import main

pytestmark = pytest.mark.e2e

WORDLE = Path(__file__).resolve().parents[2] / "examples" / "wordle"


def test_invoke_shows_the_last_tool_result_and_one_rounded_breakdown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The view ends with the last tool call's result (from the agent's tool log: no request
    follows it), prints the reward breakdown once as a table rounded to 4 significant digits,
    the reward rounded, and never the breakdown again as raw JSON."""
    code = main(
        [
            "invoke",
            str(WORDLE / "agent.py"),
            "--dataset",
            str(WORDLE / "holdout.jsonl"),
            "--row",
            "0",
            "--policy",
            f"scripted:{WORDLE / 'policies.py'}:Solver",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    last_call = max(i for i, line in enumerate(lines) if "tool call: guess_word" in line)
    after = "\n".join(lines[last_call + 1 :])
    assert "tool result ← guess_word" in after
    assert "Solved in" in after
    assert '"contribution"' not in out  # no raw JSON of the breakdown
    rows = [line.split() for line in lines if line.startswith("  strategy ")]
    assert len(rows) == 1  # one breakdown row, printed once
    assert rows[0][1:] == ["strategy", "0.633", "0.04", "0.02532"]
    assert "0.6330468459074997" not in out  # 16-digit floats are rounded
    assert "0.633" in out
    reward_line = next(line for line in lines if line.startswith("reward (UpdateReward): "))
    assert reward_line == "reward (UpdateReward): 1.37532"
    answer = next(line for line in lines if line.startswith("agent answered (ok): "))
    assert "stop_reason finished" in answer
