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
from typer.testing import CliRunner

from agent_kit.cli import app
from agent_kit.reporting.summary import summarize_records
from agent_kit.reporting.summary_schema import Summary
from agent_kit.reporting.terminal import num, render_terminal
from agent_kit.reporting.words import first_line, plural
from agent_kit.store import Rollout
from agent_kit.store.layout import RunLayout
from agent_kit.store.records import INTERRUPTED_STATE
from agent_kit.store.rows import JobRow
from agent_kit.store.run_figures import RunFigures

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
    assert "8 / 8 rewarded · 0 lost (no reward)" in text
    assert "7 succeeded, 1 unsolved" in text
    assert "eval/reward/failed_rollouts" in text
    failures = _render(_with_failures(), None)
    assert "1 lost (no reward)" in failures  # the FAILED slot; the timed-out one was retried
    assert "agent-side failures (3 floor rewards): reward: ValueError: bad guess list ×2; " in (
        failures
    )


def test_ids_are_never_wrapped(tmp_path: Path) -> None:
    """The job ARN and the commands stay on one line each, even on a narrow console."""
    run_dir = tmp_path / "a-run-directory-with-a-rather-long-name-to-overflow-the-console"
    run_dir.mkdir()
    (run_dir / "report.html").write_text("<!DOCTYPE html>")
    console = Console(record=True, width=60, color_system=None)
    console.print(render_terminal(_healthy(), run_dir), crop=False)
    lines = console.export_text().splitlines()
    assert f"  job       {ARN}" in lines
    assert f"    agent-kit doctor reward {run_dir}" in lines
    assert f"    {(run_dir / 'report.html').resolve().as_uri()}" in lines


def test_lowest_rollout_points_at_its_transcript(tmp_path: Path) -> None:
    """ "next" shows the lowest-scoring rollout itself (its transcript in report.html, by
    anchor), not a replay that would only print "identical" and make another run folder."""
    run_dir = tmp_path / "runs" / "wordle-golden"
    run_dir.mkdir(parents=True)
    (run_dir / "report.html").write_text("<!DOCTYPE html>")
    text = _render(_healthy(), run_dir)
    lines = text.splitlines()
    assert "  read the lowest-scoring rollout turn by turn (reward 0.4):" in lines
    assert "    file://RUN_DIR/report.html#tx-wordle-golden-s0-p0-g2-a0" in lines
    assert "replay" not in text
    (run_dir / "report.html").unlink()
    assert "    agent-kit report RUN_DIR --html" in _render(_healthy(), run_dir).splitlines()


def test_projection_says_what_job_it_prices(tmp_path: Path) -> None:
    """The projection names the job it prices (100 steps of the run's own shape) and "next"
    names ``agent-kit job plan`` for a real job's shape, so the two figures are not read as
    one."""
    text = " ".join(_render(_healthy(), tmp_path).split())
    assert (
        "projection: 100 steps of this run's shape (2 prompts × 4 rollouts a step, "
        "800 rollouts)" in text
    )
    assert "the rule of job plan: p50 of the recorded tokens per prompt group" in text
    assert "blended rate of the published AWS reference run (GPT-OSS-20B)" in text
    lines = _render(_healthy(), tmp_path).splitlines()
    index = lines.index("    agent-kit job plan RUN_DIR")
    assert "the service's default shape; the projection's rule" in lines[index - 1]


def test_header_says_whether_it_trained(tmp_path: Path) -> None:
    """An ``agent-kit run`` header says its steps were rollouts and nothing trained; a run
    directory of ``agent-kit train`` (train_config.json) says training; an evaluation job says
    evaluation."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    first = _render(_healthy(), run_dir).splitlines()[0]
    assert first.endswith("completed  (1 step of rollouts, no training)")
    assert "(1 step of rollouts, no training)" in _render(_healthy(), None)
    (run_dir / "train_config.json").write_text("{}")
    assert _render(_healthy(), run_dir).splitlines()[0].endswith("completed  (training, 1 step)")
    evaluation = _healthy()
    evaluation.job.mode = "evaluation"
    assert "(evaluation, 1 step of rollouts)" in _render(evaluation, None)


def test_interrupted_names_resume(tmp_path: Path) -> None:
    """An interrupted run's cut and unplayed slots are pending (not failed), the slots are the
    whole planned job's (2 prompts × 4 samples), and the next block resumes."""
    text = _render(_interrupted(), tmp_path)
    assert "2 / 8 rewarded · 0 lost (no reward) · 6 pending" in text
    assert "    agent-kit run --resume RUN_DIR" in text.splitlines()


def test_interrupted_training_run_names_train_resume(tmp_path: Path) -> None:
    """The next block of an interrupted training run (its directory holds train_config.json)
    resumes it with ``agent-kit train --resume``, which trains the steps left."""
    RunLayout(tmp_path).train_config.write_text("{}", encoding="utf-8")
    lines = _render(_interrupted(), tmp_path).splitlines()
    assert "    agent-kit train --resume RUN_DIR" in lines
    assert not any("run --resume" in line for line in lines)


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


# -- words on the terminal: wrapping, the agent's name, eval/*, plurals, one-line errors ---------


def _narrow(summary: Summary, width: int = 60) -> list[str]:
    console = Console(record=True, width=width, color_system=None)
    console.print(render_terminal(summary, None), crop=False)
    return [line.rstrip() for line in console.export_text().splitlines()]


def test_headline_wraps_at_words_under_its_text() -> None:
    """On a 60-column console a long headline line wraps at word boundaries and its
    continuation lines stay under the text, never at column 0 or inside a word."""
    lines = _narrow(_with_failures())
    at = next(i for i, line in enumerate(lines) if line.startswith("  cost "))
    block = [lines[at]]
    for line in lines[at + 1 :]:
        if not line.startswith(" " * 12):
            break
        block.append(line)
    assert len(block) > 1
    assert all(len(line) <= 60 for line in block)
    words = " ".join(" ".join(block).split())
    assert "blended rate of the published AWS reference run" in words
    assert lines[at + len(block)].startswith("  failure ")  # the next labelled line


def test_cost_names_the_agent_that_ran() -> None:
    """The cost line names the agent (entrypoint stem, or its folder for a generic agent.py),
    not the Wordle run the default prices come from."""
    summary = _healthy()
    summary.config["entrypoint"] = "/src/counter/agent.py"
    (cost,) = [line for line in _narrow(summary, 200) if line.startswith("  cost ")]
    assert "USD for counter · " in cost
    assert "Wordle" not in cost
    summary.config["entrypoint"] = "/src/ticket_triage.py"
    assert any("USD for ticket_triage · " in line for line in _narrow(summary, 200))


def test_eval_metrics_of_a_training_run_are_explained() -> None:
    """A training run's eval/* metrics come with one line saying what they are."""
    text = " ".join(" ".join(_narrow(_healthy(), 100)).split())
    assert "an evaluation job reports, computed here over this run's rollouts" in text
    assert "training run" not in text
    assert "succeeded at reward ≥ 1, failed_rollouts the rest of the finished (unsolved + " in text


def test_failed_and_plus_minus_each_say_one_thing() -> None:
    """No rollout count says "failed" for two things: a rollout without a reward is "lost (no
    reward)", one rewarded below the threshold "unsolved"; the reward's ± is labelled a
    standard deviation ("± sd")."""
    text = " ".join(" ".join(_narrow(_with_failures(), 200)).split())
    assert "1 lost (no reward)" in text
    assert "3 unsolved" in text
    assert "failed (no reward)" not in text
    assert "reward 0.657 ± sd 0.575" in text


def test_counts_of_one_are_singular() -> None:
    """Counts of one read in the singular ("1 slot", "1 episode", "1 trajectory")."""
    records = [_record(0, 0, "REWARDED", 1.0), _record(0, 1, "OPEN", None)]
    summary = summarize_records(_job("interrupted"), records)
    text = " ".join(" ".join(_narrow(summary, 200)).split())
    assert "7 slots not played or cut short" in text
    config = {"job": {"name": "one", "group_size": 2, "batch_size": 1, "steps": 1}}
    one = summarize_records(
        JobRow(
            arn=ARN, name="one", created_at=1.0, config=config, status="interrupted", summary=None
        ),
        records[:1],
    )
    text = " ".join(" ".join(_narrow(one, 200)).split())
    assert "1 slot not played or cut short" in text
    assert plural(1, "episode") == "1 episode"
    assert plural(2, "trajectory", "trajectories") == "2 trajectories"
    assert plural(1_234, "turn") == "1,234 turns"


def test_multi_line_exception_shows_its_first_line() -> None:
    """An agent failure with a multi-line message (Strands' MaxTokensReachedException) shows
    its first line on the terminal; the summary keeps the full text."""
    reason = (
        "agent: MaxTokensReachedException: Agent has reached an unrecoverable state due to "
        "max_tokens limit.\n\nFor more information see:\nhttps://strandsagents.com/x\n"
    )
    records = [
        _record(0, 0, "REWARDED", 1.0),
        _record(0, 1, "REWARDED", 0.0, agent_failure=reason, floor_reward=True),
    ]
    summary = summarize_records(_job("completed"), records)
    lines = _narrow(summary, 200)
    (agent,) = [line for line in lines if line.startswith("  agent ")]
    assert agent.endswith("due to max_tokens limit. … ×1")
    assert not any("strandsagents.com" in line or "more information" in line for line in lines)
    assert summary.agent_failures[0].reason == reason
    assert first_line("one line") == "one line"


def test_version_is_a_flag_in_the_help() -> None:
    """`agent-kit --help` lists --version (and --help) as flags, with no `<bool>` type."""
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    (version,) = [line for line in result.output.splitlines() if "--version" in line]
    assert "Print the agent-kit version and exit." in version
    assert "<bool>" not in result.output
    run_help = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "120"}).output
    assert "--json" in run_help
    assert "<bool>" not in run_help


def test_floor_rewards_are_counted_where_rewards_are_and_a_missing_extra_is_named() -> None:
    """Rollouts all on the floor read "8 / 8 rewarded (8 with the floor reward)", agreeing with
    a verdict that none got a reward from the reward function; an agent failure of a missing
    strands-agents-evals gives one hint line naming ``pip install 'agent_kit[judges]'``."""
    reason = (
        "environment: reset raised ModuleNotFoundError: No module named 'strands_evals' "
        "(at agent.py:62 in reset)"
    )
    records = [
        _record(p, g, "REWARDED", 0.0, agent_failure=reason, floor_reward=True)
        for p in range(2)
        for g in range(4)
    ]
    summary = summarize_records(_job("rollouts_failed"), records)
    text = " ".join(" ".join(_narrow(summary, 200)).split())
    assert "8 / 8 rewarded (8 with the floor reward) · 0 lost (no reward)" in text
    (hint,) = summary.hints
    assert "pip install 'agent_kit[judges]'" in hint
    assert f"hint {hint}" in text
    healthy = " ".join(" ".join(_narrow(_healthy(), 200)).split())
    assert "8 / 8 rewarded · 0 lost" in healthy
    assert _healthy().hints == []
