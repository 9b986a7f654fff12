"""Replay in process: recorded episodes through the entrypoint's ``RolloutApp``, no HTTP.

:func:`replay_in_process` drives the app's episode runner with a
:class:`~agent_kit.driver.inprocess.ScriptedModel` that answers every policy call with the
recorded response, comparing each request with the recorded one first (``messages`` and
``tools`` only: sampling parameters and transport fields never reach an in-process model).
The outcome is the same :class:`~agent_kit.replay.verdicts.ReplayReport` that
:func:`agent_kit.replay.engine.replay_run` gives through the emulator; both are exported by
the room's face, :mod:`agent_kit.replay`.

:func:`play_recorded` is the one in-process player of a recorded episode under it, shared with
``agent-kit doctor`` (re-scoring a run, auditing its judge): the recorded answers
(:class:`RecordedAnswers`) or a given scripted policy play the app's episode runner once. Its
auxiliary calls (a simulated user's opening and replies, a judge's scores) are answered from
the recording too (:class:`RecordedAux`, by content, as the subprocess replay's auxiliary
backend answers them), never by a model the agent's ``AGENT_KIT_AUX_*`` settings name.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from agent_kit.auxiliary import AUX_KIND_HEADER, AUX_NAME_HEADER, AuxTarget
from agent_kit.emulator.schemas import PolicyReply, PolicyRequest
from agent_kit.errors import ReplayDivergenceError, UsageError
from agent_kit.replay.cassette import open_recording
from agent_kit.replay.divergence import (
    Divergence,
    Normalization,
    first_difference,
    request_diff,
)
from agent_kit.replay.policy import AuxMiss, match_aux_call, reply_from_completion
from agent_kit.replay.recording import Recording
from agent_kit.replay.verdicts import EpisodeReport, ReplayReport, judge
from agent_kit.store import AuxTurnRow, Rollout

if TYPE_CHECKING:
    from agent_kit.app import RolloutApp
    from agent_kit.driver.inprocess import ScriptedPolicy
    from agent_kit.environment import Environment
    from agent_kit.episode_loop import EpisodeOutcome, RewardFunction

__all__ = [
    "RecordedAnswers",
    "RecordedAux",
    "RecordedPlay",
    "play_recorded",
    "replay_in_process",
]


class RecordedAnswers:
    """A scripted policy answering each turn with the episode's recorded response (past the
    end of the recording: the text ``(end of the recording)``), comparing nothing."""

    def __init__(self, episode: Rollout) -> None:
        self.episode = episode

    def __call__(self, request: PolicyRequest) -> PolicyReply:
        """The recorded response of ``request.turn``."""
        if request.turn >= len(self.episode.turn_rows):
            return PolicyReply(content="(end of the recording)")
        return reply_from_completion(self.episode.turn_rows[request.turn].response)


class RecordedAux(httpx.AsyncBaseTransport):
    """The auxiliary model of an in-process play: an httpx transport answering each judge or
    simulated-user call with the recorded call of the same kind whose request is the same under
    ``normalization`` (:func:`~agent_kit.replay.policy.match_aux_call`, the subprocess replay's
    rule). A call the recording does not hold is answered 400 with where it departs (the
    judge or the user then fails as it would on a refusing model) and handed to ``on_miss``.
    No socket, no event loop of its own: it answers from any loop or thread."""

    def __init__(
        self,
        calls: Sequence[AuxTurnRow],
        normalization: Normalization | None = None,
        on_miss: Callable[[int, AuxMiss], None] | None = None,
    ) -> None:
        self.calls = tuple(calls)
        self.view = (normalization or Normalization()).view
        self.on_miss = on_miss
        self._used: set[int] = set()
        self._asked = 0
        self._lock = threading.Lock()

    def target(self) -> AuxTarget:
        """The auxiliary target that reaches this transport."""
        return AuxTarget("http://recording/aux/v1", "default", transport=self)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """The recorded ``chat.completion`` of this call, or a 400 naming the departure."""
        try:
            body: Any = json.loads(await request.aread())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            body = {}
        with self._lock:
            index, self._asked = self._asked, self._asked + 1
            found = match_aux_call(
                self.calls,
                self._used,
                kind=request.headers.get(AUX_KIND_HEADER),
                name=request.headers.get(AUX_NAME_HEADER),
                index=index,
                body=body,
                view=self.view,
            )
        if isinstance(found, AuxTurnRow):
            return httpx.Response(200, json=found.response)
        if self.on_miss is not None:
            self.on_miss(index, found)
        error = {"message": f"replay: {found.where}", "type": "invalid_request_error"}
        return httpx.Response(400, json={"error": {**error, "code": "ValidationException"}})


@dataclass(frozen=True)
class RecordedPlay:
    """One recorded episode played again: the app's outcome, and the environment it was
    played in (None when none was built)."""

    outcome: EpisodeOutcome
    environment: Environment | None


async def play_recorded(
    app: RolloutApp,
    episode: Rollout,
    *,
    policy: ScriptedPolicy | None = None,
    reward: RewardFunction | None = None,
    aux: AuxTarget | None = None,
) -> RecordedPlay:
    """Play a recorded episode again through ``app``'s episode runner, in this event loop.

    The payload is the recorded prompt and inference parameters
    (:meth:`~agent_kit.contract.RolloutPayload.for_rollout`, no metadata: nothing is
    reported); a :class:`~agent_kit.driver.inprocess.ScriptedModel` asks ``policy`` (default
    :class:`RecordedAnswers`) for each turn, and ``reward`` (default the app's) scores the
    result. Auxiliary calls go to ``aux`` (typically :meth:`RecordedAux.target` over the
    episode's recorded calls; default: a :class:`RecordedAux` holding none, so every such call
    fails), never to the model the app's ``AGENT_KIT_AUX_*`` settings name. Raises only
    :class:`~agent_kit.errors.ContractError` (a task the entrypoint now refuses).
    """
    from agent_kit.auxiliary import using_target
    from agent_kit.contract import RolloutPayload
    from agent_kit.driver.inprocess import scripted_model_factory
    from agent_kit.episode_loop import play_episode

    built: list[Environment] = []

    def environment() -> Environment:
        env = app.environment()
        built.append(env)
        return env

    payload = RolloutPayload.for_rollout(
        episode.prompt, inference_params=episode.inference_params or {}
    )
    with using_target(aux if aux is not None else RecordedAux(()).target()):
        outcome = await play_episode(
            payload,
            environment=environment,
            reward=reward if reward is not None else app.reward_fn,
            settings=app.settings,
            model_factory=scripted_model_factory(
                policy if policy is not None else RecordedAnswers(episode)
            ),
            agent_settings=dataclasses.replace(app.agent_settings, aux_url=None, aux_model=None),
        )
    return RecordedPlay(outcome, built[-1] if built else None)


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

    def aux_missed(self, index: int, miss: AuxMiss) -> None:
        """An auxiliary call the recording does not hold: the episode's divergence, if first."""
        if self.divergence is None:
            ep = self.episode.id
            self.divergence = Divergence(ep, ep, index, miss.where, miss.diff, aux=True)


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
    reports = asyncio.run(_play_in_process(app, recording, norm, concurrency))
    return ReplayReport(
        source=str(recording.source),
        run_dir=None,
        entrypoint=str(path),
        mode="in-process",
        episodes=tuple(reports),
        elapsed_s=time.monotonic() - started,
    )


async def _play_in_process(
    app: RolloutApp,
    recording: Recording,
    norm: Normalization,
    concurrency: int,
) -> list[EpisodeReport]:
    """Play every episode through the app's episode runner in one event loop."""
    sem = asyncio.Semaphore(concurrency)

    async def one(episode: Rollout) -> EpisodeReport:
        policy = _InProcessPolicy(episode, norm)
        aux = RecordedAux(recording.aux.get(episode.id, ()), norm, policy.aux_missed)
        async with sem:
            played = await play_recorded(app, episode, policy=policy, aux=aux.target())
        outcome = played.outcome
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

    return list(await asyncio.gather(*(one(e) for e in recording.episodes)))
