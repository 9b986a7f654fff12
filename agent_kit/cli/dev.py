"""``agent-kit dev``: play, replay and audit the agent on every save (docs/dev.md).

``agent-kit dev ENTRYPOINT --dataset FILE [--policy SPEC] [--baseline RUN_DIR] [--prompts 4]
[--samples 2] [--out runs/dev] [--keep 5] [--workers 1] [--once] [--json]`` runs an iteration
(:mod:`agent_kit.dev`), prints its verdict, then watches the entrypoint, the modules beside it
that it imports, the scripted policy's files and the dataset, and prints one verdict per batch
of saves. Ctrl-C (or SIGTERM) ends the loop: the last verdict's path is printed, the agent
processes are ended, the exit code is 0 (a second Ctrl-C aborts at once: 130).

``--once`` runs one iteration and exits with the verdict's code (a pre-commit hook, CI): 0 ok,
2 the entrypoint, the policy or the dataset does not load, 6 the grid's rollouts failed as a
whole, 10 a baseline episode diverged or its reward changed, 13 the audit has an error finding
(another code: the error that kept the grid from playing); 130 when a signal stopped it first.
``--json`` prints each verdict as one JSON line (the iteration's ``verdict.json``).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Annotated, Final

import typer
from rich.console import Console

from agent_kit.cli.process import tune_process
from agent_kit.cli.run_options import door_settings, settings_of
from agent_kit.cli.stopping import SIGNAL_EXIT
from agent_kit.dev.loop import VerdictHook, run_dev
from agent_kit.dev.options import (
    DEFAULT_KEEP,
    DEFAULT_OUT,
    DEFAULT_PROMPTS,
    DEFAULT_SAMPLES,
    DevOptions,
)
from agent_kit.dev.runs import VERDICT_FILE
from agent_kit.dev.verdict import Verdict
from agent_kit.errors import Aborted

__all__ = ["register"]

#: Exit code of a loop that a signal ended (the normal end of a watch).
_EXIT_STOPPED: Final = 0


# The options whose declarations take several lines.
_Entrypoint = Annotated[Path, typer.Argument(help="The agent's entrypoint file (.py).")]
_Dataset = Annotated[
    Path, typer.Option(help="Prompts (.jsonl, .json, .csv, .parquet); its first rows play.")
]
_Policy = Annotated[
    str | None,
    typer.Option(
        help="Policy spec (default: the baseline's, else DEFAULT_POLICY of a policies.py beside "
        "the entrypoint, else run's)."
    ),
]
_Baseline = Annotated[
    Path | None,
    typer.Option(
        help="A recorded run to compare with: its episodes of the grid's prompts are replayed "
        "under the new code every iteration."
    ),
]
_Prompts = Annotated[
    int, typer.Option(help="Rows of the dataset each iteration plays (the first ones).")
]
_Once = Annotated[
    bool, typer.Option("--once", help="Run one iteration and exit with the verdict's code.")
]
_Json = Annotated[
    bool, typer.Option("--json", help="Each verdict as one JSON line (its verdict.json).")
]


def dev(
    ctx: typer.Context,
    entrypoint: _Entrypoint,
    dataset: _Dataset,
    policy: _Policy = None,
    baseline: _Baseline = None,
    prompts: _Prompts = DEFAULT_PROMPTS,
    samples: Annotated[int, typer.Option(help="Rollouts per row.")] = DEFAULT_SAMPLES,
    out: Annotated[Path, typer.Option(help="Where the iterations' directories go.")] = DEFAULT_OUT,
    keep: Annotated[int, typer.Option(help="Iterations kept (the last ones).")] = DEFAULT_KEEP,
    workers: Annotated[int, typer.Option(help="Agent processes.")] = DevOptions.workers,
    once: _Once = False,
    as_json: _Json = False,
) -> None:
    """Play, replay and audit the agent on every save of its code or dataset."""
    given = {k: v for k, v in locals().items() if k != "ctx"}
    options = settings_of(DevOptions, given, settings=door_settings(ctx))
    options.check()
    tune_process(policies=[policy] if policy is not None else [])
    if not once and not as_json:
        typer.echo(f"watching {entrypoint} and {dataset} (Ctrl-C to stop); runs in {out}")
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        outcome = run_dev(options, _shower(entrypoint, as_json=as_json), once=once)
    except Aborted as exc:
        err.print("aborted", markup=False)
        raise typer.Exit(SIGNAL_EXIT[exc.signum]) from None
    last = outcome.last
    if once:
        if last is None:  # a signal stopped the one iteration
            raise typer.Exit(SIGNAL_EXIT[outcome.stopped_by or signal.SIGINT])
        raise typer.Exit(last.code)
    where = "no verdict yet" if last is None else f"last verdict: {last.path / VERDICT_FILE}"
    err.print(f"stopped; {where}", markup=False)
    raise typer.Exit(_EXIT_STOPPED)


def _shower(entrypoint: Path, *, as_json: bool) -> VerdictHook:
    """What prints a verdict: its lines (file names relative to the entrypoint's folder), or
    its JSON on one line; flushed, so a pipe reads each verdict as it comes."""
    console = Console(highlight=False, soft_wrap=True)
    base = entrypoint.resolve().parent

    def show(verdict: Verdict) -> None:
        if as_json:
            typer.echo(json.dumps(verdict.document(), ensure_ascii=False, default=str))
            return
        for line in verdict.lines(base):
            console.print(line, markup=False)
        console.file.flush()

    return show


def register(app: typer.Typer) -> None:
    """Add the ``dev`` command to the ``agent-kit`` Typer app."""
    app.command("dev")(dev)
