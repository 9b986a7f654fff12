"""`agent-kit export mlflow` on real runs of examples/wordle, read back with MlflowClient.

Small real runs (agent subprocesses, Strands, the emulator on loopback) are exported to a
temporary SQLite tracking store; nothing is mocked. The OTLP test starts a loopback HTTP
collector that records the POSTed protobuf bodies. The missing-extra test runs the CLI in a
subprocess whose ``sys.path`` starts with a folder holding an ``mlflow`` that fails to import.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers import holdout, play_wordle, wordle_config

from agent_kit.cli import main
from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.hooks import JobHooks
from agent_kit.driver.local import run_local
from agent_kit.errors import UsageError
from agent_kit.export.mlflow import export_run
from agent_kit.export.tracking import default_tracking_uri
from agent_kit.store import RunStore

pytestmark = pytest.mark.e2e


def _client(uri: str) -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The ``noload`` loader strategy")
        from mlflow import MlflowClient

        return MlflowClient(uri)


def _config(name: str, steps: int = 2) -> JobConfig:
    return wordle_config(name, "Sloppy", group_size=2, concurrency=4, steps=steps)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two holdout prompts of the Wordle example."""
    return holdout(tmp_path_factory.mktemp("data") / "two.jsonl", 2)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> Path:
    """A completed 2-step run (2 prompts × group 2) of the Wordle agent with the Sloppy policy."""
    return play_wordle(dataset, tmp_path_factory.mktemp("runs"), _config("sloppy"))


@pytest.fixture(scope="module")
def store_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite tracking store for the module (creating one costs seconds); tests that share
    it write to experiments of their own."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


def _expected_spans(store: RunStore, trajectory_id: str) -> int:
    """1 (the rollout) + its turns + the tool calls in its replies, counted from the store."""
    turns = store.list_turns(trajectory_id)
    calls = 0
    for turn in turns:
        message = turn.response["choices"][0]["message"]
        calls += len(message.get("tool_calls") or [])
    return 1 + len(turns) + calls


def _traces(client: Any, experiment_id: str) -> list[Any]:
    return list(client.search_traces(locations=[experiment_id], max_results=1000))


def test_export_logs_metrics_artifacts_and_one_trace_per_rollout(
    run_dir: Path, store_uri: str
) -> None:
    """Metric histories equal summary.json's per-step rows, both files are artifacts, and every
    trajectory has one trace of 1 + turns + tool calls spans with the store's tokens and times;
    a re-export replaces the run and its traces."""
    uri = store_uri
    result = export_run(run_dir, tracking_uri=uri, experiment="wordle")
    client = _client(uri)
    experiment = client.get_experiment_by_name("wordle")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_id == result.run_id
    assert run.info.status == "FINISHED"
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert run.data.tags["agent_kit.job_arn"] == summary["job"]["arn"]
    assert run.data.params["job.group_size"] == "2"
    assert run.data.params["job.policy"].endswith("policies.py:Sloppy")

    rows = summary["steps"]
    assert [r["step"] for r in rows] == [0, 1]
    for name, field in [
        ("rollout/reward/mean", "reward_mean"),
        ("rollout/reward/std", "reward_std"),
        ("rollout/turns/mean", "turns_mean"),
        ("rollout/tokens/prefill", "prefill"),
        ("rollout/tokens/sample", "sample"),
    ]:
        history = sorted(client.get_metric_history(result.run_id, name), key=lambda m: m.step)
        assert [(m.step, m.value) for m in history] == [
            (r["step"], pytest.approx(r[field])) for r in rows
        ], name
    for name in ("eval/reward/pass_at_k", "eval/reward/pass_at_1", "timing_s/step"):
        assert [m.step for m in client.get_metric_history(result.run_id, name)] == [0, 1], name
    # one step's metrics over both steps' rollouts must equal the job's (steps are disjoint)
    assert run.data.metrics["rollout/reward/max"] <= summary["metrics"]["rollout/reward/max"]

    assert sorted(a.path for a in client.list_artifacts(result.run_id)) == [
        "report.html",
        "summary.json",
    ]

    traces = _traces(client, experiment.experiment_id)
    with RunStore.open(run_dir, readonly=True) as store:
        trajectories = {t.id: t for t in store.list_trajectories()}
        assert len(traces) == len(trajectories) == result.traces == 8
        assert {t.info.tags["agent_kit.trajectory_id"] for t in traces} == set(trajectories)
        for trace in traces:
            tid = trace.info.tags["agent_kit.trajectory_id"]
            spans = trace.data.spans
            assert len(spans) == _expected_spans(store, tid), tid
            (root,) = [s for s in spans if s.parent_id is None]
            assert root.name == "invoke_agent agent"
            assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
            assert root.attributes["agent_kit.trajectory_id"] == tid
            reward = store.get_reward(tid)
            assert reward is not None
            assert root.attributes["agent_kit.reward"] == pytest.approx(reward.total)
            assert "agent_kit.reward.outcome.contribution" in root.attributes
            assert root.attributes["agent_kit.stop_reason"]
            assert root.start_time_ns == pytest.approx(trajectories[tid].created_at * 1e9, abs=1e3)
            turns = store.list_turns(tid)
            chats = sorted((s for s in spans if s.name == "chat"), key=lambda s: s.start_time_ns)
            assert [s.attributes["gen_ai.usage.input_tokens"] for s in chats] == [
                t.prompt_tokens for t in turns
            ]
            assert [s.attributes["gen_ai.usage.output_tokens"] for s in chats] == [
                t.completion_tokens for t in turns
            ]
            for span in spans:
                if span.name.startswith("execute_tool"):
                    assert span.attributes["gen_ai.tool.name"] == "guess_word"
                    assert span.attributes["gen_ai.tool.call.id"]
                    assert span.parent_id == root.span_id
    assert result.spans == sum(len(t.data.spans) for t in traces)
    results = [
        s.attributes.get("gen_ai.tool.call.result")
        for t in traces
        for s in t.data.spans
        if s.name.startswith("execute_tool")
    ]
    assert any(r and "Feedback" in r for r in results)  # results come from the next request

    again = export_run(run_dir, tracking_uri=uri, experiment="wordle")
    assert again.replaced == 1
    (only,) = client.search_runs([experiment.experiment_id])
    assert only.info.run_id == again.run_id != result.run_id
    assert len(_traces(client, experiment.experiment_id)) == 8


def test_interrupted_then_resumed_run_exports_every_trajectory_once(
    dataset: Path, tmp_path: Path
) -> None:
    """An interrupted run exports as KILLED with a trace per trajectory it has; after --resume
    the re-export replaces it: one FINISHED run, a trace per trajectory of the whole job."""
    stop = asyncio.Event()

    def hook(progress: Any) -> None:
        if progress.done >= 2:
            stop.set()

    run_dir = play_wordle(
        dataset,
        tmp_path / "runs",
        _config("cut", steps=3),
        status="interrupted",
        hooks=JobHooks(progress=hook, stop=stop),
        grace=0.0,
    )
    uri = default_tracking_uri(run_dir)
    assert uri == f"sqlite:///{(tmp_path / 'runs' / 'mlflow.db').resolve()}"
    cut = export_run(run_dir)
    client = _client(uri)
    experiment = client.get_experiment_by_name("agent-kit")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "KILLED"
    with RunStore.open(run_dir, readonly=True) as store:
        assert cut.traces == len(store.list_trajectories()) < 12
    cut_traces = _traces(client, experiment.experiment_id)
    assert len(cut_traces) == cut.traces
    for trace in cut_traces:  # a rollout without a reward is an ERROR trace, the rest OK
        failed = trace.info.tags["agent_kit.state"] in ("FAILED", "TIMED_OUT")
        assert trace.info.state == ("ERROR" if failed else "OK")

    resumed = asyncio.run(run_local(RunConfig(resume=run_dir)))
    assert resumed.status == "completed"
    full = export_run(run_dir)
    assert full.replaced == 1
    (run,) = client.search_runs([experiment.experiment_id])
    assert (run.info.run_id, run.info.status) == (full.run_id, "FINISHED")
    with RunStore.open(run_dir, readonly=True) as store:
        assert full.traces == len(store.list_trajectories()) >= 12
    traces = _traces(client, experiment.experiment_id)
    assert len(traces) == full.traces
    assert len({t.info.tags["agent_kit.trajectory_id"] for t in traces}) == full.traces
    steps = sorted(m.step for m in client.get_metric_history(full.run_id, "rollout/reward/mean"))
    assert steps == [0, 1, 2]


def test_cli_exports_and_reports_bad_input(
    run_dir: Path, store_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`agent-kit export mlflow … --json` prints what it wrote; a folder without a store is a
    one-line error with exit 2."""
    uri = store_uri
    code = main(
        ["export", "mlflow", str(run_dir), "--tracking-uri", uri, "--experiment", "cli", "--json"]
    )
    out = capsys.readouterr().out
    assert code == 0
    data = json.loads(out)
    assert data["traces"] == 8
    assert data["artifacts"] == ["summary.json", "report.html"]
    assert data["tracking_uri"] == uri
    empty = tmp_path / "empty"
    empty.mkdir()
    code = main(["export", "mlflow", str(empty), "--tracking-uri", uri])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: no run store in ")
    assert len(err.strip().splitlines()) == 1


def test_missing_extra_is_a_clear_error(run_dir: Path, tmp_path: Path) -> None:
    """Without MLflow installed the command says which extra to install, exit 2, no traceback."""
    shim = tmp_path / "shim" / "mlflow"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mlflow'\", name='mlflow')\n",
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "agent_kit.cli", "export", "mlflow", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(tmp_path / "shim"), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "error: MLflow export needs the mlflow extra (mlflow is not installed): "
        "pip install 'agent_kit[mlflow]'"
    )
    assert not (run_dir.parent / "mlflow.db").exists()


class _Collector(BaseHTTPRequestHandler):
    """Records every POST body; answers with the status the server was given."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.bodies.append((self.path, body))  # type: ignore[attr-defined]
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def collector() -> Iterator[ThreadingHTTPServer]:
    """A loopback OTLP/HTTP collector that records the POSTs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    server.bodies = []  # type: ignore[attr-defined]
    server.status = 200  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def test_otlp_sends_the_same_spans(
    run_dir: Path, store_uri: str, collector: ThreadingHTTPServer
) -> None:
    """--otlp posts every span (same names, GenAI attributes, store times) to the collector; a
    collector that refuses them is a UsageError."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    url = f"http://127.0.0.1:{collector.server_address[1]}/v1/traces"
    uri = store_uri
    result = export_run(run_dir, tracking_uri=uri, experiment="otlp", otlp_endpoint=url)
    spans = []
    for path, body in collector.bodies:  # type: ignore[attr-defined]
        assert path == "/v1/traces"
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            attrs = {a.key: a.value.string_value for a in resource.resource.attributes}
            assert attrs["service.name"] == "agent-kit"
            for scope in resource.scope_spans:
                spans.extend(scope.spans)
    assert result.otlp_spans == len(spans) == result.spans
    roots = [s for s in spans if not s.parent_span_id]
    assert len(roots) == result.traces == 8
    assert len({s.trace_id for s in spans}) == 8
    chats = [s for s in spans if s.name == "chat"]
    assert chats
    for span in chats:
        attrs = {a.key: a.value for a in span.attributes}
        assert attrs["gen_ai.operation.name"].string_value == "chat"
        assert attrs["gen_ai.usage.input_tokens"].int_value > 0
    with RunStore.open(run_dir, readonly=True) as store:
        created = {t.id: t.created_at for t in store.list_trajectories()}
    for root in roots:
        tid = next(
            a.value.string_value for a in root.attributes if a.key == "agent_kit.trajectory_id"
        )
        assert root.start_time_unix_nano == pytest.approx(created[tid] * 1e9, abs=1e3)

    collector.status = 400  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match="refused"):
        export_run(run_dir, tracking_uri=uri, experiment="otlp", otlp_endpoint=url)
