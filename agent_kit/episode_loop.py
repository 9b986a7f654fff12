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

A rollout that made no policy call at all is retried once (fresh environment and conversation)
while the wall-clock budget lasts: the service fails a job whose rollout never sampled.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import sysconfig
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from pydantic import ValidationError as PydanticValidationError
from strands import Agent
from strands.agent.conversation_manager import NullConversationManager
from strands.hooks import (
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    HookProvider,
    HookRegistry,
)

from agent_kit.auxiliary import current_target, target_for, using_target
from agent_kit.contract import RolloutPayload
from agent_kit.environment import Environment, TextToolCall
from agent_kit.episode import Episode, Failure, FailureBoundary, ToolCallRecord, TurnRecord
from agent_kit.errors import AgentKitError, ContractError, JudgeError, RewardError
from agent_kit.reward import Reward

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


class _Recorder(HookProvider):
    """Strands hooks that fill the Episode record and enforce finish/limits."""

    def __init__(self, env: Environment, episode: Episode, max_tool_calls: int | None) -> None:
        self.env = env
        self.episode = episode
        self.max_tool_calls = max_tool_calls
        self.crash: BaseException | None = None
        self.tool_limit_hit = False
        self._model_started = 0.0

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeModelCallEvent, self._before_model)
        registry.add_callback(AfterModelCallEvent, self._after_model)
        registry.add_callback(BeforeToolCallEvent, self._before_tool)
        registry.add_callback(AfterToolCallEvent, self._after_tool)

    def _before_model(self, event: BeforeModelCallEvent) -> None:
        self._model_started = time.perf_counter()

    def _after_model(self, event: AfterModelCallEvent) -> None:
        response = event.stop_response
        if response is None:
            return  # the call failed; the exception surfaces from invoke_async
        text_parts: list[str] = []
        calls: list[str] = []
        for block in response.message.get("content", []):
            if "text" in block:
                text_parts.append(str(block["text"]))
            elif "toolUse" in block:
                calls.append(str(block["toolUse"].get("name", "")))
        self.episode.turn_log.append(
            TurnRecord(
                index=self.episode.turns,
                latency_ms=(time.perf_counter() - self._model_started) * 1000.0,
                stop_reason=str(response.stop_reason),
                text="".join(text_parts),
                tool_calls=calls,
            )
        )

    def _before_tool(self, event: BeforeToolCallEvent) -> None:
        if self.env.done or self.crash is not None:
            event.cancel_tool = "The episode is over; no more tool calls are executed."
            return
        if self.max_tool_calls is not None and len(self.episode.tool_calls) >= self.max_tool_calls:
            self.tool_limit_hit = True
            event.cancel_tool = f"Tool call limit ({self.max_tool_calls}) reached."
            event.agent.cancel(after_current_tools=True)

    def _after_tool(self, event: AfterToolCallEvent) -> None:
        if event.cancel_message is not None:
            return
        exc = event.exception
        tool_use = event.tool_use
        result = event.result or {}
        text = _result_text(result)
        status: Literal["success", "error"] = (
            "error" if result.get("status") == "error" else "success"
        )
        self.episode.tool_calls.append(
            ToolCallRecord(
                turn=max(0, self.episode.turns - 1),
                name=str(tool_use.get("name", "")),
                input=dict(tool_use.get("input") or {}),
                output=text,
                status=status,
            )
        )
        if exc is not None and not _is_bad_call(exc, event.selected_tool):
            self.crash = exc
            event.agent.cancel(after_current_tools=True)
        elif self.env.done:
            event.agent.cancel(after_current_tools=True)


def _is_bad_call(exc: BaseException, selected_tool: object) -> bool:
    """True when a tool error is the policy's fault (unknown tool, arguments failing validation)."""
    return (
        selected_tool is None
        or isinstance(exc, PydanticValidationError)
        or isinstance(exc.__cause__, PydanticValidationError)
    )


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for block in result.get("content", []) if isinstance(result, dict) else []:
        if "text" in block:
            parts.append(str(block["text"]))
        elif "json" in block:
            import json

            parts.append(json.dumps(block["json"], ensure_ascii=False))
    return "\n".join(parts)


_OWN_DIR: Final = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARY_DIRS: Final = tuple(
    {
        os.path.abspath(p) + os.sep
        for p in (sysconfig.get_paths().get(k) for k in ("stdlib", "purelib", "platlib"))
        if p
    }
)
_WHERE_FRAMES: Final = 3
_WHERE_MAX: Final = 300


def where_of(exc: BaseException) -> str | None:
    """The last frames of ``exc``'s traceback in the user's code (not agent_kit, not an
    installed library) as ``file.py:LINE in function``, innermost last, ``→``-joined and
    bounded; None when no frame is the user's. Only file names, lines and function names."""
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not (path := os.path.abspath(f.filename)).startswith(_OWN_DIR)
        and not path.startswith(_LIBRARY_DIRS)
        and not f.filename.startswith("<")
    ]
    if not frames:
        return None
    shown = [f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" for f in frames]
    text = " → ".join(shown[-_WHERE_FRAMES:])
    return text if len(text) <= _WHERE_MAX else "…" + text[-(_WHERE_MAX - 1) :]


def _user_failure(boundary: FailureBoundary, reason: str, exc: BaseException) -> Failure:
    """A failure raised by the user's code, its reason ending with where it was raised."""
    where = where_of(exc)
    return Failure(boundary, reason if where is None else f"{reason} (at {where})", where)


def _describe(exc: BaseException) -> str:
    """A readable reason; an AgentKitError wrapped by Strands (EventLoopException) is unwrapped."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, AgentKitError):
            return current.message
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return f"{type(exc).__name__}: {str(exc) or repr(exc)}"


async def _call_recovered(env: Environment, call: TextToolCall) -> tuple[str, str]:
    """Execute a tool call recovered from text; return (status, output text)."""
    tools = {getattr(t, "tool_name", ""): t for t in env.tools()}
    target = tools.get(call.name)
    if target is None:
        return "error", f"Error: unknown tool {call.name!r}"
    try:
        value = target(**call.arguments)
        if asyncio.iscoroutine(value):
            value = await value
    except TypeError as exc:
        return "error", f"Error: {exc}"
    if isinstance(value, dict) and "content" in value:
        return str(value.get("status", "success")), _result_text(value)
    return "success", str(value)


class _Play:
    """One attempt: a fresh environment and conversation against the policy."""

    def __init__(
        self,
        payload: RolloutPayload,
        env: Environment,
        episode: Episode,
        settings: EpisodeSettings,
        deadline: float,
    ) -> None:
        self.payload = payload
        self.env = env
        self.episode = episode
        self.settings = settings
        self.deadline = deadline
        max_calls = (
            env.max_tool_calls if env.max_tool_calls is not None else settings.max_tool_calls
        )
        self.recorder = _Recorder(env, episode, max_calls)
        self.max_turns = env.max_turns if env.max_turns is not None else settings.max_turns

    def _fail(self, boundary: FailureBoundary, reason: str) -> None:
        if self.episode.failure is None:
            self.episode.failure = Failure(boundary, reason)

    async def run(self, model_factory: ModelFactory, user_message: str) -> None:
        try:
            handle = await model_factory(self.payload)
        except Exception as exc:  # noqa: BLE001 - e.g. no policy configured: data, not a 500
            self.episode.stop_reason = "policy_error"
            self._fail("policy", _describe(exc))
            return
        try:
            agent = Agent(
                model=handle.model,
                tools=self.env.tools(),
                system_prompt=self.settings.system_prompt or None,
                callback_handler=None,
                conversation_manager=NullConversationManager(),
                hooks=[self.recorder],
            )
            await self._loop(agent, user_message)
            self.episode.messages = [dict(m) for m in agent.messages]
        finally:
            await handle.aclose()

    async def _loop(self, agent: Agent, prompt: str) -> None:
        episode = self.episode
        while True:
            remaining = self.max_turns - episode.turns
            if remaining <= 0:
                episode.stop_reason = "limit_turns"
                return
            budget = self.deadline - time.monotonic()
            if budget <= 0:
                episode.stop_reason = "limit_budget"
                self._fail("limit", "the episode's wall-clock budget ran out")
                return
            first_turn = episode.turns
            try:
                result = await asyncio.wait_for(
                    agent.invoke_async(prompt, limits={"turns": remaining}), timeout=budget
                )
            except asyncio.TimeoutError:
                episode.stop_reason = "limit_budget"
                self._fail("limit", f"the episode's wall-clock budget ({budget:.0f} s) ran out")
                return
            except Exception as exc:  # noqa: BLE001 - any failure of the policy call is data
                episode.stop_reason = "policy_error"
                self._fail("policy", _describe(exc))
                return
            finally:
                _fill_usage(agent, episode, first_turn)
            episode.stop_reason = str(result.stop_reason)
            episode.final_text = _message_text(result.message)
            if self.recorder.crash is not None:
                episode.stop_reason = "environment_error"
                self._fail("environment", _describe(self.recorder.crash))
                return
            if self.env.done:
                episode.stop_reason = "finished"
                return
            if self.recorder.tool_limit_hit:
                episode.stop_reason = "limit_tool_calls"
                return
            if episode.stop_reason != "end_turn" or not self.settings.recover_text_tool_calls:
                return
            follow_up = await self._recover(episode.final_text)
            if follow_up is None and episode.failure is None:
                follow_up = await self._next_user(episode.final_text)
            if follow_up is None:
                return
            if self.env.done:
                episode.stop_reason = "finished"
                return
            prompt = follow_up

    async def _next_user(self, text: str) -> str | None:
        """The environment's next user message (a simulated user), or None to end."""
        try:
            message = await self.env.next_user_message(text)
        except Exception as exc:  # noqa: BLE001 - a failing user is an environment failure
            self.episode.failure = _user_failure("environment", _describe(exc), exc)
            self.episode.stop_reason = "environment_error"
            return None
        if message is not None and not isinstance(message, str):
            self._fail("environment", "next_user_message must return a str or None")
            self.episode.stop_reason = "environment_error"
            return None
        return message or None

    async def _recover(self, text: str) -> str | None:
        try:
            calls = list(self.env.parse_text_tool_calls(text))
        except Exception as exc:  # noqa: BLE001 - a broken parser is an environment failure
            self._fail("environment", f"parse_text_tool_calls raised {_describe(exc)}")
            return None
        if not calls:
            return None
        outputs: list[str] = []
        for call in calls:
            if self.env.done:
                break
            try:
                status, output = await _call_recovered(self.env, call)
            except Exception as exc:  # noqa: BLE001 - the tool itself raised
                self._fail("environment", _describe(exc))
                self.episode.stop_reason = "environment_error"
                return None
            self.episode.tool_calls.append(
                ToolCallRecord(
                    turn=max(0, self.episode.turns - 1),
                    name=call.name,
                    input=dict(call.arguments),
                    output=output,
                    status="error" if status == "error" else "success",
                    recovered=True,
                )
            )
            outputs.append(f"[{call.name}] {output}")
        return "Result of the tool call written in your message:\n" + "\n".join(outputs)


def _fill_usage(agent: Agent, episode: Episode, first_turn: int) -> None:
    """Copy per-call token usage from Strands' cycle metrics onto this invocation's turns."""
    invocation = agent.event_loop_metrics.latest_agent_invocation
    if invocation is None:
        return
    turns = episode.turn_log[first_turn:]
    for turn, cycle in zip(turns, invocation.cycles, strict=False):
        turn.input_tokens = int(cycle.usage.get("inputTokens", 0))
        turn.output_tokens = int(cycle.usage.get("outputTokens", 0))


def _message_text(message: Any) -> str:
    parts = [str(b["text"]) for b in (message or {}).get("content", []) if "text" in b]
    return "".join(parts)


async def play_episode(
    payload: RolloutPayload,
    *,
    environment: Callable[[], Environment],
    reward: RewardFunction,
    settings: EpisodeSettings,
    model_factory: ModelFactory,
) -> EpisodeOutcome:
    """Play one episode and score it. Never raises except :class:`ContractError` (bad task).

    The caller reports the returned reward; see :mod:`agent_kit.app`. The episode's auxiliary
    target (:func:`agent_kit.auxiliary.target_for` the payload, else the caller's current one)
    is current while it plays and is scored.
    """
    with using_target(target_for(payload) or current_target()):
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
            episode.failure = _user_failure("environment", f"reset raised {_describe(exc)}", exc)
            episode.stop_reason = "environment_error"
        else:
            if not isinstance(user_message, str) or not user_message:
                raise ContractError(
                    f"{type(env).__name__}.reset() must return the first user message "
                    "(a non-empty str)"
                )
            episode.prompt = user_message
            await _Play(payload, env, episode, settings, deadline).run(model_factory, user_message)
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
    return EpisodeOutcome(
        episode=episode, reward=await _score(env, episode, reward, settings), attempts=attempts
    )


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
        episode.failure = _user_failure("reward", _describe(exc), exc)
        return Reward.floor_reward(settings.floor_reward, f"reward: {episode.failure.reason}")
    return value
