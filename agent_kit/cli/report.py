"""``agent-kit report RUN_DIR [--html] [--json]``: re-render a run's summary from its store;
``agent-kit report RUN_A RUN_B [--out PAGE]``: the comparison page of two runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from agent_kit.cli.program import program
from agent_kit.cli.run_options import JobOfRunOption, PricingOption, RunDirArgument
from agent_kit.errors import RunStoreError, UsageError
from agent_kit.reporting.compare import write_comparison
from agent_kit.reporting.metrics import ADVANTAGE_KINDS
from agent_kit.reporting.pricing import load_pricing
from agent_kit.reporting.report import write_reports
from agent_kit.reporting.summary import summarize
from agent_kit.reporting.summary_schema import Summary
from agent_kit.reporting.terminal import print_rendered, render_json, render_terminal
from agent_kit.store import RunStore, resolve_path
from agent_kit.store.layout import COMPARISON_FILE, REPORT_FILE, SUMMARY_FILE, RunLayout

__all__ = ["register", "report"]


def report(
    run_dir: RunDirArgument,
    other: Annotated[
        Path | None,
        typer.Argument(
            help="A second run directory: write the comparison page of RUN_DIR (A) and it (B).",
            show_default=False,
        ),
    ] = None,
    out_page: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help=f"Where the comparison page goes (default: OTHER/{COMPARISON_FILE}); with --html, "
            "the directory the summary and report go into (default: RUN_DIR).",
            show_default=False,
        ),
    ] = None,
    html: Annotated[
        bool,
        typer.Option(
            "--html", help=f"Write {SUMMARY_FILE} and {REPORT_FILE} into RUN_DIR (or --out DIR)."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only the summary JSON, on one line.")
    ] = False,
    job: JobOfRunOption = None,
    pricing: PricingOption = None,
    success_threshold: Annotated[
        float | None,
        typer.Option(help="Success when reward ≥ this (default: the run's setting, else 1.0)."),
    ] = None,
    advantage: Annotated[
        str, typer.Option(help=f"Advantage estimator: {' or '.join(ADVANTAGE_KINDS)}.")
    ] = "group_based",
    projection_steps: Annotated[
        int | None, typer.Option(min=1, help="Steps of the cost projection (default 100).")
    ] = None,
) -> None:
    """Summarize a run from RUN_DIR/run.sqlite: metrics, tokens, cost, failures.

    With a second run directory, write one HTML page comparing the two runs instead (settings,
    failures, metrics with deltas B − A, reward components, per-prompt success both ways).
    """
    for folder in (run_dir, other):
        if folder is not None and not folder.is_dir():
            raise UsageError(f"run directory not found: {folder}")
    if other is not None:
        _compare(run_dir, other, out_page, as_json=as_json)
        return
    _check_options(out_page, html=html, advantage=advantage)
    prices = load_pricing(pricing) if pricing is not None else None
    if not resolve_path(run_dir).exists():
        raise UsageError(f"no run store in {run_dir} (expected {resolve_path(run_dir)})")
    with RunStore.open(run_dir, readonly=True) as store:
        summary = summarize(
            store,
            job,
            success_threshold=success_threshold,
            advantage=advantage,
            pricing=prices,
            projection_steps=projection_steps,
        )
        written = _write(out_page or run_dir, summary, store) if html else None
    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if as_json:
        typer.echo(render_json(summary))
    else:
        print_rendered(out, render_terminal(summary, run_dir, program=program()))
    if written is not None:
        (err if as_json else out).print(f"wrote {written[0]} and {written[1]}", markup=False)


def _check_options(out_page: Path | None, *, html: bool, advantage: str) -> None:
    """The options of a one-run report that cannot work, as one UsageError."""
    if out_page is not None and not html:
        raise UsageError(
            "--out names the comparison page (two run directories) or, with --html, the "
            "directory the report goes into"
        )
    if advantage not in ADVANTAGE_KINDS:
        raise UsageError(f"--advantage must be one of {', '.join(ADVANTAGE_KINDS)}")


def _write(directory: Path, summary: Summary, store: RunStore) -> tuple[Path, Path]:
    """The summary and report written into ``directory``; one line (exit 14) where it cannot
    be written, naming ``--out`` (the run itself is only read)."""
    try:
        return write_reports(directory, summary, store)
    except OSError as exc:
        raise RunStoreError(
            f"cannot write {SUMMARY_FILE} and {REPORT_FILE} into {directory}: "
            f"{exc.strerror or exc} (the run is only read): give --out DIR somewhere writable"
        ) from None


def _compare(run_a: Path, run_b: Path, out_page: Path | None, *, as_json: bool) -> None:
    target = out_page if out_page is not None else RunLayout(run_b).comparison
    if target.is_dir():
        raise UsageError(f"--out {target} is a directory: name the page's file")
    try:
        written = write_comparison(run_a, run_b, target)
    except OSError as exc:
        raise UsageError(
            f"cannot write the comparison page {target}: {exc.strerror or exc}"
        ) from exc
    if as_json:
        typer.echo(json.dumps({"comparison": str(written.resolve())}))
    else:
        Console(highlight=False, soft_wrap=True).print(
            f"wrote {written.resolve().as_uri()}", markup=False
        )


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to the ``agent-kit`` Typer app."""
    app.command("report")(report)
