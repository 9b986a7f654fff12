"""``agent-kit job plan RUN_DIR``: the real training job a recorded local run predicts.

The planning is :func:`agent_kit.reporting.plan.plan_job`; this module reads the run, counts
the dataset, and prints the plan as Rich tables or (``--json``) one JSON document.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from agent_kit.cli.program import program
from agent_kit.deploy import jobs
from agent_kit.deploy.jobs import TRAINING_HYPERPARAMETERS
from agent_kit.driver.dataset import load_dataset
from agent_kit.errors import UsageError
from agent_kit.reporting.auxiliary import auxiliary_section, plan_auxiliary
from agent_kit.reporting.plan import (
    DEFAULT_TRAIN_STEP_S,
    SESSION_MEMORY_GB,
    SESSION_VCPU,
    JobPlan,
    PlanSettings,
    job_shape,
    plan_job,
)
from agent_kit.reporting.plan_groups import Band
from agent_kit.reporting.pricing import default_pricing, load_pricing
from agent_kit.reporting.summary import resolve_job
from agent_kit.reporting.summary_schema import Projection, flat_config, read_summary
from agent_kit.reporting.terminal import print_rendered
from agent_kit.reporting.words import plural
from agent_kit.store import RunStore, load_rollouts, resolve_path
from agent_kit.store.layout import RunLayout

__all__ = ["plan_cmd"]


def _dataset_rows(
    dataset: Path | None, rows: int | None, config: dict[str, Any]
) -> tuple[int | None, str | None]:
    """(rows, where the figure came from): --dataset-rows, --dataset, else the run's dataset."""
    if dataset is not None and rows is not None:
        raise UsageError("give --dataset or --dataset-rows, not both")
    if rows is not None:
        return rows, "--dataset-rows"
    if dataset is not None:
        if dataset.exists() and not dataset.is_file():
            raise UsageError(
                f"--dataset {dataset} is not a regular file (a dataset is a .jsonl, .json, "
                ".csv or .parquet file)"
            )
        return len(load_dataset(dataset)), str(dataset)
    recorded = config.get("dataset")
    if isinstance(recorded, str) and Path(recorded).is_file():
        try:
            return len(load_dataset(recorded)), f"{recorded} (the run's dataset)"
        except UsageError:
            return None, None
    return None, None


def _int(value: float) -> str:
    return f"{value:,.0f}"


def _band(band: Band, fmt: Any = _int) -> str:
    return f"{fmt(band.p50)}  ({fmt(band.p10)} – {fmt(band.p90)})"


def _duration(seconds: float) -> str:
    if seconds >= 3 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def _hyper_rows(table: Table, doc: dict[str, Any], ran: RanShape) -> None:
    """The hyperparameters given with -H, apart from the service's defaults, and the shape the
    recorded run played beside them."""
    hyper, defaulted = doc["hyperparameters"], set(doc["defaulted"])
    given = ", ".join(f"{k}={v}" for k, v in hyper.items() if k not in defaulted)
    table.add_row("given (-H)", given or "none")
    table.add_row(
        "service defaults",
        "(not given with -H): " + ", ".join(f"{k}={hyper[k]}" for k in doc["defaulted"])
        if defaulted
        else "none: every shape hyperparameter was given",
    )
    if ran.prompts is not None and ran.group_size is not None:
        table.add_row(
            "vs the run",
            f"the recorded run played {ran.prompts} prompts × {ran.group_size} a step; the "
            f"job plays {hyper['global_batch_size']} × {hyper['group_size']}",
        )


def _steps_text(shape: dict[str, Any], hyper: dict[str, Any]) -> str:
    """How many steps, which limit ends them, and how often a row is played (a batch larger
    than the dataset repeats rows within one epoch)."""
    limit = shape["ends_by"]
    text = f"{shape['steps']:,} (ended by {limit}={hyper[limit]}"
    if shape["steps_per_epoch"] is not None:
        text += f"; an epoch is {plural(shape['steps_per_epoch'], 'step')}"
    text += ")"
    if shape["epochs"] is not None:
        text += (
            f"; {shape['steps'] * shape['prompts_per_step']:,} prompts from "
            f"{plural(shape['dataset_rows'], 'row')}: each row ≈ {shape['epochs']:.3g} "
            f"time{'' if shape['epochs'] == 1 else 's'}"
        )
    return text


def _shape_table(plan: JobPlan, ran: RanShape) -> Table:
    doc = plan.document()
    shape, recorded = doc["shape"], doc["source"]["recorded"]
    table = Table(title="planned job", show_header=False, title_justify="left")
    table.add_column("item", style="bold")
    table.add_column("value")
    _hyper_rows(table, doc, ran)
    rows = shape["dataset_rows"]
    table.add_row(
        "dataset",
        "unknown"
        if rows is None
        else f"{plural(rows, 'row')}, {plural(shape['steps_per_epoch'], 'step')} an epoch",
    )
    table.add_row("steps", _steps_text(shape, doc["hyperparameters"]))
    table.add_row(
        "rollouts",
        f"{shape['rollouts']:,} = {shape['steps']} × {shape['prompts_per_step']} prompts × "
        f"{doc['hyperparameters']['group_size']}; ≈ {shape['attempts']:,.0f} attempts with the "
        f"recorded {recorded['attempts_per_slot']:.2f} attempts/slot",
    )
    table.add_row(
        "recorded run",
        f"{recorded['groups']} groups, {recorded['slots']} slots; turns p50 "
        f"{recorded['turns']['p50']:g}, max {recorded['turns']['max']:g}; session p50 "
        f"{_duration(recorded['session_s']['p50'])}, p99 {_duration(recorded['session_s']['p99'])}",
    )
    return table


def _money_table(plan: JobPlan) -> Table:
    cost = plan.cost
    table = Table(title="tokens and cost: p50 (p10 – p90)", title_justify="left")
    table.add_column("category", style="bold")
    table.add_column("tokens", justify="right")
    table.add_column(f"cost ({cost['currency']})", justify="right")
    for name in ("prefill", "sample", "train", "total"):
        table.add_row(name, _band(plan.tokens[name]), _band(cost[name], lambda v: f"{v:,.2f}"))
    table.caption = f"prices: {cost['label']} ({cost['source']})"
    aux = plan.auxiliary
    if aux is not None:  # judge and simulated-user calls, Bedrock on demand
        both = Band(**aux["total_with_auxiliary"])
        table.add_row("auxiliary", f"{aux['tokens']:,}", f"{float(aux['cost']):,.2f}")
        table.add_row("total + auxiliary", "", _band(both, lambda v: f"{v:,.2f}"))
        table.caption += f"; auxiliary: {aux['label']}"
    return table


def _clock_table(plan: JobPlan) -> Table:
    wall = plan.wall_clock
    table = Table(title="wall clock", show_header=False, title_justify="left")
    table.add_column("item", style="bold")
    table.add_column("value")
    table.add_row(
        "sessions",
        f"{wall['concurrency']} at once (quota {wall['session_quota']} in {wall['region']}), "
        f"≤ {wall['invocations_per_s']:g} starts/s; paced by {wall['paced_by']}; "
        f"{SESSION_VCPU} vCPU / {SESSION_MEMORY_GB} GB each (not measured locally)",
    )
    rollouts, step = wall["step_rollouts_s"], wall["step_s"]
    table.add_row(
        "rollouts / step", f"{_duration(rollouts['low'])} – {_duration(rollouts['high'])}"
    )
    table.add_row("training / step", f"{_duration(wall['train_step_s'])} (assumed: --train-step-s)")
    table.add_row("step", f"{_duration(step['low'])} – {_duration(step['high'])}")
    total = wall["total_s"]
    table.add_row(
        "job", Text(f"{_duration(total['low'])} – {_duration(total['high'])}", style="bold")
    )
    return table


@dataclass(frozen=True)
class RanShape:
    """What the recorded run played: prompts a step, rollouts a prompt, and the run summary's
    own projection (None where the run does not say)."""

    prompts: int | None
    group_size: int | None
    projection: Projection | None


def _ran_shape(run_dir: Path, config: dict[str, Any]) -> RanShape:
    summary = read_summary(RunLayout(run_dir).summary)
    prompts, group = config.get("batch_size"), config.get("group_size")
    return RanShape(
        prompts=prompts if isinstance(prompts, int) else None,
        group_size=group if isinstance(group, int) else None,
        projection=summary.projection if summary is not None else None,
    )


def _compared(plan: JobPlan, ran: RanShape) -> Text | None:
    """Why the run summary's projection and this plan differ: each prices its own job."""
    projection = ran.projection
    if projection is None:
        return None
    shape, cost = plan.shape, plan.cost
    return Text(
        f"the run summary's projection priced another job: {projection.steps} steps of the "
        f"run's own shape ({projection.batch_size} prompts × {projection.group_size}), "
        f"{projection.slots:,} rollouts ≈ {projection.cost.total:,.2f} "
        f"{projection.cost.currency}; this plan is {plural(shape.steps, 'step')} of "
        f"{shape.global_batch_size} × {shape.group_size}, "
        f"{shape.steps * shape.rollouts_per_step:,} rollouts ≈ {cost['total'].p50:,.2f} "
        f"{cost['currency']} (p50), at the same recorded tokens per rollout",
        style="dim",
    )


def _next_lines(plan: JobPlan, ran: RanShape, run_dir: Path) -> list[Text]:
    """The commands to run next: plan the shape the run played (when it is a job's shape and
    differs), then submit the job with the hyperparameters planned here."""
    lines = [Text("next", style="bold")]
    shape = plan.shape
    closer = []  # -H values that bring the plan to the run's shape, where a job can take them
    if ran.group_size is not None and ran.group_size != shape.group_size:
        closer.append(f"-H group_size={ran.group_size}")
    batches = TRAINING_HYPERPARAMETERS["global_batch_size"].choices
    if str(ran.prompts) in batches and ran.prompts != shape.global_batch_size:
        closer.append(f"-H global_batch_size={ran.prompts}")
    if closer:
        lines.append(Text("  plan the shape the run played:", style="dim"))
        command = f"{program()} job plan {shlex.quote(str(run_dir))} {' '.join(closer)}"
        lines.append(_command(command))
    given = [f"-H {k}={v}" for k, v in plan.hyperparameters.items() if k not in set(plan.defaulted)]
    submit = "  submit the job (after agent-kit deploy and uploading the dataset):"
    lines.append(Text(submit, style="dim"))
    lines.append(
        _command(
            f"{program()} job submit --runtime-arn ARN --train s3://BUCKET/train.jsonl "
            "--model MODEL --role-arn ROLE_ARN --output s3://BUCKET/out " + " ".join(given)
        )
    )
    return lines


def _command(text: str) -> Text:
    """A command, indented and never wrapped or cut, so it can be copied whole."""
    return Text(f"    {text.rstrip()}", no_wrap=True, overflow="ignore")


def _print_plan(plan: JobPlan, ran: RanShape, run_dir: Path) -> None:
    out = Console(highlight=False, soft_wrap=True)
    parts: list[Any] = [_shape_table(plan, ran), _money_table(plan)]
    compared = _compared(plan, ran)
    if compared is not None:
        parts.append(compared)
    parts.append(_clock_table(plan))
    if (aux := plan.auxiliary) is not None:
        parts.append(
            Text(
                f"auxiliary (judge, simulated user; Bedrock on demand, not MTRL tokens): "
                f"{aux['calls_per_rollout']} calls and {aux['tokens_per_rollout']} tokens per "
                f"rollout → {aux['tokens']:,} tokens ≈ {aux['cost']:,.2f} {aux['currency']} "
                f"for the job ({aux['label']})"
            )
        )
    for flag in plan.flags:
        style = "bold red" if flag.level == "error" else "yellow"
        parts.append(Text.assemble((f"{flag.level}: ", style), f"{flag.message} [{flag.code}]"))
    verdict = "the plan fits the quotas" if plan.fits else "the plan does NOT fit (errors above)"
    parts.append(Text(verdict, style="bold green" if plan.fits else "bold red"))
    parts.extend(_next_lines(plan, ran, run_dir))
    print_rendered(out, Group(*parts))


def plan_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A recorded local run (agent-kit run --out).")],
    hyperparameters: Annotated[
        list[str] | None,
        typer.Option("--hyperparameters", "-H", help="The job's key=value (repeatable)."),
    ] = None,
    dataset: Annotated[
        Path | None, typer.Option("--dataset", help="The training dataset, to count its rows.")
    ] = None,
    dataset_rows: Annotated[
        int | None, typer.Option("--dataset-rows", min=1, help="Rows of the training dataset.")
    ] = None,
    job: Annotated[
        str | None, typer.Option("--job", help="Job name or ARN in the run (default: latest).")
    ] = None,
    region: Annotated[
        str | None, typer.Option("--region", help="Region (session quota; default: the run's).")
    ] = None,
    pricing: Annotated[
        Path | None, typer.Option("--pricing", help="Pricing file for the cost.")
    ] = None,
    train_step_s: Annotated[
        float, typer.Option("--train-step-s", min=0, help="Assumed training seconds a step.")
    ] = DEFAULT_TRAIN_STEP_S,
    turn_latency: Annotated[
        float | None,
        typer.Option("--turn-latency", min=0, help="Seconds a policy call takes in the job."),
    ] = None,
    agent_scale: Annotated[
        float, typer.Option("--agent-scale", min=0, help="Scale of the agent's own time.")
    ] = 1.0,
    other_sessions: Annotated[
        int, typer.Option("--other-sessions", min=0, help="Sessions other work holds.")
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """Plan the real training job from a recorded run: rollouts, tokens, cost, wall clock."""
    if not resolve_path(run_dir).exists():
        raise UsageError(f"no run store in {run_dir} (expected {resolve_path(run_dir)})")
    prices = load_pricing(pricing) if pricing is not None else default_pricing()
    values = jobs.parse_hyperparameters(hyperparameters or [])
    with RunStore.open(run_dir, readonly=True) as store:
        row = resolve_job(store, job)
        rollouts = load_rollouts(store, row.arn, with_turns=True)
        aux = auxiliary_section(store, row.arn, len(rollouts), prices)
    config = flat_config(row.config)
    rows, rows_from = _dataset_rows(dataset, dataset_rows, config)
    shape, typed, unknown = job_shape(values, rows)
    settings = PlanSettings(
        region=region or str(config.get("region") or "us-west-2"),
        train_step_s=train_step_s,
        turn_latency_s=turn_latency,
        agent_scale=agent_scale,
        other_sessions=other_sessions,
    )
    max_tokens = config.get("max_tokens")
    plan = plan_job(
        rollouts,
        shape,
        prices,
        settings,
        hyperparameters=typed,
        passed_through=unknown,
        source={"run_dir": str(run_dir), "job": row.name, "dataset_rows_from": rows_from},
        local_max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        policy=str(config.get("policy") or "") or None,
    )
    rollouts_planned = shape.steps * shape.rollouts_per_step
    planned_aux = plan_auxiliary(aux, rollouts_planned, job_cost=plan.cost["total"])
    plan = replace(plan, auxiliary=planned_aux)
    if as_json:
        typer.echo(json.dumps(plan.document(), allow_nan=False))
        return
    for key in unknown:
        Console(stderr=True).print(f"[yellow]warning:[/] hyperparameter {key} is not validated")
    _print_plan(plan, _ran_shape(run_dir, config), run_dir)
