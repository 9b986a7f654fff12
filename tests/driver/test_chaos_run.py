"""Chaos mode on real runs: ``agent-kit run --chaos SPEC`` end to end, and what it reports.

The Wordle example's agent runs as a real subprocess against the emulator on loopback; the
emulator injects the faults (nothing is mocked). The tests check the chaos section of
summary.json against the store's own ``chaos`` events (the evidence), its table in the end
summary and in report.html (parsed), the outcome classes a fault leads to, the CLI's checks
of the spec, and ``--mlflow`` logging the run to a temporary SQLite store read back with
``MlflowClient``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from helpers import WORDLE_AGENT, holdout, mlflow_client, play_wordle, wordle_config, wordle_policy
from rich.console import Console

from agent_kit.reporting.summary_schema import Summary
from agent_kit.reporting.terminal import render_terminal
from agent_kit.store import RunStore
from agent_kit.store.events import CHAOS_EVENT

pytestmark = pytest.mark.e2e

#: Every fault, the timed ones with short seconds (a timeout answers 500 after 0.3 s).
MIXED = (
    "policy_5xx=0.15,policy_429=0.15,policy_403=0.1,latency=0.1@0.05,timeout=0.05@0.3,"
    "truncated_sse=0.1,text_tool_calls=0.2,malformed_tool_calls=0.15,report_throttle=0.3,"
    "report_lost=0.2"
)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four holdout words of the Wordle example."""
    return holdout(tmp_path_factory.mktemp("data") / "four.jsonl", 4)


def _run(out: Path, dataset: Path, chaos: str, *, retries: int = 2) -> Path:
    config = wordle_config(
        "chaos", group_size=2, concurrency=4, max_retries=retries, seed=5, chaos=chaos
    )
    return play_wordle(dataset, out, config, status=None)


def _summary(run_dir: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return summary


class _ChaosTable(HTMLParser):
    """The rows of ``<table class="chaos">`` in report.html, as lists of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._in_table = self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and ("class", "chaos") in attrs:
            self._in_table = True
        elif self._in_table and tag == "tr":
            self.rows.append([])
        elif self._in_table and tag in ("td", "th"):
            self._in_cell = True
            self.rows[-1].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_table = False
        elif tag in ("td", "th"):
            self._in_cell = False

    def handle_data(self, data: str) -> None:
        if self._in_cell:
            self.rows[-1][-1] += data


def test_chaos_section_matches_the_store_in_every_view(tmp_path: Path, dataset: Path) -> None:
    """A spec with every fault: per fault, the calls summary.json counts are the store's chaos
    events, rollouts hit split into outcomes that add up, examples are trajectories of the run;
    the end summary and report.html show the same figures; the job survives."""
    run_dir = _run(tmp_path, dataset, MIXED)
    summary = _summary(run_dir)
    chaos = summary["chaos"]
    assert chaos["spec"] == MIXED
    assert chaos["job_failed"] is False
    with RunStore.open(run_dir, readonly=True) as store:
        events = store.list_events(kind=CHAOS_EVENT)
        trajectories = {t.id for t in store.list_trajectories()}
    calls = Counter(str(e.detail["fault"]) for e in events)
    hit = {f: {e.trajectory_id for e in events if e.detail["fault"] == f} for f in calls}
    rows = {row["fault"]: row for row in chaos["faults"]}
    assert len(rows) >= 8, sorted(rows)  # seeded: the same faults hit on every run
    assert set(rows) == set(calls)
    for fault, row in rows.items():
        assert row["calls"] == calls[fault]
        assert row["rollouts"] == len(hit[fault])
        assert sum(row["outcomes"].values()) == row["rollouts"]
        for ids in row["examples"].values():
            assert set(ids) <= trajectories
    assert summary["job"]["status"] == "completed"
    assert summary["counts"]["rewarded"] == summary["counts"]["slots"] == 8

    console = Console(record=True, width=120)
    view = render_terminal(Summary.model_validate(summary), run_dir)
    console.print(view, soft_wrap=False, crop=False)
    text = console.export_text()
    assert "chaos  the job survived" in text
    assert f"  spec      {MIXED}\n" in text  # never wrapped
    for fault, row in rows.items():
        line = next(line for line in text.splitlines() if line.strip().startswith(fault + " "))
        assert line.split()[1:3] == [str(row["calls"]), str(row["rollouts"])]

    parser = _ChaosTable()
    parser.feed((run_dir / "report.html").read_text())
    head, *body = parser.rows
    assert head[:3] == ["fault", "calls", "rollouts"]
    assert [r[0] for r in body] == [row["fault"] for row in chaos["faults"]]
    for cells in body:
        row = rows[cells[0]]
        assert [int(c) for c in cells[1:8]] == [
            row["calls"],
            row["rollouts"],
            *(row["outcomes"][o] for o in ("recovered", "floor", "retried", "lost", "open")),
        ]


def test_a_policy_that_always_fails_gives_floor_rewards_with_their_reason(
    tmp_path: Path, dataset: Path
) -> None:
    """policy_5xx=1: every policy call is a 500; the Wordle agent scores its floor reward and
    says why, so each hit rollout is 'floor', with examples, and the agent-side failures name
    the policy error."""
    run_dir = _run(tmp_path, dataset, "policy_5xx=1", retries=0)
    summary = _summary(run_dir)
    (row,) = summary["chaos"]["faults"]
    assert row["fault"] == "policy_5xx"
    assert row["rollouts"] == 8
    assert row["outcomes"]["floor"] + row["outcomes"]["lost"] == 8
    assert row["outcomes"]["recovered"] == 0
    assert row["examples"]
    assert summary["agent_failures"] or summary["failures"]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_kit.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cli_chaos_and_mlflow(
    tmp_path: Path, dataset: Path, mlflow_store: Callable[[Path], str]
) -> None:
    """``agent-kit run --chaos SPEC --mlflow-uri URI --json``: exit 0, the summary line has the
    chaos section, the run is in MLflow with one trace per trajectory; a bad spec is one
    ``error:`` line, exit 2, no run directory; a resumed run cannot change its chaos."""
    out, db = tmp_path / "runs", tmp_path / "mlflow.db"
    common = [
        "run",
        str(WORDLE_AGENT),
        "--dataset",
        str(dataset),
        "--policy",
        wordle_policy(),
        "--group-size",
        "2",
        "--temperature",
        "0.7",
        "--out",
        str(out),
    ]
    bad = _cli(*common, "--chaos", "policy_5xx=2", cwd=tmp_path)
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.startswith("error: ")
    assert "policy_5xx" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert not out.exists() or not any(out.iterdir())

    done = _cli(
        *common, "--chaos", "policy_429=0.3", "--seed", "2", "--json",
        "--mlflow-uri", mlflow_store(db), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    (row,) = summary["chaos"]["faults"]
    assert row["fault"] == "policy_429"
    assert row["rollouts"] >= 1
    assert "logged " in done.stderr
    assert "to MLflow run" in done.stderr

    with mlflow_client(f"sqlite:///{db}") as client:
        experiment = client.get_experiment_by_name("agent-kit")
        assert experiment is not None
        (run,) = client.search_runs([experiment.experiment_id])
        assert run.data.tags["agent_kit.job_arn"] == summary["job"]["arn"]
        traces = client.search_traces(locations=[experiment.experiment_id], max_results=100)
    assert len(traces) == summary["counts"]["trajectories"]

    run_dir = next(out.iterdir())
    again = _cli("run", "--resume", str(run_dir), "--chaos", "latency=1", cwd=tmp_path)
    assert again.returncode == 2
    assert again.stderr.startswith("error: --chaos cannot change a resumed run")
