"""Wire and policy shapes specific to the emulator.

The policy-facing types here are public (re-exported by :mod:`agent_kit.emulator`): a scripted
policy (``scripted:path/to/file.py:NAME``) is any callable that takes a :class:`PolicyRequest`
and returns a :class:`PolicyReply` (or a ``str`` for a plain text answer, or a dict
``{"content": ..., "tool_calls": [{"name": ..., "arguments": {...}}]}``).

A scripted policy must be a pure function of the request (history, tools, sampling parameters
and the seeded ``rng``): the emulator seeds ``rng`` from (policy seed, trajectory id, turn), so a
run is reproducible, and temperature can change behaviour (so a group has reward variance).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PolicyReply", "PolicyRequest", "ToolCall", "coerce_reply"]


@dataclass(frozen=True)
class ToolCall:
    """One tool call the policy makes: a tool name and JSON arguments."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        """The arguments as the JSON string OpenAI's wire format carries."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, separators=(",", ":"))


@dataclass(frozen=True)
class PolicyReply:
    """The assistant message a policy produces for one turn: text and/or tool calls."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None

    @property
    def finish_reason(self) -> str:
        """``tool_calls`` when the reply calls tools, else ``stop``."""
        return "tool_calls" if self.tool_calls else "stop"


@dataclass(frozen=True)
class PolicyRequest:
    """What a policy sees for one turn.

    ``messages`` are OpenAI chat messages with ``content`` flattened to a string (list-of-parts
    content is joined; a missing content becomes ``""``); ``tools`` are OpenAI function-tool
    definitions as sent (``{"type": "function", "function": {"name", "description",
    "parameters"}}``); ``raw`` is the untouched request body.
    """

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    temperature: float
    top_p: float
    max_tokens: int | None
    rng: random.Random
    trajectory_id: str
    job_arn: str
    turn: int
    raw: dict[str, Any]
    #: Trajectory attributes the store holds (e.g. ``replay_of`` for replays); may be empty.
    context: dict[str, Any] = field(default_factory=dict)

    def tool_names(self) -> list[str]:
        """Names of the tools offered this turn."""
        return [str(t.get("function", {}).get("name", "")) for t in self.tools]

    def tool_results(self) -> list[str]:
        """Contents of the ``tool`` messages so far, oldest first."""
        return [str(m.get("content", "")) for m in self.messages if m.get("role") == "tool"]


def _coerce_call(raw: object) -> ToolCall:
    if isinstance(raw, ToolCall):
        return raw
    if isinstance(raw, dict):
        # OpenAI's shape: {"id", "type": "function", "function": {"name", "arguments"}}
        function = raw.get("function")
        spec: dict[str, Any] = function if isinstance(function, dict) else raw
        name = spec.get("name")
        arguments = spec.get("arguments") or {}
        if isinstance(name, str) and name and isinstance(arguments, dict | str):
            call_id = raw.get("id")
            return ToolCall(name, arguments, call_id if isinstance(call_id, str) else None)
    raise TypeError(
        "a tool call must be a ToolCall, {'name', 'arguments'} or OpenAI's "
        f"{{'function': {{'name', 'arguments'}}}}, not {raw!r}"
    )


def coerce_reply(value: object) -> PolicyReply:
    """Turn what a scripted policy returned (PolicyReply, str or dict) into a PolicyReply.

    Raises ``TypeError`` with the reason when the value has another shape.
    """
    if isinstance(value, PolicyReply):
        return value
    if isinstance(value, str):
        return PolicyReply(content=value)
    if isinstance(value, dict):
        calls = tuple(_coerce_call(raw) for raw in value.get("tool_calls") or ())
        content = value.get("content")
        if content is not None and not isinstance(content, str):
            raise TypeError("reply content must be a string or None")
        reasoning = value.get("reasoning")
        if reasoning is not None and not isinstance(reasoning, str):
            raise TypeError("reply reasoning must be a string or None")
        return PolicyReply(content=content, tool_calls=calls, reasoning=reasoning)
    raise TypeError(f"a policy must return PolicyReply, str or dict, not {type(value).__name__}")
