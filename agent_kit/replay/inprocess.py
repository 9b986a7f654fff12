"""Replay in process: recorded episodes through the entrypoint's ``RolloutApp``, no HTTP.

:func:`replay_in_process` drives the app's episode runner with a
:class:`~agent_kit.driver.inprocess.ScriptedModel` that answers every policy call with the
recorded response, comparing each request with the recorded one first (``messages`` and
``tools`` only: sampling parameters and transport fields never reach an in-process model).
The outcome is the same :class:`~agent_kit.replay.verdicts.ReplayReport` that
:func:`agent_kit.replay.engine.replay_run` gives through the emulator, and it is re-exported
from :mod:`agent_kit.replay.engine`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_kit.emulator.schemas import PolicyReply, PolicyRequest
from agent_kit.errors import UsageError
from agent_kit.replay.cassette import Recording, open_recording
from agent_kit.replay.policy import (
    Divergence,
    Normalization,
    ReplayDivergenceError,
    first_difference,
    reply_from_completion,
    request_diff,
)
from agent_kit.replay.verdicts import EpisodeReport, ReplayReport, judge
from agent_kit.store import Rollout

__all__ = ["replay_in_process"]


class _InProcessPolicy:
    """A scripted policy serving one recorded episode to :class:`ScriptedModel`."""

    def __init__(self, episode: Rollout, normalization: Normalization) -> None:
        self.episode = episode
        self.normalization = normalization
        self.divergence: Divergence | None = None

    def __call__(self, request: PolicyRequest) -> PolicyReply:
        turn = request.turn
        now = self.normalization.view(request.raw)
        if turn >= len(self.episode.turn_rows):
            self._stop(turn, f"turn {turn} is beyond the recording", request_diff({}, now))
        before = self.normalization.view(self.episode.turn_rows[turn].request)
        if before != now:
            self._stop(turn, first_difference(before, now), request_diff(before, now))
        return reply_from_completion(self.episode.turn_rows[turn].response)

    def _stop(self, turn: int, where: str, diff: str) -> None:
        if self.divergence is None:
            self.divergence = Divergence(self.episode.id, self.episode.id, turn, where, diff)
        raise ReplayDivergenceError(f"replay diverged at turn {turn}: {where}")


def replay_in_process(
    source: str | Path | Recording,
    entrypoint: str | Path | None = None,
    *,
    trajectories: Sequence[str] | None = None,
    limit: int | None = None,
    normalization: Normalization | None = None,
    concurrency: int = 8,
) -> ReplayReport:
    """Replay episodes through the entrypoint's ``RolloutApp`` in this process and compare them.

    No emulator, HTTP or subprocess: the app's episode runner plays each episode in one event
    loop (``concurrency`` at a time) with a :class:`~agent_kit.driver.inprocess.ScriptedModel`
    serving the recording. Only ``messages`` and ``tools`` of each request are compared
    (sampling parameters never reach an in-process model); rewards are compared bit for bit
    with the recorded ones (and per component when the recording has a breakdown). Works for
    entrypoints whose ``app`` is a :class:`~agent_kit.app.RolloutApp`. Not usable from inside
    a running event loop.
    """
    from agent_kit.driver.inprocess import load_app

    started = time.monotonic()
    recording = open_recording(source, trajectories, limit)
    path = entrypoint if entrypoint is not None else recording.entrypoint
    if path is None:
        raise UsageError(f"{recording.source} does not record its entrypoint; pass one")
    app = load_app(path)
    norm = normalization or Normalization(only=frozenset({"messages", "tools"}))
    reports = asyncio.run(_play_in_process(app, recording.episodes, norm, concurrency))
    return ReplayReport(
        source=str(recording.source),
        run_dir=None,
        entrypoint=str(path),
        mode="in-process",
        episodes=tuple(reports),
        elapsed_s=time.monotonic() - started,
    )


async def _play_in_process(
    app: Any,
    episodes: Sequence[Rollout],
    norm: Normalization,
    concurrency: int,
) -> list[EpisodeReport]:
    """Play every episode through the app's episode runner in one event loop."""
    from agent_kit.contract import parse_payload
    from agent_kit.driver.inprocess import scripted_model_factory
    from agent_kit.episode_loop import play_episode

    sem = asyncio.Semaphore(concurrency)

    async def one(episode: Rollout) -> EpisodeReport:
        policy = _InProcessPolicy(episode, norm)
        payload = parse_payload(
            {"prompt": episode.prompt, "inferenceParams": episode.inference_params or {}}
        )
        async with sem:
            outcome = await play_episode(
                payload,
                environment=app.environment,
                reward=app.reward_fn,
                settings=app.settings,
                model_factory=scripted_model_factory(policy),
            )
        body = outcome.body()
        breakdown = body.get("reward_breakdown")
        turns = outcome.episode.turns
        return judge(
            episode,
            None,
            divergence=policy.divergence,
            replayed_turns=turns
            if policy.divergence is not None
            else min(turns, len(episode.turn_rows)),
            new_rewards=outcome.reward.wire_values(turns),
            new_breakdown=breakdown if isinstance(breakdown, dict) else None,
            error=None,
            fork_at=None,
        )

    return list(await asyncio.gather(*(one(e) for e in episodes)))
