"""Per-step metrics under the service's names, computed as ``summary.json`` computes them.

For every step of a job, :func:`step_metrics` runs the same pure functions of
:mod:`agent_kit.reporting.metrics` that the summary runs over the whole job
(:func:`~agent_kit.reporting.metrics.training_metrics` and
:func:`~agent_kit.reporting.metrics.eval_metrics`, with the summary's success threshold, pass@k
and advantage settings) over that step's trajectories and groups, so ``rollout/reward/mean`` at
step s equals ``summary.json``'s ``steps[s].reward_mean``. It adds ``timing_s/*`` from the
store's times: ``timing_s/step`` (first trajectory created → last state change of the step),
``timing_s/rollout_mean`` and ``timing_s/rollout_max`` (trajectory durations) and
``timing_s/policy_call_mean`` (mean recorded latency of the step's policy calls). Undefined
statistics (None) are left out: MLflow metrics are numbers.

A training run (``agent-kit train``) adds what its store holds of the trainer
(:func:`~agent_kit.reporting.train_view.load_train_figures`): :func:`with_train_metrics` puts
every step's ``train/*`` metrics (loss, grad norm, KL, entropy, learning rate, trained tokens,
dropped turns, the signal shares ``train/signal/*``, dynamic sampling's ``train/refill/*`` …)
and ``timing_s/train_step`` (with ``timing_s/sample``, ``timing_s/update``) beside its
``rollout/*``, and
:func:`holdout_metrics` gives the holdout evaluations as ``holdout/<label>/*`` (``base`` at the
first step, as is ``warm`` (after the warm start, before GRPO), a checkpoint at its step,
``adapter`` and the paired differences at the last) and as params.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from agent_kit.reporting.breakdown import RunData
from agent_kit.reporting.metrics import eval_metrics, training_metrics
from agent_kit.reporting.summary_schema import Summary
from agent_kit.reporting.train_view import (
    TrainFigures,
    eval_comparison,
    holdout_differences,
    holdout_labels,
    holdout_row,
)
from agent_kit.store import RunStore

__all__ = ["StepMetrics", "holdout_metrics", "step_metrics", "with_train_metrics"]


@dataclass(frozen=True)
class StepMetrics:
    """The metrics of one step and when the step ended (ms since the epoch)."""

    step: int
    timestamp_ms: int
    values: dict[str, float]


def step_metrics(
    data: RunData, summary: Summary, store: RunStore | None = None
) -> list[StepMetrics]:
    """One :class:`StepMetrics` per step with trajectories, in step order.

    ``summary`` is the job's summary (its ``settings`` give the success threshold and the k of
    pass@k, its ``job.mode`` whether token ``train`` counts). ``store`` adds
    ``timing_s/policy_call_mean`` from the turns' latencies.
    """
    threshold = float(summary.settings.success_threshold)
    ks = [int(k) for k in summary.settings.pass_k or [1]]
    evaluation = summary.job.mode == "evaluation"
    out: list[StepMetrics] = []
    for step in sorted({r.step for r in data.records}):
        records = [r for r in data.records if r.step == step]
        groups = [g for g in data.groups if g.step == step]
        values: dict[str, float | None] = {}
        values.update(training_metrics(records, groups, evaluation=evaluation))
        values.update(eval_metrics(groups, success_threshold=threshold, ks=ks))
        started = min(r.started_at for r in records)
        ended = max(r.ended_at for r in records)
        durations = [r.duration_s for r in records]
        values["timing_s/step"] = max(0.0, ended - started)
        values["timing_s/rollout_mean"] = math.fsum(durations) / len(durations)
        values["timing_s/rollout_max"] = max(durations)
        if store is not None:
            latencies = [t.latency_ms / 1000.0 for r in records for t in store.list_turns(r.id)]
            if latencies:
                values["timing_s/policy_call_mean"] = math.fsum(latencies) / len(latencies)
        out.append(
            StepMetrics(
                step=step,
                timestamp_ms=round(ended * 1000),
                values={
                    k: float(v) for k, v in values.items() if v is not None and math.isfinite(v)
                },
            )
        )
    return out


def with_train_metrics(steps: list[StepMetrics], figures: TrainFigures | None) -> list[StepMetrics]:
    """``steps`` with each step's recorded train metrics added to its values (unchanged
    without ``figures``)."""
    if figures is None:
        return steps
    return [replace(s, values={**s.values, **figures.steps.get(s.step, {})}) for s in steps]


def _holdout_values(label: str, figures: dict[str, Any]) -> dict[str, float]:
    """A holdout cell's figures under ``holdout/<label>/``: ``reward_mean``, ``reward_se``,
    ``pass_at_k`` (the largest k) and ``pass_at_<k>``, ``tool_call_rate``, ``prompts``,
    ``rollouts``, ``token_limited`` and the task's own as ``task/<name>`` (a run recorded
    before the holdout was a grid: its ``eval/reward/*`` figures too)."""
    row = holdout_row(figures)
    named: dict[str, Any] = {
        "reward_mean": row["mean"],
        "reward_se": row["se"],
        "pass_at_k": row["pass_at_k"],
        "tool_call_rate": row["tool_call_rate"],
        "prompts": row["prompts"],
        "rollouts": row["rollouts"],
        "token_limited": row["token_limited"],
        **{f"task/{name}": value for name, value in row["task"].items()},
    }
    passes = figures.get("pass_at_k")
    for k, value in (passes if isinstance(passes, dict) else {}).items():
        named[f"pass_at_{k}"] = value
    for key, value in figures.items():
        if key.startswith("eval/reward/"):
            named.setdefault(key.removeprefix("eval/reward/"), value)
    return {
        f"holdout/{label}/{name}": float(value)
        for name, value in named.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    }


def holdout_metrics(
    steps: list[StepMetrics], figures: TrainFigures | None
) -> tuple[list[StepMetrics], dict[str, str]]:
    """The holdout evaluations of a training run as metrics and params: ``base`` and ``warm``
    at the first step (before training), a checkpoint at its step, ``adapter`` and the
    differences at the last (after: ``holdout/difference`` is trained − base,
    ``holdout/difference/<a>-<b>`` every paired difference, each with its ``…_se``); params
    ``holdout.<label>.status`` and ``holdout.beats_base_by_2se``. Nothing without figures,
    evaluations or steps."""
    if figures is None or not figures.evals or not steps:
        return [], {}
    first, last = steps[0], steps[-1]
    by_step = {s.step: s for s in steps}
    points: list[StepMetrics] = []
    params: dict[str, str] = {}
    for label in holdout_labels(figures.evals):
        evaluation = figures.evals[label]
        at = first if label in ("base", "warm") else last
        if label.startswith("step-") and label[5:].isdigit():
            at = by_step.get(int(label[5:]), last)
        points.append(replace(at, values=_holdout_values(label, evaluation)))
        params[f"holdout.{label}.status"] = str(holdout_row(evaluation)["status"] or "")
    values: dict[str, float] = {}
    for d in holdout_differences(figures.evals):
        values[f"holdout/difference/{d['a']}-{d['b']}"] = float(d["difference"])
        if d["se"] is not None:
            values[f"holdout/difference_se/{d['a']}-{d['b']}"] = float(d["se"])
    comparison = eval_comparison(figures.evals)
    if comparison is not None:
        values["holdout/difference"] = float(comparison["difference"])
        if comparison["se"] is not None:
            values["holdout/difference_se"] = float(comparison["se"])
        params["holdout.beats_base_by_2se"] = str(comparison["beats_base_by_2se"])
    if values:
        points.append(replace(last, values=values))
    return points, params
