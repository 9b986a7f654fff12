"""``agent-kit eval … --submit``: the grid as SageMaker evaluation jobs (docs/eval.md).

The options of the job side, the checks made before anything is submitted (every policy a model
the service evaluates, no ``env.*`` axis, the grid within the quota and the deadline), and the
runner :func:`submit_grid` (:func:`agent_kit.evaluation.job_cells.run_job_grid` with boto3's
``sagemaker`` client). The quota is the flag ``--max-concurrent-jobs`` (default 1, SageMaker's
default quota of evaluation jobs at once): agent-kit does not read Service Quotas.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from agent_kit.deploy.jobs import runtime_region
from agent_kit.deploy.s3names import check_s3_uri
from agent_kit.errors import UsageError
from agent_kit.evaluation.grid import GridSpec
from agent_kit.evaluation.job_cells import JobGridRun, mlflow_metrics, run_job_grid
from agent_kit.evaluation.job_specs import (
    JobSettings,
    cell_job_spec,
    check_job_grid,
    check_region,
    job_name,
    turns,
)
from agent_kit.reporting.pricing import default_pricing

__all__ = [
    "DatasetUriOption",
    "JobTimeoutOption",
    "MaxJobsOption",
    "MaxRuntimeOption",
    "MetricsUriOption",
    "MlflowArnOption",
    "PollIntervalOption",
    "RegionOption",
    "RoleArnOption",
    "RuntimeArnOption",
    "S3OutputOption",
    "SubmitOption",
    "check_quota",
    "job_settings",
    "submit_grid",
]


def _opt(flag: str, text: str, **kw: Any) -> Any:
    return typer.Option(flag, help=text, show_default=kw.pop("show_default", False), **kw)


SubmitOption = Annotated[
    bool,
    _opt("--submit", "Run every cell as a SageMaker evaluation job instead of here."),
]
RuntimeArnOption = Annotated[
    str | None, _opt("--runtime-arn", "--submit: the deployed agent (AgentCore runtime ARN).")
]
RoleArnOption = Annotated[str | None, _opt("--role-arn", "--submit: the role the jobs run as.")]
S3OutputOption = Annotated[
    str | None, _opt("--s3-output", "--submit: s3:// output path (a folder per cell).")
]
DatasetUriOption = Annotated[
    str | None, _opt("--dataset-uri", "--submit: the holdout in S3 (s3://…) the jobs read.")
]
MlflowArnOption = Annotated[
    str | None, _opt("--mlflow-arn", "--submit: the MLflow app the jobs log their metrics to.")
]
MetricsUriOption = Annotated[
    str | None,
    _opt("--metrics-uri", "--submit: MLflow tracking URI to read the jobs' runs from "
         "(default: --mlflow-arn, which needs the sagemaker-mlflow plugin)."),
]  # fmt: skip
MaxJobsOption = Annotated[
    int,
    _opt("--max-concurrent-jobs", "--submit: evaluation jobs at once (the account's quota).",
         show_default=True),
]  # fmt: skip
MaxRuntimeOption = Annotated[
    int, _opt("--max-runtime", "--submit: each job's StoppingCondition seconds.", show_default=True)
]
JobTimeoutOption = Annotated[
    float | None,
    _opt("--job-timeout", "--submit: seconds to wait for the whole grid (default: every "
         "round of jobs at --max-runtime)."),
]  # fmt: skip
PollIntervalOption = Annotated[
    float, _opt("--poll-interval", "Seconds between DescribeJob polls.", hidden=True)
]
RegionOption = Annotated[
    str | None, _opt("--region", "--submit: AWS region (default: the runtime ARN's).")
]
_NEEDED = (
    ("--runtime-arn", "runtime_arn"),
    ("--role-arn", "role_arn"),
    ("--s3-output", "s3_output"),
    ("--dataset-uri", "dataset_uri"),
    ("--mlflow-arn", "mlflow_arn"),
)


def job_settings(options: dict[str, Any]) -> JobSettings | None:
    """The job settings of ``--submit`` (None without it); UsageError naming what is missing.
    ``--mlflow-arn`` is needed: the table reads each job's metrics from its MLflow run."""
    if not options["submit"]:
        given = [flag for flag, key in _NEEDED if options[key]]
        if given:
            raise UsageError(f"{given[0]} is a --submit option: add --submit")
        return None
    missing = [flag for flag, key in _NEEDED if not options[key]]
    if missing:
        raise UsageError(f"--submit needs {', '.join(missing)}")
    if options["max_concurrent_jobs"] < 1:
        raise UsageError("--max-concurrent-jobs must be ≥ 1")
    if options["job_timeout"] is not None and options["job_timeout"] <= 0:
        raise UsageError("--job-timeout must be > 0")
    runtime = str(options["runtime_arn"])
    region = options["region"] or runtime_region(runtime)
    check_region("--region", region)
    check_s3_uri("--dataset-uri", str(options["dataset_uri"]))
    check_s3_uri("--s3-output", str(options["s3_output"]))
    return JobSettings(
        runtime_arn=runtime,
        role_arn=str(options["role_arn"]),
        output=str(options["s3_output"]),
        dataset_uri=str(options["dataset_uri"]),
        region=region,
        mlflow_arn=options["mlflow_arn"],
        max_concurrent=int(options["max_concurrent_jobs"]),
        max_runtime_s=int(options["max_runtime"]),
        timeout_s=options["job_timeout"],
        poll_interval_s=float(options["poll_interval"]),
    )


def check_quota(spec: GridSpec, settings: JobSettings, threshold: float) -> None:
    """Refuse, before any request, a grid that cannot run as jobs (:func:`check_job_grid`; every
    cell's CreateJob request checked as it would be sent: its role, S3 URIs, hyperparameters) or
    cannot finish within ``--job-timeout`` at the quota (rounds of jobs × ``--max-runtime``)."""
    check_job_grid(spec)
    for cell in spec.cells():
        name = job_name(cell, "0" * 8)  # the token is drawn when the grid runs
        cell_job_spec(spec, cell, settings, name, k=spec.samples, threshold=threshold)
    cells = len(spec.cells())
    rounds = turns(cells, settings.max_concurrent)
    need = rounds * settings.max_runtime_s
    if settings.timeout_s is not None and need > settings.timeout_s:
        raise UsageError(
            f"the grid is {cells} evaluation jobs: at {settings.max_concurrent} at once "
            f"(--max-concurrent-jobs) that is {rounds} rounds of up to {settings.max_runtime_s} s "
            f"(--max-runtime) = {need} s, over --job-timeout {settings.timeout_s:g} s: raise "
            "--job-timeout or the quota, lower --max-runtime, or split the grid"
        )


def submit_grid(
    spec: GridSpec,
    out: Path,
    settings: JobSettings,
    options: dict[str, Any],
    prompts: int,
    echo: Any,
) -> JobGridRun:
    """Run the grid as jobs with boto3's ``sagemaker`` client (endpoint from the usual boto3
    configuration, ``AWS_ENDPOINT_URL_SAGEMAKER`` included)."""
    from agent_kit.deploy.agentcore import boto3_clients

    client = boto3_clients(settings.region)("sagemaker")
    uri = options["metrics_uri"] or settings.mlflow_arn
    return run_job_grid(
        spec,
        out,
        settings,
        client,
        k=spec.samples,
        threshold=float(options["success_threshold"]),
        prompts=prompts,
        pricing=default_pricing(),
        read_metrics=mlflow_metrics(str(uri)),
        echo=echo,
        clock=time.monotonic,
        sleep=time.sleep,
    )
