"""The agent's side of one episode: Strands turns on the environment's tools.

:class:`AgentTurns` plays the turns of one attempt of :func:`agent_kit.episode_loop.play_episode`:
hooks record every policy call and tool call on the :class:`~agent_kit.episode.Episode` and
enforce the finish and the limits, tool calls written as text are recovered and executed, and an
environment's simulated user answers when the agent ends its turn.
:func:`~agent_kit.errors.describe_exception`, :func:`user_failure` and :func:`where_of` turn
what raised into the failure's reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import sysconfig
import time
import traceback
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any, Final, Literal

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

from agent_kit.environment import Environment, TextToolCall
from agent_kit.episode import Episode, Failure, FailureBoundary, ToolCallRecord, TurnRecord
from agent_kit.errors import describe_exception

__all__ = ["AgentTurns", "user_failure", "where_of"]


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


def user_failure(boundary: FailureBoundary, reason: str, exc: BaseException) -> Failure:
    """A failure raised by the user's code, its reason ending with where it was raised."""
    where = where_of(exc)
    return Failure(boundary, reason if where is None else f"{reason} (at {where})", where)


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


@dataclass(eq=False)
class AgentTurns:
    """The agent's turns of one attempt: a Strands agent on the environment's tools asks
    ``model`` until the environment finishes, a limit or the deadline is reached, or the
    agent ends its turn with nothing more to do (no text tool call to recover, no simulated
    user's answer). Fills ``episode``; failures are recorded on it, never raised."""

    env: Environment
    episode: Episode
    _: KW_ONLY
    system_prompt: str
    max_turns: int
    max_tool_calls: InitVar[int | None]
    recover_text_tool_calls: bool
    deadline: float
    recorder: _Recorder = field(init=False)

    def __post_init__(self, max_tool_calls: int | None) -> None:
        self.recorder = _Recorder(self.env, self.episode, max_tool_calls)

    def _fail(self, boundary: FailureBoundary, reason: str) -> None:
        if self.episode.failure is None:
            self.episode.failure = Failure(boundary, reason)

    async def run(self, model: Any, user_message: str) -> None:
        """Play the turns from ``user_message`` with the Strands ``model``."""
        agent = Agent(
            model=model,
            tools=self.env.tools(),
            system_prompt=self.system_prompt or None,
            callback_handler=None,
            conversation_manager=NullConversationManager(),
            hooks=[self.recorder],
        )
        await self._loop(agent, user_message)
        self.episode.messages = [dict(m) for m in agent.messages]

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
                self._fail("policy", describe_exception(exc))
                return
            finally:
                _fill_usage(agent, episode, first_turn)
            episode.stop_reason = str(result.stop_reason)
            episode.final_text = _message_text(result.message)
            if self.recorder.crash is not None:
                episode.stop_reason = "environment_error"
                self._fail("environment", describe_exception(self.recorder.crash))
                return
            if self.env.done:
                episode.stop_reason = "finished"
                return
            if self.recorder.tool_limit_hit:
                episode.stop_reason = "limit_tool_calls"
                return
            if episode.stop_reason != "end_turn" or not self.recover_text_tool_calls:
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
            self.episode.failure = user_failure("environment", describe_exception(exc), exc)
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
            self._fail("environment", f"parse_text_tool_calls raised {describe_exception(exc)}")
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
                self._fail("environment", describe_exception(exc))
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
