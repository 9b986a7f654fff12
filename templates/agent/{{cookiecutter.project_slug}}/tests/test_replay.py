"""Replay regression: episodes recorded with the scripted policy must replay identically.

A replay re-runs ``agent.py`` with the recorded policy responses served back; any change in
what the agent sends, what the tool answers or what the reward says is reported at the exact
turn. To pin a recording in the repository instead of recording here::

    agent-kit run agent.py --dataset data/train.jsonl --policy scripted:policies.py:binary_search
    agent-kit replay export runs/<run> --out tests/golden.cassette.jsonl

and assert ``assert_replays(PROJECT_DIR / "tests" / "golden.cassette.jsonl")``.
"""

from __future__ import annotations

import json
from pathlib import Path

from agent_kit.testing import assert_replays, recorded_run

PROJECT_DIR = Path(__file__).resolve().parent.parent
PROMPTS = [
    json.loads(line)["prompt"]
    for line in (PROJECT_DIR / "data" / "train.jsonl").read_text().splitlines()[:3]
]

recording = recorded_run(
    PROJECT_DIR / "agent.py",
    PROMPTS,
    policy=f"scripted:{PROJECT_DIR / 'policies.py'}:binary_search",
    group_size=2,
    temperature=1.0,
)


def test_recorded_episodes_replay_identically(recording: Path) -> None:
    """Every recorded episode replays with the same requests and the same reward, in process."""
    report = assert_replays(recording, in_process=True)
    assert report.counts["identical"] == 6


def test_replay_through_the_agent_process(recording: Path) -> None:
    """The same episodes replay identically through the real agent process and emulator."""
    assert assert_replays(recording).counts["identical"] == 6
