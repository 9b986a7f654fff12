"""``agent-kit doctor reward RUN_DIR --policy SPEC``: the training preflight as a finding.

Real parts: the run command records a run (agent subprocess, emulator), the doctor plays one
probe step of it with the given policy through the same driver.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import SUBMIT_AGENT, SUBMIT_EXPERT, WORDLE_AGENT, holdout, id_dataset, wordle_policy

from agent_kit.cli import main

AGENT, EXPERT = SUBMIT_AGENT, SUBMIT_EXPERT
pytestmark = pytest.mark.e2e


def test_a_policy_whose_probe_groups_are_all_equal_is_an_error_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The expert scores 1 in every probe rollout: the preflight finding is an error, exit 13,
    that says the task is solved at this size (not that a warm start is needed)."""
    data = id_dataset(tmp_path / "data.jsonl", 2)
    runs = tmp_path / "runs"
    argv = ["run", AGENT, "--dataset", str(data), "--out", str(runs), "--name", "r"]
    assert main([*argv, "--group-size", "2", "--workers", "1", "--policy", EXPERT, "--json"]) == 0
    capsys.readouterr()
    assert main(["doctor", "reward", str(runs / "r"), "--policy", EXPERT, "--json"]) == 13
    findings = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["findings"]
    (probe,) = [f for f in findings if f["check"] == "preflight"]
    assert probe["severity"] == "error"
    assert probe["title"].startswith("nothing to learn: the task is solved at this size")
    assert probe["hint"] == "try harder prompts or a stricter reward"
    assert probe["evidence"]["tool_call_rate"] == 1.0
    assert (runs / "r" / "preflight" / "run.sqlite").is_file()


def test_a_policy_whose_groups_differ_only_by_shaping_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Random Wordle guesses lose every game alike (outcome −0.5) while the shaping spreads the
    rewards: the preflight finding is a warning that the shaping dominates the outcome, and its
    hint names the outcome gate."""
    data = holdout(tmp_path / "data.jsonl", 2)
    runs = tmp_path / "runs"
    random = wordle_policy("Random")
    argv = ["run", str(WORDLE_AGENT), "--dataset", str(data), "--out", str(runs), "--name", "w"]
    assert main([*argv, "--group-size", "3", "--workers", "1", "--policy", random, "--json"]) == 0
    capsys.readouterr()
    main(["doctor", "reward", str(runs / "w"), "--policy", random, "--json"])
    findings = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["findings"]
    (probe,) = [f for f in findings if f["check"] == "preflight"]
    assert probe["evidence"]["shaping_groups"] == 2
    assert probe["severity"] == "warn"
    assert "the shaping dominates the outcome" in probe["title"]
    assert "--outcome-gate" in probe["hint"]
