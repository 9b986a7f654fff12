"""Log a local run to MLflow the way the real MTRL job does: params, metrics, artifacts, traces.

:func:`export_run` reads ``RUN_DIR/run.sqlite`` (read-only) and writes one MLflow run into an
experiment (default ``agent-kit``) of a tracking store (default
``sqlite:///<RUN_DIR's parent>/mlflow.db``, artifacts in ``<parent>/mlartifacts``):

- params: the job config, nested keys joined with ``.`` (``job.group_size``, ``entrypoint``);
- metrics: every step's ``rollout/*``, ``eval/reward/*`` and ``timing_s/*`` under the service's
  names, with ``step`` and the step's end time (:mod:`agent_kit.export.steps`); a training run
  (``agent-kit train``) adds every step's ``train/*`` (loss, grad norm, KL, entropy, learning
  rate, trained tokens …) and its holdout evaluations (``holdout/base/*``,
  ``holdout/adapter/*``, ``holdout/difference``; params ``holdout.*``);
- artifacts: ``summary.json`` and ``report.html`` (written first when the run has none), and a
  training run's ``train.json`` and ``train.html``;
- one trace per trajectory (:mod:`agent_kit.export.spans`), linked to the run, with the store's
  timestamps (``start_span_no_context(start_time_ns=…)`` / ``span.end(end_time_ns=…)``);
- tags ``agent_kit.job_arn``, ``agent_kit.export_key`` (ARN + the job's creation time, which
  survives a resume), ``agent_kit.run_dir``, ``agent_kit.job_status``.

Re-exporting replaces: the new run is written completely first, then every earlier run with the
same ``agent_kit.export_key`` is deleted (MLflow's soft delete: it leaves the experiment's
list; ``mlflow gc`` purges it) together with its traces. If the export fails half-way, the new
run and its traces are deleted and the earlier one is kept.

MLflow is an optional dependency (the ``mlflow`` extra); the tracking store's plumbing shared
with the evaluation grid's export (importing MLflow quietly, the URI, the experiment) is
:mod:`agent_kit.export.tracking`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

from agent_kit.errors import UsageError
from agent_kit.export.spans import RolloutTrace, SpanData, rollout_traces
from agent_kit.export.steps import StepMetrics, holdout_metrics, step_metrics, with_train_metrics
from agent_kit.export.tracking import (
    DEFAULT_EXPERIMENT,
    ensure_experiment,
    mlflow_error,
    mlflow_quiet,
    require_mlflow,
    writable_tracking_uri,
)
from agent_kit.reporting.breakdown import RunData, load_run_data
from agent_kit.reporting.report import write_reports
from agent_kit.reporting.summary import summarize
from agent_kit.reporting.summary_schema import Summary, read_summary
from agent_kit.reporting.train_view import load_train_figures
from agent_kit.store import RunStore, resolve_path
from agent_kit.store.layout import TRAIN_HTML, TRAIN_JSON, RunLayout

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import LiveSpan

__all__ = ["ExportResult", "export_key", "export_run"]

_RUN_STATUS: Final = {
    "completed": "FINISHED",
    "failed": "FAILED",
    "rollouts_failed": "FAILED",
    "interrupted": "KILLED",
    "running": "RUNNING",
}
_PARAM_CHARS: Final = 6000
_BATCH: Final = 1000
_SPAN_TYPES: Final = {"agent": "AGENT", "chat": "CHAT_MODEL", "tool": "TOOL"}
#: A training run's own summary files, logged as artifacts beside the report when present.
_TRAIN_FILES: Final = (TRAIN_JSON, TRAIN_HTML)


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_run` wrote, and how to look at it."""

    tracking_uri: str
    experiment_id: str
    experiment_name: str
    run_id: str
    job_arn: str
    params: int
    metric_points: int
    steps: int
    artifacts: tuple[str, ...]
    traces: int
    spans: int
    #: Earlier runs of the same job this export replaced (deleted, with their traces).
    replaced: int
    #: Spans sent to the OTLP collector (None without ``otlp_endpoint``).
    otlp_spans: int | None = None

    @property
    def ui_command(self) -> str:
        """The ``mlflow ui`` command that shows this store (needs the full ``mlflow``)."""
        return f"mlflow ui --backend-store-uri {self.tracking_uri}"


def export_key(job_arn: str, created_at: float) -> str:
    """The identity of a local job across exports and resumes: ARN and creation time."""
    return f"{job_arn}@{created_at:.6f}"


def _flat_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat_params(value, f"{name}."))
        else:
            text = "" if value is None else str(value)
            out[name] = text[:_PARAM_CHARS]
    return out


def _trace_ids(client: MlflowClient, experiment_id: str, **query: Any) -> list[str]:
    ids: list[str] = []
    token: str | None = None
    while True:
        page = client.search_traces(
            locations=[experiment_id],
            include_spans=False,
            max_results=500,
            page_token=token,
            **query,
        )
        ids.extend(t.info.trace_id for t in page)
        token = page.token
        if not token:
            return ids


def _delete_traces(client: MlflowClient, experiment_id: str, ids: Sequence[str]) -> None:
    for start in range(0, len(ids), 100):
        client.delete_traces(experiment_id, trace_ids=list(ids[start : start + 100]))


def with_aux_metrics(steps: Sequence[StepMetrics], summary: Summary) -> list[StepMetrics]:
    """``steps`` with the run's auxiliary calls (judge, simulated user) on the last step:
    ``auxiliary/{calls,input_tokens,output_tokens,cost}`` and ``auxiliary/<kind>/calls``."""
    aux, out = summary.auxiliary, list(steps)
    if aux is None or not out:
        return out
    values = {
        "auxiliary/calls": float(aux.calls),
        "auxiliary/input_tokens": float(aux.input_tokens),
        "auxiliary/output_tokens": float(aux.output_tokens),
        "auxiliary/cost": float(aux.cost),
        **{f"auxiliary/{kind}/calls": float(v.calls) for kind, v in aux.by_kind.items()},
    }
    last = out[-1]
    out[-1] = dataclasses.replace(last, values={**last.values, **values})
    return out


def _log_metrics(client: MlflowClient, run_id: str, steps: Sequence[StepMetrics]) -> int:
    from mlflow.entities import Metric

    points = [
        Metric(key, value, s.timestamp_ms, s.step)
        for s in steps
        for key, value in sorted(s.values.items())
    ]
    for start in range(0, len(points), _BATCH):
        client.log_batch(run_id, metrics=points[start : start + _BATCH])
    return len(points)


def _log_params(client: MlflowClient, run_id: str, params: Mapping[str, str]) -> None:
    from mlflow.entities import Param

    items = [Param(k, v) for k, v in sorted(params.items())]
    for start in range(0, len(items), 100):
        client.log_batch(run_id, params=items[start : start + 100])


def _write_span(mlflow: ModuleType, span: SpanData, parent: LiveSpan | None, **extra: Any) -> None:
    live = mlflow.start_span_no_context(
        span.name,
        span_type=_SPAN_TYPES[span.kind],
        parent_span=parent,
        inputs=span.inputs,
        attributes=dict(span.attributes),
        start_time_ns=span.start_ns,
        **extra,
    )
    for child in span.children:
        _write_span(mlflow, child, live)
    if span.error is not None:
        live.set_status("ERROR")
    live.end(outputs=span.outputs, end_time_ns=span.end_ns)


def _write_traces(
    mlflow: ModuleType, uri: str, run_id: str, experiment_id: str, traces: Sequence[RolloutTrace]
) -> None:
    """Write the traces under ``run_id`` (the fluent tracing API needs the global tracking URI
    and an active run; both are restored afterwards)."""
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        with mlflow.start_run(run_id=run_id, experiment_id=experiment_id, log_system_metrics=False):
            for trace in traces:
                _write_span(mlflow, trace.root, None, tags=trace.tags, experiment_id=experiment_id)
            mlflow.flush_trace_async_logging()
    finally:
        mlflow.set_tracking_uri(previous)


def _artifacts(folder: Path, summary: Summary, store: RunStore) -> list[Path]:
    """summary.json and report.html of the run, written first when either is missing or is
    another job's (or the summary.json cannot be read as a summary)."""
    paths = [RunLayout(folder).summary, RunLayout(folder).report]
    current = False
    if all(p.is_file() for p in paths):
        on_disk = read_summary(paths[0])
        current = on_disk is not None and on_disk.job.arn == summary.job.arn
    if not current:
        return list(write_reports(folder, summary, store))
    return paths


def _write_run(
    mlflow: ModuleType,
    uri: str,
    name: str,
    data: RunData,
    key: str,
    tags: Mapping[str, str],
    folder: Path,
    params: Mapping[str, str],
    steps: Sequence[StepMetrics],
    artifacts: Sequence[Path],
    traces: Sequence[RolloutTrace],
) -> tuple[str, str, int, int]:
    """Write the MLflow run, then delete the earlier exports of ``key``; return (run id,
    experiment id, metric points, runs replaced)."""
    with mlflow_quiet():
        client = mlflow.MlflowClient(uri)
        experiment_id = ensure_experiment(client, name, uri)
        old_runs = [
            r.info.run_id
            for r in client.search_runs(
                [experiment_id], filter_string=f"tags.`agent_kit.export_key` = '{key}'"
            )
        ]
        old_traces = _trace_ids(
            client, experiment_id, filter_string=f"tags.`agent_kit.export_key` = '{key}'"
        )
        ended = max(
            [data.job.created_at, *(r.ended_at for r in data.records)],
        )
        run = client.create_run(
            experiment_id,
            start_time=round(data.job.created_at * 1000),
            run_name=data.job.name,
            tags={
                **tags,
                "agent_kit.run_dir": str(folder.resolve()),
                "agent_kit.job_status": data.job.status,
                "agent_kit.exported_at": str(time.time()),
            },
        )
        run_id = run.info.run_id
        try:
            _log_params(client, run_id, params)
            points = _log_metrics(client, run_id, steps)
            for path in artifacts:
                client.log_artifact(run_id, str(path))
            _write_traces(mlflow, uri, run_id, experiment_id, traces)
            client.set_terminated(
                run_id,
                status=_RUN_STATUS.get(data.job.status, "FINISHED"),
                end_time=round(ended * 1000) if math.isfinite(ended) else None,
            )
        except BaseException:
            with contextlib.suppress(Exception):
                _delete_traces(
                    client, experiment_id, _trace_ids(client, experiment_id, run_id=run_id)
                )
                client.delete_run(run_id)
            raise
        _delete_traces(client, experiment_id, list(old_traces))
        for old in old_runs:
            client.delete_run(old)
    return run_id, experiment_id, points, len(old_runs)


def _run_folder(run_dir: str | Path) -> Path:
    """``run_dir`` as a path; a usage error when it is no directory or holds no run store."""
    folder = Path(run_dir)
    if not folder.is_dir():
        raise UsageError(f"run directory not found: {folder}")
    if not resolve_path(folder).exists():
        raise UsageError(f"no run store in {folder} (expected {resolve_path(folder)})")
    return folder


def _send_otlp(traces: Sequence[RolloutTrace], endpoint: str, job_arn: str, run_id: str) -> int:
    """The spans of ``traces`` sent to the OTLP collector at ``endpoint`` (how many); a refused
    export is a usage error that says the MLflow run ``run_id`` was written anyway."""
    from agent_kit.export.otlp import send_otlp

    try:
        return send_otlp(traces, endpoint, job_arn=job_arn)
    except UsageError as exc:
        raise UsageError(
            f"MLflow run {run_id} was written, but the OTLP export failed: {exc.message}"
        ) from exc


def export_run(
    run_dir: str | Path,
    *,
    tracking_uri: str | None = None,
    experiment: str | None = None,
    job: str | None = None,
    otlp_endpoint: str | None = None,
) -> ExportResult:
    """Log the run in ``run_dir`` to MLflow (see the module docstring); return what was written.

    ``tracking_uri`` defaults to :func:`~agent_kit.export.tracking.default_tracking_uri`,
    ``experiment`` to :data:`~agent_kit.export.tracking.DEFAULT_EXPERIMENT`, ``job`` (a name
    or ARN) to the run's latest job. With ``otlp_endpoint`` the same spans also go to that
    OTLP/HTTP collector
    (:func:`agent_kit.export.otlp.send_otlp`). Works on interrupted and resumed runs (every
    trajectory the store holds gets its trace). Raises :class:`UsageError` for a missing run
    directory or store, a missing MLflow extra, or a refused OTLP export.
    """
    folder = _run_folder(run_dir)
    with RunStore.open(folder, readonly=True) as store:  # refuses a damaged store first
        mlflow = require_mlflow()
        uri = writable_tracking_uri(tracking_uri, folder)
        summary = summarize(store, job)
        data = load_run_data(
            store,
            summary.job.arn,
            threshold=summary.settings.success_threshold,
            advantage=summary.settings.advantage,
        )
        key = export_key(data.job.arn, data.job.created_at)
        tags = {
            "agent_kit.job_arn": data.job.arn,
            "agent_kit.export_key": key,
        }
        traces = rollout_traces(store, data, tags=tags)
        trained = load_train_figures(store)
        steps = with_aux_metrics(
            with_train_metrics(step_metrics(data, summary, store), trained), summary
        )
        holdout, holdout_params = holdout_metrics(steps, trained)
        artifacts = _artifacts(folder, summary, store)
    artifacts += [
        folder / n for n in _TRAIN_FILES if trained is not None and (folder / n).is_file()
    ]
    params = {**_flat_params(data.job.config), **holdout_params}
    name = experiment or DEFAULT_EXPERIMENT
    try:
        run_id, experiment_id, points, replaced = _write_run(
            mlflow,
            uri,
            name,
            data,
            key,
            tags,
            folder,
            params,
            [*steps, *holdout],
            artifacts,
            traces,
        )
    except mlflow.exceptions.MlflowException as exc:
        raise mlflow_error(uri, exc) from exc
    otlp_spans = None
    if otlp_endpoint is not None:
        otlp_spans = _send_otlp(traces, otlp_endpoint, data.job.arn, run_id)
    return ExportResult(
        tracking_uri=uri,
        experiment_id=experiment_id,
        experiment_name=name,
        run_id=run_id,
        job_arn=data.job.arn,
        params=len(params),
        metric_points=points,
        steps=len(steps),
        artifacts=tuple(p.name for p in artifacts),
        traces=len(traces),
        spans=sum(t.root.count() for t in traces),
        replaced=replaced,
        otlp_spans=otlp_spans,
    )
