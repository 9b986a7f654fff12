"""Transcripts of agents that recover tool calls from text: the recovered call is shown, marked
as inferred from the agent's next request (what a foreign agent never reports itself)."""

from __future__ import annotations

import json
from typing import Any

from agent_kit.reporting.transcripts import _turns_html
from agent_kit.store import TurnRow


def _turn(idx: int, messages: list[dict[str, Any]], reply: dict[str, Any]) -> TurnRow:
    return TurnRow(
        trajectory_id="t",
        idx=idx,
        route="/v1/chat/completions",
        request={"messages": messages},
        response={"choices": [{"index": 0, "message": reply, "finish_reason": "stop"}]},
        prompt_tokens=10,
        completion_tokens=5,
        usage_estimated=True,
        latency_ms=1.0,
    )


def test_text_written_tool_call_recovered_by_the_agent_is_marked_inferred() -> None:
    """Reply 0 writes the call as text; request 1 echoes it as a real tool call plus its result:
    the page shows the recovered call (name and arguments) marked inferred, then the result."""
    user = {"role": "user", "content": "play"}
    text_reply = {"role": "assistant", "content": json.dumps({"name": "guess", "arguments": {}})}
    call = {"id": "c1", "type": "function", "function": {"name": "guess", "arguments": '{"w":1}'}}
    echo = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "wrong"}
    page = _turns_html(
        [
            _turn(0, [user], text_reply),
            _turn(1, [user, echo, result], {"role": "assistant", "content": "done"}),
        ],
        None,
    )
    assert "recovered from the reply's text (inferred from its next request)" in page
    marker = page.index("inferred from its next request")
    assert "→ guess({&quot;w&quot;:1})" in page[marker:]
    assert page.index("wrong") > marker


def test_a_real_tool_call_echo_is_not_marked() -> None:
    """When the reply already had the tool call, its echo is skipped and nothing is inferred."""
    user = {"role": "user", "content": "play"}
    call = {"id": "c1", "type": "function", "function": {"name": "guess", "arguments": "{}"}}
    reply = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "wrong"}
    page = _turns_html(
        [
            _turn(0, [user], reply),
            _turn(1, [user, reply, result], {"role": "assistant", "content": "done"}),
        ],
        None,
    )
    assert "inferred" not in page
