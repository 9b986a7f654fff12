"""Recordings in memory: the episodes a replay serves back, and reading them from a run store.

A :class:`Recording` is per episode the prompt, the sampling parameters, every turn's request
and response (with the recorded token usage), and the reward (with its per-component breakdown
when the agent's answer was kept). :func:`read_run` builds one from a run directory
(``run.sqlite``); :mod:`agent_kit.replay.cassette` reads and writes the cassette file form and
holds :func:`~agent_kit.replay.cassette.load_recording`, which reads either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from agent_kit.errors import UsageError
from agent_kit.store import INVOCATION_EVENT, RunStore, resolve_path

__all__ = [
    "REPLAYABLE_STATES",
    "RecordedEpisode",
    "RecordedTurn",
    "Recording",
    "read_run",
]

#: Trajectory states whose episodes are replayable (a finished rollout, rewarded or failed).
REPLAYABLE_STATES: Final = ("REWARDED", "FAILED")


@dataclass(frozen=True)
class RecordedTurn:
    """One recorded policy call: the request as sent, the response served, its token usage."""

    idx: int
    route: str
    stream: bool
    request: dict[str, Any]
    response: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    usage_estimated: bool


@dataclass(frozen=True)
class RecordedEpisode:
    """One recorded episode (trajectory) with its turns and reward.

    ``rewards`` is the UpdateReward list and ``reward_total`` its sum (None when no reward was
    reported); ``reward_breakdown`` is the agent's ``{component: {value, weight, contribution,
    kind}}`` when the run kept the agent's answer, else None.
    """

    trajectory_id: str
    prompt: str
    inference_params: dict[str, Any] | None
    step: int
    prompt_index: int
    sample_index: int
    state: str
    turns: tuple[RecordedTurn, ...]
    rewards: tuple[float, ...] | None
    reward_total: float | None
    reward_breakdown: dict[str, dict[str, Any]] | None = None


@dataclass(frozen=True)
class Recording:
    """Recorded episodes plus where they came from.

    ``entrypoint`` is the agent file the recording was made with (absolute; None when unknown);
    ``job`` holds the recorded job settings (policy, temperature, seed, …).
    """

    source: Path
    kind: Literal["run", "cassette"]
    episodes: tuple[RecordedEpisode, ...]
    entrypoint: Path | None = None
    job_arn: str | None = None
    job_name: str | None = None
    job: dict[str, Any] = field(default_factory=dict)

    def by_id(self) -> dict[str, RecordedEpisode]:
        """Episodes keyed by trajectory id."""
        return {e.trajectory_id: e for e in self.episodes}

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
        bodies: dict[str, Any] = {}
        for event in store.list_events(kind=INVOCATION_EVENT):
            if event.trajectory_id is not None:
                bodies[event.trajectory_id] = event.detail.get("body")
        episodes = []
        for row in store.list_trajectories(job_arn=job.arn, states=REPLAYABLE_STATES):
            turns = tuple(
                RecordedTurn(
                    t.idx,
                    t.route,
                    t.stream,
                    t.request,
                    t.response,
                    t.prompt_tokens,
                    t.completion_tokens,
                    t.usage_estimated,
                )
                for t in store.list_turns(row.id)
            )
            reward = store.get_reward(row.id)
            payload = row.payload or {}
            params = payload.get("inferenceParams", payload.get("inference_params"))
            episodes.append(
                RecordedEpisode(
                    trajectory_id=row.id,
                    prompt=row.prompt,
                    inference_params=params if isinstance(params, dict) else None,
                    step=row.step,
                    prompt_index=row.prompt_index,
                    sample_index=row.sample_index,
                    state=row.state,
                    turns=turns,
                    rewards=None if reward is None else tuple(reward.rewards),
                    reward_total=None if reward is None else reward.total,
                    reward_breakdown=_breakdown(bodies.get(row.id)),
                )
            )
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
    )


def _breakdown(body: Any) -> dict[str, dict[str, Any]] | None:
    if not isinstance(body, dict):
        return None
    value = body.get("reward_breakdown")
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        return None
    return {str(k): dict(v) for k, v in value.items()}
