"""Recordings in memory: the rollouts a replay serves back, and reading them from a run store.

A :class:`Recording` is a tuple of :class:`~agent_kit.store.Rollout` records (the same record
the reports read) loaded with their turns: per rollout the prompt, the sampling parameters,
every turn's request and response (with the recorded token usage), and the reward (with its
per-component breakdown when the agent's answer was kept). :func:`read_run` builds one from a
run directory (``run.sqlite``); :mod:`agent_kit.replay.cassette` reads and writes the cassette
file form and holds :func:`~agent_kit.replay.cassette.load_recording`, which reads either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from agent_kit.contract import TrajectoryState
from agent_kit.driver.config import recorded_agent_env
from agent_kit.errors import UsageError
from agent_kit.store import AuxTurnRow, Rollout, RunStore, load_rollouts, resolve_path

__all__ = [
    "REPLAYABLE_STATES",
    "Recording",
    "read_run",
]

#: Rollout states that are replayable (a finished rollout, rewarded or failed).
REPLAYABLE_STATES: Final = TrajectoryState.settled()


@dataclass(frozen=True)
class Recording:
    """Recorded rollouts (``episodes``, each with its ``turn_rows`` loaded) plus where they came
    from.

    ``entrypoint`` is the agent file the recording was made with (absolute; None when unknown);
    ``job`` holds the recorded job settings (policy, temperature, seed, …).
    """

    source: Path
    kind: Literal["run", "cassette"]
    episodes: tuple[Rollout, ...]
    entrypoint: Path | None = None
    job_arn: str | None = None
    job_name: str | None = None
    job: dict[str, Any] = field(default_factory=dict)
    #: The auxiliary calls (judge, simulated user) of each recorded rollout, in order (a run
    #: directory's; a cassette holds none).
    aux: dict[str, list[AuxTurnRow]] = field(default_factory=dict)
    #: The agent processes' extra environment the run recorded (its ``agent_env``: the
    #: agent's own settings, ``agent-kit eval --grid env.NAME=…``); a replay gives it again.
    agent_env: dict[str, str] = field(default_factory=dict)

    def by_id(self) -> dict[str, Rollout]:
        """Episodes keyed by rollout id."""
        return {e.id: e for e in self.episodes}

    def select(
        self, trajectories: Sequence[str] | None = None, limit: int | None = None
    ) -> Recording:
        """A copy holding only the named trajectories (in the given order) and/or the first
        ``limit``; UsageError naming any id the recording does not hold."""
        episodes = list(self.episodes)
        if trajectories:
            known = self.by_id()
            missing = [t for t in trajectories if t not in known]
            if missing:
                raise UsageError(
                    f"{self.source} holds no replayable trajectory {', '.join(missing)} "
                    f"(it has {len(known)}: {', '.join(list(known)[:5])}"
                    f"{', …' if len(known) > 5 else ''})"
                )
            episodes = [known[t] for t in dict.fromkeys(trajectories)]
        if limit is not None:
            if limit < 1:
                raise UsageError(f"--limit must be ≥ 1, got {limit}")
            episodes = episodes[:limit]
        return Recording(
            self.source,
            self.kind,
            tuple(episodes),
            self.entrypoint,
            self.job_arn,
            self.job_name,
            self.job,
            self.aux,
            self.agent_env,
        )


def read_run(path: Path) -> Recording:
    """The finished episodes of a run directory's latest job (UsageError when it has no store
    or no job)."""
    if not resolve_path(path).is_file():
        raise UsageError(f"no run store at {resolve_path(path)} (expected a run directory)")
    with RunStore.open(path, readonly=True) as store:
        jobs = store.list_jobs()
        if not jobs:
            raise UsageError(f"{path} holds no job")
        job = jobs[-1]
        episodes = load_rollouts(store, job.arn, states=REPLAYABLE_STATES, with_turns=True)
        aux = store.job_aux_turns(job.arn)
    config = job.config
    entry = config.get("entrypoint")
    entrypoint = Path(entry) if isinstance(entry, str) and entry.endswith(".py") else None
    settings = config.get("job") if isinstance(config.get("job"), dict) else {}
    return Recording(
        source=path,
        kind="run",
        episodes=tuple(episodes),
        entrypoint=entrypoint,
        job_arn=job.arn,
        job_name=job.name,
        job=dict(settings or {}),
        aux=aux,
        agent_env=recorded_agent_env(config),
    )
