"""``agent-kit export mlflow RUN_DIR [--tracking-uri URI] [--experiment NAME] [--otlp URL]``:
log a local run to MLflow as the real job does (params, per-step metrics, artifacts, one trace
per rollout), optionally also sending the spans to an OTLP/HTTP collector.

:class:`MlflowTarget` is the same export done by ``agent-kit run --mlflow`` as its run ends."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from agent_kit.cli.program import program
from agent_kit.cli.run_options import JobOfRunOption, RunDirArgument
from agent_kit.export.mlflow import ExportResult, export_run
from agent_kit.export.tracking import DEFAULT_EXPERIMENT, require_mlflow

if TYPE_CHECKING:
    from agent_kit.driver.job import JobResult

__all__ = ["MlflowTarget", "export_app", "mlflow_command", "print_export", "register"]

export_app = typer.Typer(
    name="export",
    help="Export a local run to where the real job's results go (MLflow, OTLP).",
    no_args_is_help=True,
)


@export_app.command("mlflow")
def mlflow_command(
    run_dir: RunDirArgument,
    tracking_uri: Annotated[
        str | None,
        typer.Option(
            "--tracking-uri",
            help="MLflow tracking URI (default: sqlite:///<RUN_DIR's parent>/mlflow.db).",
            show_default=False,
        ),
    ] = None,
    experiment: Annotated[
        str, typer.Option("--experiment", help="MLflow experiment name.")
    ] = DEFAULT_EXPERIMENT,
    job: JobOfRunOption = None,
    otlp: Annotated[
        str | None,
        typer.Option(
            "--otlp",
            help="Also send the spans to this OTLP/HTTP traces endpoint "
            "(e.g. http://127.0.0.1:4318/v1/traces).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was written as one JSON line.")
    ] = False,
) -> None:
    """Log RUN_DIR to MLflow: job config as params, per-step rollout/* eval/* timing_s/* metrics,
    summary.json and report.html as artifacts, one trace per rollout. Re-exporting replaces the
    earlier export of the same job. Needs the mlflow extra (see docs/mlflow.md)."""
    result = export_run(
        run_dir, tracking_uri=tracking_uri, experiment=experiment, job=job, otlp_endpoint=otlp
    )
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "tracking_uri": result.tracking_uri,
                    "experiment_id": result.experiment_id,
                    "experiment": result.experiment_name,
                    "run_id": result.run_id,
                    "job_arn": result.job_arn,
                    "steps": result.steps,
                    "metric_points": result.metric_points,
                    "artifacts": list(result.artifacts),
                    "traces": result.traces,
                    "spans": result.spans,
                    "replaced": result.replaced,
                    "otlp_spans": result.otlp_spans,
                }
            )
        )
        return
    print_export(result, Console(highlight=False, soft_wrap=True), otlp)


def print_export(result: ExportResult, out: Console, otlp: str | None = None) -> None:
    """What an export wrote, where the store is and how to view it, in three or four lines."""
    replaced = f", replacing {result.replaced} earlier export" if result.replaced else ""
    steps = f"{result.steps} step{'' if result.steps == 1 else 's'}"
    out.print(
        f"logged {result.job_arn} to MLflow run {result.run_id} "
        f"(experiment {result.experiment_name!r}{replaced}): {steps}, "
        f"{result.metric_points} metric points, {len(result.artifacts)} artifacts, "
        f"{result.traces} traces ({result.spans} spans)",
        markup=False,
    )
    if result.otlp_spans is not None:
        out.print(f"sent {result.otlp_spans} spans to {otlp}", markup=False)
    out.print(f"store: {result.tracking_uri}", markup=False)
    out.print(f"view:  {result.ui_command}  (needs the full mlflow package)", markup=False)


@dataclass(frozen=True)
class MlflowTarget:
    """Where ``run --mlflow`` logs the run once it ends (None: the run's default store)."""

    tracking_uri: str | None
    experiment: str | None

    @classmethod
    def from_options(
        cls, mlflow: bool, tracking_uri: str | None, experiment: str | None
    ) -> MlflowTarget | None:
        """The target of ``--mlflow`` / ``--mlflow-uri`` / ``--mlflow-experiment`` (either of the
        last two implies the first), checked (:meth:`check`); None when none is given."""
        if not (mlflow or tracking_uri is not None or experiment is not None):
            return None
        target = cls(tracking_uri, experiment)
        target.check()
        return target

    def check(self) -> None:
        """The mlflow extra is installed: checked before the run, not after it."""
        require_mlflow()

    def export(self, result: JobResult, console: Console, err: Console, *, as_json: bool) -> None:
        """Log the run (also an interrupted or failed one); a failed export is one warning
        line, the run's own outcome and exit code stand."""
        try:
            exported = export_run(
                result.run_dir,
                tracking_uri=self.tracking_uri,
                experiment=self.experiment,
                job=result.job_arn,
            )
        except Exception as exc:  # noqa: BLE001 - the run is recorded; export it again later
            err.print(
                f"warning: the MLflow export failed ({type(exc).__name__}: {exc}); retry with "
                f"{program()} export mlflow {result.run_dir}",
                markup=False,
            )
            return
        print_export(exported, err if as_json else console)


def register(app: typer.Typer) -> None:
    """Add the ``export`` command group to the ``agent-kit`` Typer app."""
    app.add_typer(export_app, name="export")
