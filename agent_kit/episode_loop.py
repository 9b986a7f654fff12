"""Run one episode: environment → Strands agent turns → reward → report.

Failures are data, not crashes. Each one is recorded on the :class:`~agent_kit.episode.Episode`
with the boundary where it happened, and the rollout still reports a reward (the app's floor) so
the service never kills a job over an agent-side problem:

- ``payload``: the task cannot be played (bad ``prompt``) → :class:`ContractError` (HTTP 400).
- ``policy``: the policy call failed (HTTP error, timeout, unusable answer) → floor reward.
- ``environment``: ``reset`` or a tool raised → floor reward. Tools signal a *bad move* by
  returning text; raising means the environment itself is broken.
- ``reward``: the reward function raised or returned a non-finite value → floor reward.
- ``judge``: an LLM judge of the reward failed or answered nonsense
  (:class:`~agent_kit.errors.JudgeError`) → floor reward, reason ``judge: …``.
- ``limit``: the turn/tool-call limit or the wall-clock budget ran out before the environment
  finished → the reward function still scores it when ``score_unfinished`` (default), else floor.

A reward function may be ``async`` (an LLM judge awaits its model). While the episode and its
reward run, the episode's auxiliary target (:mod:`agent_kit.auxiliary`: where a judge's or a
simulated user's model calls go) is the current one. When the agent ends its turn, the
environment's :meth:`~agent_kit.environment.Environment.next_user_message` may answer as the
user (a simulated user), and the conversation goes on.

Once scored, the environment's own figures (:meth:`~agent_kit.environment.Environment.metrics`)
are read and go into the answer as ``metrics``; a ``metrics()`` that raises is logged and leaves
the episode without them.

A rollout that made no policy call at all is retried once (fresh environment and conversation)
while the wall-clock budget lasts: the service fails a job whose rollout never sampled.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from agent_kit.agent_turns import AgentTurns, user_failure
from agent_kit.auxiliary import current_target, target_for, using_target
from agent_kit.contract import RolloutPayload
from agent_kit.environment import Environment
from agent_kit.episode import Episode, Failure
from agent_kit.errors import ContractError, JudgeError, RewardError, describe_exception
from agent_kit.reward import Reward
from agent_kit.settings import DEFAULTS, Settings

__all__ = [
    "EpisodeOutcome",
    "EpisodeSettings",
    "ModelFactory",
    "ModelHandle",
    "RewardFunction",
    "play_episode",
]

logger = logging.getLogger("agent_kit.episode")

RewardFunction = Callable[[Any, Episode], "Reward | float | Awaitable[Reward | float]"]


class ModelHandle(Protocol):
    """A Strands model for one episode plus the resources to release when it ends."""

    @property
    def model(self) -> Any:
        """The Strands model the agent calls."""

    async def aclose(self) -> None:
        """Release the episode's client (connections, threads)."""


ModelFactory = Callable[[RolloutPayload], Awaitable[ModelHandle]]


@dataclass(frozen=True)
class EpisodeSettings:
    """How the episodes of one app run (fixed per :class:`~agent_kit.app.RolloutApp`)."""

    system_prompt: str = ""
    max_turns: int = 16
    max_tool_calls: int | None = None
    floor_reward: float = -1.0
    score_unfinished: bool = True
    budget_s: float = 420.0
    recover_text_tool_calls: bool = True


@dataclass
class EpisodeOutcome:
    """The finished episode, its reward, and what happened when it was reported."""

    episode: Episode
    reward: Reward
    attempts: int = 1
    reported: bool | None = None
    report_error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: The environment's own figures (:meth:`Environment.metrics`), finite numbers by name.
    metrics: dict[str, float] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """The JSON the entrypoint returns to the invoker (the service does not rely on it)."""
        ep = self.episode
        out: dict[str, Any] = {
            "reward": self.reward.total,
            "reward_breakdown": self.reward.breakdown(),
            "turns": ep.turns,
            "tool_calls": len(ep.tool_calls),
            "recovered_tool_calls": len(ep.recovered_calls),
            "usage": ep.usage,
            "stop_reason": ep.stop_reason,
            "attempts": self.attempts,
        }
        if ep.trajectory_id is not None:
            out["trajectory_id"] = ep.trajectory_id
        if self.reward.floor:
            out["floor_reward"] = True
        out["tool_log"] = _final_tool_log(ep)
        if self.metrics:
            out["metrics"] = dict(self.metrics)
        if ep.failure is not None:
            out["failure"] = {"boundary": ep.failure.boundary, "reason": ep.failure.reason}
            if ep.failure.where is not None:
                out["failure"]["where"] = ep.failure.where
        if self.reported is not None:
            out["reported"] = self.reported
            if self.report_error:
                out["report_error"] = self.report_error
        out.update(self.extra)
        return out


#: Bounds of the answer's ``tool_log``: entries, characters per output and per input.
TOOL_LOG_MAX_CALLS: Final = 8
TOOL_LOG_MAX_OUTPUT: Final = 2000
TOOL_LOG_MAX_INPUT: Final = 500


def _clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _final_tool_log(episode: Episode) -> list[dict[str, Any]]:
    """The tool calls of the episode's last policy call with their results — the ones no
    later request shows — bounded: at most :data:`TOOL_LOG_MAX_CALLS` (the last ones), each
    output and input clipped."""
    if not episode.tool_calls or episode.turns == 0:
        return []
    last = episode.turns - 1
    calls = [c for c in episode.tool_calls if c.turn == last][-TOOL_LOG_MAX_CALLS:]
    log: list[dict[str, Any]] = []
    for call in calls:
        shown = json.dumps(call.input, ensure_ascii=False, default=str)
        log.append(
            {
                "turn": call.turn,
                "name": _clipped(call.name, 200),
                "input": call.input
                if len(shown) <= TOOL_LOG_MAX_INPUT
                else _clipped(shown, TOOL_LOG_MAX_INPUT),
                "output": _clipped(call.output, TOOL_LOG_MAX_OUTPUT),
                "status": call.status,
            }
        )
    return log


async def _play_turns(
    payload: RolloutPayload,
    env: Environment,
    episode: Episode,
    settings: EpisodeSettings,
    deadline: float,
    model_factory: ModelFactory,
) -> None:
    """One attempt's agent turns (:class:`~agent_kit.agent_turns.AgentTurns`) with the model
    ``model_factory`` builds, released at the end; a factory that fails is a policy failure."""
    try:
        handle = await model_factory(payload)
    except Exception as exc:  # noqa: BLE001 - e.g. no policy configured: data, not a 500
        episode.stop_reason = "policy_error"
        if episode.failure is None:
            episode.failure = Failure("policy", describe_exception(exc))
        return
    turns = AgentTurns(
        env,
        episode,
        system_prompt=settings.system_prompt,
        max_turns=env.max_turns if env.max_turns is not None else settings.max_turns,
        max_tool_calls=env.max_tool_calls
        if env.max_tool_calls is not None
        else settings.max_tool_calls,
        recover_text_tool_calls=settings.recover_text_tool_calls,
        deadline=deadline,
    )
    try:
        await turns.run(handle.model, episode.prompt)
    finally:
        await handle.aclose()


async def play_episode(
    payload: RolloutPayload,
    *,
    environment: Callable[[], Environment],
    reward: RewardFunction,
    settings: EpisodeSettings,
    model_factory: ModelFactory,
    agent_settings: Settings = DEFAULTS,
) -> EpisodeOutcome:
    """Play one episode and score it. Never raises except :class:`ContractError` (bad task).

    The caller reports the returned reward; see :mod:`agent_kit.app`. The episode's auxiliary
    target (:func:`agent_kit.auxiliary.target_for` the payload under ``agent_settings``, the
    ``AGENT_KIT_*`` settings the agent's door read; else the caller's current one) is current
    while it plays and is scored.
    """
    with using_target(target_for(payload, agent_settings) or current_target()):
        return await _play_and_score(payload, environment, reward, settings, model_factory)


async def _play_and_score(
    payload: RolloutPayload,
    environment: Callable[[], Environment],
    reward: RewardFunction,
    settings: EpisodeSettings,
    model_factory: ModelFactory,
) -> EpisodeOutcome:
    """:func:`play_episode` under its auxiliary target."""
    started = time.monotonic()
    deadline = started + settings.budget_s
    task = payload.task()
    trajectory_id = payload.metadata.rollout_id if payload.metadata else None
    attempts = 0
    while True:
        attempts += 1
        env = environment()
        episode = Episode(task=task, prompt="", trajectory_id=trajectory_id)
        env._attach(episode)
        try:
            user_message = env.reset(task)
        except (KeyError, ValueError, TypeError) as exc:
            raise ContractError(
                f"the environment cannot play this task ({type(exc).__name__}: {exc})"
            ) from None
        except Exception as exc:  # noqa: BLE001 - a broken environment is data
            episode.failure = user_failure(
                "environment", f"reset raised {describe_exception(exc)}", exc
            )
            episode.stop_reason = "environment_error"
        else:
            if not isinstance(user_message, str) or not user_message:
                raise ContractError(
                    f"{type(env).__name__}.reset() must return the first user message "
                    "(a non-empty str)"
                )
            episode.prompt = user_message
            await _play_turns(payload, env, episode, settings, deadline, model_factory)
        retry = (
            episode.turns == 0
            and episode.failure is not None
            and attempts == 1
            and payload.metadata is not None
            and time.monotonic() < deadline
        )
        if not retry:
            break
        logger.warning(
            "rollout %s made no policy call (%s); retrying once with a fresh environment",
            trajectory_id,
            episode.failure.reason if episode.failure else "",
        )
    scored = await _score(env, episode, reward, settings)
    return EpisodeOutcome(
        episode=episode, reward=scored, attempts=attempts, metrics=_task_metrics(env)
    )


def _task_metrics(env: Environment) -> dict[str, float]:
    """The environment's own figures as finite floats (a bool as 0/1); none when its
    ``metrics()`` raises or returns no mapping (logged: a broken figure never costs the
    episode)."""
    try:
        found = env.metrics()
        items = list(found.items())
    except Exception as exc:  # noqa: BLE001 - the author's code; the episode is scored already
        logger.warning("%s.metrics() failed: %s", type(env).__name__, describe_exception(exc))
        return {}
    out: dict[str, float] = {}
    for name, value in items:
        if isinstance(value, int | float) and math.isfinite(value):
            out[str(name)] = float(value)
    return out


async def _score(
    env: Environment, episode: Episode, reward_fn: RewardFunction, settings: EpisodeSettings
) -> Reward:
    failure = episode.failure
    if failure is not None and failure.boundary != "limit":
        return Reward.floor_reward(settings.floor_reward, f"{failure.boundary}: {failure.reason}")
    unfinished = not env.done and episode.stop_reason.startswith("limit")
    if unfinished and not settings.score_unfinished:
        reason = failure.reason if failure else f"{episode.stop_reason} before the task finished"
        if failure is None:
            episode.failure = Failure("limit", reason)
        return Reward.floor_reward(settings.floor_reward, f"limit: {reason}")
    try:
        returned = reward_fn(env, episode)
        if inspect.isawaitable(returned):
            returned = await returned
        value = Reward.of(returned)
        if value.per_turn is not None and len(value.per_turn) != episode.turns:
            raise RewardError(
                f"per_turn has {len(value.per_turn)} values "
                f"but the episode has {episode.turns} turns"
            )
    except JudgeError as exc:  # the judge's model failed or answered nonsense
        episode.failure = Failure("judge", exc.message)
        return Reward.floor_reward(settings.floor_reward, f"judge: {exc.message}")
    except Exception as exc:  # noqa: BLE001 - a broken reward function must not kill the job
        episode.failure = user_failure("reward", describe_exception(exc), exc)
        return Reward.floor_reward(settings.floor_reward, f"reward: {episode.failure.reason}")
    return value
