"""Render a run summary: a Rich terminal view, one-line JSON, and one self-contained HTML page.

The HTML report answers RL questions from ``summary.json`` and the run store: what failed (first),
what each reward component contributes, which prompts succeed or give no gradient, how rewards,
turns and tokens are distributed (or move over steps), and what the worst rollouts did, turn by
turn. It is a single file — inline CSS, inline SVG plots (:mod:`agent_kit.reporting.svg`) and
one static inline script for sorting and filtering — with no CDN and no external fetch (a
Content-Security-Policy allows only that script, by hash), so it opens offline from ``file://``
and can be attached to an issue. Every piece of run text (model output, tool results, prompts,
failure reasons) is HTML-escaped and only ever placed in markup, never in the script.
Transcripts show only chat messages from the stored request/response bodies and the agent's
answer; the store never holds headers, so no credential can reach the page. The task prompt is
shown as recorded (it may contain hidden answers: the report is a local debugging view, not
something to publish). Side-by-side comparison of two runs: :mod:`agent_kit.reporting.compare`.

Nothing here prints; ``agent_kit.cli`` prints the renderables this module returns.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from agent_kit.reporting.breakdown import (
    RunData,
    load_run_data,
    prompt_label,
)
from agent_kit.reporting.failure_view import (
    briefs,
    chaos_section,
    cost_banner,
    failures_section,
    hints_html,
)
from agent_kit.reporting.group_view import run_groups
from agent_kit.reporting.page import cell, document, esc, section, table, wide
from agent_kit.reporting.reward_view import breakdown_section, plots_section, prompts_section
from agent_kit.reporting.summary_schema import Summary
from agent_kit.reporting.train_view import load_train_figures, train_section
from agent_kit.reporting.transcripts import fmt, select_transcripts, transcript_html, value_attr
from agent_kit.store import Rollout, RunStore, load_rollouts
from agent_kit.store.layout import RunLayout

__all__ = ["render_html", "write_reports"]

# -- HTML --------------------------------------------------------------------------------------

_OUTCOME_OPTIONS: Final = (
    ("", "every outcome"),
    ("rewarded", "rewarded (any reward)"),
    ("succeeded", "succeeded (reward ≥ threshold)"),
    ("unsolved", "unsolved (rewarded, below threshold)"),
    ("floor", "floor reward (agent-side failure)"),
    ("failed", "lost (no reward)"),
    ("pending", "pending"),
)

#: Short meanings for metric names that are easy to misread (names as the service spells them).
_METRIC_NOTES: Final = {
    "rollout/reward/valid_mean": "mean over groups with non-zero advantage",
    "rollout/reward/zero_frac": "fraction of groups with zero reward variance (no gradient)",
    "eval/reward/succeeded_rollouts": "slots with reward ≥ the success threshold",
    "eval/reward/failed_rollouts": "slots below the threshold or lost (service name: "
    "not the same as a failed rollout)",
    "eval/reward/pass_at_k": "P(≥ 1 of k succeeds), largest k",
    "eval/reward/pass_power_k": "P(all k succeed), largest k",
}

#: The page's metric cards: (label, metric name as the service spells it).
_METRIC_CARDS: Final = (
    ("reward mean", "rollout/reward/mean"),
    ("success rate (pass@1)", "eval/reward/pass_at_1"),
    ("zero_frac", "rollout/reward/zero_frac"),
    ("turns mean", "rollout/turns/mean"),
)

_NAV: Final = (
    ("failures", "Failures"),
    ("chaos", "Chaos"),
    ("breakdown", "Reward breakdown"),
    ("prompts", "Per prompt"),
    ("groups", "Groups"),
    ("plots", "Plots"),
    ("metrics", "Metrics"),
    ("tokens", "Tokens and cost"),
    ("steps", "Per step"),
    ("transcripts", "Transcripts"),
    ("slowest", "Slowest"),
    ("config", "Configuration"),
)


def _metrics_section(summary: Summary) -> str:
    rows = "".join(
        f'<tr data-metric="{esc(name)}"><td><code>{esc(name)}</code></td>{cell(value)}'
        f"<td class=muted>{esc(_METRIC_NOTES.get(name, ''))}</td></tr>"
        for name, value in summary.metrics.items()
    )
    grid = wide(
        '<table id="metrics-table"><thead><tr><th>metric (service name)</th><th>value</th>'
        f"<th>meaning</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    return section("metrics", "Metrics", grid)


def _tokens_section(summary: Summary) -> str:
    tokens, cost, projection = summary.tokens, summary.cost, summary.projection
    token_rows = [
        ("prefill", tokens.prefill),
        ("sample", tokens.sample),
        ("train", tokens.train),
        ("total", tokens.total),
    ]
    cost_rows = [
        ("prefill", cost.prefill),
        ("sample", cost.sample),
        ("train", cost.train),
        ("total", cost.total),
    ]
    body = (
        table(["category", "tokens"], token_rows)
        + table(["category", f"estimated cost ({cost.currency})"], cost_rows)
        + f"<p class=muted>pricing: {esc(cost.label)} (source: {esc(cost.source)})</p>"
    )
    if (aux := summary.auxiliary) is not None:
        rows = [(kind, v.calls, v.input_tokens, v.output_tokens) for kind, v in aux.by_kind.items()]
        rows.append(("total", aux.calls, aux.input_tokens, aux.output_tokens))
        body += (
            "<h3>Auxiliary calls (judge, simulated user)</h3>"
            + table(["kind", "calls", "input tokens", "output tokens"], rows)
            + f"<p>≈ {esc(fmt(aux.cost))} {esc(aux.currency)} (Bedrock on demand, not MTRL "
            f"tokens; {esc(aux.label)})</p>"
        )
    if projection is not None:
        body += f"<h3>Projection</h3><p>{esc(projection.text)}</p>"
    return section("tokens", "Tokens and cost", body)


def _steps_section(summary: Summary) -> str:
    keys = ["step", "trajectories", "rewarded", "lost", "reward_mean", "reward_std"]
    keys += ["valid_mean", "zero_frac", "turns_mean", "prefill", "sample", "train"]
    rows = [[getattr(s, k) for k in keys] for s in summary.steps]
    grid = table(keys, rows, "steps")
    return section("steps", "Per step", grid)


def _transcripts_section(store: RunStore | None, data: RunData | None) -> str:
    if store is None or data is None:
        return section("transcripts", "Transcripts", "<p class=muted>needs the run store</p>")
    selected = select_transcripts(data)
    labels = {index: prompt_label(prompt) for index, prompt in data.prompts.items()}
    prompt_options = "".join(
        f'<option value="{i}">{i}: {esc(labels[i])}</option>' for i in sorted(labels)
    )
    outcome_options = "".join(f'<option value="{v}">{esc(t)}</option>' for v, t in _OUTCOME_OPTIONS)
    controls = (
        '<div class="filters" id="filters"><label>prompt <select id="f-prompt">'
        f'<option value="">every prompt</option>{prompt_options}</select></label>'
        f'<label>outcome <select id="f-outcome">{outcome_options}</select></label>'
        f'<span id="f-count" aria-live="polite">{len(selected)} transcripts</span></div>'
    )
    intro = (
        f"<p>{len(selected)} of {len(data.records)} rollouts: the lowest-scoring first, then the "
        "floor-reward and failed ones, then a sample of the rest. Each shows every turn, every "
        "tool call and its result (the last one from the agent's answer, when it kept one), the "
        "reward with its breakdown, and the stop reason.</p>"
    )
    items = "".join(transcript_html(store, data, s, open_=i == 0) for i, s in enumerate(selected))
    return section("transcripts", "Transcripts", intro + controls + items)


def _groups_section(store: RunStore | None, data: RunData | None) -> str:
    """Every group's rollouts side by side (:mod:`agent_kit.reporting.group_view`)."""
    if store is None or data is None:
        return section("groups", "Groups side by side", "<p class=muted>needs the run store</p>")
    with_turns = {r.id: r for r in load_rollouts(store, data.job.arn, with_turns=True)}
    intro = (
        "<p>Pick a group (a step's prompt): its rollouts side by side, with their rewards, "
        "advantages (the group's spread is where GRPO's gradient comes from), reward terms, "
        "turns, and what each did at the first turn where they part.</p>"
    )
    return section("groups", "Groups side by side", intro + run_groups(data.groups, with_turns))


def _cards(summary: Summary) -> list[str]:
    """The headline cards: rollouts rewarded of the slots, the headline metrics, tokens,
    the estimated cost and the agent-side failures."""
    counts, cost = summary.counts, summary.cost
    cards: list[tuple[str, str, Any]] = [
        ("rollouts rewarded / slots", f"{counts.rewarded} / {counts.slots}", None),
        *((label, key, summary.metrics.get(key)) for label, key in _METRIC_CARDS),
        ("tokens", "tokens.total", summary.tokens.total),
        ("estimated cost", "cost.total", None),
        ("agent-side failures", "agent_failures", summary.agent_failure_count),
    ]
    card_html = []
    for label, key, value in cards:
        if key.startswith(("rollout/", "eval/", "tokens.", "agent_failures")):
            card_html.append(
                f'<div class="card" data-metric="{esc(key)}"{value_attr(value)}>{esc(label)}'
                f"<b>{esc(fmt(value))}</b></div>"
            )
        elif key == "cost.total":
            card_html.append(
                f'<div class="card" data-metric="cost.total"{value_attr(float(cost.total))}>'
                f"{esc(label)}<b>{cost.total:,.4f} {esc(cost.currency)}</b></div>"
            )
        else:
            card_html.append(f'<div class="card">{esc(label)}<b>{esc(key)}</b></div>')
    return card_html


def _what_ran(mode: str, trained: bool) -> str:
    """The header's word for the run, as the end summary's: an evaluation job evaluated, an
    ``agent-kit train`` run trained, any other run only played rollouts."""
    if mode == "evaluation":
        return "evaluation"
    return "training" if trained else "rollouts, no training"


def render_html(
    summary: Summary,
    store: RunStore | None = None,
    *,
    records: Sequence[Rollout] | None = None,
) -> str:
    """One self-contained HTML page of the summary (inline CSS, SVG and one static script).

    Sections, in order: the cost banner; hints; training (a run of ``agent-kit train`` only:
    :mod:`~agent_kit.reporting.train_view`); failures (agent-side, floor and non-finite
    rewards, job failures, failed rollouts); chaos (a ``--chaos`` run only); reward breakdown;
    per-prompt table (sortable); groups side by side; plots (distributions for one step,
    curves for several); metrics; tokens and cost; per-step table; transcripts with prompt
    and outcome filters; slowest rollouts; configuration.
    Without ``store`` the sections that need it say so; ``records`` (the job's
    :func:`~agent_kit.store.load_rollouts`) saves reading them again. All run text
    is HTML-escaped, and a Content-Security-Policy allows only the page's own script (by hash)
    and no fetch at all.
    """
    job, settings = summary.job, summary.settings
    data = None
    if store is not None:
        data = load_run_data(
            store,
            job.arn,
            threshold=float(settings.success_threshold),
            advantage=str(settings.advantage),
            records=records,
        )
    card_html = _cards(summary)
    trained = load_train_figures(store) if store is not None else None
    shown = [(a, t) for a, t in _NAV if a != "chaos" or summary.chaos is not None]
    if trained is not None:
        shown.insert(0, ("training", "Training"))
    nav = "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in shown)
    parts = [
        f"<h1>agent_kit run report: {esc(job.name)}</h1>",
        f'<div class=muted><span class="id">{esc(job.arn)}</span> · '
        f"{esc(_what_ran(job.mode, trained is not None))} · status {esc(job.status)}"
        f" · success threshold {esc(fmt(settings.success_threshold))}"
        f" · advantage {esc(settings.advantage)} · schema {esc(summary.schema_id)}</div>",
        f"<nav>{nav}</nav>",
        '<div class="cards">',
        *card_html,
        "</div>",
        cost_banner(summary),
        hints_html(summary),
        *([train_section(trained, summary, data)] if trained is not None else []),
        failures_section(summary, data),
        chaos_section(summary),
        breakdown_section(data),
        prompts_section(data),
        _groups_section(store, data),
        plots_section(summary, data),
        _metrics_section(summary),
        _tokens_section(summary),
        _steps_section(summary),
        _transcripts_section(store, data),
        section("slowest", "Slowest rollouts", briefs(summary.slowest)),
        section(
            "config",
            "Configuration",
            f"<pre>{esc(json.dumps(summary.config, indent=2, ensure_ascii=False))}</pre>",
        ),
    ]
    return document(f"agent_kit report — {job.name}", parts)


def write_reports(
    run_dir: str | Path,
    summary: Summary,
    store: RunStore | None = None,
    *,
    records: Sequence[Rollout] | None = None,
) -> tuple[Path, Path]:
    """Write ``summary.json`` (indented JSON) and ``report.html`` into ``run_dir``; return both
    paths. Each file is written to a temporary name and renamed, so a reader never sees half.
    ``records`` as for :func:`render_html`."""
    directory = Path(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    layout = RunLayout(directory)
    paths = (layout.summary, layout.report)
    texts = (
        json.dumps(summary.document(), indent=2, ensure_ascii=False, allow_nan=False) + "\n",
        render_html(summary, store, records=records),
    )
    for path, text in zip(paths, texts, strict=True):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return paths
