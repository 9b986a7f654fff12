"""Wire and policy shapes specific to the emulator.

The policy-facing types here are public (re-exported by :mod:`agent_kit.emulator`): a scripted
policy (``scripted:path/to/file.py:NAME``) is any callable that takes a :class:`PolicyRequest`
and returns a :class:`PolicyReply` (or a ``str`` for a plain text answer, or a dict
``{"content": ..., "tool_calls": [{"name": ..., "arguments": {...}}]}``).

A scripted policy must be a pure function of the request (history, tools, sampling parameters
and the seeded ``rng``): the emulator seeds ``rng`` from (policy seed, trajectory id, turn), so a
run is reproducible, and temperature can change behaviour (so a group has reward variance).

The wire bodies the emulator's server validates are pydantic models here too:
:class:`ChatCompletionBody` (what every turn route accepts: an OpenAI chat-completions request;
unknown fields are kept, known ones are type-checked strictly) and :class:`MintRolloutBody`
(``POST /_emulator/rollouts``). :func:`parse_body` validates a parsed JSON value against one of
them and turns the first problem into a :class:`BodyError` (a 400 ValidationException that
also names the offending ``param`` the way OpenAI's errors do, e.g. ``messages[2].role``).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    with_config,
)
from pydantic import ValidationError as PydanticValidationError
from typing_extensions import NotRequired, TypedDict

from agent_kit.contract import InferenceParams
from agent_kit.errors import BodyError

__all__ = [
    "CHAT_ROLES",
    "ChatCompletionBody",
    "ChatMessage",
    "MintRolloutBody",
    "PolicyReply",
    "PolicyRequest",
    "ToolCall",
    "coerce_reply",
    "parse_body",
]

#: The chat roles an OpenAI-compatible endpoint accepts; any other role is a 400.
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
ChatRole = Literal["system", "developer", "user", "assistant", "tool", "function"]


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


# -- wire bodies the server validates ------------------------------------------------------------


def _param(loc: tuple[int | str, ...]) -> str | None:
    """A pydantic location as OpenAI names a parameter: ``("messages", 2, "role")`` →
    ``messages[2].role``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or None


_Body = TypeVar("_Body", bound=BaseModel)


def parse_body(model: type[_Body], value: Any) -> _Body:
    """``value`` (parsed JSON) as ``model``; the first problem is a :class:`BodyError`."""
    if not isinstance(value, dict):
        raise BodyError("Request body must be a JSON object")
    try:
        return model.model_validate(value)
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first.get("loc", ()))
        param = _param(loc)
        message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        raise BodyError(f"{param or 'body'}: {message}", param) from None


def _json_number(value: Any) -> Any:
    """Only a JSON number is a number (not a boolean, not a numeric string)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("Input should be a number")
    return value


_Number = Annotated[float, BeforeValidator(_json_number)]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)


def _content(value: Any) -> Any:
    if value is None or isinstance(value, str | list):
        return value
    raise ValueError("message content must be a string, a list of parts or null")


@with_config(ConfigDict(extra="allow"))
class ChatMessage(TypedDict):
    """One chat message: a known ``role``, string / list-of-parts / null ``content``; other
    keys kept. A typed dict, not a model: a long history is validated without building an
    object per message."""

    role: ChatRole
    content: NotRequired[Annotated[Any, AfterValidator(_content)]]
    tool_calls: NotRequired[list[dict[str, Any]] | None]


class ChatCompletionBody(_Wire):
    """An OpenAI chat-completions request as the turn routes accept it (extra fields kept).

    ``temperature`` 0–2, ``top_p`` 0–1, ``max_tokens`` (or ``max_completion_tokens``) > 0,
    ``model`` a string when given, ``stream`` a boolean; numbers are never booleans.
    """

    messages: list[ChatMessage] = Field(min_length=1)
    model: StrictStr | None = None
    tools: list[dict[str, Any]] | None = None
    temperature: _Number | None = Field(default=None, ge=0.0, le=2.0)
    top_p: _Number | None = Field(default=None, ge=0.0, le=1.0)
    max_tokens: StrictInt | None = Field(
        default=None, gt=0, validation_alias=AliasChoices("max_tokens", "max_completion_tokens")
    )
    stream: StrictBool = False
    stream_options: Any = None

    @property
    def include_usage(self) -> bool:
        """True when the caller asked for the final usage chunk of a stream."""
        options = self.stream_options
        return isinstance(options, dict) and options.get("include_usage") is True


class MintRolloutBody(_Wire):
    """``POST /_emulator/rollouts``: every field optional (defaults: the emulator's job, an
    empty prompt, the service's inference parameters, a fresh trajectory id)."""

    job_arn: StrictStr | None = Field(
        default=None, validation_alias=AliasChoices("jobArn", "job_arn")
    )
    prompt: Any = ""
    inference_params: InferenceParams | None = Field(
        default=None, validation_alias=AliasChoices("inferenceParams", "inference_params")
    )
    rollout_id: StrictStr | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        validation_alias=AliasChoices("rolloutId", "trajectoryId"),
    )

    @property
    def prompt_text(self) -> str:
        """The prompt as the agent receives it: a string, or the JSON of any other value."""
        return self.prompt if isinstance(self.prompt, str) else json.dumps(self.prompt)
