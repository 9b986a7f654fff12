"""A training run's summary: ``train.json`` (the figures) and ``train.html`` (the curves).

``train.json`` (schema ``agent_kit.train/1``): the settings; per step the service's
``rollout/*`` metrics of that step's rollouts
(:func:`~agent_kit.reporting.metrics.training_metrics`, as summary.json computes them) beside
the trainer's ``train/*`` metrics (loss, grad norm, KL when ``beta`` > 0, entropy, trained
tokens), the step's signal shares (``train/signal/*``: groups all equal, groups that differ only
by shaping), dynamic sampling's figures (``train/refill/*``), the seconds spent sampling and
updating, the adapter that sampled the step (``sampled_by``) and the one saved, and the step's
warnings (a stale adapter, weights that did not move: also gathered in ``warnings``); the
holdout: its grid's cells (``eval``: base, warm, the checkpoints, adapter, each the grid's cell
figures), the paired differences (``differences``: warm − base, trained − warm, trained − base,
each checkpoint − base; ``comparison`` the trained − base one) and where its table is
(``holdout``: ``eval/table.json``, ``eval/eval.html``); seconds per step (and apart: sampling,
update) and the trainer process's peak RSS. ``train.html`` plots the training reward per step
against the holdout, and lists the steps. :func:`record_evals` stores the holdout's cells in
the run itself (event ``train_eval``) and writes its summary.json and report.html again, whose
Training section (:mod:`~agent_kit.reporting.train_view`) and the MLflow export read them from
there.
"""

from __future__ import annotations

import json
import resource
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from agent_kit.driver.job import JobResult
from agent_kit.driver.local import write_run_outputs
from agent_kit.evaluation.groups import grid_groups
from agent_kit.evaluation.holdout import Holdout, cell_document
from agent_kit.reporting.metrics import build_groups, training_metrics
from agent_kit.reporting.page import document, esc, section, table
from agent_kit.reporting.svg import lines
from agent_kit.reporting.train_view import (
    eval_comparison,
    holdout_differences,
    holdout_labels,
    holdout_row,
    holdout_series,
)
from agent_kit.store import RunStore, load_rollouts
from agent_kit.store.events import TRAIN_EVAL_EVENT, TRAIN_STEP_EVENT
from agent_kit.store.layout import RunLayout
from agent_kit.train.config import TrainConfig

__all__ = ["TRAIN_SCHEMA", "peak_rss_mb", "record_evals", "write_train_outputs"]

TRAIN_SCHEMA: Final = "agent_kit.train/1"
_ROLLOUT_KEYS: Final = (
    "rollout/reward/mean",
    "rollout/reward/std",
    "rollout/reward/zero_frac",
    "rollout/turns/mean",
    "rollout/tokens/prefill",
    "rollout/tokens/sample",
    "rollout/tokens/train",
)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


def _steps(run_dir: Path, job_arn: str) -> list[dict[str, Any]]:
    store = RunStore.open(run_dir, readonly=True)
    try:
        records = load_rollouts(store, job_arn)
        trained = {
            int(e.detail["step"]): e.detail for e in store.list_events(kind=TRAIN_STEP_EVENT)
        }
    finally:
        store.close()
    groups = build_groups(records)
    rows: list[dict[str, Any]] = []
    for step in sorted({r.step for r in records}):
        metrics = training_metrics(
            [r for r in records if r.step == step], [g for g in groups if g.step == step]
        )
        row: dict[str, Any] = {"step": step}
        row.update({k: metrics.get(k) for k in _ROLLOUT_KEYS})
        row.update({k: v for k, v in trained.get(step, {}).items() if k != "step"})
        rows.append(row)
    return rows


def record_evals(run_dir: Path, job_arn: str, evals: dict[str, Any]) -> bool:
    """Store each evaluation not stored yet with these figures (event ``train_eval``), then,
    when one was, write the run's summary.json and report.html again so the report shows it;
    return whether anything was stored."""
    store = RunStore.open(run_dir)
    try:
        stored = {
            str(e.detail.get("label")): e.detail for e in store.list_events(kind=TRAIN_EVAL_EVENT)
        }
        added = False
        for label, figures in evals.items():
            detail = json.loads(json.dumps({"label": label, **figures}, default=str))
            if figures and stored.get(label) != detail:
                store.add_event(TRAIN_EVAL_EVENT, detail)
                added = True
        if added:  # a training job is local: no route token to scrub from the outputs
            write_run_outputs(store, job_arn, run_dir)
    finally:
        store.close()
    return added


def _mean(steps: list[dict[str, Any]], key: str) -> float | None:
    values = [float(s[key]) for s in steps if isinstance(s.get(key), int | float)]
    return sum(values) / len(values) if values else None


def holdout_outputs(holdout: Holdout | None) -> tuple[dict[str, Any], dict[str, str] | None]:
    """The holdout's cells by label (those played) and where its table is, once its
    ``table.json`` and ``eval.html`` are written; ({}, None) without a holdout."""
    if holdout is None:
        return {}, None
    grid = holdout.table()
    table_file, page_file = holdout.write(grid, grid_groups(grid))
    evals = {
        row.cell.label: cell_document(row.cell.label, row.figures)
        for row in grid.rows
        if row.figures.state != "pending"
    }
    return evals, {"table": str(table_file), "page": str(page_file)}


def write_train_outputs(
    run_dir: Path,
    config: TrainConfig,
    job: JobResult,
    holdout: Holdout | None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the holdout's table (:func:`holdout_outputs`), store its cells
    (:func:`record_evals`), write ``train.json`` and ``train.html`` into the run directory;
    return the document. ``extra`` (the warm start's and the preflight's figures) is added to
    the document as it is."""
    evals, where = holdout_outputs(holdout)
    record_evals(run_dir, job.job_arn, evals)
    steps = _steps(run_dir, job.job_arn)
    timed = [s["timing_s/train_step"] for s in steps if "timing_s/train_step" in s]
    adapters = [s["adapter"] for s in steps if "adapter" in s]
    warnings = [str(w) for s in steps for w in s.get("warnings") or []]
    doc: dict[str, Any] = {
        "schema": TRAIN_SCHEMA,
        "job": job.job_arn,
        "status": job.status,
        "settings": config.to_dict(),
        "steps": steps,
        "eval": evals,
        "differences": holdout_differences(evals),
        "comparison": eval_comparison(evals),
        "holdout": where,
        "adapter": str(run_dir / adapters[-1]) if adapters else None,
        "seconds_per_step": sum(timed) / len(timed) if timed else None,
        "seconds_per_step_sampling": _mean(steps, "timing_s/sample"),
        "seconds_per_step_update": _mean(steps, "timing_s/update"),
        "warnings": warnings,
        "peak_rss_mb": peak_rss_mb(),
        **(extra or {}),
    }
    text = json.dumps(doc, indent=2, default=str)
    RunLayout(run_dir).train_json.write_text(text + "\n", encoding="utf-8")
    RunLayout(run_dir).train_html.write_text(render_train_html(doc), encoding="utf-8")
    return doc


def render_train_html(doc: dict[str, Any]) -> str:
    """The self-contained training page: the reward curve (train vs the holdout, its
    checkpoints with their SE band), the holdout's cells and their paired differences, and the
    steps."""
    steps = doc["steps"]
    xs = [float(s["step"]) for s in steps]
    holdout, bands = holdout_series(doc["eval"], xs)
    series: list[tuple[str, Sequence[float | None]]] = [
        ("train reward", [s.get("rollout/reward/mean") for s in steps]),
        *holdout,
    ]
    chart = lines(xs, series, title="Reward per step", x_label="step", integer_x=True, bands=bands)
    columns = [
        "step",
        "rollout/reward/mean",
        "train/loss",
        "train/grad_norm",
        "train/tokens",
        "train/signal/all_equal",
        "train/signal/shaping_only",
        "sampled_by",
    ]
    rows = [[s.get(c) for c in columns] for s in steps]
    evals = [
        [label, r["mean"], r["se"], r["pass_at_k"], r["tool_call_rate"]]
        for label in holdout_labels(doc["eval"])
        if (r := holdout_row(doc["eval"][label]))
    ]
    differences = [
        [d["a"], d["b"], f"{d['difference']:+.3f}", d["se"], d["paired"], d["beyond_2se"]]
        for d in doc.get("differences") or []
    ]
    where = doc.get("holdout") or {}
    parts = [
        f"<h1>Training run {esc(doc['job'])}</h1>",
        section("curve", "Reward", chart),
        section(
            "eval",
            "Holdout",
            table(["model", "mean", "± se", "pass@k", "tool-call rate"], evals)
            + table(["a", "b", "a − b", "se", "paired", "beyond 2 SE"], differences)
            + (f"<p>the table: {esc(where['page'])}</p>" if where.get("page") else ""),
        ),
        section("steps", "Steps", table(columns, rows)),
    ]
    return document(f"agent-kit train: {doc['job']}", parts)
