"""``agent-kit eval``'s own options beside the grid's: a training run's checkpoints as the
policies (``--checkpoints``) and how many prompts are enough (``--plan --pilot|--spread
[--target]``, :mod:`agent_kit.evaluation.power`), parsed and checked (docs/eval.md)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from agent_kit.errors import UsageError
from agent_kit.evaluation.checkpoints import Checkpoints, parse_checkpoints
from agent_kit.evaluation.grid import GridSpec
from agent_kit.evaluation.power import Spread, pilot_spread, power_plan

__all__ = [
    "CheckpointsOption",
    "EvalEntrypoint",
    "PilotOption",
    "SpreadOption",
    "TargetOption",
    "checkpoints_of",
    "named",
    "power_of",
    "power_rows",
]

EvalEntrypoint = Annotated[
    str | None,
    typer.Argument(
        help="Agent: entrypoint .py file (not with --submit; with --checkpoints, default: the "
        "training run's)."
    ),
]
CheckpointsOption = Annotated[
    str | None,
    typer.Option(
        "--checkpoints",
        help="A training run's checkpoints as the policies: RUN_DIR (every saved step), "
        "RUN_DIR:every=N or RUN_DIR:steps=0,4,9, with the base model and the warm start.",
        show_default=False,
    ),
]
PilotOption = Annotated[
    Path | None,
    typer.Option(
        help="--plan: the spread of the per-prompt differences from a finished eval directory "
        "(two cells) or run.",
        show_default=False,
    ),
]
SpreadOption = Annotated[
    float | None,
    typer.Option(
        help="--plan: the standard deviation of the per-prompt differences, stated.",
        show_default=False,
    ),
]
TargetOption = Annotated[
    float | None,
    typer.Option(
        help="--plan: a difference to find: how many prompts it needs (80% power, 5% level).",
        show_default=False,
    ),
]


def checkpoints_of(options: dict[str, Any], *, submitted: bool) -> Checkpoints | None:
    """The policies of ``--checkpoints`` (None without it), put into ``options``: first in
    ``policy``, the run's entrypoint and holdout where ``entrypoint`` and ``dataset`` are not
    given; refused with ``--submit``."""
    text = options["checkpoints"]
    if text is None:
        return None
    if submitted:
        raise UsageError("--checkpoints plays a local training run's adapters: not with --submit")
    found = parse_checkpoints(text)
    options["entrypoint"] = options["entrypoint"] or found.entrypoint
    if options["dataset"] is None and found.holdout:
        options["dataset"] = Path(found.holdout)
    given = [p for p in options["policy"] if p not in found.policies]
    options["policy"] = [*found.policies, *given]
    return found


def named(spec: GridSpec, found: Checkpoints | None, options: dict[str, Any]) -> GridSpec:
    """``spec`` with the checkpoints' labels (``base``, ``warm``, ``step-NNNN``); their
    differences (every checkpoint − base) go to ``options["pairs"]`` unless ``--compare``."""
    if found is None:
        return spec
    options["pairs"] = None if options["compare"] else found.pairs
    return replace(spec, names=found.names)


def power_of(options: dict[str, Any], spec: GridSpec, prompts: int) -> dict[str, Any] | None:
    """The plan's ``power`` part from ``--pilot`` or ``--spread`` (and ``--target``); None
    without them. UsageError for both, a bad number, ``--target`` alone, or any of them
    without ``--plan``."""
    pilot, spread, target = options["pilot"], options["spread"], options["target"]
    if not options["plan"] and (pilot, spread, target) != (None, None, None):
        raise UsageError("--pilot, --spread and --target go with --plan")
    if pilot is None and spread is None:
        if target is not None:
            raise UsageError("--target needs the spread: give --pilot RUN_DIR or --spread SD")
        return None
    if pilot is not None and spread is not None:
        raise UsageError("give --pilot or --spread, not both")
    if spread is not None and not (math.isfinite(spread) and spread >= 0):
        raise UsageError(f"--spread must be a finite number ≥ 0, got {spread}")
    if target is not None and not (math.isfinite(target) and target != 0):
        raise UsageError(f"--target must be a finite, non-zero difference, got {target}")
    found = (
        Spread(spread, "stated (--spread)")
        if spread is not None
        else pilot_spread(pilot, spec.samples)
    )
    return power_plan(found, prompts, target)


def power_rows(table: Table, power: dict[str, Any], samples: int) -> None:
    """The plan's rows of how many prompts are enough (docs/eval.md)."""
    table.add_row("spread of the differences", f"{power['spread']:.3f} ({power['source']})")
    table.add_row(
        "detectable difference",
        f"{power['detectable_difference']:.3f} at two SE over {power['prompts']} prompts × "
        f"{samples} samples (2·sd/√prompts)",
    )
    if power["prompts_needed"] is not None:
        table.add_row(
            "prompts for --target",
            f"{power['prompts_needed']:,} prompts find {power['target']:g} with 80% power at "
            "the 5% level ((2.8·sd/target)²)",
        )
