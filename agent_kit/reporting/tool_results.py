"""The last tool results of an episode, read from the agent's answer (not from any request).

The last tool result of an episode is in no later request (no policy call follows it). It is
taken from the agent's answer when the answer carries a tool log (``tool_log`` — a list of
``{turn, name, input, output, status}``, which ``RolloutApp`` answers with the last turn's
calls, bounded — or ``last_tool_result``, or chat/Strands ``messages``); otherwise (a foreign
agent that keeps none) :func:`last_tool_results` says so with None, and the views show
:data:`NOT_RECORDED`. The transcripts of the report, ``agent-kit invoke`` and the exported
spans all read it here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["NOT_RECORDED", "ToolResult", "content_text", "last_tool_results"]

#: The text shown where the last tool result is not in the store nor in the agent's answer.
NOT_RECORDED: Final = "last tool result: not recorded"


def content_text(content: Any) -> str:
    """The text of a chat message's ``content`` (a string, or a list of text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and "text" in part:
                parts.append(str(part["text"]))
            elif isinstance(part, dict) and isinstance(part.get("toolResult"), dict):
                parts.append(content_text(part["toolResult"].get("content")))
            elif isinstance(part, dict) and isinstance(part.get("json"), (dict, list)):
                parts.append(json.dumps(part["json"], ensure_ascii=False))
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


@dataclass(frozen=True)
class ToolResult:
    """A tool result taken from the agent's answer (not from any request)."""

    name: str
    output: str
    input: str = ""
    status: str = ""


def _tool_log_results(log: Sequence[Any], last_turn: int, pending: int) -> list[ToolResult]:
    entries = [e for e in log if isinstance(e, dict)]
    if any(isinstance(e.get("turn"), int) for e in entries):
        chosen = [e for e in entries if e.get("turn") == last_turn]
    else:
        chosen = entries[-pending:] if pending else []
    return [
        ToolResult(
            name=str(e.get("name", "?")),
            output=content_text(e.get("output", e.get("content", ""))),
            input=json.dumps(e.get("input", ""), ensure_ascii=False)
            if not isinstance(e.get("input"), str)
            else str(e.get("input")),
            status=str(e.get("status", "")),
        )
        for e in chosen
    ]


def _trailing_message_results(messages: Sequence[Any]) -> list[ToolResult]:
    """Tool results after the last assistant message of a chat or Strands message list."""
    tail: list[ToolResult] = []
    for message in reversed([m for m in messages if isinstance(m, dict)]):
        if message.get("role") == "assistant":
            break
        if message.get("role") == "tool":
            tail.append(ToolResult("tool", content_text(message.get("content"))))
            continue
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            result = block.get("toolResult") if isinstance(block, dict) else None
            if isinstance(result, dict):
                tail.append(
                    ToolResult(
                        str(result.get("toolUseId", "tool")),
                        content_text(result.get("content")),
                        status=str(result.get("status", "")),
                    )
                )
    return list(reversed(tail))


def last_tool_results(
    body: Mapping[str, Any] | None, last_turn: int, pending: int
) -> list[ToolResult] | None:
    """The results of the tool calls made in the last turn, from the agent's answer.

    ``pending``: tool calls in the last reply (their results are in no request). Returns None
    when the answer carries no tool log (not recorded), else the results found (maybe none).
    """
    if body is None:
        return None
    log = body.get("tool_log")
    if not isinstance(log, list) and isinstance(body.get("tool_calls"), list):
        log = body["tool_calls"]  # an answer that lists its calls with their outputs
    if isinstance(log, list):
        return _tool_log_results(log, last_turn, pending)
    last = body.get("last_tool_result")
    if isinstance(last, str):
        return [ToolResult("tool", last)]
    if isinstance(last, dict):
        return _tool_log_results([last], last_turn, 1) or [
            ToolResult(str(last.get("name", "tool")), content_text(last.get("output", "")))
        ]
    if isinstance(last, list):
        return _tool_log_results(last, last_turn, len(last))
    messages = body.get("messages")
    if isinstance(messages, list) and messages:
        return _trailing_message_results(messages)
    return None
