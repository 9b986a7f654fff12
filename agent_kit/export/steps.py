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
first step, as is ``warm`` (after the warm start, before GRPO), ``adapter`` and
``holdout/difference`` at the last) and as params.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from agent_kit.reporting.breakdown import RunData
from agent_kit.reporting.metrics import eval_metrics, training_metrics
from agent_kit.reporting.summary_schema import Summary
from agent_kit.reporting.train_view import EVAL_LABELS, TrainFigures, eval_comparison
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


def _holdout_values(label: str, figures: dict[str, object]) -> dict[str, float]:
    names = {
        "mean": "reward_mean",
        "se": "reward_se",
        "prompts": "prompts",
        "rollouts": "rollouts",
        "tool_call_rate": "tool_call_rate",
    }
    values: dict[str, float] = {}
    for key, value in figures.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not math.isfinite(value):
            continue
        name = names.get(key) or (
            key.removeprefix("eval/reward/") if key.startswith("eval/") else ""
        )
        if name:
            values[f"holdout/{label}/{name}"] = float(value)
    return values


def holdout_metrics(
    steps: list[StepMetrics], figures: TrainFigures | None
) -> tuple[list[StepMetrics], dict[str, str]]:
    """The holdout evaluations of a training run as metrics and params: ``base`` at the first
    step (the model before training), ``adapter`` and the difference at the last (after);
    params ``holdout.<label>.status`` and ``holdout.beats_base_by_2se``. Nothing without
    figures, evaluations or steps."""
    if figures is None or not figures.evals or not steps:
        return [], {}
    first, last = steps[0], steps[-1]
    points: list[StepMetrics] = []
    params: dict[str, str] = {}
    for label in (*EVAL_LABELS, *sorted(set(figures.evals) - set(EVAL_LABELS))):
        evaluation = figures.evals.get(label)
        if evaluation is None:
            continue
        at = first if label in ("base", "warm") else last
        points.append(replace(at, values=_holdout_values(label, evaluation)))
        params[f"holdout.{label}.status"] = str(evaluation.get("status", ""))
    comparison = eval_comparison(figures.evals)
    if comparison is not None:
        values = {
            "holdout/difference": float(comparison["difference"]),
            "holdout/difference_se": float(comparison["se"]),
        }
        points.append(replace(last, values=values))
        params["holdout.beats_base_by_2se"] = str(comparison["beats_base_by_2se"])
    return points, params
