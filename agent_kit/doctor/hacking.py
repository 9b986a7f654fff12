"""The reward audit's hacking checks: signs that the reward pays for something besides the outcome.

- :func:`length_signals`: reward vs turns / tokens / tool calls (Pearson,
  :func:`statistics.correlation`) compared with the outcome terms' own correlation;
- :func:`unearned_rewards`: rewards at or above the success threshold without a positive
  outcome term;
- :func:`dominance`: a component whose share of the reward variance
  (``cov(contribution, reward) / var(reward)``) is far above its declared weight's share;
- :func:`recovered_calls`: whether any component responds to tool calls recovered from text.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Final

from agent_kit.doctor.findings import Finding
from agent_kit.doctor.invariants import EpisodeView
from agent_kit.doctor.views import SHOWN, view_reward
from agent_kit.reporting.words import plural

__all__ = [
    "STRONG_CORRELATION",
    "dominance",
    "length_signals",
    "recovered_calls",
    "unearned_rewards",
]

#: Correlation magnitude from which a length signal is reported as a warning.
STRONG_CORRELATION: Final = 0.5
#: Below this |r| a correlation with length says nothing about the reward.
WEAK_CORRELATION: Final = 0.3


def _info(
    title: str,
    hint: str = "",
    evidence: Mapping[str, Any] | None = None,
    trajectory_ids: Sequence[str] = (),
) -> Finding:
    """An ``info`` finding of the hacking check (the common case: a figure, not a problem)."""
    return Finding("hacking", "info", title, hint, evidence or {}, trajectory_ids)


def _correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return statistics.correlation(xs, ys)


def _outcome_sum(view: EpisodeView) -> float | None:
    terms = [c for n, c in view.contributions.items() if view.kinds.get(n) == "outcome"]
    return math.fsum(terms) if terms else None


def length_signals(views: Sequence[EpisodeView]) -> list[Finding]:
    """Reward vs turns / tokens / tool calls, against the outcome terms' own correlation."""
    scored = [v for v in views if v.scored]
    findings: list[Finding] = []
    measures: dict[str, list[EpisodeView]] = {
        "turns": scored,
        "tokens": scored,
        "tool_calls": [v for v in scored if v.tool_calls is not None],
    }
    for measure, eps in measures.items():
        xs = [float(getattr(v, measure)) for v in eps]
        r = _correlation(xs, [view_reward(v) for v in eps])
        with_outcome = [v for v in eps if _outcome_sum(v) is not None]
        r_outcome = _correlation(
            [float(getattr(v, measure)) for v in with_outcome],
            [_outcome_sum(v) or 0.0 for v in with_outcome],
        )
        evidence = {"measure": measure, "episodes": len(eps), "r_reward": r, "r_outcome": r_outcome}
        if r is None:
            findings.append(
                _info(
                    f"reward vs {measure}: not measurable (fewer than 3 episodes or no spread)",
                    "",
                    evidence,
                )
            )
            continue
        explained = r_outcome is not None and r_outcome * r > 0 and abs(r_outcome) >= abs(r) / 2
        if abs(r) >= STRONG_CORRELATION and not explained:
            direction = "shorter" if r < 0 else "longer"
            ranked = sorted(eps, key=view_reward, reverse=True)
            findings.append(
                Finding(
                    "hacking",
                    "warn",
                    f"reward follows {measure} (r = {r:+.2f}) but the outcome does not "
                    f"(r = {_fmt(r_outcome)}): {direction} episodes score higher for no outcome",
                    f"pay for the outcome, not for {measure}: bound or remove the length term",
                    evidence,
                    [v.trajectory_id for v in ranked[:SHOWN]],
                )
            )
        else:
            title = f"reward vs {measure}: r = {r:+.2f}, {_verdict(measure, r, r_outcome)}"
            findings.append(_info(title, "", evidence))
    return findings


def _words(measure: str) -> str:
    """A measure's name as words (``tool_calls`` → ``tool calls``)."""
    return measure.replace("_", " ")


def _verdict(measure: str, r: float, r_outcome: float | None) -> str:
    """What a correlation the audit does not flag means, ending in its verdict."""
    if abs(r) < WEAK_CORRELATION:
        return f"weak: the reward hardly depends on {_words(measure)}, fine"
    subject = "longer episodes" if measure == "turns" else f"episodes with more {_words(measure)}"
    said = f"{subject} score {'higher' if r > 0 else 'lower'}"
    if r_outcome is not None and r_outcome * r > 0:
        return (
            f"{said}; the outcome terms alone move the same way (r = {r_outcome:+.2f}): it "
            "comes from which episodes succeed, fine"
        )
    outcome = "no outcome terms to compare" if r_outcome is None else f"r = {r_outcome:+.2f}"
    return (
        f"{said}; the outcome terms do not explain it ({outcome}), but it is under the "
        f"|r| ≥ {STRONG_CORRELATION:g} that would be a warning: fine, watch it"
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.2f}"


def unearned_rewards(views: Sequence[EpisodeView], threshold: float) -> list[Finding]:
    """Episodes at or above the success threshold whose outcome terms are absent or ≤ 0."""
    scored = [v for v in views if v.scored]
    with_breakdown = [v for v in scored if v.components]
    if not with_breakdown:
        return [
            _info(
                "no reward breakdown recorded: high rewards without an outcome are not detectable",
                "return a Reward with named components (Reward.weighted(outcome=…, …))",
                {"episodes": len(scored)},
            )
        ]
    high = [v for v in with_breakdown if view_reward(v) >= threshold]
    unearned = [v for v in high if (_outcome_sum(v) or 0.0) <= 0.0]
    evidence = {
        "threshold": threshold,
        "high_reward": len(high),
        "without_outcome": len(unearned),
        "examples": [
            {"trajectory_id": v.trajectory_id, "reward": v.reward, "turns": v.turns}
            for v in unearned[:SHOWN]
        ],
    }
    if not unearned:
        return [
            _info(
                f"all {plural(len(high), 'episode')} at or above {threshold:g} carry a "
                "positive outcome term: only solved episodes reach it, fine",
                "",
                evidence,
            )
        ]
    return [
        Finding(
            "hacking",
            "error",
            f"{len(unearned)} of {len(high)} episodes scored ≥ {threshold:g} with no positive "
            "outcome term",
            "make the outcome term dominant (kind='outcome', names starting with 'outcome') so "
            "only a solved task reaches the success threshold",
            evidence,
            [v.trajectory_id for v in unearned[:SHOWN]],
        )
    ]


def dominance(views: Sequence[EpisodeView]) -> list[Finding]:
    """A component whose variance share is far above the share of its declared weight."""
    eps = [v for v in views if v.scored and v.components]
    rewards = [view_reward(v) for v in eps]
    if len(eps) < 3 or len(set(rewards)) < 2:
        return []
    variance = statistics.variance(rewards)
    findings: list[Finding] = []
    names = sorted({n for v in eps for n, w in v.weights.items() if w != 0})
    shares: dict[str, float] = {}
    declared: dict[str, float] = {}
    for name in names:
        contributions = [v.contributions.get(name, 0.0) for v in eps]
        shares[name] = statistics.covariance(contributions, rewards) / variance
        weight_shares = [
            abs(v.weights[name]) / math.fsum(abs(w) for w in v.weights.values())
            for v in eps
            if name in v.weights
        ]
        declared[name] = statistics.fmean(weight_shares) if weight_shares else 0.0
    evidence = {"variance_share": shares, "declared_weight_share": declared, "episodes": len(eps)}
    for name in names:
        if shares[name] >= 0.5 and shares[name] > 2 * declared[name]:
            findings.append(
                Finding(
                    "hacking",
                    "warn",
                    f"component {name!r} drives {shares[name]:.0%} of the reward variance with "
                    f"{declared[name]:.0%} of the declared weight",
                    f"scale or clip {name!r} so its spread matches its weight (normalize its value "
                    "to [-1, 1])",
                    evidence,
                )
            )
    if not findings:
        top = max(names, key=lambda n: shares[n], default=None)
        title = "no component dominates against its weight"
        if top is not None:
            title += (
                f": the largest, {top!r}, makes {shares[top]:.0%} of the reward's variance "
                f"with {declared[top]:.0%} of the declared weight"
            )
            if shares[top] > 1:
                title += (
                    " (the shares add up to 100%; one above 100% means other components pull "
                    "against it)"
                )
        findings.append(_info(title + " — fine", "", evidence))
    return findings


def recovered_calls(views: Sequence[EpisodeView]) -> list[Finding]:
    """Does any component respond to tool calls recovered from text?"""
    eps = [v for v in views if v.scored and v.recovered_tool_calls is not None]
    if not eps:
        return [
            _info("recovered text tool calls: not detectable (the answers do not count them)", "")
        ]
    counts = [float(v.recovered_tool_calls or 0) for v in eps]
    with_text = [v for v in eps if v.recovered_tool_calls]
    if not with_text:
        return [
            _info("no tool call was recovered from text in this run", "", {"episodes": len(eps)})
        ]
    names = sorted({n for v in eps for n in v.components})
    responses = {n: _correlation(counts, [v.components.get(n, 0.0) for v in eps]) for n in names}
    penalizing = {n: r for n, r in responses.items() if r is not None and r <= -STRONG_CORRELATION}
    evidence = {
        "episodes": len(eps),
        "with_recovered_calls": len(with_text),
        "recovered_calls": int(sum(counts)),
        "component_correlation": responses,
    }
    ids = [v.trajectory_id for v in with_text[:SHOWN]]
    if penalizing:
        best = min(penalizing, key=lambda n: penalizing[n])
        return [
            _info(
                f"{plural(len(with_text), 'episode')} used text tool calls; "
                f"component {best!r} penalizes "
                f"them (r = {penalizing[best]:+.2f}): the policy learns to call tools properly, "
                "fine",
                "",
                evidence,
                ids,
            )
        ]
    return [
        Finding(
            "hacking",
            "warn",
            f"{plural(len(with_text), 'episode')} used text tool calls and no reward "
            "component responds "
            "to them: recovered calls are rewarded as well as real ones",
            "add a small penalty per recovered call (Episode.recovered_calls) so the policy "
            "learns the structured format",
            evidence,
            ids,
        )
    ]
