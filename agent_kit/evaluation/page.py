"""The grid's HTML page (``eval.html``): grouped bars with error bars, the checkpoint curve,
the table, the differences and the group view.

One group of bars per setting, one bar per policy (mean reward), its error bar ± 1 SE, the y
axis up to a tick above the highest bar; for a grid of a training run's checkpoints, the holdout
reward against the step with its ± 1 SE band (the base and warm start as flat lines), the best
step marked in the table. Success, pass@k and the task's shares are percentages and differences
keep their sign, as in the terminal. The group view (:mod:`agent_kit.reporting.group_view`)
puts two cells' rollouts of one prompt side by side. No external resource (the shared
scaffolding of :mod:`agent_kit.reporting.page`), so it opens from ``file://`` without a server.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Final

from agent_kit.evaluation.render import (
    cell_notes,
    fmt_diff,
    fmt_mean,
    fmt_pct,
    fmt_task,
    pairing,
    side,
    task_names,
    verdict,
)
from agent_kit.evaluation.table import GridTable
from agent_kit.reporting import page
from agent_kit.reporting.svg import lines, ticks

__all__ = ["grouped_bars", "render_page"]

_PALETTE: Final = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2")
_H: Final = 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 60, 14, 44, 70


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _covering(lo: float, hi: float) -> tuple[float, float]:
    """``[lo, hi]`` widened to the ticks just outside it, so the axis covers every bar."""
    marks = ticks(lo, hi)
    if len(marks) < 2:
        return lo, hi
    step = marks[1] - marks[0]
    return math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step


def grouped_bars(
    groups: Sequence[str],
    series: Sequence[str],
    values: Sequence[Sequence[tuple[float | None, float | None]]],
    *,
    title: str,
    y_label: str,
) -> str:
    """An ``<svg data-kind="grouped-bars">``: for each group (x), one bar per series with its
    error bar; ``values[g][s]`` is (value, error) or None parts (no bar / no error bar)."""
    tops = [v + (e or 0.0) for row in values for v, e in row if v is not None]
    lows = [min(0.0, v - (e or 0.0)) for row in values for v, e in row if v is not None]
    lo, hi = _covering(min([0.0, *lows]), max([1e-9, *tops]))
    width = max(540, _LEFT + _RIGHT + len(groups) * (len(series) * 26 + 30))
    plot_w, plot_h = width - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def py(v: float) -> float:
        return _TOP + plot_h - (v - lo) / ((hi - lo) or 1.0) * plot_h

    body = [
        f'<text x="{width / 2:.0f}" y="18" text-anchor="middle" font-size="13" '
        f'font-weight="600">{_e(title)}</text>',
        f'<text class="y-label" x="12" y="{_TOP + plot_h / 2:.0f}" text-anchor="middle" '
        f'font-size="11" transform="rotate(-90 12 {_TOP + plot_h / 2:.0f})">{_e(y_label)}</text>',
    ]
    for t in ticks(lo, hi):
        body.append(
            f'<line x1="{_LEFT}" x2="{width - _RIGHT}" y1="{py(t):.1f}" y2="{py(t):.1f}" '
            f'stroke="#eaeef2"/><text x="{_LEFT - 4}" y="{py(t) + 4:.1f}" text-anchor="end" '
            f'font-size="10">{_e(f"{t:g}")}</text>'
        )
    slot = plot_w / max(1, len(groups))
    bar = min(26.0, (slot - 20) / max(1, len(series)))
    for g, group in enumerate(groups):
        x0 = _LEFT + g * slot + (slot - bar * len(series)) / 2
        body.append(
            f'<text x="{_LEFT + (g + 0.5) * slot:.1f}" y="{_TOP + plot_h + 16}" '
            f'text-anchor="middle" font-size="10">{_e(group[:40])}</text>'
        )
        for s, name in enumerate(series):
            value, err = values[g][s]
            if value is None:
                continue
            x, color = x0 + s * bar, _PALETTE[s % len(_PALETTE)]
            top, base = sorted((py(value), py(0.0)))
            tip = f"{name} at {group}: {value:.3f}" + ("" if err is None else f" ± {err:.3f}")
            body.append(
                f'<rect class="bar" x="{x + 2:.1f}" y="{top:.1f}" width="{bar - 4:.1f}" '
                f'height="{max(1.0, base - top):.1f}" fill="{color}">'
                f"<title>{_e(tip)}</title></rect>"
            )
            if err is not None:
                cx = x + bar / 2
                body.append(
                    f'<line class="error-bar" x1="{cx:.1f}" x2="{cx:.1f}" '
                    f'y1="{py(value - err):.1f}" y2="{py(value + err):.1f}" stroke="#1f2328"/>'
                )
    body.append(
        f'<line x1="{_LEFT}" x2="{width - _RIGHT}" y1="{py(0.0):.1f}" y2="{py(0.0):.1f}" '
        'stroke="#57606a"/>'
    )
    for s, name in enumerate(series):
        x = _LEFT + s * 120
        body.append(
            f'<rect x="{x}" y="{_H - 22}" width="10" height="10" '
            f'fill="{_PALETTE[s % len(_PALETTE)]}"/><text x="{x + 14}" y="{_H - 13}" '
            f'font-size="11">{_e(name[:16])}</text>'
        )
    return (
        f'<svg width="{width}" height="{_H}" data-kind="grouped-bars" '
        f'viewBox="0 0 {width} {_H}" role="img" aria-label="{_e(title)}" '
        f'font-family="system-ui,sans-serif">' + "".join(body) + "</svg>"
    )


def _plot(table: GridTable) -> str:
    settings = table.settings()
    policies = list(table.spec.labels().values())
    values = [
        [
            next(
                ((r.figures.mean, r.figures.se) for r in table.rows
                 if r.cell.setting_label == setting and r.cell.label == policy),
                (None, None),
            )
            for policy in policies
        ]
        for setting in settings
    ]  # fmt: skip
    return grouped_bars(
        settings,
        policies,
        values,
        title="Mean reward ± 1 SE, by setting",
        y_label="mean reward (unitless)",
    )


def _curves(table: GridTable) -> list[str]:
    """Per setting with checkpoints: the holdout reward against the step, ± 1 SE band, and the
    base and warm start (when evaluated) as flat lines."""
    charts = []
    for setting in table.settings():
        curve = table.curve(setting)
        if not curve:
            continue
        xs = [float(step) for step, _ in curve]
        series: list[tuple[str, Sequence[float | None]]] = [
            ("checkpoint", [r.figures.mean for _, r in curve])
        ]
        for r in table.rows:
            if r.cell.setting_label == setting and r.cell.label in ("base", "warm"):
                series.append((r.cell.label, [r.figures.mean] * len(xs)))
        charts.append(
            lines(
                xs,
                series,
                title=f"Holdout reward per checkpoint ± 1 SE ({setting})",
                x_label="training step of the checkpoint (adapters/step-NNNN)",
                y_label="mean reward (unitless)",
                integer_x=True,
                bands={"checkpoint": [r.figures.se for _, r in curve]},
            )
        )
    return charts


def _cell_rows(table: GridTable) -> tuple[list[str], list[list[object]]]:
    k, tasks = table.k, task_names(table)
    headers = ["setting", "policy", "mean ± SE", "success", f"pass@{k}", *tasks, "turns"]
    headers += ["prompt tok / rollout", "sample tok / rollout", "cost", "n", "state", "cell"]
    best = {s: b.cell.id for s in table.settings() if (b := table.best(s)) is not None}
    rows: list[list[object]] = [
        [
            r.cell.setting_label,
            r.cell.label + (" (best)" if best.get(r.cell.setting_label) == r.cell.id else ""),
            fmt_mean(r.figures),
            fmt_pct(r.figures.success_rate),
            fmt_pct(r.figures.pass_at_k.get(k)),
            *(fmt_task(table, name, r.figures.task.get(name)) for name in tasks),
            r.figures.turns,
            r.figures.prompt_tokens,
            r.figures.sample_tokens,
            r.figures.cost,
            r.figures.n,
            "; ".join(cell_notes(r)) or r.figures.state,
            r.cell.id,
        ]
        for r in table.rows
    ]
    return headers, rows


def render_page(table: GridTable, groups: str = "") -> str:
    """The whole page of ``table``; ``groups`` is its group view's section (markup), if any."""
    k = table.k
    headers, rows = _cell_rows(table)
    diffs = [
        [d.setting or "–", side(table, d.a, d), side(table, d.b, d), fmt_diff(d.difference),
         d.se, pairing(d), verdict(d)]
        for d in table.differences
    ]  # fmt: skip
    spec = table.spec
    parts = [
        "<h1>agent-kit eval</h1>",
        f'<p class="muted">{page.esc(spec.entrypoint)} on {page.esc(spec.dataset)}, '
        f"{spec.samples} samples per prompt; mean ± SE over prompts (SE: the standard deviation "
        f"of the per-prompt means / √prompts); success and pass@{k} at reward ≥ "
        f"{table.threshold:g}; a difference of two cells that played the same prompts is paired "
        "(SE: the standard deviation of the per-prompt differences / √prompts).</p>",
        f'<div class="plots">{_plot(table)}{"".join(_curves(table))}</div>',
        page.section("cells", "Cells", page.table(headers, rows)),
    ]
    if diffs:
        head = ["setting", "a", "b", "a − b", "SE", "over", "beyond 2 SE"]
        parts.append(page.section("differences", "Differences", page.table(head, diffs)))
    if groups:
        parts.append(groups)
    return page.document("agent-kit eval", parts)
