"""The report's reward parts: the reward breakdown, the per-prompt table and the plots.

Each function returns one HTML fragment of ``report.html`` from the run's
:class:`~agent_kit.reporting.breakdown.RunData` (and the summary for the plots);
:func:`agent_kit.reporting.report.render_html` puts them in order. Every run text is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from agent_kit.reporting import svg as plots
from agent_kit.reporting.breakdown import RunData, component_stats, prompt_rows
from agent_kit.reporting.page import cell, esc, section, sortable_head, wide
from agent_kit.reporting.summary_schema import StepRow, Summary
from agent_kit.reporting.transcripts import fmt, value_attr

__all__ = ["breakdown_section", "plots_section", "prompts_section"]

#: Groups above this many are not drawn one strip each in the plots.
_MAX_STRIP_GROUPS: Final = 120


def _weights(weights: Sequence[float]) -> str:
    if not weights:
        return "–"
    if len(weights) == 1:
        return fmt(weights[0])
    return f"{fmt(weights[0])} … {fmt(weights[-1])} (varies)"


def breakdown_section(data: RunData | None) -> str:
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
    grid = wide(
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


def prompts_section(data: RunData | None) -> str:
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
    grid = wide(
        f'<table class="sortable" id="prompt-table">{sortable_head(columns)}'
        f"<tbody>{''.join(body)}</tbody>{foot}</table>"
    )
    return section("prompts", "Per prompt", intro + grid)


def _step_curves(steps: Sequence[StepRow], data: RunData | None) -> list[str]:
    """Curves over the steps: reward (mean, valid mean, min, max), zero_frac, turns and,
    with the store, tokens per rollout."""
    xs = [float(s.step) for s in steps]

    def per_step(
        series: Sequence[tuple[str, Sequence[float | None]]],
        title: str,
        y_label: str,
        ylim: tuple[float, float] | None = None,
    ) -> str:
        return plots.lines(
            xs,
            series,
            title=title,
            x_label="training step (index)",
            y_label=y_label,
            ylim=ylim,
            integer_x=True,
        )

    rewards = [
        ("reward mean", [s.reward_mean for s in steps]),
        ("valid mean", [s.valid_mean for s in steps]),
        ("min", [s.reward_min for s in steps]),
        ("max", [s.reward_max for s in steps]),
    ]
    charts = [
        per_step(rewards, "Reward per step", "reward (unitless)"),
        per_step(
            [("zero_frac", [s.zero_frac for s in steps])],
            "Zero-variance groups per step (zero_frac)",
            "fraction of groups (0–1)",
            ylim=(0.0, 1.0),
        ),
        per_step(
            [("turns mean", [s.turns_mean for s in steps])],
            "Turns per rollout, mean per step",
            "turns (policy calls per rollout)",
        ),
    ]
    if data is not None:
        tokens: dict[int, list[float]] = {}
        for r in data.chosen:
            tokens.setdefault(r.step, []).append(float(r.tokens))
        means: list[float | None] = [
            (sum(v) / len(v)) if (v := tokens.get(int(x))) else None for x in xs
        ]
        charts.append(
            per_step(
                [("tokens mean", means)],
                "Tokens per rollout, mean per step",
                "tokens per rollout (prefill + sample)",
            )
        )
    return charts


def _distributions(data: RunData, marker: list[tuple[str, float]]) -> list[str]:
    """Histograms of one step's rollouts: reward (with the threshold), turns and tokens."""
    chosen = data.chosen
    return [
        plots.histogram(
            [float(r.reward) for r in chosen if r.reward is not None],
            title="Reward distribution",
            x_label="reward (unitless)",
            markers=marker,
        ),
        plots.histogram(
            [float(r.turns) for r in chosen],
            title="Turns per rollout",
            x_label="turns per rollout (policy calls)",
            integer=True,
        ),
        plots.histogram(
            [float(r.tokens) for r in chosen],
            title="Tokens per rollout",
            x_label="tokens per rollout (prefill + sample)",
        ),
    ]


def _group_plots(data: RunData, marker: list[tuple[str, float]], advantage: str) -> list[str]:
    """Rewards per group (the last groups when there are many) and the advantages."""
    groups = data.groups
    shown = groups[-_MAX_STRIP_GROUPS:]
    note = "" if len(shown) == len(groups) else f" (last {len(shown)} of {len(groups)})"
    return [
        plots.strip(
            [(f"{g.step}:{g.prompt_index}", g.rewards, g.degenerate) for g in shown],
            title=f"Reward distribution per group{note}",
            y_label="reward (unitless)",
            markers=marker,
        ),
        plots.histogram(
            [a for g in groups for a in g.advantages],
            title=f"Advantages ({advantage})",
            x_label="advantage (unitless; 0 for zero-variance groups)",
        ),
    ]


def plots_section(summary: Summary, data: RunData | None) -> str:
    """The plots: curves over the steps for a run of several steps, distributions for one
    step (they need the store), then the per-group rewards and advantages (with the store)."""
    steps = summary.steps
    threshold = float(summary.settings.success_threshold)
    marker = [(f"success threshold {fmt(threshold)}", threshold)]
    charts: list[str] = []
    if len(steps) > 1:
        charts += _step_curves(steps, data)
    elif data is not None:
        charts += _distributions(data, marker)
    if data is not None:
        charts += _group_plots(data, marker, summary.settings.advantage)
    if not charts:
        body = "<p class=muted>one step and no run store: the distributions need the store</p>"
        return section("plots", "Plots", body)
    kind = "distributions (one step)" if len(steps) <= 1 else "curves over steps"
    intro = f'<p class="muted" id="plots-kind">{esc(kind)}</p>'
    return section("plots", "Plots", intro + '<div class="plots">' + "".join(charts) + "</div>")
