"""The support agent under the emulator: judged reward terms and a simulated customer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_agent_runs_offline_with_a_judged_reward(tmp_path: Path) -> None:
    """`agent-kit run` with the scripted policy, judge and customer rewards every rollout with
    the judged resolution term and counts the auxiliary calls."""
    cmd = [
        sys.executable, "-m", "agent_kit.cli", "run", str(ROOT / "agent.py"),
        "--dataset", str(ROOT / "data" / "cases.jsonl"),
        "--policy", f"scripted:{ROOT / 'policies.py'}:SupportAgent",
        "--aux-policy", f"scripted:{ROOT / 'policies.py'}:Aux",
        "--group-size", "2", "--json", "--out", str(tmp_path),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["counts"]["rewarded"] == summary["counts"]["slots"]
    assert summary["auxiliary"]["by_kind"]["judge"]["calls"] > 0
