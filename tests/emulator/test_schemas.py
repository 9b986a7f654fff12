"""Emulator schemas: the shapes a scripted policy may return, and the wire bodies the server
validates (chat completions, minting a rollout)."""

from __future__ import annotations

import pytest

from agent_kit.emulator import PolicyReply, ToolCall, coerce_reply
from agent_kit.emulator.schemas import (
    CHAT_ROLES,
    ChatCompletionBody,
    MintRolloutBody,
    parse_body,
)
from agent_kit.errors import BodyError


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


# -- the wire bodies the server validates ------------------------------------------------------


def test_chat_body_keeps_unknown_fields_and_reads_aliases() -> None:
    """Unknown fields pass through; max_completion_tokens is max_tokens; include_usage is read."""
    body = ChatCompletionBody.model_validate(
        {
            "model": "default",
            "messages": [{"role": "user", "content": "hi", "name": "u"}],
            "max_completion_tokens": 5,
            "reasoning_effort": "low",
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    assert body.max_tokens == 5
    assert body.include_usage is True
    assert body.model_extra == {"reasoning_effort": "low"}
    assert body.messages == [{"role": "user", "content": "hi", "name": "u"}]
    assert set(CHAT_ROLES) == {"system", "developer", "user", "assistant", "tool", "function"}


@pytest.mark.parametrize(
    ("value", "param"),
    [
        ([], None),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "robot"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
        ({"messages": [{"role": "user"}], "model": 1}, "model"),
        ({"messages": [{"role": "user"}], "temperature": True}, "temperature"),
        ({"messages": [{"role": "user"}], "top_p": 1.5}, "top_p"),
        ({"messages": [{"role": "user"}], "max_tokens": 0}, "max_tokens"),
        ({"messages": [{"role": "user"}], "tools": [1]}, "tools[0]"),
    ],
)
def test_parse_body_names_the_first_bad_param(value: object, param: str | None) -> None:
    """parse_body raises a 400 BodyError whose param is OpenAI-style and whose message names it."""
    with pytest.raises(BodyError) as info:
        parse_body(ChatCompletionBody, value)
    assert info.value.status == 400
    assert info.value.param == param
    assert info.value.message.startswith(f"{param}:" if param else "Request body must be")


def test_mint_body_defaults_and_prompt_text() -> None:
    """Every mint field is optional; a non-string prompt reaches the agent as its JSON."""
    empty = parse_body(MintRolloutBody, {})
    assert (empty.job_arn, empty.rollout_id, empty.inference_params) == (None, None, None)
    assert empty.prompt_text == ""
    given = parse_body(MintRolloutBody, {"prompt": {"a": 1}, "trajectoryId": "t-1"})
    assert given.prompt_text == '{"a": 1}'
    assert given.rollout_id == "t-1"
    with pytest.raises(BodyError, match="rolloutId"):
        parse_body(MintRolloutBody, {"rolloutId": ""})
