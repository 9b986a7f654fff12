"""``agent-kit eval``: an evaluation grid, one table (docs/eval.md).

``agent-kit eval ENTRYPOINT --dataset HOLDOUT --policy SPEC [--policy SPEC …] [--grid
NAME=V1,V2 …] [--samples K] [--out DIR] [--compare A B] [--plan [--plan-from RUN_DIR]]
[--mlflow …] [--json]``: every cell (a policy under one setting) is a run through the driver in
``DIR/<cell id>/``; the table (mean ± SE, success, pass@K, turns, tokens, cost; the differences)
is printed (``--json``: its document as the last stdout line) and written to ``DIR/table.json``
and ``DIR/eval.html``. Progress goes to stderr. Re-running with the same ``--out`` keeps the
finished cells and resumes an interrupted one. Exit 0 when every cell completed; 9 after the
table when one did not (the table marks it with its reason); 2 for a bad grid, setting or policy
(checked before the first cell, and by ``--plan``) or an ``--out`` holding a run that is not
its cell's; 14 when the eval directory cannot be written (after the table is printed); 130/143
after a Ctrl-C/SIGTERM (the cell in flight stops gracefully and is resumed by the next run).
``--plan`` prints the grid's rollouts, tokens, cost and wall clock and exits without running
anything. ``--submit`` runs every cell as a SageMaker evaluation job instead
(:mod:`agent_kit.cli.eval_jobs`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from rich.console import Console
from rich.table import Table

from agent_kit.cli.eval_jobs import (
    DatasetUriOption,
    JobTimeoutOption,
    MaxJobsOption,
    MaxRuntimeOption,
    MetricsUriOption,
    MlflowArnOption,
    PollIntervalOption,
    RegionOption,
    RoleArnOption,
    RuntimeArnOption,
    S3OutputOption,
    SubmitOption,
    check_quota,
    job_settings,
    submit_grid,
)
from agent_kit.cli.eval_options import (
    CheckpointsOption,
    EvalEntrypoint,
    PilotOption,
    SpreadOption,
    TargetOption,
    checkpoints_of,
    named,
    power_of,
    power_rows,
)
from agent_kit.cli.process import tune_process
from agent_kit.cli.run_options import (
    AgentMemoryOption,
    AsJsonOption,
    ConcurrencyOption,
    LenientAuthOption,
    MaxRetriesOption,
    MlflowExperimentOption,
    MlflowOption,
    MlflowUriOption,
    RolloutTimeoutOption,
    SeedOption,
    SuccessThresholdOption,
    WorkersOption,
    door_settings,
)
from agent_kit.cli.stopping import aborts_exit, announcer, exit_interrupted
from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.dataset import load_dataset
from agent_kit.driver.invokers.process_tree import parse_memory
from agent_kit.errors import JobFailed, UsageError
from agent_kit.evaluation.grid import GridSpec, grid_spec
from agent_kit.evaluation.groups import grid_groups
from agent_kit.evaluation.job_cells import JobGridRun
from agent_kit.evaluation.job_specs import JobSettings, job_policy
from agent_kit.evaluation.local_cells import (
    EvalLayout,
    GridRun,
    base_settings,
    check_cells,
    read_cell,
    run_grid,
    survey,
    write_file,
)
from agent_kit.evaluation.page import render_page
from agent_kit.evaluation.plan import grid_plan, job_plan, recorded_rollouts
from agent_kit.evaluation.render import render_table
from agent_kit.evaluation.table import GridTable, build_table, comparisons
from agent_kit.reporting.pricing import default_pricing
from agent_kit.settings import Settings
from agent_kit.store import resolve_path

__all__ = ["eval_cmd", "register"]

PoliciesOption = Annotated[
    list[str],
    typer.Option(
        "--policy",
        help="A policy to evaluate (repeat for more): any --policy spec of run, e.g. "
        "scripted:FILE.py:NAME, openai:URL#MODEL, hf:MODEL+ADAPTER, local.",
        show_default=False,
    ),
]
GridOption = Annotated[
    list[str] | None,
    typer.Option(
        "--grid",
        help="An axis NAME=V1,V2,… (repeatable): temperature, top_p, max_tokens, or env.NAME "
        "(an environment variable of the agent's processes).",
        show_default=False,
    ),
]
CompareOption = Annotated[
    tuple[str, str] | None,
    typer.Option(
        "--compare",
        help="Difference A − B of two cells (by id) or two policies (by label, at every "
        "setting); default: the first two policies.",
        show_default=False,
    ),
]


def _memory(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return parse_memory(text)
    except ValueError as exc:
        raise UsageError(f"--agent-memory: {exc}") from None


def _base(options: dict[str, Any], spec_axes: list[str]) -> dict[str, Any]:
    """The job settings every cell shares; an inference setting that is also an axis is
    refused."""
    base = base_settings(options)
    base.pop("region", None)  # --region is the jobs' (--submit), not a cell's setting
    for name in ("temperature", "top_p", "max_tokens"):
        given = options.get(name)
        if given is None:
            base.pop(name, None)
        elif any(a.split("=", 1)[0].strip() == name for a in spec_axes):
            raise UsageError(f"--{name.replace('_', '-')} and --grid {name}=… both given")
    return base


def _prompts(dataset: Path) -> int:
    if not dataset.is_file():
        raise UsageError(f"--dataset {dataset}: no such file")
    return len(load_dataset(dataset))


def _print_plan(doc: dict[str, Any], console: Console, *, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(doc))
        return
    table = Table(title="agent-kit eval --plan", title_justify="left", show_header=False)
    table.add_row("cells", str(doc["cells"]))
    table.add_row(
        "rollouts",
        f"{doc['rollouts']:,} ({doc['prompts']} prompts × {doc['samples']} samples × "
        f"{doc['cells']} cells)",
    )
    if "tokens" in doc:
        for name in ("prompt", "sample"):
            band = doc["tokens"][name]
            table.add_row(
                f"{name} tokens",
                f"{band['p50']:,.0f} ({band['p10']:,.0f} – {band['p90']:,.0f})",
            )
        cost = doc["cost"]
        table.add_row(
            "cost",
            f"{cost['p50']:.4f} {cost['currency']} ({cost['p10']:.4f} – {cost['p90']:.4f})",
        )
        wall = doc["wall_clock_s"]
        table.add_row("wall clock", f"{wall['low']:.0f} – {wall['high']:.0f} s (cells in turn)")
        table.add_row("recorded run", str(doc["source"]))
    else:
        table.add_row("tokens, cost, time", "give --plan-from RUN_DIR (a run of this agent)")
    jobs = doc.get("jobs")
    if jobs is not None:
        table.add_row(
            "as jobs",
            f"{jobs['count']} evaluation jobs, {jobs['max_concurrent']} at once: "
            f"{jobs['turns']} rounds (each at most {jobs['max_runtime_s'] // jobs['turns']} s)",
        )
        if jobs["wall_clock_s"] is not None:
            wall = jobs["wall_clock_s"]
            table.add_row(
                "jobs' wall clock",
                f"{wall['low']:.0f} – {wall['high']:.0f} s (rounds in turn; start-up not counted)",
            )
    if "power" in doc:
        power_rows(table, doc["power"], doc["samples"])
    console.print(table)


def _plan(
    spec: GridSpec,
    prompts: int,
    plan_from: Path | None,
    options: dict[str, Any],
    jobs: JobSettings | None,
    power: dict[str, Any] | None = None,
) -> None:
    source = plan_from
    if source is not None and not resolve_path(source).exists():
        raise UsageError(f"--plan-from {source}: no run store there")
    if jobs is None:  # what the run would refuse in --out, the plan refuses too
        layout = EvalLayout(options["out"])
        held = survey(layout, spec)
        done = [
            layout.cell_dir(c)
            for c in spec.cells()
            if held[c.id].job is not None
            and (f := read_cell(layout.cell_dir(c), spec.samples, 1.0)) is not None
            and f.state == "completed"
        ]
        source = source or (done[0] if done else None)
    doc = grid_plan(
        spec,
        prompts,
        concurrency=options["concurrency"],
        rollout_timeout=options["rollout_timeout"],
        max_tokens=options.get("max_tokens") or _JOB.max_tokens,
        pricing=default_pricing(),
        recorded=None if source is None else recorded_rollouts(source),
        source=None if source is None else str(source),
    )
    if jobs is not None:
        doc = job_plan(doc, jobs.max_concurrent, jobs.max_runtime_s)
    if power is not None:
        doc["power"] = power
    _print_plan(doc, Console(highlight=False, soft_wrap=True), as_json=options["as_json"])


def _write(table: GridTable, out: Path) -> tuple[Path, Path]:
    """``table.json`` and ``eval.html``, each whole or not at all (RunStoreError, exit 14,
    naming the file that could not be written: a full disk)."""
    layout = EvalLayout(out)
    write_file(layout.table, json.dumps(table.document(), indent=2, default=str) + "\n")
    write_file(layout.page, render_page(table, grid_groups(table)))
    return layout.table, layout.page


#: The job's settings' defaults, which a cell's settings default to (tests/cli pins them).
_JOB: Final = JobConfig()


def eval_cmd(
    ctx: typer.Context,
    entrypoint: EvalEntrypoint = None,
    dataset: Annotated[
        Path | None, typer.Option(help="The holdout: .jsonl, .json, .csv or .parquet.")
    ] = None,
    policy: PoliciesOption = [],  # noqa: B006 - typer reads the default
    checkpoints: CheckpointsOption = None,
    grid: GridOption = None,
    samples: Annotated[int, typer.Option(help="Rollouts per prompt (the group size; pass@K).")] = 4,
    out: Annotated[
        Path, typer.Option(help="The eval directory (a run directory per cell).")
    ] = Path("runs/eval"),
    compare: CompareOption = None,
    temperature: Annotated[
        float | None, typer.Option(help="Temperature of every cell (not an axis).")
    ] = None,
    top_p: Annotated[float | None, typer.Option(help="top_p of every cell (not an axis).")] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="max_tokens of every cell (not an axis).")
    ] = None,
    concurrency: ConcurrencyOption = _JOB.concurrency,
    rollout_timeout: RolloutTimeoutOption = _JOB.rollout_timeout,
    max_retries: MaxRetriesOption = _JOB.max_retries,
    success_threshold: SuccessThresholdOption = _JOB.success_threshold,
    seed: SeedOption = _JOB.seed,
    workers: WorkersOption = None,
    agent_memory: AgentMemoryOption = None,
    lenient_auth: LenientAuthOption = False,
    plan: Annotated[
        bool,
        typer.Option(
            "--plan", help="Print the grid's rollouts, tokens, cost and wall clock; run nothing."
        ),
    ] = False,
    plan_from: Annotated[
        Path | None,
        typer.Option(help="--plan: the recorded run to plan from (default: a finished cell)."),
    ] = None,
    pilot: PilotOption = None,
    spread: SpreadOption = None,
    target: TargetOption = None,
    mlflow: MlflowOption = False,
    mlflow_uri: MlflowUriOption = None,
    mlflow_experiment: MlflowExperimentOption = None,
    submit: SubmitOption = False,
    runtime_arn: RuntimeArnOption = None,
    role_arn: RoleArnOption = None,
    s3_output: S3OutputOption = None,
    dataset_uri: DatasetUriOption = None,
    mlflow_arn: MlflowArnOption = None,
    metrics_uri: MetricsUriOption = None,
    max_concurrent_jobs: MaxJobsOption = 1,
    max_runtime: MaxRuntimeOption = 86400,
    job_timeout: JobTimeoutOption = None,
    poll_interval: PollIntervalOption = 60.0,
    region: RegionOption = None,
    as_json: AsJsonOption = False,
) -> None:
    """Evaluate policies × settings on a holdout: one table, mean ± SE and differences."""
    options = {k: v for k, v in locals().items() if k != "ctx"}
    jobs = job_settings(options)
    settings = door_settings(ctx)
    spec, prompts = _checked_grid(options, jobs, settings)
    power = power_of(options, spec, prompts)
    if plan:
        _plan(spec, prompts, plan_from, options, jobs, power)
        return
    run = _local_run(options, settings)
    tune_process(policies=list(spec.policies))
    if mlflow or mlflow_uri or mlflow_experiment or jobs is not None:
        from agent_kit.export.tracking import require_mlflow

        require_mlflow()  # a missing extra is said before anything runs
    _run_and_report(spec, out, run, options, (jobs, prompts))


def _checked_grid(
    options: dict[str, Any], jobs: JobSettings | None, settings: Settings
) -> tuple[GridSpec, int]:
    """The grid the options give (a ``--checkpoints`` run's policies first, named) and the
    holdout's prompts, everything checked before any cell plays (``--plan`` included): the
    grid, ``--compare``, the holdout, and every cell's settings and policy
    (:func:`check_cells`) or job (:func:`check_quota`)."""
    found = checkpoints_of(options, submitted=jobs is not None)  # their agent, holdout, policies
    agent = jobs.runtime_arn if jobs is not None else options["entrypoint"]
    dataset: Path | None = options["dataset"]
    if agent is None or dataset is None:
        raise UsageError("give ENTRYPOINT and --dataset HOLDOUT")
    axes = list(options["grid"] or [])
    base = _base(options, axes)
    where = jobs.dataset_uri if jobs is not None else str(dataset)
    check = job_policy if jobs is not None else None
    spec = grid_spec(agent, where, options["policy"], axes, options["samples"], base, check)
    spec = named(spec, found, options)
    comparisons(spec, options["compare"], options.get("pairs"))
    prompts = _prompts(dataset)
    if jobs is not None:
        check_quota(spec, jobs, float(options["success_threshold"]))
    else:
        check_cells(spec, settings)
    return spec, prompts


def _local_run(options: dict[str, Any], settings: Settings) -> RunConfig:
    """How the local cells reach the agent: its processes, their memory, the signature checks,
    the ``AGENT_KIT_*`` settings the CLI read."""
    return RunConfig(
        workers=options["workers"],
        agent_memory=_memory(options["agent_memory"]),
        lenient_auth=options["lenient_auth"],
        settings=settings,
    )


def _run_and_report(
    spec: GridSpec,
    out: Path,
    run: RunConfig,
    options: dict[str, Any],
    submit: tuple[JobSettings | None, int],
) -> None:
    as_json = bool(options["as_json"])
    console = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    threshold = float(options["success_threshold"])

    def echo(line: str) -> None:
        err.print(line, markup=False)

    jobs, prompts = submit
    with aborts_exit(err):
        done: GridRun | JobGridRun = (
            submit_grid(spec, out, jobs, options, prompts, echo)
            if jobs is not None
            else run_grid(
                spec,
                out,
                run,
                k=spec.samples,
                threshold=threshold,
                echo=echo,
                on_stop=announcer(err, run.grace),
            )
        )
    table = build_table(
        spec,
        done.figures,
        compare=options["compare"],
        pairs=options.get("pairs"),
        k=spec.samples,
        threshold=threshold,
        location=str(out),
    )
    if as_json:
        typer.echo(json.dumps(table.document(), default=str))
    else:
        console.print(render_table(table), soft_wrap=False, crop=False)
    table_file, page_file = _write(table, out)  # after the table: a full disk loses no figure
    if not as_json:
        console.print(f"table: {table_file}\npage:  {page_file}", markup=False)
    if options["mlflow"] or options["mlflow_uri"] or options["mlflow_experiment"]:
        _export(table, out, (table_file, page_file), options, err)
    if done.stopped_by is not None:
        exit_interrupted(done.stopped_by, err)
    failed = table.failed_cells
    if failed:
        names = ", ".join(f"{r.cell.id} ({r.figures.state})" for r in failed)
        raise JobFailed(f"{len(failed)} of {len(table.rows)} cells did not complete: {names}")


def _export(
    table: GridTable, out: Path, files: tuple[Path, ...], options: dict[str, Any], err: Console
) -> None:
    from agent_kit.evaluation.mlflow import export_grid

    done = export_grid(
        table,
        out,
        tracking_uri=options["mlflow_uri"],
        experiment=options["mlflow_experiment"],
        files=files,
    )
    err.print(
        f"mlflow: parent run {done.parent_run_id} with {len(done.children)} cells in "
        f"{done.tracking_uri}",
        markup=False,
    )


def register(app: typer.Typer) -> None:
    """Add the ``eval`` command to the ``agent-kit`` Typer app."""
    app.command("eval")(eval_cmd)
