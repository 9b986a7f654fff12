"""Replay verdicts: per-episode status and the whole replay's report (table text and JSON).

An episode is ``identical`` (same requests, same rewards bit for bit), ``diverged`` (first
differing turn and diff), ``reward_changed`` (same turns; old → new total and per component),
``forked`` (a fork that went live after turn K) or ``error`` (the replay did not finish).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final

from agent_kit.errors import ReplayMismatch
from agent_kit.replay.divergence import Divergence
from agent_kit.reporting.words import plural
from agent_kit.store import Rollout

__all__ = [
    "REPORT_FORMAT",
    "EpisodeReport",
    "ReplayReport",
    "compare_rewards",
    "describe",
    "judge",
]

#: Format tag of the JSON report.
REPORT_FORMAT: Final = "agent_kit.replay_report/1"


# -- reports -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpisodeReport:
    """The verdict on one replayed episode.

    ``status``: ``identical`` (same requests, same rewards bit for bit), ``diverged`` (see
    ``turn``, ``where`` and ``diff``), ``reward_changed`` (same turns; ``old_reward`` →
    ``new_reward`` and per-component ``components``), ``forked`` (continued live after
    ``fork_at``) or ``error`` (the replay did not finish: ``reason``).
    """

    trajectory_id: str
    replay_id: str | None
    status: str
    recorded_turns: int
    replayed_turns: int
    old_reward: float | None
    new_reward: float | None
    turn: int | None = None
    where: str | None = None
    diff: str | None = None
    reason: str | None = None
    components: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (one element of the report's ``episodes``)."""
        return asdict(self)


@dataclass(frozen=True)
class ReplayReport:
    """All episode verdicts of one replay, plus where it ran."""

    source: str
    run_dir: str | None
    entrypoint: str | None
    mode: str
    episodes: tuple[EpisodeReport, ...]
    fork_at: int | None = None
    policy: str | None = None
    elapsed_s: float = 0.0

    @property
    def counts(self) -> dict[str, int]:
        """How many episodes got each status."""
        out = dict.fromkeys(("identical", "diverged", "reward_changed", "forked", "error"), 0)
        for e in self.episodes:
            out[e.status] = out.get(e.status, 0) + 1
        return out

    @property
    def ok(self) -> bool:
        """True when nothing changed: every episode identical (a fork: none diverged/failed)."""
        allowed = {"identical", "forked"} if self.mode == "fork" else {"identical"}
        return all(e.status in allowed for e in self.episodes)

    @property
    def episodes_per_s(self) -> float:
        """Replayed episodes per second of wall time."""
        return len(self.episodes) / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (``format`` :data:`REPORT_FORMAT`)."""
        return {
            "format": REPORT_FORMAT,
            "source": self.source,
            "run_dir": self.run_dir,
            "entrypoint": self.entrypoint,
            "mode": self.mode,
            "fork_at": self.fork_at,
            "policy": self.policy,
            "ok": self.ok,
            "counts": self.counts,
            "elapsed_s": round(self.elapsed_s, 3),
            "episodes": [e.to_dict() for e in self.episodes],
        }

    def text(self, *, diffs: int = 3) -> str:
        """A plain-text report: counts, one line per non-identical episode, the first diffs."""
        counts = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in self.counts.items() if v)
        lines = [
            f"replay of {self.source}: {plural(len(self.episodes), 'episode')} — {counts or 'none'}"
        ]
        shown = 0
        for e in self.episodes:
            if e.status == "identical":
                continue
            lines.append(f"  {e.trajectory_id}: {describe(e)}")
            if e.diff and shown < diffs:
                shown += 1
                lines.extend("    " + line for line in e.diff.splitlines())
        return "\n".join(lines)

    def raise_for_mismatch(self) -> None:
        """Raise :class:`~agent_kit.errors.ReplayMismatch` (exit 10) unless :attr:`ok`."""
        if self.ok:
            return
        counts = self.counts
        what = ", ".join(
            f"{counts[k]} {k.replace('_', ' ')}"
            for k in ("diverged", "reward_changed", "error")
            if counts[k]
        )
        raise ReplayMismatch(
            f"replay of {self.source}: {what} (of {plural(len(self.episodes), 'episode')})"
        )


def describe(e: EpisodeReport) -> str:
    """One human line for an episode verdict."""
    if e.status == "identical":
        return "identical"
    if e.status == "diverged":
        if e.turn is None:  # an auxiliary call: ``where`` names it
            return f"diverged at {e.where}"
        return f"diverged at turn {e.turn}: {e.where}"
    if e.status == "reward_changed":
        parts = [f"reward changed {_num(e.old_reward)} → {_num(e.new_reward)}"]
        for name, c in e.components.items():
            if c.get("changed"):
                parts.append(f"{name} {_num(c.get('old'))} → {_num(c.get('new'))}")
        return "; ".join(parts)
    if e.status == "forked":
        return (
            f"forked: {e.recorded_turns} → {plural(e.replayed_turns, 'turn')}, reward "
            f"{_num(e.old_reward)} → {_num(e.new_reward)}"
        )
    return f"error: {e.reason}"


def _num(value: Any) -> str:
    return "–" if value is None else f"{float(value):.6g}"


def _contribution(component: dict[str, Any] | None) -> float | None:
    if component is None:
        return None
    value = component.get("contribution")
    return float(value) if isinstance(value, (int, float)) else None


def compare_rewards(
    episode: Rollout,
    new_rewards: Sequence[float] | None,
    new_breakdown: dict[str, dict[str, Any]] | None,
) -> tuple[bool, dict[str, dict[str, Any]]]:
    """(changed?, per-component old/new/delta) between a recorded and a replayed reward.

    Rewards must be equal bit for bit (the UpdateReward lists); components are compared when both
    sides have a breakdown (contribution, plus weight and value).
    """
    old = list(episode.rewards) if episode.rewards is not None else None
    new = list(new_rewards) if new_rewards is not None else None
    changed = old != new
    components: dict[str, dict[str, Any]] = {}
    before, after = episode.reward_breakdown, new_breakdown
    if before is not None and after is not None:
        for name in list(before) + [n for n in after if n not in before]:
            a, b = before.get(name), after.get(name)
            ca, cb = _contribution(a), _contribution(b)
            differs = a != b
            changed = changed or differs
            entry: dict[str, Any] = {
                "old": ca,
                "new": cb,
                "delta": None if ca is None or cb is None else cb - ca,
                "changed": differs,
            }
            if a is not None and b is not None:
                for key in ("weight", "value"):
                    if a.get(key) != b.get(key):
                        entry[key] = {"old": a.get(key), "new": b.get(key)}
            components[name] = entry
    return changed, components


def judge(
    episode: Rollout,
    replay_id: str | None,
    *,
    divergence: Divergence | None,
    replayed_turns: int,
    new_rewards: Sequence[float] | None,
    new_breakdown: dict[str, dict[str, Any]] | None,
    error: str | None,
    fork_at: int | None,
) -> EpisodeReport:
    n = len(episode.turn_rows)
    new_total = None if new_rewards is None else float(sum(new_rewards))
    base = EpisodeReport(
        trajectory_id=episode.id,
        replay_id=replay_id,
        status="identical",
        recorded_turns=n,
        replayed_turns=replayed_turns,
        old_reward=episode.reward_total,
        new_reward=new_total,
    )
    if divergence is not None:
        return replace(
            base,
            status="diverged",
            turn=None if divergence.aux else divergence.turn,
            where=divergence.where,
            diff=divergence.diff,
        )
    if error is not None:
        return replace(base, status="error", reason=error)
    forked = fork_at is not None and n > fork_at
    if not forked and replayed_turns < n:
        return replace(
            base,
            status="diverged",
            turn=replayed_turns,
            where=f"the replay ended after {replayed_turns} turns; the recording has {n}",
        )
    changed, components = compare_rewards(episode, new_rewards, new_breakdown)
    if forked:
        return replace(base, status="forked", components=components)
    if changed:
        if not components and episode.reward_total is not None and new_total is not None:
            components = {
                "total": {
                    "old": episode.reward_total,
                    "new": new_total,
                    "delta": new_total - episode.reward_total,
                    "changed": True,
                }
            }
        return replace(base, status="reward_changed", components=components)
    return base
