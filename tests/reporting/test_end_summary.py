"""The end summary of ``agent-kit run`` / ``agent-kit report``: golden text for three runs.

The summaries are what :func:`summarize_records` produces for fixed records (a healthy run, a run
with failed rollouts and agent-side failures, an interrupted run), rendered by
:func:`render_terminal` on a recording Rich console of fixed width. The expected text lives in
``tests/reporting/golden/end_summary_*.txt``;
``AGENT_KIT_REGEN_GOLDEN=1 pytest tests/reporting/test_end_summary.py`` rewrites those files
(off by default, so a changed rendering fails until the files are regenerated and the diff is
reviewed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fakes.rollouts import rollout
from rich.console import Console

from agent_kit.reporting.report import num, render_terminal
from agent_kit.reporting.summary import (
    INTERRUPTED_STATE,
    RunFigures,
    Summary,
    summarize_records,
)
from agent_kit.store import Rollout
from agent_kit.store.rows import JobRow

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("AGENT_KIT_REGEN_GOLDEN") == "1"
WIDTH = 100
ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/wordle-golden-run-with-a-long-name"


def _job(status: str, *, threshold: float = 1.0) -> JobRow:
    config = {
        "job": {"name": "wordle-golden", "group_size": 4, "batch_size": 2, "steps": 1},
        "success_threshold": threshold,
    }
    return JobRow(
        arn=ARN, name="wordle-golden", created_at=1000.0, config=config, status=status, summary=None
    )


def _record(prompt: int, sample: int, state: str, reward: float | None, **extra: Any) -> Rollout:
    start = 1000.0 + prompt * 0.5 + sample * 0.25
    return rollout(
        f"wordle-golden-s0-p{prompt}-g{sample}-a{extra.get('attempt', 0)}",
        step=0,
        prompt_index=prompt,
        sample_index=sample,
        state=state,
        reward=reward,
        turns=3,
        prefill_tokens=1200 + 10 * sample,
        sample_tokens=60 + sample,
        estimated_turns=3,
        started_at=start,
        ended_at=start + 2.0,
        **extra,
    )


def _healthy() -> Summary:
    rewards = [[1.2, 1.3, 0.4, 1.1], [1.45, 1.45, 1.2, 1.0]]
    records = [
        _record(p, g, "REWARDED", reward)
        for p, row in enumerate(rewards)
        for g, reward in enumerate(row)
    ]
    return summarize_records(_job("completed"), records)


def _with_failures() -> Summary:
    records = [
        _record(0, 0, "REWARDED", 1.2),
        _record(
            0,
            1,
            "REWARDED",
            0.0,
            agent_failure="reward: ValueError: bad guess list",
            floor_reward=True,
        ),
        _record(
            0,
            2,
            "REWARDED",
            0.0,
            agent_failure="reward: ValueError: bad guess list",
            floor_reward=True,
        ),
        _record(0, 3, "FAILED", None, reason="The agent signaled that the trajectory failed"),
        _record(1, 0, "REWARDED", 1.0),
        _record(1, 1, "TIMED_OUT", None, reason="rollout timeout"),
        _record(1, 1, "REWARDED", 1.1, attempt=1, retry_of="wordle-golden-s0-p1-g1-a0"),
        _record(1, 2, "REWARDED", 0.0, agent_failure="tool: KeyError: 'board'", floor_reward=True),
        _record(1, 3, "REWARDED", 1.3),
    ]
    summary = summarize_records(_job("failed"), records)
    summary.run = RunFigures(failure_reason="The agent signaled that the trajectory failed")
    return summary


def _interrupted() -> Summary:
    records = [
        _record(0, 0, "REWARDED", 1.2),
        _record(0, 1, "REWARDED", 1.0),
        _record(0, 2, INTERRUPTED_STATE, None, reason="job stopped: interrupted"),
        _record(0, 3, INTERRUPTED_STATE, None, reason="job stopped: interrupted"),
    ]
    return summarize_records(_job("interrupted"), records)


CASES = {"healthy": _healthy, "failures": _with_failures, "interrupted": _interrupted}


def _render(summary: Summary, run_dir: Path | None) -> str:
    console = Console(record=True, width=WIDTH, color_system=None)
    console.print(render_terminal(summary, run_dir), crop=False)
    text = console.export_text()
    if run_dir is not None:
        text = text.replace(run_dir.resolve().as_uri(), "file://RUN_DIR").replace(
            str(run_dir), "RUN_DIR"
        )
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


@pytest.mark.parametrize("case", sorted(CASES))
def test_end_summary_golden(case: str, tmp_path: Path) -> None:
    """The end summary of each run equals its golden file (regenerate with
    AGENT_KIT_REGEN_GOLDEN=1)."""
    summary = CASES[case]()
    Summary.model_validate(summary.document())  # what summarize_records made is valid JSON
    run_dir = tmp_path / "runs" / "wordle-golden"
    run_dir.mkdir(parents=True)
    (run_dir / "report.html").write_text("<!DOCTYPE html>")
    text = _render(summary, run_dir)
    golden = GOLDEN / f"end_summary_{case}.txt"
    if REGEN:
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


def test_words_do_not_clash() -> None:
    """ "failed" in the headline means no reward; rewarded episodes below the threshold are
    "unsolved", while the service's metric keeps its own name."""
    text = _render(_healthy(), None)
    assert "8 / 8 rewarded · 0 failed (no reward)" in text
    assert "7 succeeded, 1 unsolved" in text
    assert "eval/reward/failed_rollouts" in text
    failures = _render(_with_failures(), None)
    assert "1 failed (no reward)" in failures  # the FAILED slot; the timed-out one was retried
    assert "agent-side failures (3 floor rewards): reward: ValueError: bad guess list ×2; " in (
        failures
    )


def test_ids_are_never_wrapped(tmp_path: Path) -> None:
    """The job ARN and the commands stay on one line each, even on a narrow console."""
    run_dir = tmp_path / "a-run-directory-with-a-rather-long-name-to-overflow-the-console"
    run_dir.mkdir()
    console = Console(record=True, width=60, color_system=None)
    console.print(render_terminal(_healthy(), run_dir), crop=False)
    lines = console.export_text().splitlines()
    assert f"  job       {ARN}" in lines
    assert f"    agent-kit doctor reward {run_dir}" in lines
    assert any(line.startswith(f"    agent-kit replay {run_dir} --trajectory ") for line in lines)


def test_interrupted_names_resume(tmp_path: Path) -> None:
    """An interrupted run's cut and unplayed slots are pending (not failed), the slots are the
    whole planned job's (2 prompts × 4 samples), and the next block resumes."""
    text = _render(_interrupted(), tmp_path)
    assert "2 / 8 rewarded · 0 failed (no reward) · 6 pending" in text
    assert "    agent-kit run --resume RUN_DIR" in text.splitlines()


def test_next_fits_a_row_that_failed_the_job(tmp_path: Path) -> None:
    """A job failed by one row with nothing rewarded: "next" plays that row with
    ``agent-kit invoke`` and suggests no reward audit."""
    reason = "No sampling requests were received for this rollout (the agent answered HTTP 400)"
    records = [
        _record(1, 0, "TIMED_OUT", None, reason=reason),
        _record(1, 1, "TIMED_OUT", None, reason=f"job stopped: {reason}"),
    ]
    job = _job("failed")
    job.config.update({"entrypoint": "/src/my agent.py", "dataset": "/data/train.jsonl"})
    summary = summarize_records(job, records)
    summary.run = RunFigures(
        failure_reason=reason,
        job_failures=[{"reason": reason, "trajectory_id": records[0].id, "prompt_index": 1}],
    )
    lines = _render(summary, tmp_path).splitlines()
    at = lines.index("next")
    assert lines[at + 1 :] == [
        "  play the row that failed the job alone (No sampling requests were received for "
        "this rollout):",
        "    agent-kit invoke '/src/my agent.py' --dataset /data/train.jsonl --row 1",
    ]


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "–"),
        (0, "0"),
        (0.0, "0"),
        (-0.0, "0"),
        (7.165898733771381e-19, "0"),
        (-3e-17, "0"),
        (127.0, "127"),
        (493504, "493,504"),
        (0.9921875, "0.992"),
        (1.2677399888174532, "1.27"),
        (-0.35, "-0.35"),
        (1927.75, "1,930"),
        (0.000123456, "0.000123"),
        (float("nan"), "nan"),
    ],
)
def test_one_rounding_rule(value: float | None, shown: str) -> None:
    """3 significant digits; integers exact; zero and float noise as 0."""
    assert num(value) == shown
