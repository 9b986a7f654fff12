"""One iteration's verdict: what a save did, in a few lines, and the code ``--once`` exits with.

A verdict is either a **load error** (one line: the file, the line, the error; nothing ran) or
what the iteration played: the grid's figures, the comparisons with the previous iteration and
the baseline (:mod:`agent_kit.dev.compare`), the baseline's replay under the new code (the
replay engine's :class:`~agent_kit.replay.verdicts.ReplayReport`), the audit's changes
(:mod:`agent_kit.dev.audit`) and the time each part took.

The code (docs/cli.md, ``agent-kit dev --once``), the first that applies:

- **2** the entrypoint, the policy or the dataset does not load (``UsageError``'s code);
- the code of an :class:`~agent_kit.errors.AgentKitError` that kept the grid from playing
  (5 a policy that cannot answer, 8 agents that stop answering, …);
- **6** the grid's rollouts failed as a whole (``agent-kit run``'s ``rollouts_failed``);
- **10** a baseline episode diverged or its reward changed under the new code (as ``agent-kit
  replay``);
- **13** the audit has an error finding (as ``agent-kit doctor``);
- **0** otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from agent_kit.dev.audit import AuditChange
from agent_kit.dev.compare import Comparison
from agent_kit.dev.loadcheck import LoadError
from agent_kit.doctor.findings import EXIT_FINDINGS
from agent_kit.errors import ReplayMismatch, RewardError, UsageError
from agent_kit.evaluation.figures import CellFigures, RewardFigures
from agent_kit.evaluation.render import fmt_mean
from agent_kit.replay.verdicts import EpisodeReport, ReplayReport, describe
from agent_kit.reporting.words import plural
from agent_kit.store.run_figures import ROLLOUTS_FAILED

__all__ = [
    "EXIT_AUDIT",
    "EXIT_CHANGED",
    "EXIT_LOAD",
    "EXIT_OK",
    "EXIT_ROLLOUTS",
    "VERDICT_SCHEMA",
    "Verdict",
]

EXIT_OK: Final = 0
EXIT_LOAD: Final = UsageError.exit_code
EXIT_ROLLOUTS: Final = RewardError.exit_code
EXIT_CHANGED: Final = ReplayMismatch.exit_code
EXIT_AUDIT: Final = EXIT_FINDINGS
#: The ``schema`` of a verdict's JSON (``verdict.json``, ``agent-kit dev --json``).
VERDICT_SCHEMA: Final = "agent_kit.dev.verdict/1"
#: How many changed baseline episodes a verdict names.
_EPISODES_SHOWN: Final = 4
_WORDS: Final = {
    EXIT_OK: "ok",
    EXIT_LOAD: "does not load",
    EXIT_ROLLOUTS: "the grid's rollouts failed as a whole",
    EXIT_CHANGED: "changed against the baseline",
    EXIT_AUDIT: "the audit found an error",
}


@dataclass(frozen=True)
class Verdict:
    """One iteration's verdict (see the module docstring).

    ``number`` and ``path`` are the iteration's (its directory); ``trigger`` the files whose
    save started it (empty for the first); ``restarted`` whether the agent processes were
    started for it. ``failure``/``failure_code`` say why a grid that loaded could not play.
    """

    number: int
    path: Path
    trigger: tuple[str, ...] = ()
    restarted: bool = False
    load_error: LoadError | None = None
    failure: str | None = None
    failure_code: int | None = None
    status: str | None = None
    grid: tuple[int, int] = (0, 0)
    figures: RewardFigures | None = None
    rewarded: int = 0
    previous: Comparison | None = None
    baseline: Comparison | None = None
    replay: ReplayReport | None = None
    #: The baseline's job name (its trajectory ids' prefix, left out of the episode labels).
    baseline_job: str | None = None
    audit: AuditChange | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    #: What the verdict could not say, and why (a baseline without the grid's prompts).
    notes: tuple[str, ...] = ()

    @property
    def code(self) -> int:
        """The exit code of ``--once`` (module docstring)."""
        if self.load_error is not None:
            return EXIT_LOAD
        if self.failure is not None:
            return self.failure_code or 1
        if self.status == ROLLOUTS_FAILED:
            return EXIT_ROLLOUTS
        if self.replay is not None and not self.replay.ok:
            return EXIT_CHANGED
        if self.audit is not None and self.audit.errors:
            return EXIT_AUDIT
        return EXIT_OK

    @property
    def words(self) -> str:
        """What the code means, in words."""
        if self.failure is not None:
            return self.failure
        return _WORDS.get(self.code, "failed")

    def _head(self) -> str:
        what = ", ".join(self.trigger) if self.trigger else "start"
        return f"#{self.number} {what}"

    def lines(self, base: Path | None = None) -> list[str]:
        """The verdict as text: one line for a load error, else a headline, one line per part
        and the outcome (file names relative to ``base``)."""
        if self.load_error is not None:
            return [f"{self._head()}: does not load: {self.load_error.text(base)}"]
        timing = ", ".join(f"{k} {v:.2f} s" for k, v in self.timings.items())
        restart = " · agents restarted" if self.restarted else ""
        lines = [f"{self._head()}{restart} · {self.path}" + (f" ({timing})" if timing else "")]
        if self.failure is not None:
            lines.append(f"  → {self.failure} (exit {self.code})")
            return lines
        lines.append("  " + self._play_line())
        for comparison in (self.previous, self.baseline):
            if comparison is not None:
                lines.append("  " + comparison.text())
        if self.replay is not None:
            lines.extend("  " + line for line in self._replay_lines())
        if self.audit is not None:
            lines.extend("  audit: " + line for line in self.audit.lines())
        lines.extend(f"  note: {note}" for note in self.notes)
        lines.append(f"  → {self.words} (exit {self.code})")
        return lines

    def _play_line(self) -> str:
        prompts, samples = self.grid
        f = self.figures
        total = prompts * samples
        head = f"play: {plural(prompts, 'prompt')} × {samples}"
        if f is None or f.mean is None:
            return f"{head}: no rollout rewarded ({self.status})"
        mean = fmt_mean(CellFigures.from_rewards(f, state="completed"))
        success = "–" if f.success_rate is None else f"{f.success_rate:.0%}"
        return f"{head}: reward {mean}, success {success}, {self.rewarded} of {total} rewarded"

    def _label(self, episode: EpisodeReport) -> str:
        prefix = f"{self.baseline_job}-" if self.baseline_job else ""
        return episode.trajectory_id.removeprefix(prefix)

    def _replay_lines(self) -> list[str]:
        report = self.replay
        if report is None:
            return []
        counts = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in report.counts.items() if v)
        lines = [f"replay of the baseline: {plural(len(report.episodes), 'episode')}: {counts}"]
        changed = [e for e in report.episodes if e.status != "identical"]
        for e in changed[:_EPISODES_SHOWN]:
            text = describe(e)
            if e.status == "diverged":
                text += f"; reward {_num(e.old_reward)} → {_num(e.new_reward)}"
            lines.append(f"  {self._label(e)}: {text}")
        if len(changed) > _EPISODES_SHOWN:
            lines.append(f"  (+{len(changed) - _EPISODES_SHOWN} more)")
        return lines

    def document(self) -> dict[str, Any]:
        """The verdict as JSON (``verdict.json``, ``--json``)."""
        f = self.figures
        return {
            "schema": VERDICT_SCHEMA,
            "iteration": self.number,
            "path": str(self.path),
            "trigger": list(self.trigger),
            "restarted": self.restarted,
            "code": self.code,
            "verdict": self.words,
            "load_error": None if self.load_error is None else self.load_error.document(),
            "failure": self.failure,
            "status": self.status,
            "grid": {"prompts": self.grid[0], "samples": self.grid[1]},
            "figures": None
            if f is None
            else {"mean": f.mean, "se": f.se, "success_rate": f.success_rate},
            "rewarded": self.rewarded,
            "previous": None if self.previous is None else self.previous.document(),
            "baseline": None if self.baseline is None else self.baseline.document(),
            "replay": None if self.replay is None else self.replay.to_dict(),
            "audit": None if self.audit is None else self.audit.document(),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "notes": list(self.notes),
        }


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"
