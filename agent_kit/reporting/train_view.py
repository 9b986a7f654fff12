"""The training part of a run: the trainer's figures as the store holds them, and their section.

An ``agent-kit train`` run stores one ``train_step`` event per trained step (the trainer's
``train/*`` metrics: loss, grad norm, KL, entropy, learning rate, trained tokens …, the step's
signal shares ``train/signal/*``, its seconds, the adapter that sampled it, the adapter saved
and its warnings) and one ``train_eval`` event per holdout evaluation (``base``:
the model before training, ``adapter``: after; mean reward ± standard error over prompts,
pass@k, tool-call rate; ``warm``: after the warm start, before GRPO).
:func:`load_train_figures` reads them back (reporting never imports the trainer: the
store is the interface); :func:`train_section` renders them as the report's "Training" section
(the reward curve over steps against the holdout means, the train metrics and the signal
shares over steps, train vs eval, the steps with the adapter that sampled each and their
warnings); :func:`eval_comparison` is the adapter's difference to the base with its
standard error. A run without these events (an ordinary ``agent-kit run``) has no figures and
its report no such section.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agent_kit.reporting import svg as plots
from agent_kit.reporting.page import esc, section, table
from agent_kit.reporting.summary_schema import Summary
from agent_kit.reporting.transcripts import fmt
from agent_kit.store import RunStore
from agent_kit.store.events import TRAIN_EVAL_EVENT, TRAIN_STEP_EVENT

__all__ = ["EVAL_LABELS", "TrainFigures", "eval_comparison", "load_train_figures", "train_section"]

#: The holdout evaluations of a training run, in order: before training, after the warm start
#: (when there was one), after GRPO.
EVAL_LABELS: Final = ("base", "warm", "adapter")
#: Train metrics drawn as curves over the steps, when recorded: (metric, title, y label).
_CURVES: Final = (
    ("train/loss", "Loss per step (train/loss)", "loss (unitless)"),
    ("train/grad_norm", "Gradient norm per step (train/grad_norm)", "L2 norm (unitless)"),
    ("train/kl", "KL to the base model per step (train/kl)", "KL (nats per token)"),
    ("train/entropy", "Policy entropy per step (train/entropy)", "entropy (nats per token)"),
)
#: The signal shares drawn together, when recorded (see agent_kit.train.outcomes).
_SIGNAL: Final = (
    ("train/signal/all_equal", "groups all equal"),
    ("train/signal/shaping_only", "groups differing only by shaping"),
)
#: Columns of the steps table after the step and its reward, when any step recorded them.
_STEP_COLUMNS: Final = (
    "train/loss",
    "train/grad_norm",
    "train/kl",
    "train/entropy",
    "train/learning_rate",
    "train/tokens",
    "train/signal/all_equal",
    "train/signal/shaping_only",
    "train/refill/dropped_groups",
    "train/refill/prompts",
    "train/refill/filled",
    "train/dropped_turns",
    "train/missing_samples",
    "timing_s/sample",
    "timing_s/update",
    "timing_s/train_step",
)
_STEP_X: Final = "training step (index)"


@dataclass(frozen=True)
class TrainFigures:
    """A training run's figures from its store: per step the numeric train metrics, the adapter
    saved, the adapter that sampled the step and the step's warnings; per holdout label
    (``base``, ``adapter``) the latest evaluation."""

    steps: dict[int, dict[str, float]] = field(default_factory=dict)
    adapters: dict[int, str] = field(default_factory=dict)
    evals: dict[str, dict[str, Any]] = field(default_factory=dict)
    sampled_by: dict[int, str] = field(default_factory=dict)
    warnings: dict[int, list[str]] = field(default_factory=dict)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def load_train_figures(store: RunStore) -> TrainFigures | None:
    """The training figures the store holds, or None when it holds none (not a training run).
    A step or label recorded twice (a resumed run) keeps its latest record."""
    steps: dict[int, dict[str, float]] = {}
    adapters: dict[int, str] = {}
    sampled_by: dict[int, str] = {}
    warnings: dict[int, list[str]] = {}
    for event in store.list_events(kind=TRAIN_STEP_EVENT):
        step = int(event.detail["step"])
        values = {k: _number(v) for k, v in event.detail.items() if k != "step"}
        steps[step] = {k: v for k, v in values.items() if v is not None}
        if isinstance(event.detail.get("adapter"), str):
            adapters[step] = event.detail["adapter"]
        if isinstance(event.detail.get("sampled_by"), str):
            sampled_by[step] = event.detail["sampled_by"]
        lines = event.detail.get("warnings")
        warnings[step] = [str(w) for w in lines] if isinstance(lines, list) else []
    evals = {
        str(e.detail["label"]): dict(e.detail)
        for e in store.list_events(kind=TRAIN_EVAL_EVENT)
        if "label" in e.detail
    }
    if not steps and not evals:
        return None
    kept = {step: lines for step, lines in warnings.items() if lines}
    return TrainFigures(dict(sorted(steps.items())), adapters, evals, sampled_by, kept)


def eval_comparison(evals: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The adapter's holdout mean minus the base's, with the standard error of the difference
    (the two standard errors in quadrature) and whether it exceeds twice that; None unless
    both evaluations have a mean."""
    base, adapter = evals.get("base") or {}, evals.get("adapter") or {}
    if base.get("mean") is None or adapter.get("mean") is None:
        return None
    diff = float(adapter["mean"]) - float(base["mean"])
    se = math.hypot(float(base.get("se") or 0.0), float(adapter.get("se") or 0.0))
    return {"difference": diff, "se": se, "beats_base_by_2se": bool(se > 0 and diff > 2 * se)}


def _curves(figures: TrainFigures, summary: Summary) -> list[str]:
    """The reward per step against the holdout means, the recorded train metrics, tokens."""
    rows = {s.step: s for s in summary.steps}
    xs = [float(x) for x in sorted(set(rows) | set(figures.steps))]
    reward: list[tuple[str, Sequence[float | None]]] = [
        ("train reward", [rows[int(x)].reward_mean if int(x) in rows else None for x in xs])
    ]
    for label in EVAL_LABELS:
        mean = _number((figures.evals.get(label) or {}).get("mean"))
        if mean is not None:
            reward.append((f"holdout {label}", [mean] * len(xs)))
    charts = [
        plots.lines(
            xs,
            reward,
            title="Reward per step: train vs holdout",
            x_label=_STEP_X,
            y_label="reward (unitless)",
            integer_x=True,
        )
    ]
    for key, title, y_label in _CURVES:
        values = [figures.steps.get(int(x), {}).get(key) for x in xs]
        if any(v is not None for v in values):
            charts.append(
                plots.lines(
                    xs,
                    [(key, values)],
                    title=title,
                    x_label=_STEP_X,
                    y_label=y_label,
                    integer_x=True,
                )
            )
    signal = [(name, [figures.steps.get(int(x), {}).get(key) for x in xs]) for key, name in _SIGNAL]
    if any(v is not None for _, values in signal for v in values):
        charts.append(
            plots.lines(
                xs,
                signal,
                title="Groups without outcome signal per step (train/signal/*)",
                x_label=_STEP_X,
                y_label="share of the step's groups",
                integer_x=True,
            )
        )
    tokens: list[tuple[str, Sequence[float | None]]] = [
        ("prefill", [float(rows[int(x)].prefill) if int(x) in rows else None for x in xs]),
        ("sample", [float(rows[int(x)].sample) if int(x) in rows else None for x in xs]),
        ("train", [figures.steps.get(int(x), {}).get("train/tokens") for x in xs]),
    ]
    charts.append(
        plots.lines(
            xs,
            tokens,
            title="Tokens per step (prefill, sample, train)",
            x_label=_STEP_X,
            y_label="tokens per step",
            integer_x=True,
        )
    )
    return charts


def _evals_html(figures: TrainFigures) -> str:
    """Train vs eval: the holdout's base and adapter figures and their difference."""
    if not figures.evals:
        return "<p class=muted>no holdout was evaluated (agent-kit train --eval FILE)</p>"
    rows = [
        [
            label,
            _number(e.get("mean")),
            _number(e.get("se")),
            _number(e.get("eval/reward/pass_at_k")),
            _number(e.get("tool_call_rate")),
            e.get("prompts"),
            e.get("rollouts"),
            e.get("status"),
        ]
        for label in (*EVAL_LABELS, *sorted(set(figures.evals) - set(EVAL_LABELS)))
        if (e := figures.evals.get(label)) is not None
    ]
    headers = [
        "model",
        "mean reward",
        "± se",
        "pass@k",
        "tool-call rate",
        "prompts",
        "rollouts",
        "status",
    ]
    body = table(headers, rows, "train-eval")
    comparison = eval_comparison(figures.evals)
    if comparison is not None:
        verdict = "beats" if comparison["beats_base_by_2se"] else "does not beat"
        diff, se = comparison["difference"], comparison["se"]
        body += (
            f'<p id="train-verdict">adapter − base: <b>{diff:+.3f}</b> ± se {se:.3f}: the adapter '
            f"{verdict} the base model by two standard errors.</p>"
        )
    return body


def train_section(figures: TrainFigures, summary: Summary) -> str:
    """The report's "Training" section (anchor ``training``) of a training run."""
    rewards = {s.step: s.reward_mean for s in summary.steps}
    keys = [k for k in _STEP_COLUMNS if any(k in v for v in figures.steps.values())]
    rows = [
        [
            step,
            rewards.get(step),
            *(values.get(k) for k in keys),
            figures.sampled_by.get(step, ""),
            figures.adapters.get(step, ""),
        ]
        for step, values in figures.steps.items()
    ]
    headers = ["step", "rollout/reward/mean", *keys, "sampled by", "adapter"]
    steps_table = table(headers, rows, "train-steps")
    warned = [line for lines in figures.warnings.values() for line in lines]
    if warned:
        items = "".join(f"<li>{esc(line)}</li>" for line in warned)
        steps_table = f'<ul id="train-warnings" class="warn">{items}</ul>' + steps_table
    intro = (
        f"<p>This run trained a LoRA adapter (<code>agent-kit train</code>): "
        f"{len(figures.steps)} steps updated. The train reward is the mean reward of each step's "
        "rollouts, sampled by the policy as trained so far; the holdout means are the base model "
        "and the final adapter on the holdout (mean over prompts ± standard error, pass@k over "
        f"the samples of each prompt). {esc(fmt(len(figures.evals)))} holdout evaluations.</p>"
    )
    charts = '<div class="plots">' + "".join(_curves(figures, summary)) + "</div>"
    body = intro + "<h3>Train vs eval</h3>" + _evals_html(figures) + charts
    return section("training", "Training", body + "<h3>Steps</h3>" + steps_table)
