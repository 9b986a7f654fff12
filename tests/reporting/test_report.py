"""Tests of agent_kit.reporting.summary (store-backed), agent_kit.reporting.report and ``agent-kit
report``."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import sqlite3
from html.parser import HTMLParser
from pathlib import Path

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from agent_kit.cli.report import register
from agent_kit.errors import RunStoreError, UsageError
from agent_kit.reporting import svg as _svg
from agent_kit.reporting.page import SCRIPT
from agent_kit.reporting.report import render_html, write_reports
from agent_kit.reporting.summary import summarize
from agent_kit.reporting.summary_schema import SUMMARY_SCHEMA, Summary
from agent_kit.reporting.terminal import render_json, render_terminal
from agent_kit.store import RunStore, TrajectoryRow, TurnRow
from agent_kit.store.events import TRAIN_EVAL_EVENT, TRAIN_STEP_EVENT

ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/report-test"
HOSTILE = (
    '<script>alert(1)</script><img src=x onerror="alert(2)"></pre><a href="https://evil.example/x">'
)
HOSTILE_REASON = "[bold red]boom[/] <b>not bold</b>"
SECRET = "sagemaker-api-key-SECRET123"


def populate(store: RunStore) -> None:
    """Two steps × two prompts × group 3, one failed-then-retried slot, one lost slot."""
    store.create_job(ARN, "report-test", {"group_size": 3, "batch_size": 2, "steps": 2})
    rewards = {(0, 0): [1.0, 0.0, 1.5], (0, 1): [1.0, 1.0, 1.0], (1, 0): [0.5, 0.0, 2.0]}
    rewards[(1, 1)] = [0.25, None, 1.0]
    for (step, prompt), values in rewards.items():
        for sample, reward in enumerate(values):
            tid = f"t-{step}-{prompt}-{sample}"
            store.create_trajectory(
                TrajectoryRow(
                    id=tid,
                    job_arn=ARN,
                    state="OPEN",
                    prompt=json.dumps({"prompt": "guess the word", "answer": "riser"}),
                    step=step,
                    prompt_index=prompt,
                    sample_index=sample,
                )
            )
            messages: list[dict[str, object]] = [{"role": "user", "content": "play"}]
            for idx in range(sample + 1):
                store.add_turn(
                    TurnRow(
                        trajectory_id=tid,
                        idx=idx,
                        route="/v1/chat/completions",
                        request={
                            "messages": list(messages),
                            "metadata": {"authorization": f"Bearer {SECRET}"},
                        },
                        response={
                            "choices": [
                                {
                                    "message": {
                                        "role": "assistant",
                                        "content": f"turn {idx} {HOSTILE}",
                                        "tool_calls": [
                                            {"function": {"name": "guess", "arguments": "{}"}}
                                        ],
                                    }
                                }
                            ]
                        },
                        prompt_tokens=100 + 10 * idx,
                        completion_tokens=20,
                        usage_estimated=idx == 0,
                        latency_ms=3.0,
                    )
                )
                messages.append({"role": "tool", "content": f"feedback {HOSTILE}"})
            if reward is None:
                store.set_state(tid, "FAILED", HOSTILE_REASON)
            elif (step, prompt, sample) == (0, 0, 1):
                store.set_state(tid, "TIMED_OUT", "rollout_timeout")
                retry = f"{tid}-r1"
                store.create_trajectory(
                    TrajectoryRow(
                        id=retry,
                        job_arn=ARN,
                        state="OPEN",
                        prompt="{}",
                        step=step,
                        prompt_index=prompt,
                        sample_index=sample,
                        attempt=1,
                        retry_of=tid,
                    )
                )
                store.set_reward(retry, [reward], None, None, state="REWARDED")
            else:
                store.set_reward(tid, [reward], None, None, state="REWARDED")


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A run directory whose run.sqlite holds the populated job."""
    directory = tmp_path / "runs" / "report-test"
    with RunStore.open(directory) as store:
        populate(store)
        store.update_job(ARN, status="completed", summary={"run": {"elapsed_s": 2.5}})
    return directory


class _Audit(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.urls: list[str] = []
        self.handlers: list[str] = []
        self.text: list[str] = []
        self.style: list[str] = []
        self.scripts: list[str] = []
        self.script_attrs: list[dict[str, str | None]] = []
        self.csp: list[str] = []
        self._in_style = False
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._in_style = tag == "style"
        self._in_script = tag == "script"
        if tag == "script":
            self.script_attrs.append(dict(attrs))
            self.scripts.append("")
        if tag == "meta" and dict(attrs).get("http-equiv") == "Content-Security-Policy":
            self.csp.append(dict(attrs).get("content") or "")
        for name, value in attrs:
            if name in {"src", "href", "xlink:href", "action", "srcset", "poster", "data"}:
                self.urls.append(value or "")
            if name.startswith("on"):
                self.handlers.append(name)

    def handle_endtag(self, tag: str) -> None:
        self._in_style = self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
            return
        (self.style if self._in_style else self.text).append(data)


def test_summarize_from_store(run_dir: Path) -> None:
    """summarize reads the store: retries, lost slots, tokens equal the sum of turns."""
    with RunStore.open(run_dir, readonly=True) as store:
        s = summarize(store).document()
        assert summarize(store, "report-test", advantage="rloo").document()["settings"] == {
            **s["settings"],
            "advantage": "rloo",
        }
        turns = [t for tr in store.list_trajectories(ARN) for t in store.list_turns(tr.id)]
    Summary.model_validate(s)
    assert s["schema"] == SUMMARY_SCHEMA
    assert s["run"] == {"elapsed_s": 2.5}  # the driver's section survives a re-render
    assert s["job"]["status"] == "completed"
    assert s["counts"]["trajectories"] == 13
    assert s["counts"]["by_state"] == {"FAILED": 1, "REWARDED": 11, "TIMED_OUT": 1}
    assert (s["counts"]["lost"], s["counts"]["retries"], s["counts"]["slots"]) == (1, 1, 12)
    assert s["tokens"]["prefill"] == sum(t.prompt_tokens for t in turns)
    assert s["tokens"]["sample"] == sum(t.completion_tokens for t in turns)
    assert s["tokens"]["estimated_turns"] == sum(1 for t in turns if t.usage_estimated)
    assert s["metrics"]["rollout/reward/zero_frac"] == pytest.approx(1 / 4)
    reasons = {f["reason"]: f["count"] for f in s["failures"]}
    assert reasons == {HOSTILE_REASON: 1, "rollout_timeout": 1}
    durations = [r["duration_s"] for r in s["slowest"]]
    assert durations == sorted(durations, reverse=True)


def test_summarize_unknown_job(run_dir: Path) -> None:
    """Asking for a job the store does not hold is a UsageError listing the jobs."""
    with RunStore.open(run_dir, readonly=True) as store, pytest.raises(UsageError, match="jobs"):
        summarize(store, "nope")


def test_html_is_self_contained_and_escaped(run_dir: Path) -> None:
    """The HTML has only its own static script (allowed by hash), no external URL, escapes model
    text and shows no secret."""
    with RunStore.open(run_dir, readonly=True) as store:
        page = render_html(summarize(store), store)
    audit = _Audit()
    audit.feed(page)
    audit.close()
    assert audit.tags.count("svg") == 6
    forbidden = {"img", "iframe", "link", "object", "embed", "base", "form"}
    assert forbidden.isdisjoint(audit.tags)
    assert audit.scripts == [SCRIPT]  # one script, the static one: no run data in it
    assert audit.script_attrs == [{}]  # inline, no src
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    assert len(audit.csp) == 1
    assert f"script-src 'sha256-{digest}'" in audit.csp[0]
    assert "default-src 'none'" in audit.csp[0]
    assert all(url.startswith("#") for url in audit.urls)  # in-page anchors only
    assert audit.handlers == []
    style = "".join(audit.style)
    assert "url(" not in style
    assert "@import" not in style
    text = "".join(audit.text)
    assert "<script>alert(1)</script>" in text  # shown as text, not markup
    assert HOSTILE_REASON in text
    assert "&lt;script&gt;" in page
    assert SECRET not in page
    assert "riser" in text  # the task prompt is shown in this local view
    assert "Failed rollouts" in text
    assert "guess({})" in text.replace("→ ", "")


def test_html_without_store_still_renders(run_dir: Path) -> None:
    """Without a store the page has the per-step plots and tables but no transcripts."""
    with RunStore.open(run_dir, readonly=True) as store:
        s = summarize(store)
    audit = _Audit()
    audit.feed(render_html(s))
    assert audit.tags.count("svg") == 3  # reward, zero_frac and turns per step
    assert "details" not in audit.tags


def test_training_section_is_the_only_difference_a_training_run_makes(run_dir: Path) -> None:
    """With train_step/train_eval records the page gains the Training section and its nav link,
    escaped, and its header says "training" where the plain run's says "rollouts, no
    training"; undoing those gives back the page of the same run without them, byte for
    byte."""
    with RunStore.open(run_dir, readonly=True) as store:
        plain = render_html(summarize(store), store)
    assert 'id="training"' not in plain
    with RunStore.open(run_dir) as store:
        for step, loss in ((0, 0.5), (1, 0.25)):
            detail = {"step": step, "train/loss": loss, "train/tokens": 12.0}
            store.add_event(TRAIN_STEP_EVENT, {**detail, "adapter": f"adapters/{HOSTILE}"})
        for label, mean in (("base", 0.125), ("adapter", 0.875)):
            figures = {"mean": mean, "se": 0.0625, "eval/reward/pass_at_k": 1.0}
            store.add_event(TRAIN_EVAL_EVENT, {"label": label, **figures, "status": "completed"})
        page = render_html(summarize(store), store)
    link = '<a href="#training">Training</a>'
    start = page.index('<section id="training">')
    end = page.index("</section>", start) + len("</section>")
    section = page[start:end]
    assert " · rollouts, no training · status " in plain
    assert " · training · status " in page
    undone = page.replace(link, "", 1).replace(section + "\n", "", 1)
    assert undone.replace(" · training · ", " · rollouts, no training · ", 1) == plain
    assert '<td>adapter</td><td class="n" data-v="0.875">' in section
    assert '<td>base</td><td class="n" data-v="0.125">' in section
    assert "adapter − base: <b>+0.750</b> ± se 0.088" in section
    assert "beats the base model" in section
    assert "Loss per step (train/loss)" in section
    assert "<script>alert(1)</script>" not in section


def test_terminal_and_json(run_dir: Path) -> None:
    """The terminal view lists metrics and reasons literally; JSON is one strict line."""
    with RunStore.open(run_dir, readonly=True) as store:
        s = summarize(store)
    console = Console(record=True, width=160)
    console.print(render_terminal(s))
    out = console.export_text()
    assert "rollout/reward/valid_mean" in out
    assert "eval/reward/pass_at_k" in out
    assert HOSTILE_REASON in out
    assert "blended rate of the published AWS reference run" in out
    line = render_json(s)
    assert "\n" not in line
    assert json.loads(line) == s.document()


def test_write_reports(run_dir: Path) -> None:
    """write_reports writes summary.json and report.html and leaves no temp file."""
    with RunStore.open(run_dir, readonly=True) as store:
        s = summarize(store)
        paths = write_reports(run_dir, s, store)
    assert [p.name for p in paths] == ["summary.json", "report.html"]
    assert json.loads(paths[0].read_text()) == s.document()
    assert paths[1].read_text().startswith("<!DOCTYPE html>")
    assert not list(run_dir.glob("*.tmp"))


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Test root so ``report`` stays a subcommand."""

    register(app)
    return app


def test_cli_report_json_and_html(run_dir: Path, tmp_path: Path) -> None:
    """``report RUN_DIR --json --html`` prints only JSON on stdout and writes both files."""
    pricing = tmp_path / "prices.json"
    pricing.write_text(json.dumps({"blended_per_million": 1000.0, "label": "test rates"}))
    result = CliRunner().invoke(
        _app(), ["report", str(run_dir), "--json", "--html", "--pricing", str(pricing)]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["cost"]["label"] == "test rates"
    assert summary["cost"]["total"] == pytest.approx(summary["tokens"]["total"] / 1000)
    assert (run_dir / "report.html").is_file()
    assert (run_dir / "summary.json").is_file()
    table = CliRunner().invoke(_app(), ["report", str(run_dir), "--advantage", "rloo"])
    assert table.exit_code == 0, table.output
    assert "rollout/advantage/abs_mean" in table.stdout


def test_cli_report_of_a_stored_non_finite_total_is_a_clear_error(run_dir: Path) -> None:
    """A store holding a reward total of inf (written before the emulator refused such
    rewards) is a one-line RunStoreError naming the rollout, never a traceback."""
    with RunStore.open(run_dir) as store:
        tid = next(r.id for r in store.list_trajectories() if store.get_reward(r.id))
        store.set_reward(tid, [1e308, 1e308], None, None)
    result = CliRunner().invoke(_app(), ["report", str(run_dir)])
    assert isinstance(result.exception, RunStoreError), result.output
    message = str(result.exception)
    assert tid in message
    assert "non-finite" in message
    assert "\n" not in message


def test_cli_report_errors(tmp_path: Path, run_dir: Path) -> None:
    """Missing directory, missing store, newer schema and a bad flag are clear UsageErrors."""
    runner = CliRunner()
    missing = runner.invoke(_app(), ["report", str(tmp_path / "nope")])
    assert isinstance(missing.exception, UsageError)
    assert "run directory not found" in str(missing.exception)
    (tmp_path / "empty").mkdir()
    empty = runner.invoke(_app(), ["report", str(tmp_path / "empty")])
    assert isinstance(empty.exception, UsageError)
    assert "no run store" in str(empty.exception)
    bad = runner.invoke(_app(), ["report", str(run_dir), "--advantage", "ppo"])
    assert isinstance(bad.exception, UsageError)
    with sqlite3.connect(run_dir / "run.sqlite") as conn:
        conn.execute("PRAGMA user_version=99")
    newer = runner.invoke(_app(), ["report", str(run_dir)])
    assert isinstance(newer.exception, UsageError)
    assert "newer" in str(newer.exception)


@given(
    st.floats(-1e6, 1e6, allow_nan=False),
    st.floats(1e-3, 1e6, allow_nan=False),
)
def test_svg_ticks_are_round_and_inside(lo: float, span: float) -> None:
    """Axis ticks lie inside the range, are evenly spaced, and number between 2 and 11."""
    hi = lo + span
    values = _svg.ticks(lo, hi)
    assert 2 <= len(values) <= 11
    assert all(lo - 1e-9 * span <= v <= hi + 1e-9 * span for v in values)
    steps = {round(b - a, 9) for a, b in itertools.pairwise(values)}
    assert max(steps) - min(steps) <= 1e-6 * span


def test_svg_charts_handle_empty_and_gaps() -> None:
    """Empty data draws a 'no data' frame; None values break a line instead of plotting 0."""
    assert "no data" in _svg.histogram([], title="t", x_label="x")
    chart = _svg.lines([0, 1, 2, 3], [("s", [1.0, None, 2.0, 3.0])], title="t", x_label="x")
    assert chart.count("<polyline") == 1  # only the 2..3 segment has two points
    assert chart.count("<circle") == 3
    assert "&lt;b&gt;" in _svg.strip([("<b>", [1.0, 2.0], False)], title="t")


def test_training_section_shows_each_steps_signal_sampler_and_warnings(run_dir: Path) -> None:
    """Steps that recorded their signal shares get the signal curve and columns, the adapter
    that sampled each step, and the steps' warnings listed, escaped."""
    with RunStore.open(run_dir) as store:
        for step, equal in ((0, 0.5), (1, 0.25)):
            detail = {
                "step": step,
                "train/loss": 0.5,
                "train/signal/all_equal": equal,
                "train/signal/shaping_only": 0.25,
                "sampled_by": "base" if step == 0 else "step-0000",
                "warnings": [f"warning: step {step}: {HOSTILE}"] if step else [],
                "adapter": f"adapters/step-{step:04d}",
            }
            store.add_event(TRAIN_STEP_EVENT, detail)
        page = render_html(summarize(store), store)
    start = page.index('<section id="training">')
    section = page[start : page.index("</section>", start)]
    assert "Groups without outcome signal per step (train/signal/*)" in section
    assert "<th>train/signal/all_equal</th>" in section
    assert "<th>train/signal/shaping_only</th>" in section
    assert "<th>sampled by</th>" in section
    assert "<td>step-0000</td><td>adapters/step-0001</td>" in section
    warnings = section[section.index('<ul id="train-warnings"') : section.index("</ul>")]
    assert warnings.count("<li>") == 1
    assert HOSTILE not in warnings
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in warnings
