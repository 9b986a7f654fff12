"""The reward doctor's fast checks on one grid, and what changed since the last one.

:func:`fast_findings` runs the checks of ``agent-kit doctor reward`` that need neither a model
nor the entrypoint's module (:mod:`agent_kit.doctor`): zero reward variance across a group
(:func:`~agent_kit.doctor.variance.zero_variance`), and the hacking signals: reward against
length, rewards above the success threshold without an outcome, a dominating term, a term
that answers recovered text tool calls (:mod:`agent_kit.doctor.hacking`). The declared
orderings and the judge audit load the entrypoint or call a model: ``agent-kit doctor reward``
runs them.

:func:`audit_change` keeps what a verdict shows: the findings that are new since the last
iteration and those that are gone (a finding is its check, severity and title: a figure in the
title that moved makes it new).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_kit.doctor.findings import Finding
from agent_kit.doctor.hacking import dominance, length_signals, recovered_calls, unearned_rewards
from agent_kit.doctor.variance import zero_variance
from agent_kit.doctor.views import episode_views
from agent_kit.reporting.breakdown import RunData

__all__ = ["AuditChange", "audit_change", "fast_findings"]


def fast_findings(data: RunData) -> tuple[Finding, ...]:
    """The fast checks' findings on a run (module docstring), errors first."""
    views = episode_views(data)
    findings = [
        *zero_variance(views, data),
        *length_signals(views),
        *unearned_rewards(views, data.threshold),
        *dominance(views),
        *recovered_calls(views),
    ]
    order = {"error": 0, "warn": 1, "info": 2}
    return tuple(sorted(findings, key=lambda f: order[f.severity]))


def _key(finding: Finding) -> tuple[str, str, str]:
    return (finding.check, finding.severity, finding.title)


@dataclass(frozen=True)
class AuditChange:
    """The findings of this iteration's audit (``now``), those new since the last audit and
    those gone (all of ``now`` are new on a first audit)."""

    now: tuple[Finding, ...]
    new: tuple[Finding, ...]
    gone: tuple[Finding, ...]

    @property
    def errors(self) -> int:
        """Error findings now (a ``--once`` verdict exits 13 on one)."""
        return sum(f.severity == "error" for f in self.now)

    def lines(self) -> list[str]:
        """One line per new or gone warning or error (info findings are figures: the JSON
        verdict holds them)."""
        shown = [("+", f) for f in self.new] + [("−", f) for f in self.gone]
        return [
            f"{sign} {f.severity} {f.check}: {f.title}" for sign, f in shown if f.severity != "info"
        ]

    def document(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "findings": [f.to_dict() for f in self.now],
            "new": [f.to_dict() for f in self.new],
            "gone": [f.to_dict() for f in self.gone],
        }


def audit_change(now: Sequence[Finding], before: Sequence[Finding] | None) -> AuditChange:
    """What changed from ``before`` (the last audit; None: there was none) to ``now``."""
    old = {_key(f) for f in before or ()}
    current = {_key(f) for f in now}
    return AuditChange(
        now=tuple(now),
        new=tuple(f for f in now if _key(f) not in old),
        gone=tuple(f for f in before or () if _key(f) not in current),
    )
