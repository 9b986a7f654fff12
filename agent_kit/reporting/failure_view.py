"""The report's "what went wrong" parts: the cost banner, hints, failures and chaos sections.

Each function returns one HTML fragment of ``report.html`` from the summary (and the run's
:class:`~agent_kit.reporting.breakdown.RunData` where it needs the store);
:func:`agent_kit.reporting.report.render_html` puts them in order. Every run text is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_kit.reporting.breakdown import FailureOverview, RunData, failure_overview, prompt_label
from agent_kit.reporting.chaos import OUTCOMES
from agent_kit.reporting.page import cell, esc, section, table, wide
from agent_kit.reporting.summary_schema import AgentFailure, RolloutBrief, Summary
from agent_kit.reporting.tool_results import content_text
from agent_kit.reporting.transcripts import (
    LOWEST,
    below_threshold,
    fmt,
    stop_reason,
)
from agent_kit.store import Rollout
from agent_kit.store.records import breakdown_of
from agent_kit.store.run_figures import RunFigures

__all__ = ["briefs", "chaos_section", "cost_banner", "failures_section", "hints_html"]


def _ids(ids: Sequence[str]) -> str:
    return ", ".join(f'<a href="#tx-{esc(i)}"><code>{esc(i)}</code></a>' for i in ids) or "–"


def cost_banner(summary: Summary) -> str:
    """The cost estimate with its pricing's label and source, the projection, and a warning
    when token counts were estimated."""
    tokens, cost, projection = summary.tokens, summary.cost, summary.projection
    money = f"{cost.total:,.4f}"
    parts = [
        f'<p class="banner" id="cost-banner"><b>Cost is an estimate, not a bill.</b> '
        f"{esc(money)} {esc(cost.currency)} for this run's "
        f"{esc(fmt(tokens.total))} tokens at {esc(cost.label)} (source: "
        f"{esc(cost.source)}). MTRL's per-category prices are not published: give your own "
        "with <code>--pricing FILE</code>."
    ]
    if projection is not None:
        parts.append(f" Projection: {esc(projection.text)}.")
    parts.append("</p>")
    if tokens.estimated:
        parts.append(
            f'<p class="warn">{tokens.estimated_turns} of {tokens.turns} turns have '
            "estimated token usage (the policy reported none): token counts and costs are "
            "estimates.</p>"
        )
    return "".join(parts)


def _job_failures(run: RunFigures | None) -> list[tuple[str, int, Sequence[str]]]:
    """Job failures by reason from the driver's figures (when the run store is not at hand)."""
    if run is None or run.job_failures is None:
        return []
    reasons: dict[str, list[str]] = {}
    for item in run.job_failures:
        reasons.setdefault(str(item.reason or "unknown"), []).append(str(item.trajectory_id or ""))
    return [(k, len(v), v[:10]) for k, v in reasons.items()]


def failures_section(summary: Summary, data: RunData | None) -> str:
    """Failure counts, the job's failure reason, agent-side failures, non-finite rewards, job
    failures and failed rollouts (from the store when given, else from the summary)."""
    overview = failure_overview(data) if data is not None else None
    agent, floor, counts, run = (
        summary.agent_failures,
        summary.floor_rewards,
        summary.counts,
        summary.run,
    )
    failed_n = counts.failed_rollouts
    job_failures: list[tuple[str, int, Sequence[str]]] = []
    if overview is not None:
        job_failures = [(f.reason, f.count, f.trajectory_ids) for f in overview.job]
    else:
        job_failures = _job_failures(run)
    failure_reason = run.failure_reason if run is not None else None
    non_finite = overview.non_finite if overview is not None else None
    out = [_failure_counts(summary, non_finite, job_failures)]
    status = summary.job.status
    if status == "failed" or failure_reason:
        out.append(
            f'<p class="warn">job status <b>{esc(status)}</b>'
            f"{': ' + esc(failure_reason) if failure_reason else ''}</p>"
        )
    below = below_threshold(data.records, data.threshold) if data is not None else []
    nothing = not agent and not floor and not job_failures and not failed_n
    if nothing and not below:
        out.append(
            '<p class="ok" id="no-failures">No failures: every rollout was rewarded, each at or '
            "above the success threshold, and the agent reported no failure of its own.</p>"
        )
    elif nothing:
        out.append(
            '<p id="nothing-failed">No rollout failed (every one was rewarded) and the agent '
            "reported no failure of its own, but some fell short of the success threshold: "
            "where, below.</p>"
        )
    if agent:
        out.append(_agent_failures_table(agent))
    if overview is not None and overview.non_finite:
        out.append(
            f"<p>Non-finite rewards (NaN/inf, scored as the floor): {overview.non_finite} — "
            f"{_ids(overview.non_finite_ids)}</p>"
        )
    if job_failures:
        out.append(_job_failures_table(job_failures))
    if failed_n:
        out.append(_failed_rollouts_table(summary, overview))
        out.append(briefs(summary.failed))
    if data is not None and below:
        out.append(_below_threshold_html(data, below))
    return section("failures", "Failures", "".join(out))


def _components(record: Rollout) -> str:
    """The weighted reward components of a rollout's breakdown, ``name contribution`` each
    (weight-0 ones, which move no reward, left out); ``–`` without a breakdown."""
    parts = breakdown_of(record.body) or {}
    shown = [
        f"{name} {fmt(part.get('contribution'), 3)}"
        for name, part in parts.items()
        if part.get("weight") not in (0, 0.0, None)
    ]
    return " · ".join(shown) or "–"


def _last_result(record: Rollout, limit: int = 120) -> str:
    """The last line of the last tool result in the agent's tool log (``–`` without one):
    often the environment's own word on how the episode ended."""
    log = (record.body or {}).get("tool_log")
    entries = [e for e in log if isinstance(e, dict)] if isinstance(log, list) else []
    if not entries:
        return "–"
    lines = [line.strip() for line in content_text(entries[-1].get("output")).splitlines()]
    last = next((line for line in reversed(lines) if line), "")
    return (last[:limit] + "…" if len(last) > limit else last) or "–"


def _below_threshold_html(data: RunData, below: Sequence[Rollout]) -> str:
    """Where the run fell short: how many rewarded rollouts are below the success threshold,
    why they ended (by stop reason) and the lowest of them with their reward components, each
    a link to its transcript (the report shows a transcript of every one listed)."""
    rewarded = sum(1 for r in data.records if r.rewarded and r.reward is not None)
    share = 100 * len(below) / rewarded if rewarded else 0.0
    why = {r.id: stop_reason(r, r.invocation, data.threshold) for r in below}
    by_reason: dict[str, list[str]] = {}
    for record in below:
        by_reason.setdefault(why[record.id], []).append(record.id)
    reasons = "".join(
        f"<tr><td>{esc(reason)}</td>{cell(len(ids))}<td>{_ids(ids[:LOWEST])}</td></tr>"
        for reason, ids in sorted(by_reason.items(), key=lambda item: -len(item[1]))
    )
    lowest = "".join(
        f'<tr data-trajectory="{esc(r.id)}"><td>{_ids([r.id])}</td>'
        f"<td>{esc(prompt_label(r.prompt))}</td>{cell(r.reward)}"
        f"<td>{esc(data.outcome(r))}</td><td>{esc(why[r.id])}</td>"
        f"<td>{esc(_components(r))}</td><td>{esc(_last_result(r))}</td></tr>"
        for r in below[:LOWEST]
    )
    return (
        f"<h3>Below the success threshold</h3><p><b>{len(below)} of {rewarded} rewarded "
        f"rollouts are below the success threshold {esc(fmt(data.threshold))}</b> "
        f"({share:.0f}%: unsolved, or scored with the agent's floor reward). Why they ended:</p>"
        + wide(
            '<table id="below-threshold-reasons"><thead><tr><th>why it ended</th>'
            f"<th>rollouts</th><th>first trajectories</th></tr></thead><tbody>{reasons}"
            "</tbody></table>"
        )
        + f"<p>The {min(LOWEST, len(below))} lowest, with the reward components that moved "
        "their reward (each links to its transcript; the transcripts' outcome filter shows "
        "every unsolved one):</p>"
        + wide(
            '<table id="below-threshold"><thead><tr><th>rollout</th><th>prompt</th>'
            "<th>reward</th><th>outcome</th><th>why it ended</th><th>reward components "
            "(weighted)</th><th>last tool result (its last line)</th></tr></thead>"
            f"<tbody>{lowest}</tbody></table>"
        )
    )


def _failure_counts(
    summary: Summary, non_finite: int | None, job_failures: Sequence[tuple[str, int, Sequence[str]]]
) -> str:
    """The vocabulary note and the table of failure counts (rollouts, slots, retries)."""
    counts = summary.counts
    return "".join(
        [
            '<p class="muted">Vocabulary: a rollout <b>failed</b> when it got no reward (state '
            "FAILED or TIMED_OUT, the job's sense); a rewarded episode below the success "
            "threshold is <b>unsolved</b>, not failed; a <b>floor</b> reward is the agent's own "
            "failure scored with its floor. The service's "
            "<code>eval/reward/failed_rollouts</code> counts unsolved and lost slots.</p>",
            '<div class="wide"><table class="failure-counts"><tbody>',
            f'<tr data-count="agent_failures"><th>agent-side failures</th>'
            f"{cell(summary.agent_failure_count)}</tr>",
            f'<tr data-count="floor_rewards"><th>floor rewards</th>'
            f"{cell(summary.floor_rewards)}</tr>",
            f'<tr data-count="non_finite"><th>of which non-finite rewards</th>'
            f"{cell(non_finite)}</tr>",
            f'<tr data-count="job_failures"><th>job failures</th>'
            f"{cell(sum(c for _, c, _ in job_failures))}</tr>",
            f'<tr data-count="failed_rollouts"><th>failed rollouts (no reward)</th>'
            f"{cell(counts.failed_rollouts)}</tr>",
            f'<tr data-count="timed_out"><th>of which timed out</th>{cell(counts.timed_out)}</tr>',
            f'<tr data-count="lost"><th>slots lost (no rewarded attempt)</th>'
            f"{cell(counts.lost)}</tr>",
            f'<tr data-count="retries"><th>retries</th>{cell(counts.retries)}</tr>',
            "</tbody></table></div>",
        ]
    )


def _agent_failures_table(agent: Sequence[AgentFailure]) -> str:
    """Agent-side failures by reason: rollouts, floor rewards, first trajectories."""
    rows = "".join(
        f"<tr><td>{esc(a.reason)}</td>{cell(a.count)}{cell(a.floor_rewards)}"
        f"<td>{_ids(a.trajectory_ids)}</td></tr>"
        for a in agent
    )
    return "<h3>Agent-side failures</h3>" + wide(
        '<table id="agent-failures"><thead><tr><th>reason</th><th>rollouts</th>'
        "<th>floor rewards</th><th>first trajectories</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _job_failures_table(job_failures: Sequence[tuple[str, int, Sequence[str]]]) -> str:
    """Job failures by reason: count and trajectories."""
    rows = "".join(
        f"<tr><td>{esc(r)}</td>{cell(c)}<td>{_ids(ids)}</td></tr>" for r, c, ids in job_failures
    )
    return "<h3>Job failures</h3>" + wide(
        '<table id="job-failures"><thead><tr><th>reason</th><th>count</th>'
        f"<th>trajectories</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _failed_rollouts_table(summary: Summary, overview: FailureOverview | None) -> str:
    """Rollouts without a reward by reason (first trajectories when the store is at hand)."""
    if overview is not None:
        rows = "".join(
            f"<tr><td>{esc(f.reason)}</td>{cell(f.count)}<td>{_ids(f.trajectory_ids)}</td></tr>"
            for f in overview.rollouts
        )
    else:
        rows = "".join(
            f"<tr><td>{esc(f.reason)}</td>{cell(f.count)}<td>–</td></tr>" for f in summary.failures
        )
    return "<h3>Failed rollouts (no reward)</h3>" + wide(
        '<table id="failure-reasons"><thead><tr><th>reason</th><th>count</th>'
        f"<th>first trajectories</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def hints_html(summary: Summary) -> str:
    """The run's hints (e.g. a new connection per policy call), one warning line each."""
    return "".join(f'<p class="warn hint">{esc(h)}</p>' for h in summary.hints)


def chaos_section(summary: Summary) -> str:
    """Per injected fault of a ``--chaos`` run: calls, rollouts hit, how they ended, examples."""
    chaos = summary.chaos
    if chaos is None:
        return ""
    fate = "the job failed" if chaos.job_failed else "the job survived"
    intro = (
        f"<p>Spec <code>{esc(chaos.spec or '(faults recorded)')}</code> · {fate}. A rollout "
        "hit by a fault is <b>recovered</b> (rewarded normally), <b>floor</b> (the agent's floor "
        "reward), <b>retried</b> (failed, a retry was rewarded), <b>lost</b> (no reward) or "
        "<b>open</b> (not finished).</p>"
    )
    rows = [
        [
            row.fault,
            row.calls,
            row.rollouts,
            *(row.outcomes.get(o, 0) for o in OUTCOMES),
            "; ".join(f"{o}: {', '.join(ids)}" for o, ids in row.examples.items()) or "—",
        ]
        for row in chaos.faults
    ]
    body = (
        table(["fault", "calls", "rollouts", *OUTCOMES, "examples"], rows, "chaos")
        if rows
        else "<p>No fault was injected at these rates.</p>"
    )
    return section("chaos", "Chaos", intro + body)


def briefs(items: Sequence[RolloutBrief]) -> str:
    """A table of listed rollouts: id (a link to its transcript), slot, state, reward, turns,
    tokens, seconds and reason."""
    headers = ["id", "step", "prompt", "sample", "attempt", "state", "reward", "turns", "tokens"]
    keys = ["step", "prompt_index", "sample_index", "attempt", "state", "reward", "turns"]
    keys += ["tokens", "duration_s"]
    rows = "".join(
        f"<tr><td>{_ids([i.id])}</td>"
        + "".join(cell(getattr(i, k)) for k in keys)
        + f"<td>{esc(i.reason or '')}</td></tr>"
        for i in items
    )
    head = "".join(f"<th>{esc(h)}</th>" for h in [*headers, "seconds", "reason"])
    return wide(
        f'<table class="briefs"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    )
