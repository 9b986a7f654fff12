"""Reading a model's reply back: its text split into content and tool calls, in the chat format's
tool-call syntax (:data:`~agent_kit.model.chat.Syntax`, learnt by
:func:`~agent_kit.model.chat.chat_format`).

- ``hermes``: ``<tool_call>{"name", "arguments"}</tool_call>`` blocks anywhere in the text (a
  block cut at the token cap still counts when its JSON is whole); a block that is not such JSON
  stays in the content as written;
- ``json``: a reply that is one JSON object ``{"name", "parameters"}`` (or ``"arguments"``),
  optionally after ``<|python_tag|>``, several separated by ``;`` (Llama 3.x); anything else is
  content.

Arguments given as a JSON string are decoded; a call whose arguments are not an object is not a
call. The calls are plain :class:`ParsedCall` records: the ``hf`` policy turns them into the
emulator's tool calls.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, NamedTuple

from agent_kit.model.chat import Syntax

__all__ = ["ParsedCall", "parse_tool_calls"]

_TOOL_CALL: Final = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_PYTHON_TAG: Final = "<|python_tag|>"


class ParsedCall(NamedTuple):
    """One tool call read from a reply: the tool's name and its JSON arguments."""

    name: str
    arguments: dict[str, Any]


def parse_tool_calls(
    text: str, syntax: Syntax = "hermes"
) -> tuple[str | None, tuple[ParsedCall, ...]]:
    """Split generated text into content (None when empty) and tool calls in ``syntax`` (see the
    module docstring)."""
    if syntax == "json":
        return _parse_json_calls(text)
    calls: list[ParsedCall] = []
    kept: list[str] = []
    last = 0
    for match in _TOOL_CALL.finditer(text):
        call = _tool_call(match.group(1))
        if call is None:
            continue
        kept.append(text[last : match.start()])
        last = match.end()
        calls.append(call)
    kept.append(text[last:])
    content = "".join(kept).strip()
    return (content or None), tuple(calls)


def _parse_json_calls(text: str) -> tuple[str | None, tuple[ParsedCall, ...]]:
    body = text.strip().removeprefix(_PYTHON_TAG).strip()
    calls = [_tool_call(part) for part in body.split(";") if part.strip()] if body else []
    if body.startswith("{") and calls and all(c is not None for c in calls):
        return None, tuple(c for c in calls if c is not None)
    stripped = text.strip()
    return (stripped or None), ()


def _tool_call(body: str) -> ParsedCall | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return None
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ParsedCall(data["name"], arguments)
