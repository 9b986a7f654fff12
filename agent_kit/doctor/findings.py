"""What a doctor check reports: :class:`Finding` (severity, evidence, fix hint) and a verdict.

A finding is data: the CLI renders it (table or ``--json``) and turns the verdict into the exit
code. Severities: ``error`` (this will waste the job: the CLI exits
:data:`EXIT_FINDINGS`), ``warn`` (probably wrong; look before paying), ``info`` (a figure worth
knowing, or a check that could not run and why).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

__all__ = [
    "EXIT_FINDINGS",
    "SEVERITIES",
    "Finding",
    "Severity",
    "count_by_severity",
    "fields_document",
    "worst",
]

#: Severity of a finding, most severe first in :data:`SEVERITIES`.
Severity = Literal["error", "warn", "info"]
SEVERITIES: Final[tuple[Severity, ...]] = ("error", "warn", "info")
#: Exit code of ``agent-kit doctor …`` when any finding is an error (a failed endpoint check).
EXIT_FINDINGS: Final = 13


@dataclass(frozen=True)
class Finding:
    """One result of a doctor check.

    ``check`` names the check (``ordering``, ``zero-variance``, ``tool-calls`` …), ``title`` says
    what was found in one line, ``evidence`` holds the figures behind it (JSON-ready),
    ``trajectory_ids`` the episodes that show it (at most a few), ``hint`` the one-line fix.
    """

    check: str
    severity: Severity
    title: str
    hint: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    trajectory_ids: Sequence[str] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return fields_document(self)


def fields_document(record: Any) -> dict[str, Any]:
    """A doctor record (a dataclass of strings, mappings and sequences) as JSON-ready data: its
    fields in order, a mapping as a dict, a sequence as a list."""
    return {f.name: _plain(getattr(record, f.name)) for f in fields(record)}


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return value


def count_by_severity(findings: Iterable[Finding]) -> dict[str, int]:
    """``{"error": n, "warn": n, "info": n}`` over ``findings``."""
    counts: dict[str, int] = dict.fromkeys(SEVERITIES, 0)
    for finding in findings:
        counts[finding.severity] += 1
    return counts


def worst(findings: Iterable[Finding]) -> Severity | None:
    """The most severe severity among ``findings`` (None when there are none)."""
    seen = {f.severity for f in findings}
    return next((s for s in SEVERITIES if s in seen), None)
