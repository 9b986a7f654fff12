"""Compare two runs side by side: one self-contained HTML page (``write_comparison``).

Typical uses: two policies on the same dataset (``Solver`` vs ``Sloppy`` on examples/wordle),
or the same policy before and after a reward change. Each run is a run directory (its
``run.sqlite``, and its ``summary.json`` when present: the numbers it reported, with its
pricing and threshold; else the summary is recomputed from the store).

The page shows: what differs in the settings (threshold, group size, dataset, advantage); the
failure counts; every metric of both runs (names as the service spells them) with the delta
B − A and the relative change; the reward components' mean contribution and variance share in
each run; and per-prompt success both ways — prompts are matched by their exact prompt text, so
two runs over the same dataset line up even if the order differs — with the lists of prompts
that do better in B than in A and in A than in B. Same scaffolding as the run report (inline
CSS and SVG, one static script by hash under a Content-Security-Policy, everything escaped).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent_kit.errors import UsageError
from agent_kit.reporting import svg as plots
from agent_kit.reporting.breakdown import (
    PromptRow,
    RunData,
    component_stats,
    failure_overview,
    load_run_data,
    prompt_rows,
)
from agent_kit.reporting.page import cell, document, esc, section, sortable_head, wide
from agent_kit.reporting.summary import summarize
from agent_kit.reporting.summary_schema import Summary, read_summary
from agent_kit.reporting.transcripts import fmt, value_attr
from agent_kit.store import RunStore, resolve_path
from agent_kit.store.layout import RUN_FILE, RunLayout

__all__ = [
    "RunSide",
    "delta",
    "load_side",
    "render_comparison",
    "write_comparison",
]

_SETTING_KEYS: Final = ("success_threshold", "group_size", "batch_size", "steps", "temperature")
#: Config entries shown after the summary's own settings (threshold, advantage, mode).
_RUN_KEYS: Final = ("policy", "dataset_sha256", "entrypoint")


@dataclass(frozen=True)
class RunSide:
    """One side of a comparison: its label, directory, summary and store data."""

    label: str
    run_dir: Path
    summary: Summary
    data: RunData
    summary_source: str

    @property
    def prompts(self) -> dict[str, PromptRow]:
        """Per-prompt rows keyed by the exact prompt text."""
        return {row.prompt: row for row in prompt_rows(self.data)}


def load_side(run_dir: str | Path, label: str | None = None) -> RunSide:
    """Read one run directory: its summary (``summary.json`` if valid, else recomputed) and
    its store. UsageError when the directory has no run store."""
    store_path = resolve_path(run_dir)
    if not store_path.is_file():
        raise UsageError(f"no run store at {store_path} (expected a run directory)")
    directory = store_path.parent
    with RunStore.open(store_path, readonly=True) as store:
        path = RunLayout(directory).summary
        summary = read_summary(path)
        source = str(path)
        if summary is None:
            summary, source = summarize(store), f"recomputed from {RUN_FILE}"
        settings = summary.settings
        data = load_run_data(
            store,
            summary.job.arn,
            threshold=float(settings.success_threshold),
            advantage=str(settings.advantage),
        )
    name = label or f"{summary.job.name}"
    return RunSide(name, directory, summary, data, source)


def delta(a: float | None, b: float | None) -> tuple[float | None, float | None]:
    """(B − A, (B − A) / |A|) — None where undefined (a missing side, or A = 0 for the ratio)."""
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return None, None
    change = b - a
    return change, (change / abs(a) if a != 0 else None)


def _signed(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "–"
    if percent:
        return f"{value * 100:+.1f} %"
    return ("+" if value > 0 else "") + fmt(value)


def _delta_cells(a: float | None, b: float | None) -> str:
    change, ratio = delta(a, b)
    cls = "" if change is None or change == 0 else (" up" if change > 0 else " down")
    return (
        f'<td class="n delta{cls}"{value_attr(change)}>{esc(_signed(change))}</td>'
        f'<td class="n rel"{value_attr(ratio)}>{esc(_signed(ratio, percent=True))}</td>'
    )


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _row(name: str, a: Any, b: Any, key: str = "") -> str:
    attr = f' data-metric="{esc(key or name)}"'
    return (
        f"<tr{attr}><td><code>{esc(name)}</code></td>{cell(a)}{cell(b)}"
        f"{_delta_cells(_num(a), _num(b))}</tr>"
    )


def _ab_section(
    key: str, title: str, note: str, a: RunSide, b: RunSide, rows: Sequence[str]
) -> str:
    """The section ``key``: ``note`` over a sortable table of ``rows`` (name, A, B, Δ, Δ %)."""
    head = sortable_head(
        [
            ("name", False),
            (f"A: {a.label}", True),
            (f"B: {b.label}", True),
            ("Δ (B − A)", True),
            ("Δ %", True),
        ]
    )
    table = f'<table class="sortable" id="{key}-table">{head}<tbody>{"".join(rows)}</tbody></table>'
    return section(key, title, note + wide(table))


def _settings_of(summary: Summary) -> dict[str, Any]:
    flat = summary.flat_config()
    out: dict[str, Any] = {k: flat.get(k) for k in _SETTING_KEYS}
    out.update(
        success_threshold=summary.settings.success_threshold,
        advantage=summary.settings.advantage,
        mode=summary.job.mode,
    )
    out.update({k: flat.get(k) for k in _RUN_KEYS})
    sha = out["dataset_sha256"]
    out["dataset_sha256"] = sha[:16] + "…" if isinstance(sha, str) and len(sha) > 16 else sha
    return out


def _settings_section(a: RunSide, b: RunSide) -> str:
    sa, sb = _settings_of(a.summary), _settings_of(b.summary)
    rows = []
    warnings = []
    for key in sa:
        same = sa[key] == sb[key]
        mark = "" if same else ' class="differs"'
        rows.append(
            f'<tr{mark} data-setting="{esc(key)}"><td>{esc(key)}</td><td>{esc(fmt(sa[key]))}'
            f"</td><td>{esc(fmt(sb[key]))}</td><td>{'same' if same else 'differs'}</td></tr>"
        )
        if not same and key in ("success_threshold", "mode", "advantage", "dataset_sha256"):
            warnings.append(key)
    warn = ""
    if warnings:
        warn = (
            f'<p class="warn" id="settings-warning">The runs differ in {esc(", ".join(warnings))}:'
            " some deltas compare different things (success counts use each run's own "
            "threshold).</p>"
        )
    grid = wide(
        f'<table id="settings-table"><thead><tr><th>setting</th><th>A: {esc(a.label)}</th>'
        f"<th>B: {esc(b.label)}</th><th></th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    return section("settings", "Settings", warn + grid)


def _failure_counts(side: RunSide) -> dict[str, int]:
    overview = failure_overview(side.data)
    counts = side.summary.counts
    return {
        "agent-side failures": side.summary.agent_failure_count,
        "floor rewards": side.summary.floor_rewards,
        "non-finite rewards": overview.non_finite,
        "job failures": sum(f.count for f in overview.job),
        "failed rollouts (no reward)": counts.failed_rollouts,
        "timed-out rollouts": counts.timed_out,
        "lost slots": counts.lost,
        "retries": counts.retries,
    }


def _failures_section(a: RunSide, b: RunSide) -> str:
    fa, fb = _failure_counts(a), _failure_counts(b)
    rows = [_row(k, fa[k], fb[k], f"failures.{k}") for k in fa]
    note = (
        '<p class="muted">failed = no reward (job sense); unsolved episodes are in the '
        "per-prompt table. Lower is better.</p>"
    )
    return _ab_section("failures", "Failures", note, a, b, rows)


def _metrics_section(a: RunSide, b: RunSide) -> str:
    ma, mb = a.summary.metrics, b.summary.metrics
    names = list(ma) + [n for n in mb if n not in ma]
    rows = [_row(n, ma.get(n), mb.get(n)) for n in names]
    ca, cb = a.summary.counts, b.summary.counts
    for key in ("slots", "rewarded", "lost", "retries", "groups", "degenerate_groups", "turns"):
        rows.append(_row(f"counts.{key}", getattr(ca, key), getattr(cb, key)))
    ta, tb = a.summary.tokens, b.summary.tokens
    for key in ("prefill", "sample", "train", "total"):
        rows.append(_row(f"tokens.{key}", getattr(ta, key), getattr(tb, key)))
    rows.append(
        _row("cost.total (estimate)", a.summary.cost.total, b.summary.cost.total, "cost.total")
    )
    note = (
        "<p class=muted>Names as the service spells them "
        "(<code>eval/reward/failed_rollouts</code> = below threshold or lost). Δ = B − A.</p>"
    )
    return _ab_section("metrics", "Metrics", note, a, b, rows)


def _breakdown_section(a: RunSide, b: RunSide) -> str:
    ba, bb = component_stats(a.data), component_stats(b.data)
    by_a = {c.name: c for c in ba.components}
    by_b = {c.name: c for c in bb.components}
    names = list(by_a) + [n for n in by_b if n not in by_a]
    if not names:
        return section("breakdown", "Reward breakdown", "<p class=muted>no breakdown recorded</p>")
    rows = []
    for name in names:
        ca, cb = by_a.get(name), by_b.get(name)
        mean_a = ca.contribution_mean if ca else None
        mean_b = cb.contribution_mean if cb else None
        rows.append(
            f'<tr data-component="{esc(name)}"><td>{esc(name)}</td>{cell(mean_a)}{cell(mean_b)}'
            f"{_delta_cells(mean_a, mean_b)}{cell(ca.share if ca else None)}"
            f"{cell(cb.share if cb else None)}</tr>"
        )
    head = sortable_head(
        [
            ("component", False),
            ("A contribution mean", True),
            ("B contribution mean", True),
            ("Δ (B − A)", True),
            ("Δ %", True),
            ("A share of variance", True),
            ("B share of variance", True),
        ]
    )
    note = (
        f"<p class=muted>A: {ba.analysed} rollouts with a breakdown, {ba.floor} floor rewards; "
        f"B: {bb.analysed} with a breakdown, {bb.floor} floor rewards.</p>"
    )
    grid = wide(
        f'<table class="sortable" id="breakdown-table">{head}<tbody>{"".join(rows)}</tbody></table>'
    )
    return section("breakdown", "Reward breakdown", note + grid)


def _prompt_list(rows: Sequence[tuple[str, float | None, float | None]], anchor: str) -> str:
    if not rows:
        return f'<p class=muted id="{anchor}">none</p>'
    items = "".join(f"<li>{esc(label)}: {esc(fmt(x))} → {esc(fmt(y))}</li>" for label, x, y in rows)
    return f'<ul id="{anchor}">{items}</ul>'


def _prompts_section(a: RunSide, b: RunSide) -> str:
    pa, pb = a.prompts, b.prompts
    keys = list(pa) + [k for k in pb if k not in pa]
    rows = []
    better_b: list[tuple[str, float | None, float | None]] = []
    better_a: list[tuple[str, float | None, float | None]] = []
    for key in keys:
        ra, rb = pa.get(key), pb.get(key)
        either = ra or rb
        label = either.label if either is not None else key
        sa = ra.success_rate if ra else None
        sb = rb.success_rate if rb else None
        change, _ = delta(sa, sb)
        if change is not None and change > 0:
            better_b.append((label, sa, sb))
        elif change is not None and change < 0:
            better_a.append((label, sa, sb))
        nograd = []
        if ra and ra.no_gradient:
            nograd.append("A")
        if rb and rb.no_gradient:
            nograd.append("B")
        only = "only in A" if rb is None else "only in B" if ra is None else ""
        note = " · ".join(
            x for x in (only, f"no gradient in {' and '.join(nograd)}" if nograd else "") if x
        )
        rows.append(
            f'<tr data-prompt-label="{esc(label)}"><td>{esc(label)}</td>{cell(sa)}{cell(sb)}'
            f"{_delta_cells(sa, sb)}{cell(ra.reward_mean if ra else None)}"
            f"{cell(rb.reward_mean if rb else None)}<td>{esc(note)}</td></tr>"
        )
    head = sortable_head(
        [
            ("prompt", False),
            ("A success rate", True),
            ("B success rate", True),
            ("Δ (B − A)", True),
            ("Δ %", True),
            ("A reward mean", True),
            ("B reward mean", True),
            ("note", False),
        ]
    )
    intro = (
        "<p>Prompts matched by their exact text. Success = reward ≥ each run's success "
        f"threshold (A: {esc(fmt(a.data.threshold))}, B: {esc(fmt(b.data.threshold))}), over "
        "finished slots.</p>"
    )
    grid = wide(
        f'<table class="sortable" id="prompt-table">{head}<tbody>{"".join(rows)}</tbody></table>'
    )
    both = (
        f"<h3>Better in B than in A ({len(better_b)})</h3>"
        + _prompt_list(better_b, "better-in-b")
        + f"<h3>Better in A than in B ({len(better_a)})</h3>"
        + _prompt_list(better_a, "better-in-a")
    )
    return section("prompts", "Per-prompt success, both ways", intro + grid + both)


def _plots_section(a: RunSide, b: RunSide) -> str:
    sa, sb = a.summary.steps, b.summary.steps
    charts: list[str] = []
    if len(sa) > 1 or len(sb) > 1:
        xs = sorted({float(s.step) for s in [*sa, *sb]})
        mean_a = {float(s.step): s.reward_mean for s in sa}
        mean_b = {float(s.step): s.reward_mean for s in sb}
        charts.append(
            plots.lines(
                xs,
                [
                    (f"A {a.label}"[:16], [mean_a.get(x) for x in xs]),
                    (f"B {b.label}"[:16], [mean_b.get(x) for x in xs]),
                ],
                title="Reward mean per step",
                x_label="training step (index)",
                y_label="reward (unitless)",
                integer_x=True,
            )
        )
    for side, name in ((a, "A"), (b, "B")):
        threshold = side.data.threshold
        charts.append(
            plots.histogram(
                [float(r.reward) for r in side.data.chosen if r.reward is not None],
                title=f"Reward distribution — {name}: {side.label}",
                x_label="reward (unitless)",
                markers=[(f"success threshold {fmt(threshold)}", threshold)],
            )
        )
    return section("plots", "Plots", '<div class="plots">' + "".join(charts) + "</div>")


def render_comparison(a: RunSide, b: RunSide) -> str:
    """The comparison page of run A and run B (deltas are B − A)."""
    cost_a, cost_b = a.summary.cost, b.summary.cost
    metric_a, metric_b = a.summary.metrics, b.summary.metrics
    cards = []
    for label, key in (
        ("reward mean", "rollout/reward/mean"),
        ("success rate (pass@1)", "eval/reward/pass_at_1"),
        ("zero_frac", "rollout/reward/zero_frac"),
        ("turns mean", "rollout/turns/mean"),
    ):
        x, y = _num(metric_a.get(key)), _num(metric_b.get(key))
        change, _ = delta(x, y)
        cards.append(
            f'<div class="card" data-metric="{esc(key)}">{esc(label)}<b>{esc(fmt(x))} → '
            f"{esc(fmt(y))}</b><span{value_attr(change)}>Δ {esc(_signed(change))}</span></div>"
        )
    parts = [
        f"<h1>agent_kit comparison: {esc(a.label)} vs {esc(b.label)}</h1>",
        f'<p class=muted id="sides">A = <b>{esc(a.label)}</b> ({esc(a.run_dir)}; summary: '
        f"{esc(a.summary_source)}) · B = <b>{esc(b.label)}</b> ({esc(b.run_dir)}; summary: "
        f"{esc(b.summary_source)}). Every Δ is B − A.</p>",
        '<div class="cards">',
        *cards,
        "</div>",
        f'<p class="banner" id="cost-banner"><b>Costs are estimates, not bills.</b> A: '
        f"{cost_a.total:,.4f} {esc(cost_a.currency)} ({esc(cost_a.label)}); B: "
        f"{cost_b.total:,.4f} {esc(cost_b.currency)} ({esc(cost_b.label)}). "
        "MTRL's per-category prices are not published: give your own with "
        "<code>--pricing FILE</code>.</p>",
        _settings_section(a, b),
        _failures_section(a, b),
        _metrics_section(a, b),
        _breakdown_section(a, b),
        _prompts_section(a, b),
        _plots_section(a, b),
    ]
    return document(f"agent_kit comparison — {a.label} vs {b.label}", parts)


def write_comparison(
    run_a: str | Path,
    run_b: str | Path,
    out_path: str | Path,
    *,
    labels: tuple[str, str] | None = None,
) -> Path:
    """Write the comparison page of two run directories to ``out_path``; return the path.

    ``labels`` name the sides (default: the job names; identical names get ``A``/``B``
    prefixes). Written to a temporary name and renamed. UsageError when a directory holds no
    run store.
    """
    a = load_side(run_a, labels[0] if labels else None)
    b = load_side(run_b, labels[1] if labels else None)
    if a.label == b.label:
        a = RunSide(f"A {a.label}", a.run_dir, a.summary, a.data, a.summary_source)
        b = RunSide(f"B {b.label}", b.run_dir, b.summary, b.data, b.summary_source)
    path = Path(out_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_comparison(a, b), encoding="utf-8")
    tmp.replace(path)
    return path
