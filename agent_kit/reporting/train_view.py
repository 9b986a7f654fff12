"""The training part of a run: the trainer's figures as the store holds them, and their section.

An ``agent-kit train`` run stores one ``train_step`` event per trained step (the trainer's
``train/*`` metrics: loss, grad norm, KL, entropy, learning rate, trained tokens …, the step's
signal shares ``train/signal/*``, its seconds, the adapter that sampled it, the adapter saved
and its warnings) and one ``train_eval`` event per cell of its holdout grid
(``base``: the model before training, ``warm``: after the warm start, ``step-NNNN``: a
checkpoint of ``--eval-every``, ``adapter``: after the last step; the grid's cell figures: mean
reward ± standard error over prompts, each prompt's mean, pass@k, tool-call rate, the rollouts
that hit the token limit, the task's own figures). :func:`load_train_figures` reads them back
(reporting never imports the trainer: the store is the interface); :func:`train_section`
renders them as the report's "Training" section (the reward curve over steps against the
holdout, checkpoints with their SE band, the train metrics and the signal shares over steps,
train vs eval with the paired differences, the steps with the adapter that sampled each and
their warnings). :func:`holdout_differences` are the differences every run reports (warm −
base, trained − warm, trained − base, each checkpoint − base), paired by prompt through
:func:`agent_kit.reporting.paired.difference`; :func:`eval_comparison` is the trained − base
one. A run without these events (an ordinary ``agent-kit run``) has no figures and its report
no such section.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agent_kit.reporting import paired
from agent_kit.reporting import svg as plots
from agent_kit.reporting.breakdown import RunData
from agent_kit.reporting.page import esc, section, table
from agent_kit.reporting.summary_schema import Summary
from agent_kit.reporting.transcripts import fmt
from agent_kit.store import RunStore
from agent_kit.store.events import TRAIN_EVAL_EVENT, TRAIN_STEP_EVENT

__all__ = [
    "EVAL_LABELS",
    "HOLDOUT_PAIRS",
    "TrainFigures",
    "difference_line",
    "eval_comparison",
    "holdout_differences",
    "holdout_labels",
    "holdout_notes",
    "holdout_row",
    "holdout_series",
    "load_train_figures",
    "train_section",
]

#: The holdout evaluations of a training run, in order: before training, after the warm start
#: (when there was one), after GRPO; checkpoints (``step-NNNN``) go between the last two.
EVAL_LABELS: Final = ("base", "warm", "adapter")
#: The differences a training run's holdout reports, when it has both cells.
HOLDOUT_PAIRS: Final = (("warm", "base"), ("adapter", "warm"), ("adapter", "base"))
_CHECKPOINT: Final = re.compile(r"step-(\d+)\Z")
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


def holdout_labels(evals: Mapping[str, Any]) -> list[str]:
    """The labels of ``evals`` in order: base, warm, the checkpoints by step, the adapter,
    then any other."""
    steps = sorted((k for k in evals if _CHECKPOINT.match(k)), key=lambda k: int(k[5:]))
    known = [k for k in ("base", "warm") if k in evals] + steps
    known += [k for k in ("adapter",) if k in evals]
    return known + sorted(set(evals) - set(known))


def holdout_row(detail: Mapping[str, Any]) -> dict[str, Any]:
    """One holdout cell as stored (a ``train_eval`` event; a grid cell's figures since the
    holdout is a grid, flat ``eval/reward/*`` figures before) in one shape: ``mean``, ``se``,
    ``pass_at_k`` (the largest k), ``tool_call_rate``, ``prompts``, ``rollouts``, ``status``,
    ``per_prompt``, ``task``, ``token_limited``, ``failure``, ``cut``."""
    passes = detail.get("pass_at_k")
    pass_k = detail.get("eval/reward/pass_at_k")
    if isinstance(passes, dict) and passes:
        pass_k = passes[max(passes, key=lambda k: int(k))]
    per_prompt = detail.get("per_prompt")
    task = detail.get("task")
    return {
        "mean": _number(detail.get("mean")),
        "se": _number(detail.get("se")),
        "pass_at_k": _number(pass_k),
        "tool_call_rate": _number(detail.get("tool_call_rate")),
        "prompts": detail.get("prompts"),
        "rollouts": detail.get("n", detail.get("rollouts")),
        "status": detail.get("state", detail.get("status")),
        "per_prompt": per_prompt if isinstance(per_prompt, dict) else {},
        "task": task if isinstance(task, dict) else {},
        "token_limited": int(detail.get("token_limited") or 0),
        "failure": detail.get("failure"),
        "cut": detail.get("cut"),
    }


def _difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> paired.Difference | None:
    """``a − b`` of two holdout rows: paired by prompt when both hold per-prompt means, else
    from their means and SEs (a run recorded before the holdout was a grid)."""
    if a["mean"] is None or b["mean"] is None:
        return None
    found = paired.difference(a["per_prompt"], b["per_prompt"])
    if found is not None:
        return found
    se = None if a["se"] is None or b["se"] is None else math.hypot(a["se"], b["se"])
    return paired.Difference(a["mean"] - b["mean"], se, se, False, 0)


def holdout_differences(evals: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every difference a run's holdout has (:data:`HOLDOUT_PAIRS`, then each checkpoint −
    base): ``a``, ``b``, ``difference``, ``se`` (paired when ``paired``), ``unpaired_se``,
    ``prompts`` and ``beyond_2se`` (None without an SE)."""
    rows = {label: holdout_row(detail) for label, detail in evals.items()}
    pairs = [*HOLDOUT_PAIRS]
    pairs += [(label, "base") for label in holdout_labels(evals) if _CHECKPOINT.match(label)]
    out = []
    for a, b in pairs:
        found = _difference(rows[a], rows[b]) if a in rows and b in rows else None
        if found is not None:
            out.append(
                {
                    "a": a,
                    "b": b,
                    "difference": found.mean,
                    "se": found.se,
                    "unpaired_se": found.unpaired_se,
                    "paired": found.paired,
                    "prompts": found.prompts,
                    "beyond_2se": found.beyond(),
                }
            )
    return out


def eval_comparison(evals: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The trained adapter's holdout mean minus the base's, with the difference's standard
    error (paired by prompt when the cells played the same prompts) and whether the adapter
    beats the base by more than two of them; None unless both evaluations have a mean."""
    found = next(
        (d for d in holdout_differences(evals) if (d["a"], d["b"]) == ("adapter", "base")), None
    )
    if found is None:
        return None
    se = found["se"]
    beats = bool(se is not None and found["difference"] > 2 * se and found["beyond_2se"])
    return {**found, "beats_base_by_2se": beats}


def holdout_series(
    evals: Mapping[str, Mapping[str, Any]], xs: Sequence[float]
) -> tuple[list[tuple[str, Sequence[float | None]]], dict[str, Sequence[float | None]]]:
    """The holdout over the steps ``xs``, for :func:`agent_kit.reporting.svg.lines`: base,
    warm and adapter as flat lines, and the checkpoints (``--eval-every``, the adapter at the
    last step) as points with their ± 1 SE band; (series, bands)."""
    rows = {label: holdout_row(detail) for label, detail in evals.items()}
    series: list[tuple[str, Sequence[float | None]]] = []
    for label in EVAL_LABELS:
        mean = (rows.get(label) or {}).get("mean")
        if mean is not None:
            series.append((f"holdout {label}", [mean] * len(xs)))
    points = {int(m.group(1)): rows[k] for k in rows if (m := _CHECKPOINT.match(k))}
    if points and "adapter" in rows and xs:
        points[int(xs[-1])] = rows["adapter"]
    if not points:
        return series, {}
    series.append(("holdout checkpoints", [(points.get(int(x)) or {}).get("mean") for x in xs]))
    band = [(points.get(int(x)) or {}).get("se") for x in xs]
    return series, {"holdout checkpoints": band}


def _curves(figures: TrainFigures, summary: Summary) -> list[str]:
    """The reward per step against the holdout, the recorded train metrics, tokens."""
    rows = {s.step: s for s in summary.steps}
    xs = [float(x) for x in sorted(set(rows) | set(figures.steps))]
    holdout, bands = holdout_series(figures.evals, xs)
    reward: list[tuple[str, Sequence[float | None]]] = [
        ("train reward", [rows[int(x)].reward_mean if int(x) in rows else None for x in xs]),
        *holdout,
    ]
    charts = [
        plots.lines(
            xs,
            reward,
            title="Reward per step: train vs holdout",
            x_label=_STEP_X,
            y_label="reward (unitless)",
            integer_x=True,
            bands=bands,
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


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def holdout_notes(label: str, row: Mapping[str, Any]) -> list[str]:
    """What a holdout row says beside its figures: rollouts that hit the token limit (``5 of
    8 base rollouts hit the token limit``), a failure as a whole, rollouts cut early."""
    notes = []
    if row["token_limited"]:
        notes.append(
            f"{row['token_limited']} of {row['rollouts']} {label} rollouts hit the token limit"
        )
    notes += [str(row[key]) for key in ("failure", "cut") if row[key]]
    return notes


def difference_line(d: Mapping[str, Any]) -> str:
    """``adapter − base: +0.050 ± se 0.030 (paired over 8 prompts): beyond two SE``."""
    se = "" if d["se"] is None else f" ± se {d['se']:.3f}"
    over = f"paired over {d['prompts']} prompts" if d["paired"] else "unpaired"
    verdict = {True: "beyond two SE", False: "within two SE (noise)", None: "no verdict"}
    return f"{d['a']} − {d['b']}: {d['difference']:+.3f}{se} ({over}): {verdict[d['beyond_2se']]}"


def _evals_html(figures: TrainFigures) -> str:
    """Train vs eval: every holdout cell's figures and the paired differences."""
    if not figures.evals:
        return "<p class=muted>no holdout was evaluated (agent-kit train --eval FILE)</p>"
    rows = {label: holdout_row(figures.evals[label]) for label in holdout_labels(figures.evals)}
    tasks = list(dict.fromkeys(n for r in rows.values() for n in r["task"]))
    headers = ["model", "mean reward", "± se", "pass@k", "tool-call rate", *tasks]
    headers += ["prompts", "rollouts", "status", "notes"]
    cells = [
        [
            label,
            r["mean"],
            r["se"],
            r["pass_at_k"],
            r["tool_call_rate"],
            *(_pct(r["task"].get(n)) for n in tasks),
            r["prompts"],
            r["rollouts"],
            r["status"],
            "; ".join(holdout_notes(label, r)),
        ]
        for label, r in rows.items()
    ]
    body = table(headers, cells, "train-eval")
    differences = holdout_differences(figures.evals)
    if differences:
        body += (
            '<ul id="train-differences">'
            + "".join(f"<li>{esc(difference_line(d))}</li>" for d in differences)
            + "</ul>"
        )
    comparison = eval_comparison(figures.evals)
    if comparison is not None and comparison["se"] is not None:
        verdict = "beats" if comparison["beats_base_by_2se"] else "does not beat"
        diff, se = comparison["difference"], comparison["se"]
        body += (
            f'<p id="train-verdict">adapter − base: <b>{diff:+.3f}</b> ± se {se:.3f}: the adapter '
            f"{verdict} the base model by two standard errors.</p>"
        )
    return body


def _group_buttons(data: RunData | None) -> str:
    """A button per step that shows the step's first group in the group view."""
    if data is None or not data.groups:
        return ""
    first: dict[int, int] = {}
    for g in data.groups:
        if g.rollouts:
            first.setdefault(g.step, g.prompt_index)
    buttons = "".join(
        f'<button type="button" class="show show-group" data-group="s{step}-p{prompt}">'
        f"step {step}</button> "
        for step, prompt in sorted(first.items())
    )
    return f"<p>A step's groups side by side (Groups, below): {buttons}</p>"


def train_section(figures: TrainFigures, summary: Summary, data: RunData | None = None) -> str:
    """The report's "Training" section (anchor ``training``) of a training run; ``data`` (the
    run's groups) adds a button per step that opens its groups in the group view."""
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
        "rollouts, sampled by the policy as trained so far; the holdout is an evaluation grid "
        "(RUN_DIR/eval/) whose cells are the base model, the warm start, the checkpoints of "
        "--eval-every (with their ± 1 SE band) and the final adapter (mean over prompts ± "
        "standard error, pass@k over the samples of each prompt); its differences are paired "
        f"by prompt. {esc(fmt(len(figures.evals)))} holdout evaluations.</p>"
    )
    charts = '<div class="plots">' + "".join(_curves(figures, summary)) + "</div>"
    body = intro + "<h3>Train vs eval</h3>" + _evals_html(figures) + charts
    body += "<h3>Steps</h3>" + steps_table + _group_buttons(data)
    return section("training", "Training", body)
