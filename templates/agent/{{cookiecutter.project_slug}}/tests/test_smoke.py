"""Emulator smoke run: the whole local pipeline plays the dataset and every rollout is rewarded.

``agent-kit run`` starts the entrypoint as a real process, serves the policy from the emulator
(here the scripted ``binary_search``), plays the dataset in groups like the service does, and
prints the run summary as JSON (its last stdout line).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

GROUP_SIZE = 2


def test_emulator_smoke_run(project_dir: Path, agent_kit_cli: list[str], tmp_path: Path) -> None:
    """Every rollout (holdout prompt, group member) ends rewarded, and halving solves them all."""
    completed = subprocess.run(
        [
            *agent_kit_cli,
            "run",
            "agent.py",
            "--dataset",
            "data/holdout.jsonl",
            "--policy",
            "scripted:policies.py:binary_search",
            "--group-size",
            str(GROUP_SIZE),
            "--temperature",
            "0",
            "--out",
            str(tmp_path / "runs"),
            "--json",
        ],
        cwd=project_dir,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    summary = json.loads(completed.stdout.strip().splitlines()[-1])  # the last line is the JSON
    rows = len((project_dir / "data" / "holdout.jsonl").read_text().splitlines())
    assert summary["counts"]["rewarded"] == rows * GROUP_SIZE
    assert summary["counts"]["lost"] == 0
    assert summary["metrics"]["rollout/reward/min"] >= 1.0  # temperature 0 halving always solves
