"""What chaos mode did to a run: per injected fault, the rollouts it hit and how each ended.

Read from the store: the emulator records each injected fault as a ``chaos`` event of its
trajectory (agent_kit.emulator.chaos). A trajectory hit by a fault ends as one of:

- ``recovered``: the agent absorbed the fault and the trajectory was rewarded normally;
- ``floor``: rewarded, but with the agent's floor reward (its own failure path caught it);
- ``retried``: the trajectory failed (or timed out) and a retry of it was rewarded: the
  driver's retry saved the slot, at the cost of a whole new rollout;
- ``lost``: it failed and no retry was rewarded (the slot has no reward);
- ``open``: not finished (an interrupted run).

The job's own status tells whether faults killed it (``job_failed``). The same trajectory can
be hit by several faults; it counts once per fault.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from agent_kit.contract import TrajectoryState
from agent_kit.emulator.chaos import FAULTS
from agent_kit.store import Rollout, RunStore
from agent_kit.store.events import CHAOS_EVENT

__all__ = ["OUTCOMES", "ChaosReport", "FaultRow", "chaos_report"]

OUTCOMES: Final = ("recovered", "floor", "retried", "lost", "open")


@dataclass
class FaultRow:
    """One fault: calls it hit, trajectories it hit, and their outcomes (counts by OUTCOMES)."""

    fault: str
    calls: int = 0
    rollouts: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    #: Up to five trajectory ids per outcome other than ``recovered``, for a look in the report.
    examples: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (summary.json ``chaos.faults``)."""
        return asdict(self)


@dataclass
class ChaosReport:
    """The chaos section of a run: the spec it ran with and one row per fault that hit."""

    spec: str
    faults: list[FaultRow]
    job_failed: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON form (summary.json ``chaos``)."""
        return {
            "spec": self.spec,
            "job_failed": self.job_failed,
            "faults": [f.to_dict() for f in self.faults],
        }


def _outcome(record: Rollout, retries: dict[str, list[Rollout]]) -> str:
    if record.state == TrajectoryState.REWARDED:
        return "floor" if record.floor_reward else "recovered"
    if record.state in TrajectoryState.unrewarded():
        todo, seen = list(retries.get(record.id, ())), set()
        while todo:
            retry = todo.pop()
            if retry.id in seen:
                continue
            seen.add(retry.id)
            if retry.state == TrajectoryState.REWARDED:
                return "retried"
            todo.extend(retries.get(retry.id, ()))
        return "lost"
    return "open"


def chaos_report(
    store: RunStore, records: list[Rollout], *, spec: str = "", job_status: str = ""
) -> ChaosReport | None:
    """The chaos section for a job's ``records``, or None when no fault hit and no spec ran."""
    ids = {r.id: r for r in records}
    calls: dict[str, int] = defaultdict(int)
    hit: dict[str, set[str]] = defaultdict(set)
    for event in store.list_events(kind=CHAOS_EVENT):
        tid = event.trajectory_id
        if tid is None or tid not in ids:
            continue
        fault = str(event.detail.get("fault"))
        calls[fault] += 1
        hit[fault].add(tid)
    if not calls and not spec:
        return None
    retries: dict[str, list[Rollout]] = defaultdict(list)
    for record in records:
        if record.retry_of:
            retries[record.retry_of].append(record)
    rows = []
    for fault in sorted(calls, key=lambda f: FAULTS.index(f) if f in FAULTS else len(FAULTS)):
        row = FaultRow(fault, calls=calls[fault], rollouts=len(hit[fault]))
        for tid in sorted(hit[fault]):
            outcome = _outcome(ids[tid], retries)
            row.outcomes[outcome] += 1
            if outcome != "recovered":
                examples = row.examples.setdefault(outcome, [])
                if len(examples) < 5:
                    examples.append(tid)
        rows.append(row)
    return ChaosReport(spec=spec, faults=rows, job_failed=job_status == "failed")
