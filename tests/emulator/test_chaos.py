"""Chaos mode in the emulator: SPEC parsing, reproducible hits, and each fault as the agent sees
it over the HTTP routes (in process: httpx on the ASGI app, no sockets)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from test_emulator_server import CHAT, SIGV4, Harness, _harness, bearer

from agent_kit.emulator.chaos import (
    FAULTS,
    PRESETS,
    Chaos,
    as_text_tool_calls,
    parse_chaos,
    with_malformed_arguments,
)
from agent_kit.emulator.core import Emulator
from agent_kit.errors import UsageError
from agent_kit.store import RunStore
from agent_kit.store.events import CHAOS_EVENT

TOOLS_BODY = {
    "model": "default",
    "messages": [{"role": "user", "content": "play"}],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "guess",
                "description": "Guess.",
                "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
            },
        }
    ],
}


def test_parse_spec_presets_and_overrides() -> None:
    """Items, @SECONDS and presets parse; a later item overrides the preset's rate."""
    chaos = parse_chaos("service,policy_5xx=0.2,latency=0.5@0.25", seed=3)
    assert chaos.rates["policy_5xx"] == 0.2
    assert chaos.rates["report_throttle"] == 0.02  # from the preset
    assert chaos.delay("latency") == 0.25
    assert chaos.delay("timeout") == 30.0
    assert chaos.seed == 3
    heavy = parse_chaos("heavy")
    assert set(heavy.rates) == set(FAULTS)
    assert set(PRESETS) == {"service", "heavy"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("", "give FAULT=RATE items"),
        ("policy_500=0.1", "unknown item 'policy_500=0.1'"),
        ("policy_5xx", "unknown item"),
        ("policy_5xx=1.5", "in [0, 1]"),
        ("policy_5xx=lots", "is not a number"),
        ("policy_5xx=0.1@3", "only latency and timeout take @SECONDS"),
        ("latency=0.1@0", "SECONDS must be in (0, 600]"),
        ("latency=nan", "finite"),
    ],
)
def test_bad_specs_are_usage_errors(spec: str, expected: str) -> None:
    """Each bad SPEC names the item and what is wrong (the CLI prints it as one error line)."""
    with pytest.raises(UsageError, match=None) as info:
        parse_chaos(spec)
    assert expected in str(info.value)


def test_hits_are_reproducible_and_follow_the_rate() -> None:
    """The same seed hits the same calls; another seed others; the hit share is near the rate."""
    a, b = Chaos({"policy_5xx": 0.2}, seed=1), Chaos({"policy_5xx": 0.2}, seed=2)
    calls = [(f"t{i}", j) for i in range(200) for j in range(10)]
    hits_a = [c for c in calls if a.hits("policy_5xx", *c)]
    assert hits_a == [c for c in calls if Chaos({"policy_5xx": 0.2}, seed=1).hits("policy_5xx", *c)]
    assert hits_a != [c for c in calls if b.hits("policy_5xx", *c)]
    assert 0.17 < len(hits_a) / len(calls) < 0.23
    assert not Chaos({"policy_5xx": 0.0}).hits("policy_5xx", "t", 0)
    assert Chaos({"policy_5xx": 1.0}).hits("policy_5xx", "t", 0)


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    return {"id": "c", "choices": [{"index": 0, "message": message, "finish_reason": "x"}]}


def test_tool_call_rewrites() -> None:
    """Tool calls become JSON text (finish stop) or get cut arguments; text answers are left."""
    call = {"id": "1", "type": "function", "function": {"name": "guess", "arguments": '{"w": 1}'}}
    response = _completion({"role": "assistant", "content": None, "tool_calls": [call]})
    text = as_text_tool_calls(response)
    assert text is not None
    message = text["choices"][0]["message"]
    assert "tool_calls" not in message
    assert json.loads(message["content"]) == {"name": "guess", "arguments": {"w": 1}}
    assert text["choices"][0]["finish_reason"] == "stop"
    broken = with_malformed_arguments(response)
    assert broken is not None
    arguments = broken["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    with pytest.raises(ValueError, match=r"\w"):
        json.loads(arguments)
    plain = _completion({"role": "assistant", "content": "done"})
    assert as_text_tool_calls(plain) is None
    assert with_malformed_arguments(plain) is None


@pytest.fixture
def emulator_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Every test below sets its fault at rate 1 (``chaos_spec`` mark)."""
    mark = request.node.get_closest_marker("chaos_spec")
    return {"chaos": parse_chaos(mark.args[0]) if mark else None}


@pytest.fixture
async def h(emulator: Emulator) -> AsyncIterator[Harness]:
    """In-process harness (ASGI transport, default auth)."""
    async for harness in _harness(emulator):
        yield harness


def _events(h: Harness, tid: str) -> list[dict[str, Any]]:
    return [e.detail for e in h.emu.store.list_events(tid, CHAOS_EVENT)]


@pytest.mark.chaos_spec("policy_5xx=1")
async def test_policy_5xx(h: Harness) -> None:
    """500 InternalServiceError, no turn recorded, one chaos event."""
    tid = h.open()
    response = await h.chat(tid)
    assert response.status_code == 500
    assert response.headers["x-amzn-ErrorType"] == "InternalServiceError"
    assert h.emu.store.list_turns(tid) == []
    assert _events(h, tid) == [{"fault": "policy_5xx", "turn": 0}]


@pytest.mark.chaos_spec("policy_429=1")
async def test_policy_429(h: Harness) -> None:
    """429 ThrottlingException, no turn recorded."""
    tid = h.open()
    response = await h.chat(tid)
    assert response.status_code == 429
    assert response.headers["x-amzn-ErrorType"] == "ThrottlingException"
    assert h.emu.store.list_turns(tid) == []


@pytest.mark.chaos_spec("policy_403=1")
async def test_policy_403(h: Harness) -> None:
    """403 AccessDeniedException naming the expired signature."""
    tid = h.open()
    response = await h.chat(tid)
    assert response.status_code == 403
    assert "signature expired" in response.text


@pytest.mark.chaos_spec("policy_5xx=0.5")
async def test_retries_of_a_failed_call_are_new_draws(h: Harness) -> None:
    """A retried call is a new call index: at rate 0.5 an agent that retries gets through, and
    the recorded turns are only the successful calls."""
    tid = h.open()
    statuses = [(await h.chat(tid)).status_code for _ in range(40)]
    assert 200 in statuses
    assert 500 in statuses
    assert len(h.emu.store.list_turns(tid)) == statuses.count(200)
    assert len(_events(h, tid)) == statuses.count(500)


@pytest.mark.chaos_spec("text_tool_calls=1")
async def test_text_tool_calls(h: Harness) -> None:
    """The tool call arrives as JSON text; the stored turn is what the agent saw."""
    tid = h.open()
    response = await h.chat(tid, TOOLS_BODY)
    assert response.status_code == 200
    message = response.json()["choices"][0]["message"]
    assert "tool_calls" not in message
    assert json.loads(message["content"])["name"] == "guess"
    stored = h.emu.store.list_turns(tid)[0].response["choices"][0]["message"]
    assert stored == message
    assert _events(h, tid) == [{"fault": "text_tool_calls", "turn": 0}]


@pytest.mark.chaos_spec("text_tool_calls=1")
async def test_rewrite_faults_skip_text_answers(h: Harness) -> None:
    """A text answer has no tool call to rewrite: unchanged, and no chaos event."""
    tid = h.open()
    response = await h.chat(tid)  # CHAT already has a tool result: the policy answers in text
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "final answer"
    assert _events(h, tid) == []


@pytest.mark.chaos_spec("malformed_tool_calls=1")
async def test_malformed_tool_calls_stream(h: Harness) -> None:
    """Streamed too, the tool call's arguments do not parse."""
    tid = h.open()
    response = await h.chat(tid, {**TOOLS_BODY, "stream": True})
    assert response.status_code == 200
    deltas = [
        json.loads(line[len("data: ") :])["choices"][0]["delta"]
        for line in response.text.split("\n\n")
        if line.startswith("data: {") and '"choices":[{' in line
    ]
    arguments = "".join(
        c["function"].get("arguments", "") for d in deltas for c in d.get("tool_calls") or ()
    )
    with pytest.raises(ValueError, match=r"\w"):
        json.loads(arguments)


@pytest.mark.chaos_spec("truncated_sse=1")
async def test_truncated_stream_and_body(h: Harness) -> None:
    """A stream stops after one event with no [DONE]; a JSON body stops mid-way."""
    tid = h.open()
    streamed = await h.chat(tid, {**CHAT, "stream": True})
    assert streamed.status_code == 200
    assert "[DONE]" not in streamed.text
    assert streamed.text.count("data: ") == 1
    plain = await h.chat(tid)
    with pytest.raises(ValueError, match=r"\w"):
        json.loads(plain.text)
    assert len(h.emu.store.list_turns(tid)) == 2  # the policy answered; the wire cut it


@pytest.mark.chaos_spec("latency=1@0.05")
async def test_latency_delays_and_answers(h: Harness) -> None:
    """The answer comes (after the injected delay) and the event says so."""
    tid = h.open()
    response = await h.chat(tid)
    assert response.status_code == 200
    assert _events(h, tid) == [{"fault": "latency", "turn": 0}]


@pytest.mark.chaos_spec("timeout=1@0.05")
async def test_timeout_ends_in_a_500(h: Harness) -> None:
    """After hanging, the call fails with a 500 naming the timeout; no turn."""
    tid = h.open()
    response = await h.chat(tid)
    assert response.status_code == 500
    assert "did not answer" in response.text
    assert h.emu.store.list_turns(tid) == []


async def _report(h: Harness, path: str, body: dict[str, Any]) -> httpx.Response:
    return await h.client.post(
        path, json={"JobArn": h.job_arn, **body}, headers={"authorization": SIGV4}
    )


@pytest.mark.chaos_spec("report_throttle=0.5")
async def test_report_throttle_is_not_applied_and_a_retry_gets_through(h: Harness) -> None:
    """A throttled CompleteRollout changes nothing; retried, it completes."""
    tid = h.open()
    statuses = []
    for _ in range(20):
        response = await _report(h, "/complete-rollout", {"TrajectoryId": tid, "Status": "ready"})
        statuses.append(response.status_code)
        if response.status_code == 200:
            break
        assert h.emu.state(tid).value == "OPEN"  # type: ignore[union-attr]
    assert statuses[-1] == 200
    assert h.emu.state(tid).value == "READY"  # type: ignore[union-attr]
    assert len(_events(h, tid)) == statuses.count(429)


@pytest.mark.chaos_spec("report_lost=1")
async def test_report_lost_is_applied_and_the_retry_is_a_duplicate(h: Harness) -> None:
    """The reward is applied though the answer is a 500; the retry with the same ClientToken is
    the cached success (with the fault off, as rate 1 would hit it again)."""
    tid = h.open()
    done = await _report(h, "/complete-rollout", {"TrajectoryId": tid, "Status": "ready"})
    assert done.status_code == 500
    assert h.emu.state(tid).value == "READY"  # type: ignore[union-attr]
    body = {"TrajectoryId": tid, "Rewards": [1.0], "ClientToken": "tok-1"}
    lost = await _report(h, "/update-reward", body)
    assert lost.status_code == 500
    reward = h.emu.store.get_reward(tid)
    assert reward is not None
    assert reward.total == 1.0
    h.emu.chaos = None
    again = await _report(h, "/update-reward", body)
    assert again.status_code == 200
    assert h.emu.store.get_reward(tid) == reward
    assert [e["fault"] for e in _events(h, tid)] == ["report_lost", "report_lost"]


class _FirstCallCut(Chaos):
    """Truncates the first policy call of each trajectory only."""

    def policy_fault(self, trajectory_id: str, turn: int) -> str | None:
        return "truncated_sse" if turn == 0 else None


@pytest.mark.parametrize("cut_calls", [1, 5])
async def test_agent_kit_client_asks_again_after_a_cut_body(
    emulator: Emulator, run_store: RunStore, cut_calls: int
) -> None:
    """The runtime's OpenAI transport (agent_kit.transport.OpenAIChat) asks again when a 200's body
    does not parse: one cut body is absorbed; when every answer is cut it gives up with a
    PolicyError naming the garbage (after its 2 extra tries)."""
    from agent_kit.emulator.server import create_app
    from agent_kit.errors import PolicyError
    from agent_kit.transport import OpenAIChat

    emulator.chaos = _FirstCallCut({}) if cut_calls == 1 else parse_chaos("truncated_sse=1")
    assert emulator.default_job_arn is not None
    tid = emulator.open_trajectory(emulator.default_job_arn, '{"prompt": "p"}').id
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(emulator)))
    client = openai.AsyncOpenAI(
        api_key=bearer().removeprefix("Bearer "),
        base_url="http://emu.test/v1",
        http_client=http,
        max_retries=0,
        default_headers={
            "x-amzn-sagemaker-job-arn": emulator.default_job_arn,
            "x-amzn-sagemaker-trajectory-id": tid,
        },
    )
    chat = OpenAIChat(client, "emu")
    try:
        if cut_calls == 1:
            answer = await chat.create(**CHAT)
            assert answer.choices[0].message.content == "final answer"
            assert len(run_store.list_turns(tid)) == 2  # the cut one and the retry
        else:
            with pytest.raises(PolicyError, match="garbage"):
                await chat.create(**CHAT)
            assert len(run_store.list_turns(tid)) == 3
    finally:
        await client.close()
