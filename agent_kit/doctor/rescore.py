"""Re-score recorded episodes with an entrypoint's reward function, in this process.

Each finished episode of the run is played again through the entrypoint's
:class:`~agent_kit.app.RolloutApp` episode runner with a scripted model that answers every policy
call with the recorded response (:func:`agent_kit.replay.inprocess.play_recorded`, as
``agent-kit replay --in-process`` does, without comparing requests) and every auxiliary call (a
simulated user's opening and replies, a judge's score) with the recorded call whose request is
the same (:class:`~agent_kit.replay.inprocess.RecordedAux`): the environment sees the same tool
calls, the entrypoint's *current* reward function scores the result, and the environment's
``finish()`` result is kept for ordering predicates. A judge whose prompt changed since the
recording has no recorded answer: its term fails as on a refusing model, with the reason.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kit.errors import AgentKitError
from agent_kit.replay.cassette import open_recording
from agent_kit.replay.inprocess import RecordedAux, play_recorded
from agent_kit.replay.recording import Recording
from agent_kit.store import Rollout

if TYPE_CHECKING:
    from agent_kit.app import RolloutApp

__all__ = ["Rescored", "rescore_run"]


@dataclass(frozen=True)
class Rescored:
    """One episode re-scored: the new reward and breakdown, the environment's result, and the
    agent-side failure if any (``error``; ``reward`` is None when the episode could not be
    played at all, and the recorded reward is then kept)."""

    trajectory_id: str
    reward: float | None
    breakdown: dict[str, dict[str, Any]] | None
    result: Any
    floor: bool
    error: str | None = None


def rescore_run(
    run_dir: str | Path, entrypoint: str | Path, *, concurrency: int = 8
) -> dict[str, Rescored]:
    """Trajectory id → :class:`Rescored` for every finished episode of the run's latest job.

    ``entrypoint`` must define a RolloutApp ``app`` (else UsageError). Not usable from inside a
    running event loop.
    """
    from agent_kit.driver.inprocess import load_app

    recording = open_recording(Path(run_dir))
    app = load_app(entrypoint)
    return asyncio.run(_rescore(app, recording, concurrency))


async def _rescore(app: RolloutApp, recording: Recording, concurrency: int) -> dict[str, Rescored]:
    sem = asyncio.Semaphore(concurrency)

    async def one(episode: Rollout) -> Rescored:
        async with sem:
            try:
                aux = RecordedAux(recording.aux.get(episode.id, ())).target()
                played = await play_recorded(app, episode, aux=aux)
            except AgentKitError as exc:  # a task the entrypoint now refuses (ContractError)
                return Rescored(episode.id, None, None, None, False, exc.message)
        outcome = played.outcome
        body = outcome.body()
        failure = body.get("failure")
        breakdown = body.get("reward_breakdown")
        return Rescored(
            trajectory_id=episode.id,
            reward=float(outcome.reward.total),
            breakdown=breakdown if isinstance(breakdown, dict) and breakdown else None,
            result=played.environment.result if played.environment is not None else None,
            floor=bool(outcome.reward.floor),
            error=str(failure.get("reason")) if isinstance(failure, dict) else None,
        )

    settled = (e for e in recording.episodes if e.reward_total is not None)
    results = await asyncio.gather(*(one(e) for e in settled))
    return {r.trajectory_id: r for r in results}
