"""Scripted-policy reply coercion: the shapes a policy may return."""

from __future__ import annotations

import pytest

from agent_kit.emulator import PolicyReply, ToolCall, coerce_reply


def test_strings_and_replies_pass_through() -> None:
    """A string is a text answer; a PolicyReply is returned as is."""
    assert coerce_reply("hi") == PolicyReply(content="hi")
    reply = PolicyReply(tool_calls=(ToolCall("add", {"n": 1}),))
    assert coerce_reply(reply) is reply
    assert reply.finish_reason == "tool_calls"
    assert PolicyReply("x").finish_reason == "stop"


def test_dicts_accept_plain_and_openai_tool_call_shapes() -> None:
    """Tool calls may be {'name','arguments'} or OpenAI's {'function': {...}} with an id."""
    reply = coerce_reply(
        {
            "content": None,
            "tool_calls": [
                {"name": "add", "arguments": {"n": 1}},
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "sub", "arguments": '{"n": 2}'},
                },
            ],
        }
    )
    assert reply.tool_calls[0] == ToolCall("add", {"n": 1})
    assert reply.tool_calls[1] == ToolCall("sub", '{"n": 2}', "call_9")
    assert reply.tool_calls[1].arguments_json() == '{"n": 2}'
    assert reply.tool_calls[0].arguments_json() == '{"n":1}'


@pytest.mark.parametrize(
    "bad",
    [
        42,
        {"content": 3},
        {"reasoning": ["x"]},
        {"tool_calls": [{"arguments": {}}]},
        {"tool_calls": [{"name": "x", "arguments": 5}]},
        {"tool_calls": ["add"]},
    ],
)
def test_other_shapes_raise_type_errors(bad: object) -> None:
    """Anything else is a TypeError naming what was wrong."""
    with pytest.raises(TypeError):
        coerce_reply(bad)
