"""``agent-kit doctor reward RUN_DIR`` and ``agent-kit doctor endpoint URL``: pre-flight checks.

Both print a table (or ``--json``) and exit :data:`~agent_kit.doctor.findings.EXIT_FINDINGS`
(13) when any finding is an error / any probe failed, 0 otherwise, so they gate CI.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent_kit.cli.process import tune_process
from agent_kit.cli.run_options import (
    AuxPolicyOption,
    PricingOption,
    RunDirArgument,
    door_settings,
    key_values,
)
from agent_kit.errors import UsageError
from agent_kit.reporting.terminal import print_rendered
from agent_kit.reporting.words import plural

if TYPE_CHECKING:  # the doctor package loads when a doctor command runs, not with the CLI
    from agent_kit.doctor.endpoint import EndpointReport
    from agent_kit.doctor.reward import RewardAudit

__all__ = ["doctor_app", "register"]

doctor_app = typer.Typer(
    name="doctor",
    help="Check a recorded run's reward or a policy endpoint before a job pays for them.",
    no_args_is_help=True,
)

_STYLE = {"error": "bold red", "fail": "bold red", "warn": "yellow", "info": "dim", "pass": "green"}


def register(app: typer.Typer) -> None:
    """Add the ``doctor`` group (``reward``, ``endpoint``) to the CLI."""
    app.add_typer(doctor_app, name="doctor")


@doctor_app.command("reward")
def reward_cmd(
    ctx: typer.Context,
    run_dir: RunDirArgument,
    entrypoint: Annotated[
        Path | None,
        typer.Option(
            help="Re-score every episode with this entrypoint's reward and check its "
            "REWARD_ORDERINGS (default: the run's entrypoint, recorded rewards).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
    budget: Annotated[
        float | None,
        typer.Option(help="Error when the projected job costs more than this (USD).", min=0.0),
    ] = None,
    steps: Annotated[
        int | None, typer.Option(min=1, help="Steps of the planned job (default 100).")
    ] = None,
    pricing: PricingOption = None,
    aux_policy: AuxPolicyOption = None,
    judge_runs: Annotated[
        int,
        typer.Option(min=2, help="Times each audited episode is judged again (consistency)."),
    ] = 3,
    policy: Annotated[
        str | None,
        typer.Option(
            help="Also play one probe step of the run with this policy (e.g. hf:MODEL) and say "
            "whether GRPO would have anything to learn (all groups equal is an error).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Audit a run's reward: declared orderings, zero-variance groups, hacking signals, cost,
    and LLM judges (consistency, share of the variance, length/flattery/order bias)."""
    from agent_kit.doctor.reward import audit_reward
    from agent_kit.reporting.pricing import load_pricing

    if not run_dir.is_dir():
        raise UsageError(f"run directory not found: {run_dir}")
    tune_process(policies=[p for p in (policy, aux_policy) if p is not None])
    prices = load_pricing(pricing) if pricing is not None else None
    audit = audit_reward(
        run_dir,
        entrypoint=entrypoint,
        budget=budget,
        steps=steps,
        pricing=prices,
        aux_policy=aux_policy,
        judge_runs=judge_runs,
        settings=door_settings(ctx),
    )
    if policy is not None:
        from agent_kit.doctor.preflight import policy_preflight

        probe = policy_preflight(run_dir, policy, door_settings(ctx))
        audit = dataclasses.replace(audit, findings=(*audit.findings, probe))
    _answer(audit, print_audit, as_json=as_json)


class _Result(Protocol):
    @property
    def ok(self) -> bool: ...

    def to_dict(self) -> dict[str, Any]: ...


_R = TypeVar("_R", bound=_Result)


def _answer(result: _R, show: Callable[[_R], None], *, as_json: bool) -> None:
    """Print a doctor command's result (its JSON on one line, or ``show``'s lines), then exit
    with EXIT_FINDINGS when it is not ok."""
    from agent_kit.doctor.findings import EXIT_FINDINGS

    if as_json:
        typer.echo(json.dumps(result.to_dict(), ensure_ascii=False, default=str))
    else:
        show(result)
    if not result.ok:
        raise typer.Exit(EXIT_FINDINGS)


def print_audit(audit: RewardAudit) -> None:
    """``doctor reward``'s findings on the terminal; piped, at full width: no line wrapped at 80,
    no check name cut, no trailing spaces."""
    console = Console(highlight=False)  # wrapped by Rich at words, not by the terminal mid-word
    source = "re-scored with " if audit.rescored else "recorded rewards; orderings from "
    print_rendered(
        console,
        Text(
            f"doctor reward: {audit.run_dir} (job {audit.job_name}, {audit.scored} scored of "
            f"{plural(audit.episodes, 'trajectory', 'trajectories')}; "
            f"{source}{audit.entrypoint or 'no entrypoint'})",
            style="bold",
        ),
    )
    if audit.live is not None:
        who = f"pid {audit.live['pid']}" if audit.live.get("pid") else "another process"
        print_rendered(
            console,
            Text(
                f"live run: {who} is still playing it; audited the rollouts finished so far "
                f"({audit.in_flight} in flight left out): audit again when it ends",
                style="yellow",
            ),
        )
    # The text wraps at word boundaries, under its own column; the first column is as wide as
    # the longest check name, so no name is cut.
    name = max((len(f.check) for f in audit.findings), default=0)
    for f in audit.findings:
        grid = Table.grid()
        grid.add_column(width=max(22, 8 + name), no_wrap=True)
        grid.add_column(overflow="fold")
        grid.add_row(
            Text(f"{f.severity:<6} {f.check:<{max(14, name)}} ", style=_STYLE[f.severity]),
            f.title,
        )
        if f.hint:
            grid.add_row("", Text(f"fix: {f.hint}", style="cyan"))
        if f.trajectory_ids:
            grid.add_row("", Text(f"see: {', '.join(f.trajectory_ids[:3])}", style="dim"))
        print_rendered(console, grid)
    from agent_kit.doctor.findings import count_by_severity

    counts = count_by_severity(audit.findings)
    print_rendered(
        console,
        Text(
            f"{plural(counts['error'], 'error')}, {plural(counts['warn'], 'warning')}, "
            f"{plural(counts['info'], 'note')}",
            style="bold green" if audit.ok else "bold red",
        ),
    )


@doctor_app.command("endpoint")
def endpoint_cmd(
    url: Annotated[str, typer.Argument(help="Server base URL, …/v1 or …/v1/chat/completions.")],
    model: Annotated[
        str | None,
        typer.Option(help="Model to probe (default: the first the server lists, else default)."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(envvar="OPENAI_API_KEY", help="Sent as a Bearer token.", show_default=False),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option("--header", "-H", help="Extra request header NAME=VALUE (repeatable)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the probes as JSON.")] = False,
    burst: Annotated[
        int, typer.Option(min=1, max=256, help="Concurrent requests of the latency burst.")
    ] = 8,
    timeout: Annotated[float, typer.Option(min=0.1, help="Seconds per request.")] = 60.0,
) -> None:
    """Probe an OpenAI-compatible policy server the way MTRL's policy calls it."""
    from agent_kit.doctor.endpoint import probe_endpoint

    headers = key_values(header, "--header must be NAME=VALUE")
    report = probe_endpoint(
        url, model=model, api_key=api_key, headers=headers, burst=burst, timeout=timeout
    )
    _answer(report, _print_endpoint, as_json=as_json)


def _print_endpoint(report: EndpointReport) -> None:
    console = Console(highlight=False, soft_wrap=True)
    console.print(Text(f"doctor endpoint: {report.url} (model {report.model})", style="bold"))
    for p in report.probes:
        line = Text(f"{p.status:<5} ", style=_STYLE[p.status])
        line.append(f"{p.name:<15} ")
        line.append(p.detail)
        console.print(line)
        if p.hint and p.status != "pass":
            console.print(Text(f"{' ' * 22}fix: {p.hint}", style="cyan"))
    failed = sum(p.status == "fail" for p in report.probes)
    warned = sum(p.status == "warn" for p in report.probes)
    console.print(
        Text(
            f"{len(report.probes)} checks: {failed} failed, {plural(warned, 'warning')}",
            style="bold green" if report.ok else "bold red",
        )
    )
