"""What a grid will cost before it runs (``agent-kit eval … --plan``): rollouts, tokens, cost and
wall clock of every cell and of the whole grid.

The shape needs nothing recorded: every cell plays every holdout prompt ``samples`` times, so a
grid of C cells plays ``C × prompts × samples`` rollouts. Tokens, cost and wall clock come from
a recorded run of the same agent (``--plan-from RUN_DIR``, else the first finished cell of the
eval directory), through :func:`agent_kit.reporting.plan.plan_job` with the cell's shape (one
step of ``prompts × samples`` rollouts, at most ``concurrency`` at once, no training time, no
invocation-rate cap: it runs here); the cell's bands (10th, 50th, 90th percentiles) are
multiplied by the number of cells (every cell is assumed to behave like the recorded run; cells
play one after another). Prompt tokens are the service's prefill, sample tokens its sample;
cost is prefill + sample (an evaluation trains nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Final

from agent_kit.evaluation.grid import GridSpec
from agent_kit.reporting.plan import JobShape, PlanSettings, plan_job
from agent_kit.reporting.plan_groups import Band
from agent_kit.reporting.pricing import Pricing
from agent_kit.store import RunStore, load_rollouts

__all__ = ["PLAN_SCHEMA", "grid_plan", "job_plan", "recorded_rollouts"]

#: The ``schema`` tag of a grid plan.
PLAN_SCHEMA: Final = "agent_kit.eval_plan/1"
_LOCAL_RATE: Final = 1_000_000.0


def recorded_rollouts(run_dir: Path) -> list[Any]:
    """The rollouts (with their turns) of the latest job in ``run_dir``."""
    with RunStore.open(run_dir, readonly=True) as store:
        job = store.list_jobs()[-1]
        return load_rollouts(store, job.arn, with_turns=True)


def _times(band: Band, factor: int) -> dict[str, float]:
    return {k: v * factor for k, v in asdict(band).items()}


def _add(a: Band, b: Band) -> Band:
    return Band(a.p10 + b.p10, a.p50 + b.p50, a.p90 + b.p90)


def grid_plan(
    spec: GridSpec,
    prompts: int,
    *,
    concurrency: int,
    rollout_timeout: float,
    max_tokens: int,
    pricing: Pricing,
    recorded: Sequence[Any] | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    """The plan document (schema :data:`PLAN_SCHEMA`; see the module docstring). Without
    ``recorded`` rollouts it holds the shape only; UsageError when they hold no reward."""
    cells = len(spec.cells())
    per_cell = prompts * spec.samples
    doc: dict[str, Any] = {
        "schema": PLAN_SCHEMA,
        "cells": cells,
        "prompts": prompts,
        "samples": spec.samples,
        "rollouts_per_cell": per_cell,
        "rollouts": cells * per_cell,
        "source": source,
    }
    if recorded is None:
        return doc
    shape = JobShape(
        global_batch_size=prompts,
        group_size=spec.samples,
        max_steps=1,
        max_epochs=1,
        rollout_max_concurrency=concurrency,
        rollout_timeout=max(1, int(rollout_timeout)),
        sampling_max_tokens=max_tokens,
        dataset_rows=prompts,
    )
    settings = PlanSettings(train_step_s=0.0, invocations_per_s=_LOCAL_RATE)
    plan = plan_job(recorded, shape, pricing, settings)
    cost = _add(plan.cost["prefill"], plan.cost["sample"])
    wall = plan.wall_clock["step_rollouts_s"]
    doc.update(
        {
            "tokens": {
                "prompt": _times(plan.tokens["prefill"], cells),
                "sample": _times(plan.tokens["sample"], cells),
            },
            "cost": {**_times(cost, cells), "currency": pricing.currency, "label": pricing.label},
            "wall_clock_s": {"low": wall["low"] * cells, "high": wall["high"] * cells},
            "cell": {
                "tokens": {
                    "prompt": asdict(plan.tokens["prefill"]),
                    "sample": asdict(plan.tokens["sample"]),
                },
                "cost": asdict(cost),
                "wall_clock_s": dict(wall),
            },
            "flags": [asdict(f) for f in plan.flags if f.code != "dataset-smaller-than-batch"],
        }
    )
    return doc


def job_plan(doc: dict[str, Any], max_concurrent: int, max_runtime_s: int) -> dict[str, Any]:
    """``doc`` (a :func:`grid_plan` document) with its job side under ``"jobs"``: one
    evaluation job per cell, at most ``max_concurrent`` at once, so ``turns`` rounds; the wall
    clock is the recorded cell's band × rounds (each job's start-up is not counted: it is the
    service's), at most ``max_runtime_s`` × rounds. Rollouts, tokens and cost are the grid's."""
    cells = int(doc["cells"])
    rounds = -(-cells // max(1, max_concurrent))
    jobs: dict[str, Any] = {
        "count": cells,
        "max_concurrent": max_concurrent,
        "turns": rounds,
        "max_runtime_s": max_runtime_s * rounds,
        "wall_clock_s": None,
    }
    if "cell" in doc:
        wall = doc["cell"]["wall_clock_s"]
        jobs["wall_clock_s"] = {"low": wall["low"] * rounds, "high": wall["high"] * rounds}
    return {**doc, "jobs": jobs}
