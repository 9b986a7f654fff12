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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from agent_kit.emulator.store import RunStore
from agent_kit.reporting import svg as plots
from agent_kit.reporting.breakdown import (
    RunData,
    component_stats,
    failure_overview,
    load_run_data,
    prompt_label,
    prompt_rows,
)
from agent_kit.reporting.chaos import OUTCOMES
from agent_kit.reporting.metrics import RolloutRecord
from agent_kit.reporting.page import (
    REPORT_FILE,
    cell,
    document,
    esc,
    section,
    sortable_head,
    table,
    value_attr,
)
from agent_kit.reporting.summary import SUMMARY_FILE
from agent_kit.reporting.terminal import num, render_json, render_terminal
from agent_kit.reporting.transcripts import fmt, select_transcripts, transcript_html

__all__ = [
    "REPORT_FILE",
    "SUMMARY_FILE",
    "fmt",
    "num",
    "render_html",
    "render_json",
    "render_terminal",
    "write_reports",
]

_MAX_STRIP_GROUPS: Final = 120


# -- HTML --------------------------------------------------------------------------------------

_OUTCOME_OPTIONS: Final = (
    ("", "every outcome"),
    ("rewarded", "rewarded (any reward)"),
    ("succeeded", "succeeded (reward ≥ threshold)"),
    ("unsolved", "unsolved (rewarded, below threshold)"),
    ("floor", "floor reward (agent-side failure)"),
    ("failed", "failed (no reward)"),
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

_NAV: Final = (
    ("failures", "Failures"),
    ("chaos", "Chaos"),
    ("breakdown", "Reward breakdown"),
    ("prompts", "Per prompt"),
    ("plots", "Plots"),
    ("metrics", "Metrics"),
    ("tokens", "Tokens and cost"),
    ("steps", "Per step"),
    ("transcripts", "Transcripts"),
    ("slowest", "Slowest"),
    ("config", "Configuration"),
)


def _ids(ids: Sequence[str]) -> str:
    return ", ".join(f'<a href="#tx-{esc(i)}"><code>{esc(i)}</code></a>' for i in ids) or "–"


# -- sections ----------------------------------------------------------------------------------


def _cost_banner(summary: Mapping[str, Any]) -> str:
    tokens, cost, projection = summary["tokens"], summary["cost"], summary.get("projection")
    money = f"{cost['total']:,.4f}"
    parts = [
        f'<p class="banner" id="cost-banner"><b>Cost is an estimate, not a bill.</b> '
        f"{esc(money)} {esc(cost['currency'])} for this run's "
        f"{esc(fmt(tokens['total']))} tokens at {esc(cost['label'])} (source: "
        f"{esc(cost['source'])}). MTRL's per-category prices are not published: give your own "
        "with <code>--pricing FILE</code>."
    ]
    if projection:
        parts.append(f" Projection: {esc(projection['text'])}.")
    parts.append("</p>")
    if tokens["estimated"]:
        parts.append(
            f'<p class="warn">{tokens["estimated_turns"]} of {tokens["turns"]} turns have '
            "estimated token usage (the policy reported none): token counts and costs are "
            "estimates.</p>"
        )
    return "".join(parts)


def _failures_section(summary: Mapping[str, Any], data: RunData | None) -> str:
    overview = failure_overview(data) if data is not None else None
    agent = summary.get("agent_failures") or []
    floor = summary.get("floor_rewards", 0)
    counts, run = summary["counts"], summary.get("run") or {}
    by_state = counts["by_state"]
    failed_n = by_state.get("FAILED", 0) + by_state.get("TIMED_OUT", 0)
    job_failures: list[tuple[str, int, Sequence[str]]] = []
    if overview is not None:
        job_failures = [(f.reason, f.count, f.trajectory_ids) for f in overview.job]
    elif isinstance(run.get("job_failures"), list):
        reasons: dict[str, list[str]] = {}
        for item in run["job_failures"]:
            if isinstance(item, dict):
                key = str(item.get("reason") or "unknown")
                reasons.setdefault(key, []).append(str(item.get("trajectory_id") or ""))
        job_failures = [(k, len(v), v[:10]) for k, v in reasons.items()]
    non_finite = overview.non_finite if overview is not None else None
    out = [
        '<p class="muted">Vocabulary: a rollout <b>failed</b> when it got no reward (state '
        "FAILED or TIMED_OUT, the job's sense); a rewarded episode below the success threshold "
        "is <b>unsolved</b>, not failed; a <b>floor</b> reward is the agent's own failure scored "
        "with its floor. The service's <code>eval/reward/failed_rollouts</code> counts unsolved "
        "and lost slots.</p>",
        '<table class="failure-counts"><tbody>',
        f'<tr data-count="agent_failures"><th>agent-side failures</th>'
        f"{cell(sum(int(a['count']) for a in agent))}</tr>",
        f'<tr data-count="floor_rewards"><th>floor rewards</th>{cell(floor)}</tr>',
        f'<tr data-count="non_finite"><th>of which non-finite rewards</th>{cell(non_finite)}</tr>',
        f'<tr data-count="job_failures"><th>job failures</th>'
        f"{cell(sum(c for _, c, _ in job_failures))}</tr>",
        f'<tr data-count="failed_rollouts"><th>failed rollouts (no reward)</th>'
        f"{cell(failed_n)}</tr>",
        f'<tr data-count="timed_out"><th>of which timed out</th>'
        f"{cell(by_state.get('TIMED_OUT', 0))}</tr>",
        f'<tr data-count="lost"><th>slots lost (no rewarded attempt)</th>'
        f"{cell(counts['lost'])}</tr>",
        f'<tr data-count="retries"><th>retries</th>{cell(counts["retries"])}</tr>',
        "</tbody></table>",
    ]
    status = summary["job"]["status"]
    if status == "failed" or run.get("failure_reason"):
        out.append(
            f'<p class="warn">job status <b>{esc(status)}</b>'
            f"{': ' + esc(run['failure_reason']) if run.get('failure_reason') else ''}</p>"
        )
    nothing = not agent and not floor and not job_failures and not failed_n
    if nothing:
        out.append(
            '<p class="ok" id="no-failures">No failures: every rollout was rewarded and the '
            "agent reported no failure of its own.</p>"
        )
    if agent:
        rows = "".join(
            f"<tr><td>{esc(a['reason'])}</td>{cell(a['count'])}{cell(a['floor_rewards'])}"
            f"<td>{_ids(a['trajectory_ids'])}</td></tr>"
            for a in agent
        )
        out.append(
            '<h3>Agent-side failures</h3><table id="agent-failures"><thead><tr><th>reason</th>'
            "<th>rollouts</th><th>floor rewards</th><th>first trajectories</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
    if overview is not None and overview.non_finite:
        out.append(
            f"<p>Non-finite rewards (NaN/inf, scored as the floor): {overview.non_finite} — "
            f"{_ids(overview.non_finite_ids)}</p>"
        )
    if job_failures:
        rows = "".join(
            f"<tr><td>{esc(r)}</td>{cell(c)}<td>{_ids(ids)}</td></tr>" for r, c, ids in job_failures
        )
        out.append(
            '<h3>Job failures</h3><table id="job-failures"><thead><tr><th>reason</th>'
            "<th>count</th><th>trajectories</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
    if failed_n:
        if overview is not None:
            rows = "".join(
                f"<tr><td>{esc(f.reason)}</td>{cell(f.count)}<td>{_ids(f.trajectory_ids)}</td></tr>"
                for f in overview.rollouts
            )
        else:
            rows = "".join(
                f"<tr><td>{esc(f['reason'])}</td>{cell(f['count'])}<td>–</td></tr>"
                for f in summary["failures"]
            )
        out.append(
            '<h3>Failed rollouts (no reward)</h3><table id="failure-reasons"><thead><tr>'
            "<th>reason</th><th>count</th><th>first trajectories</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
        out.append(_briefs(summary["failed"]))
    return section("failures", "Failures", "".join(out))


def _hints_html(summary: Mapping[str, Any]) -> str:
    """The run's hints (e.g. a new connection per policy call), one warning line each."""
    hints = summary.get("hints") or []
    return "".join(f'<p class="warn hint">{esc(h)}</p>' for h in hints)


def _chaos_section(summary: Mapping[str, Any]) -> str:
    """Per injected fault of a ``--chaos`` run: calls, rollouts hit, how they ended, examples."""
    chaos = summary.get("chaos")
    if not chaos:
        return ""
    fate = "the job failed" if chaos["job_failed"] else "the job survived"
    intro = (
        f"<p>Spec <code>{esc(chaos['spec'] or '(faults recorded)')}</code> · {fate}. A rollout "
        "hit by a fault is <b>recovered</b> (rewarded normally), <b>floor</b> (the agent's floor "
        "reward), <b>retried</b> (failed, a retry was rewarded), <b>lost</b> (no reward) or "
        "<b>open</b> (not finished).</p>"
    )
    rows = [
        [
            row["fault"],
            row["calls"],
            row["rollouts"],
            *(row["outcomes"].get(o, 0) for o in OUTCOMES),
            "; ".join(f"{o}: {', '.join(ids)}" for o, ids in row["examples"].items()) or "—",
        ]
        for row in chaos["faults"]
    ]
    body = (
        table(["fault", "calls", "rollouts", *OUTCOMES, "examples"], rows, "chaos")
        if rows
        else "<p>No fault was injected at these rates.</p>"
    )
    return section("chaos", "Chaos", intro + body)


def _briefs(items: Sequence[Mapping[str, Any]]) -> str:
    headers = ["id", "step", "prompt", "sample", "attempt", "state", "reward", "turns", "tokens"]
    keys = ["step", "prompt_index", "sample_index", "attempt", "state", "reward", "turns"]
    keys += ["tokens", "duration_s"]
    rows = "".join(
        f"<tr><td>{_ids([i['id']])}</td>"
        + "".join(cell(i[k]) for k in keys)
        + f"<td>{esc(i['reason'] or '')}</td></tr>"
        for i in items
    )
    head = "".join(f"<th>{esc(h)}</th>" for h in [*headers, "seconds", "reason"])
    return f'<table class="briefs"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _weights(weights: Sequence[float]) -> str:
    if not weights:
        return "–"
    if len(weights) == 1:
        return fmt(weights[0])
    return f"{fmt(weights[0])} … {fmt(weights[-1])} (varies)"


def _breakdown_section(data: RunData | None) -> str:
    if data is None:
        return section("breakdown", "Reward breakdown", "<p class=muted>needs the run store</p>")
    result = component_stats(data)
    notes = (
        f"<p>Over <b>{result.analysed}</b> rewarded rollouts whose agent answer carried a "
        f"breakdown (reward mean {esc(fmt(result.reward_mean))}, std "
        f"{esc(fmt(result.reward_std))}). Counted separately: <b>{result.floor}</b> floor "
        f"rewards (of which <b>{result.non_finite}</b> non-finite) and "
        f"<b>{result.without_breakdown}</b> rewarded rollouts without a breakdown. "
        "Share of variance = cov(contribution, reward) / var(reward): the shares add up to 1; "
        "a weight-0 component is diagnostic (it adds nothing to the reward).</p>"
    )
    if not result.components:
        body = notes + "<p class=muted>no reward breakdown was recorded for this job</p>"
        return section("breakdown", "Reward breakdown", body)
    columns = [
        ("component", False),
        ("kind", False),
        ("declared weight", True),
        ("rollouts", True),
        ("value mean", True),
        ("value std", True),
        ("contribution mean", True),
        ("contribution std", True),
        ("share of reward variance", True),
    ]
    rows = []
    for c in result.components:
        weight = c.weights[0] if len(c.weights) == 1 else None
        rows.append(
            f'<tr data-component="{esc(c.name)}"><td>{esc(c.name)}</td><td>{esc(c.kind)}</td>'
            f'<td class="n"{value_attr(weight)}>{esc(_weights(c.weights))}</td>{cell(c.n)}'
            f"{cell(c.value_mean)}{cell(c.value_std)}{cell(c.contribution_mean)}"
            f"{cell(c.contribution_std)}{cell(c.share)}</tr>"
        )
    grid = (
        f'<table class="sortable" id="breakdown-table">{sortable_head(columns)}'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    chart = plots.bars(
        [(c.name, c.share) for c in result.components],
        title="Share of reward variance per component",
        x_label="share of reward variance (fraction; negative = narrows the spread)",
        y_label="reward component",
    )
    return section(
        "breakdown", "Reward breakdown", notes + grid + f'<div class="plots">{chart}</div>'
    )


def _prompts_section(data: RunData | None) -> str:
    if data is None:
        return section("prompts", "Per prompt", "<p class=muted>needs the run store</p>")
    rows = prompt_rows(data)
    columns = [
        ("prompt", False),
        ("index", True),
        ("groups", True),
        ("finished slots", True),
        ("succeeded", True),
        ("unsolved", True),
        ("floor", True),
        ("lost", True),
        ("success rate", True),
        ("reward mean", True),
        ("reward std", True),
        ("zero-variance groups", True),
    ]
    body = []
    for r in rows:
        mark = ' <span class="badge b-nograd">no gradient</span>' if r.no_gradient else ""
        cls = ' class="novar"' if r.zero_variance_groups else ""
        body.append(
            f'<tr{cls} data-prompt="{r.prompt_index}"><td><button type="button" class="show" '
            f'data-show-prompt="{r.prompt_index}">{esc(r.label)}</button>{mark}</td>'
            + "".join(
                cell(v)
                for v in (
                    r.prompt_index,
                    r.groups,
                    r.finished,
                    r.succeeded,
                    r.unsolved,
                    r.floor,
                    r.lost,
                    r.success_rate,
                    r.reward_mean,
                    r.reward_std,
                    r.zero_variance_groups,
                )
            )
            + "</tr>"
        )
    finished = sum(r.finished for r in rows)
    succeeded = sum(r.succeeded for r in rows)
    foot = (
        "<tfoot><tr><th>all prompts</th><td></td>"
        + "".join(
            cell(v)
            for v in (
                sum(r.groups for r in rows),
                finished,
                succeeded,
                sum(r.unsolved for r in rows),
                sum(r.floor for r in rows),
                sum(r.lost for r in rows),
                succeeded / finished if finished else None,
            )
        )
        + "<td></td><td></td>"
        + cell(sum(r.zero_variance_groups for r in rows))
        + "</tr></tfoot>"
    )
    intro = (
        f"<p>Success = reward ≥ {esc(fmt(data.threshold))} (the job's success threshold); the "
        "success rate is over finished slots (a lost slot counts as not succeeded). Grey rows "
        "have zero-variance groups (equal rewards: zero advantage, no gradient). Click a header "
        "to sort, a prompt to filter the transcripts.</p>"
    )
    grid = (
        f'<table class="sortable" id="prompt-table">{sortable_head(columns)}'
        f"<tbody>{''.join(body)}</tbody>{foot}</table>"
    )
    return section("prompts", "Per prompt", intro + grid)


def _plots_section(summary: Mapping[str, Any], data: RunData | None) -> str:
    steps = summary["steps"]
    threshold = float(summary["settings"]["success_threshold"])
    marker = [(f"success threshold {fmt(threshold)}", threshold)]
    charts: list[str] = []
    chosen = data.chosen if data is not None else []
    if len(steps) > 1:
        xs = [float(s["step"]) for s in steps]
        step_x = "training step (index)"
        charts.append(
            plots.lines(
                xs,
                [
                    ("reward mean", [s["reward_mean"] for s in steps]),
                    ("valid mean", [s["valid_mean"] for s in steps]),
                    ("min", [s["reward_min"] for s in steps]),
                    ("max", [s["reward_max"] for s in steps]),
                ],
                title="Reward per step",
                x_label=step_x,
                y_label="reward (unitless)",
                integer_x=True,
            )
        )
        charts.append(
            plots.lines(
                xs,
                [("zero_frac", [s["zero_frac"] for s in steps])],
                title="Zero-variance groups per step (zero_frac)",
                x_label=step_x,
                y_label="fraction of groups (0–1)",
                ylim=(0.0, 1.0),
                integer_x=True,
            )
        )
        charts.append(
            plots.lines(
                xs,
                [("turns mean", [s["turns_mean"] for s in steps])],
                title="Turns per rollout, mean per step",
                x_label=step_x,
                y_label="turns (policy calls per rollout)",
                integer_x=True,
            )
        )
        if data is not None:
            per_step: dict[int, list[float]] = {}
            for r in chosen:
                per_step.setdefault(r.step, []).append(float(r.tokens))
            means: list[float | None] = [
                (sum(v) / len(v)) if (v := per_step.get(int(x))) else None for x in xs
            ]
            charts.append(
                plots.lines(
                    xs,
                    [("tokens mean", means)],
                    title="Tokens per rollout, mean per step",
                    x_label=step_x,
                    y_label="tokens per rollout (prefill + sample)",
                    integer_x=True,
                )
            )
    elif data is not None:
        charts.append(
            plots.histogram(
                [float(r.reward) for r in chosen if r.reward is not None],
                title="Reward distribution",
                x_label="reward (unitless)",
                markers=marker,
            )
        )
        charts.append(
            plots.histogram(
                [float(r.turns) for r in chosen],
                title="Turns per rollout",
                x_label="turns per rollout (policy calls)",
                integer=True,
            )
        )
        charts.append(
            plots.histogram(
                [float(r.tokens) for r in chosen],
                title="Tokens per rollout",
                x_label="tokens per rollout (prefill + sample)",
            )
        )
    if data is not None:
        groups = data.groups
        shown = groups[-_MAX_STRIP_GROUPS:]
        note = "" if len(shown) == len(groups) else f" (last {len(shown)} of {len(groups)})"
        charts.append(
            plots.strip(
                [(f"{g.step}:{g.prompt_index}", g.rewards, g.degenerate) for g in shown],
                title=f"Reward distribution per group{note}",
                y_label="reward (unitless)",
                markers=marker,
            )
        )
        charts.append(
            plots.histogram(
                [a for g in groups for a in g.advantages],
                title=f"Advantages ({summary['settings']['advantage']})",
                x_label="advantage (unitless; 0 for zero-variance groups)",
            )
        )
    if not charts:
        body = "<p class=muted>one step and no run store: the distributions need the store</p>"
        return section("plots", "Plots", body)
    kind = "distributions (one step)" if len(steps) <= 1 else "curves over steps"
    intro = f'<p class="muted" id="plots-kind">{esc(kind)}</p>'
    return section("plots", "Plots", intro + '<div class="plots">' + "".join(charts) + "</div>")


def _metrics_section(summary: Mapping[str, Any]) -> str:
    rows = "".join(
        f'<tr data-metric="{esc(name)}"><td><code>{esc(name)}</code></td>{cell(value)}'
        f"<td class=muted>{esc(_METRIC_NOTES.get(name, ''))}</td></tr>"
        for name, value in summary["metrics"].items()
    )
    grid = (
        '<table id="metrics-table"><thead><tr><th>metric (service name)</th><th>value</th>'
        f"<th>meaning</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    return section("metrics", "Metrics", grid)


def _tokens_section(summary: Mapping[str, Any]) -> str:
    tokens, cost, projection = summary["tokens"], summary["cost"], summary.get("projection")
    token_rows = [(k, tokens[k]) for k in ("prefill", "sample", "train", "total")]
    cost_rows = [(k, cost[k]) for k in ("prefill", "sample", "train", "total")]
    body = (
        table(["category", "tokens"], token_rows)
        + table(["category", f"estimated cost ({cost['currency']})"], cost_rows)
        + f"<p class=muted>pricing: {esc(cost['label'])} (source: {esc(cost['source'])})</p>"
    )
    if projection:
        body += f"<h3>Projection</h3><p>{esc(projection['text'])}</p>"
    return section("tokens", "Tokens and cost", body)


def _steps_section(summary: Mapping[str, Any]) -> str:
    keys = ["step", "trajectories", "rewarded", "lost", "reward_mean", "reward_std"]
    keys += ["valid_mean", "zero_frac", "turns_mean", "prefill", "sample", "train"]
    grid = table(keys, [[s[k] for k in keys] for s in summary["steps"]], "steps")
    return section("steps", "Per step", grid)


def _transcripts_section(store: RunStore | None, data: RunData | None) -> str:
    if store is None or data is None:
        return section("transcripts", "Transcripts", "<p class=muted>needs the run store</p>")
    selected = select_transcripts(data)
    labels: dict[int, str] = {}
    for traj in data.trajectories.values():
        labels.setdefault(traj.prompt_index, prompt_label(traj.prompt))
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


def render_html(
    summary: Mapping[str, Any],
    store: RunStore | None = None,
    *,
    records: Sequence[RolloutRecord] | None = None,
) -> str:
    """One self-contained HTML page of the summary (inline CSS, SVG and one static script).

    Sections, in order: the cost banner; hints; failures (agent-side, floor and non-finite
    rewards, job failures, failed rollouts); chaos (a ``--chaos`` run only); reward breakdown;
    per-prompt table (sortable); plots (distributions for one step, curves for several);
    metrics; tokens and cost; per-step table; transcripts with prompt and outcome filters;
    slowest rollouts; configuration.
    Without ``store`` the sections that need it say so; ``records`` (the job's
    :func:`~agent_kit.reporting.summary.load_records`) saves reading them again. All run text
    is HTML-escaped, and a Content-Security-Policy allows only the page's own script (by hash)
    and no fetch at all.
    """
    job, counts, tokens, cost = (summary[k] for k in ("job", "counts", "tokens", "cost"))
    metrics = summary["metrics"]
    settings = summary["settings"]
    data = None
    if store is not None:
        data = load_run_data(
            store,
            job["arn"],
            threshold=float(settings["success_threshold"]),
            advantage=str(settings["advantage"]),
            records=records,
        )
    agent_failures = sum(int(a["count"]) for a in summary.get("agent_failures") or [])
    cards: list[tuple[str, str, Any]] = [
        ("rollouts rewarded / slots", f"{counts['rewarded']} / {counts['slots']}", None),
        ("reward mean", "rollout/reward/mean", metrics.get("rollout/reward/mean")),
        ("success rate (pass@1)", "eval/reward/pass_at_1", metrics.get("eval/reward/pass_at_1")),
        ("zero_frac", "rollout/reward/zero_frac", metrics.get("rollout/reward/zero_frac")),
        ("turns mean", "rollout/turns/mean", metrics.get("rollout/turns/mean")),
        ("tokens", "tokens.total", tokens["total"]),
        ("estimated cost", "cost.total", None),
        ("agent-side failures", "agent_failures", agent_failures),
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
                f'<div class="card" data-metric="cost.total"{value_attr(float(cost["total"]))}>'
                f"{esc(label)}<b>{cost['total']:,.4f} {esc(cost['currency'])}</b></div>"
            )
        else:
            card_html.append(f'<div class="card">{esc(label)}<b>{esc(key)}</b></div>')
    shown = [(a, t) for a, t in _NAV if a != "chaos" or summary.get("chaos")]
    nav = "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in shown)
    parts = [
        f"<h1>agent_kit run report: {esc(job['name'])}</h1>",
        f"<div class=muted>{esc(job['arn'])} · {esc(job['mode'])} · status {esc(job['status'])}"
        f" · success threshold {esc(fmt(settings['success_threshold']))}"
        f" · advantage {esc(settings['advantage'])} · schema {esc(summary['schema'])}</div>",
        f"<nav>{nav}</nav>",
        '<div class="cards">',
        *card_html,
        "</div>",
        _cost_banner(summary),
        _hints_html(summary),
        _failures_section(summary, data),
        _chaos_section(summary),
        _breakdown_section(data),
        _prompts_section(data),
        _plots_section(summary, data),
        _metrics_section(summary),
        _tokens_section(summary),
        _steps_section(summary),
        _transcripts_section(store, data),
        section("slowest", "Slowest rollouts", _briefs(summary["slowest"])),
        section(
            "config",
            "Configuration",
            f"<pre>{esc(json.dumps(summary['config'], indent=2, ensure_ascii=False))}</pre>",
        ),
    ]
    return document(f"agent_kit report — {job['name']}", parts)


def write_reports(
    run_dir: str | Path,
    summary: Mapping[str, Any],
    store: RunStore | None = None,
    *,
    records: Sequence[RolloutRecord] | None = None,
) -> tuple[Path, Path]:
    """Write ``summary.json`` (indented JSON) and ``report.html`` into ``run_dir``; return both
    paths. Each file is written to a temporary name and renamed, so a reader never sees half.
    ``records`` as for :func:`render_html`."""
    directory = Path(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    paths = (directory / SUMMARY_FILE, directory / REPORT_FILE)
    texts = (
        json.dumps(summary, indent=2, ensure_ascii=False, allow_nan=False) + "\n",
        render_html(summary, store, records=records),
    )
    for path, text in zip(paths, texts, strict=True):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return paths
