"""The job source of cell figures: each cell a SageMaker evaluation job (``--submit``).

:func:`run_job_grid` submits one evaluation job per cell (CreateJob, category
``AgentRFTEvaluation``, a hub model id resolved by DescribeHubContent; the request is
:func:`agent_kit.deploy.jobs.build_create_job`'s, the cell's settings
:mod:`~agent_kit.evaluation.job_specs`'s) and keeps at most ``JobSettings.max_concurrent`` of
them running: before each submission it counts the account's running evaluation jobs
(ListJobs, status InProgress; the grid's own included) and submits only under the quota. It
polls every running job (DescribeJob) until it ends, then reads its metrics (``read_metrics``:
by default the MLflow run the job names in ``MlflowDetails``) into the cell's figures.

The state is ``jobs.json`` next to ``grid.json`` (the eval directory): the grid's token and,
per cell, its job name, ARN, last status and, once read, its figures; it is written after every
submission and every end, so an interrupted grid resumes: a cell with figures is kept, a cell
with an ARN is waited for (never submitted again), the others are submitted. A job that ends
Failed or Stopped marks its cell ``failed`` with the job's reason (kept on re-runs, as a failed
local cell is); a completed job whose metrics cannot be read is an ``error`` this time and keeps
no figures, so the next run reads them again (with the ``--metrics-uri`` it is given: the job
is paid for and not submitted again); a cell the service refuses (CreateJob fails) marks it
``error`` and the others go on (it is not recorded: a re-run submits it). At the deadline the
cells still running are marked ``interrupted`` (a re-run waits for them) and those not
submitted ``pending``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from agent_kit.deploy.jobs import JobSpec, build_create_job, hub_model_arn_request
from agent_kit.errors import AgentKitError, DeployError, UsageError
from agent_kit.evaluation.figures import CellFigures
from agent_kit.evaluation.grid import Cell, GridSpec
from agent_kit.evaluation.job_specs import JobSettings, cell_job_spec, job_figures, job_name
from agent_kit.evaluation.local_cells import EvalLayout, write_file
from agent_kit.reporting.pricing import Pricing

__all__ = [
    "JOBS_FILE",
    "JOBS_SCHEMA",
    "JobGridRun",
    "JobState",
    "mlflow_metrics",
    "run_job_grid",
]

#: The job state file of an eval directory, and its schema tag.
JOBS_FILE: Final = "jobs.json"
JOBS_SCHEMA: Final = "agent_kit.eval_jobs/1"
_ENDED: Final = ("Completed", "Failed", "Stopped")
_CATEGORY: Final = "AgentRFTEvaluation"

Echo = Callable[[str], None]
#: Reads a completed job's metrics from its DescribeJob answer.
MetricsReader = Callable[[Mapping[str, Any]], Mapping[str, Any]]


@dataclass
class JobState:
    """``jobs.json``: the grid's token and, per cell id, its job (name, arn, status, figures)."""

    path: Path
    token: str
    cells: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> JobState:
        """The state in ``root`` (a fresh one with a new token when there is none)."""
        path = root / JOBS_FILE
        if not path.is_file():
            return cls(path, secrets.token_hex(4))
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise UsageError(f"{path} cannot be read: use another --out") from None
        if not isinstance(data, dict) or data.get("schema") != JOBS_SCHEMA:
            raise UsageError(f"{path} is not an agent-kit eval job state: use another --out")
        return cls(path, str(data["token"]), dict(data.get("cells") or {}))

    def save(self) -> None:
        """Write the state atomically."""
        doc = {"schema": JOBS_SCHEMA, "token": self.token, "cells": self.cells}
        write_file(self.path, json.dumps(doc, indent=2) + "\n")

    def figures(self, cell: Cell) -> CellFigures | None:
        """The cell's recorded figures (None while it has none, and for a completed job whose
        metrics could not be read: an earlier state file recorded that as an ``error``)."""
        entry = self.cells.get(cell.id, {})
        data = entry.get("figures")
        if not data or (entry.get("status") == "Completed" and data.get("state") == "error"):
            return None
        return CellFigures.from_document(data)

    def record(self, cell: Cell, **values: Any) -> None:
        """Update the cell's entry and save."""
        self.cells.setdefault(cell.id, {}).update(values)
        self.save()


@dataclass(frozen=True)
class JobGridRun:
    """What :func:`run_job_grid` did: the figures by cell id and the jobs it submitted."""

    figures: dict[str, CellFigures]
    submitted: tuple[str, ...]
    stopped_by: None = None


def mlflow_metrics(tracking_uri: str) -> MetricsReader:
    """A reader of a job's metrics from the MLflow run its ``MlflowDetails`` names, on the
    tracking server ``tracking_uri`` (a SageMaker MLflow ARN needs the sagemaker-mlflow
    plugin; any MLflow URI works)."""

    def read(describe: Mapping[str, Any]) -> Mapping[str, Any]:
        from agent_kit.deploy.jobs import job_status
        from agent_kit.export.tracking import mlflow_quiet, require_mlflow

        details = job_status(describe).get("mlflow") or {}
        run_id = details.get("MlflowRunId") or details.get("RunId")
        if not run_id:
            raise DeployError(f"job {describe.get('JobName')} names no MLflow run")
        mlflow = require_mlflow()
        try:
            with mlflow_quiet():
                run = mlflow.MlflowClient(tracking_uri).get_run(str(run_id))
        except Exception as exc:  # noqa: BLE001 - any MLflow failure is the cell's reason
            raise DeployError(f"MLflow run {run_id} in {tracking_uri}: {exc}") from None
        return dict(run.data.metrics)

    return read


def _call(client: Any, method: str, **params: Any) -> dict[str, Any]:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        answer: dict[str, Any] = getattr(client, method)(**params)
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise DeployError(f"{err.get('Code', 'Error')}: {err.get('Message', exc)}") from None
    except BotoCoreError as exc:
        raise DeployError(str(exc)) from None
    return answer


def _running(client: Any) -> int:
    """The account's evaluation jobs in progress (ListJobs, every page)."""
    count, token = 0, None
    for _ in range(100):
        params: dict[str, Any] = {"JobCategory": _CATEGORY, "StatusEquals": "InProgress"}
        if token:
            params["NextToken"] = token
        page = _call(client, "list_jobs", **params)
        count += len(page.get("JobSummaries") or [])
        token = page.get("NextToken")
        if not token:
            break
    return count


@dataclass
class _Grid:
    """One invocation's working set (see :func:`run_job_grid`)."""

    spec: GridSpec
    settings: JobSettings
    client: Any
    state: JobState
    k: int
    threshold: float
    prompts: int
    pricing: Pricing
    read_metrics: MetricsReader
    echo: Echo
    figures: dict[str, CellFigures] = field(default_factory=dict)
    submitted: list[str] = field(default_factory=list)
    said_full: bool = False
    models: dict[str, str] = field(default_factory=dict)

    def submit(self, cell: Cell) -> bool:
        """Submit the cell's job; False when the quota is full (try again later)."""
        name = job_name(cell, self.state.token)
        job = cell_job_spec(
            self.spec, cell, self.settings, name, k=self.k, threshold=self.threshold
        )
        try:
            request = self._request(job)
            answer = _call(self.client, "create_job", **request)
        except DeployError as exc:
            if "ResourceLimitExceeded" in exc.message:
                return False
            self.figures[cell.id] = CellFigures(state="error", reason=f"CreateJob: {exc.message}")
            return True  # not recorded: a re-run submits it again
        self.state.record(cell, name=name, arn=answer["JobArn"], status="InProgress")
        self.submitted.append(cell.id)
        self.echo(f"submitted {cell.id}: {answer['JobArn']}")
        return True

    def _request(self, job: JobSpec) -> dict[str, Any]:
        """The CreateJob request, a hub model id resolved to its ARN (DescribeHubContent)."""
        model = job.model
        if not model.startswith("arn:"):
            if model not in self.models:
                found = _call(self.client, "describe_hub_content", **hub_model_arn_request(model))
                self.models[model] = str(found["HubContentArn"])
            model = self.models[model]
        request, _ = build_create_job(job, model_arn=model)
        return request

    def poll(self, cell: Cell) -> bool:
        """Describe the cell's job; True when it has ended (its figures are then read)."""
        entry = self.state.cells[cell.id]
        describe = _call(self.client, "describe_job", JobName=entry["name"], JobCategory=_CATEGORY)
        status = str(describe.get("JobStatus"))
        if status != entry.get("status"):
            self.echo(f"  {cell.id}: {status}")
        if status not in _ENDED:
            self.state.record(cell, status=status)
            return False
        figures = self._ended(describe, status, entry["arn"])
        self.figures[cell.id] = figures
        if status == "Completed" and figures.state == "error":  # the metrics were not read
            entry.pop("figures", None)
            self.state.record(cell, status=status, metrics_error=figures.reason)
            self.echo(f"  {cell.id}: {figures.reason} (the next run reads its metrics again)")
        else:
            self.state.record(cell, status=status, figures=figures.document())
        return True

    def _ended(self, describe: Mapping[str, Any], status: str, arn: str) -> CellFigures:
        if status != "Completed":
            reason = describe.get("FailureReason") or f"the job is {status}"
            return CellFigures(state="failed", reason=str(reason), source="job", location=arn)
        try:
            metrics = self.read_metrics(describe)
        except AgentKitError as exc:
            return CellFigures(state="error", reason=exc.message, source="job", location=arn)
        return job_figures(
            metrics,
            describe,
            k=self.k,
            rollouts=self.prompts * self.spec.samples,
            prompts=self.prompts,
            pricing=self.pricing,
        )


def run_job_grid(
    spec: GridSpec,
    out: Path,
    settings: JobSettings,
    client: Any,
    *,
    k: int,
    threshold: float,
    prompts: int,
    pricing: Pricing,
    read_metrics: MetricsReader,
    echo: Echo,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> JobGridRun:
    """Run every cell of ``spec`` as an evaluation job with the SageMaker ``client`` (see the
    module docstring); ``clock`` / ``sleep`` time the polls (injectable for tests). Writes
    ``grid.json`` first."""
    layout = EvalLayout(out)
    layout.check(spec)
    write_file(layout.grid, json.dumps(spec.document(), indent=2, allow_nan=False) + "\n")
    grid = _Grid(
        spec, settings, client, JobState.load(out), k, threshold, prompts, pricing,
        read_metrics, echo,
    )  # fmt: skip
    waiting: list[Cell] = []
    queued: list[Cell] = []
    for cell in spec.cells():
        found = grid.state.figures(cell)
        if found is not None:
            echo(f"{cell.id}: {found.state} (kept)")
            grid.figures[cell.id] = found
        elif grid.state.cells.get(cell.id, {}).get("arn"):
            echo(f"{cell.id}: waiting for {grid.state.cells[cell.id]['arn']}")
            waiting.append(cell)
        else:
            queued.append(cell)
    deadline = clock() + settings.deadline_s(len(waiting) + len(queued))
    while True:
        waiting = [c for c in waiting if not grid.poll(c)]
        while queued and _free(grid, len(waiting)):
            cell = queued[0]
            if not grid.submit(cell):
                break
            queued.pop(0)
            if cell.id not in grid.figures:
                waiting.append(cell)
        if not waiting and not queued:
            break
        if clock() >= deadline:
            _time_out(grid, waiting, queued)
            break
        sleep(settings.poll_interval_s)
    return JobGridRun(grid.figures, tuple(grid.submitted))


def _free(grid: _Grid, ours: int) -> bool:
    """True when one more job fits the quota (the account's running jobs and ours)."""
    quota = grid.settings.max_concurrent
    if ours >= quota:
        return False
    running = _running(grid.client)
    if running >= quota and not ours and not grid.said_full:
        grid.echo(f"{running} evaluation job(s) already running (quota {quota}): waiting")
        grid.said_full = True
    return running < quota


def _time_out(grid: _Grid, waiting: list[Cell], queued: list[Cell]) -> None:
    for cell in waiting:
        grid.figures[cell.id] = CellFigures(
            state="interrupted",
            reason="still running at the deadline: a re-run waits for it",
            source="job",
            location=grid.state.cells[cell.id].get("arn"),
        )
    for cell in queued:
        grid.figures[cell.id] = CellFigures(
            state="pending", reason="not submitted by the deadline: a re-run submits it"
        )
