"""The emulator's ASGI app in-process (httpx ASGITransport), its core, and the ``emulate`` CLI."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.eventstream import EventStreamBuffer
from conftest import CannedPolicy, CannedResult
from typer.testing import CliRunner

from agent_kit.cli import app as cli_app
from agent_kit.contract import TrajectoryState
from agent_kit.emulator.core import Emulator
from agent_kit.emulator.gate import RequestGate
from agent_kit.emulator.server import create_app
from agent_kit.errors import AccessDeniedError, ThrottlingError, UsageError
from agent_kit.store import RunStore

SIGV4 = (
    "AWS4-HMAC-SHA256 Credential=AKIDTEST/20261202/us-west-2/sagemaker/aws4_request, "
    "SignedHeaders=host;x-amz-date, Signature=abc"
)


def bearer(access_key: str = "AKIDTEST") -> str:
    """A token shaped like sagemaker.core.token_generator's (base64 of a presigned URL)."""
    url = (
        "sagemaker.amazonaws.com/?Action=CallWithBearerToken&X-Amz-Algorithm=AWS4-HMAC-SHA256"
        f"&X-Amz-Credential={access_key}%2F20261202%2Fus-west-2%2Fsagemaker%2Faws4_request"
        "&X-Amz-Signature=abc&Version=1"
    )
    return "Bearer sagemaker-api-key-" + base64.b64encode(url.encode()).decode()


CHAT = {
    "model": "default",
    "messages": [
        {"role": "system", "content": "You play."},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "guess", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "wrong"},
    ],
}


class Harness:
    """An Emulator plus an httpx client on its ASGI app (no sockets)."""

    def __init__(self, emu: Emulator, client: httpx.AsyncClient) -> None:
        self.emu = emu
        self.client = client
        assert emu.default_job_arn is not None
        self.job_arn = emu.default_job_arn

    def open(self) -> str:
        """A fresh OPEN trajectory id in the default job."""
        return self.emu.open_trajectory(self.job_arn, '{"prompt": "p"}').id

    def headers(self, tid: str, auth: str = SIGV4) -> dict[str, str]:
        """Auth + job + trajectory headers."""
        return {
            "authorization": auth,
            "x-amzn-sagemaker-job-arn": self.job_arn,
            "x-amzn-sagemaker-trajectory-id": tid,
        }

    async def chat(self, tid: str, body: Any = None, **kw: Any) -> httpx.Response:
        """POST /v1/chat/completions."""
        return await self.client.post(
            "/v1/chat/completions",
            content=json.dumps(CHAT if body is None else body),
            headers=self.headers(tid, **kw),
        )


async def _harness(emu: Emulator, **app_kw: Any) -> AsyncIterator[Harness]:
    transport = httpx.ASGITransport(app=create_app(emu, **app_kw))
    async with httpx.AsyncClient(transport=transport, base_url="http://emu.test") as client:
        yield Harness(emu, client)


@pytest.fixture
async def h(emulator: Emulator) -> AsyncIterator[Harness]:
    """In-process harness with default auth."""
    async for harness in _harness(emulator):
        yield harness


def assert_error(response: httpx.Response, status: int, name: str, match: str = "") -> None:
    """The route's error shape: status, x-amzn-ErrorType, and the body ``{"Message": ...}``
    (the contract's) or, on /v1/chat/completions, OpenAI's ``{"error": {...}}`` with code=name."""
    assert response.status_code == status, response.text
    assert response.headers["x-amzn-ErrorType"] == name
    body = response.json()
    if response.request.url.path.endswith("/v1/chat/completions"):
        assert set(body) == {"error"}
        error = body["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["code"] == name
        kind = "server_error" if status >= 500 else "invalid_request_error"
        assert error["type"] == ("rate_limit_error" if status == 429 else kind)
        message = error["message"]
    else:
        assert set(body) == {"Message"}
        message = body["Message"]
    assert isinstance(message, str)
    assert re.search(match, message), message


def sse_chunks(text: str) -> list[Any]:
    """The JSON chunks of an SSE body (asserting it ends with [DONE])."""
    events = [e for e in text.split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    return [json.loads(e.removeprefix("data: ")) for e in events[:-1]]


async def test_health_and_unknown_routes(h: Harness) -> None:
    """/health answers without auth; unknown routes and methods get contract-shaped 4xx."""
    r = await h.client.get("/health")
    assert r.status_code == 200
    assert r.json() == {"status": "healthy"}
    assert_error(await h.client.get("/nope"), 404, "ResourceNotFoundException", "Unknown route")
    assert_error(await h.client.get("/sample"), 400, "ValidationException", "not allowed")


async def test_chat_non_stream_flattens_and_passes_sampling(
    h: Harness, emulator_policy: CannedPolicy
) -> None:
    """List-of-parts content is joined, content-less assistant messages accepted, params passed."""
    tid = h.open()
    body = dict(CHAT, temperature=0.3, top_p=0.9, max_tokens=17)
    r = await h.chat(tid, body)
    assert r.status_code == 200, r.text
    completion = r.json()
    assert completion["choices"][0]["message"]["content"] == "final answer"
    assert completion["usage"]["total_tokens"] == completion["usage"]["prompt_tokens"] + 3
    req = emulator_policy.seen[0]
    assert [m["content"] for m in req.messages] == ["You play.", "a\nb", "", "wrong"]
    assert req.messages[2]["tool_calls"][0]["id"] == "c1"
    assert (req.temperature, req.top_p, req.max_tokens) == (0.3, 0.9, 17)
    assert req.raw == body
    assert req.turn == 0
    assert req.context["prompt"] == '{"prompt": "p"}'
    r2 = await h.chat(tid, {"messages": [{"role": "user", "content": "x"}]})
    assert r2.status_code == 200
    req2 = emulator_policy.seen[1]
    assert (req2.temperature, req2.top_p, req2.max_tokens, req2.turn) == (1.0, 1.0, None, 1)


async def test_rng_is_seeded_from_seed_trajectory_and_turn(
    h: Harness, emulator_policy: CannedPolicy
) -> None:
    """The same (seed, trajectory, turn) gives the same RNG stream; other turns differ."""
    tid = h.open()
    for _ in range(2):
        assert (await h.chat(tid)).status_code == 200
    draws = [r.rng.random() for r in emulator_policy.seen]
    other = Emulator(RunStore.open(":memory:"), CannedPolicy())
    other.create_job("test-job")
    other.open_trajectory(other.default_job_arn or "", "", trajectory_id=tid)
    async for h2 in _harness(other):
        assert (await h2.chat(tid)).status_code == 200
    assert draws[0] != draws[1]
    assert other.policy.seen[0].rng.random() == draws[0]  # type: ignore[attr-defined]


async def test_stream_usage_chunk_only_when_asked_and_after_finish(h: Harness) -> None:
    """SSE ends finish → usage → [DONE] with include_usage, and has no usage chunk without it."""
    tid = h.open()
    body = dict(CHAT, stream=True, stream_options={"include_usage": True})
    r = await h.chat(tid, body)
    assert r.headers["content-type"].startswith("text/event-stream")
    chunks = sse_chunks(r.text)
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 3
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1])
    assert text == "final answer"
    plain = sse_chunks((await h.chat(tid, dict(CHAT, stream=True))).text)
    assert all(c["choices"] for c in plain)


async def test_tool_call_deltas(h: Harness) -> None:
    """A tool-calling turn streams OpenAI tool_call deltas with index, id, name and arguments."""
    tid = h.open()
    body = {
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"type": "function", "function": {"name": "guess", "parameters": {}}}],
        "stream": True,
    }
    chunks = sse_chunks((await h.chat(tid, body)).text)
    call = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
    assert call["index"] == 0
    assert call["id"] == "call_0"
    assert call["function"] == {"name": "guess", "arguments": '{"word": "crane"}'}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_eventstream_framing_on_request(h: Harness) -> None:
    """Accept: application/vnd.amazon.eventstream gets PayloadPart frames botocore decodes."""
    tid = h.open()
    r = await h.client.post(
        "/sample-with-response-stream",
        content=json.dumps(CHAT),
        headers=h.headers(tid) | {"accept": "application/vnd.amazon.eventstream"},
    )
    assert r.headers["content-type"] == "application/vnd.amazon.eventstream"
    buf = EventStreamBuffer()
    buf.add_data(r.content)
    payloads = []
    for message in buf:
        assert message.headers[":event-type"] == "PayloadPart"
        payloads.append(message.payload)
    assert payloads[-1] == b"data: [DONE]\n\n"
    assert json.loads(payloads[0][6:])["choices"][0]["delta"]["role"] == "assistant"


async def test_upstream_chunks_pass_through(emulator: Emulator) -> None:
    """Chunks a backend streamed for real are sent as they are (usage chunk dropped if unasked)."""
    finish = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
    usage_chunk = {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}

    class Upstream(CannedPolicy):
        async def complete(self, request: Any) -> CannedResult:
            result = await super().complete(request)
            result.chunks = [finish, usage_chunk]
            return result

    emulator.policy = Upstream()
    async for h in _harness(emulator):
        tid = h.open()
        asked = sse_chunks(
            (
                await h.chat(tid, dict(CHAT, stream=True, stream_options={"include_usage": True}))
            ).text
        )
        assert asked == [finish, usage_chunk]
        assert sse_chunks((await h.chat(tid, dict(CHAT, stream=True))).text) == [finish]


@pytest.mark.parametrize(
    ("auth", "match"),
    [
        (None, "Missing"),
        ("Basic dXNlcjpwYXNz", "Unsupported"),
        ("Bearer sk-openai-key", "not a SageMaker API key"),
        ("Bearer sagemaker-api-key-%%%notbase64", "not valid base64"),
        ("Bearer sagemaker-api-key-" + base64.b64encode(b"hello world").decode(), "presigned"),
        ("AWS4-HMAC-SHA256 SignedHeaders=host", "no Credential"),
    ],
)
async def test_auth_rejections(h: Harness, auth: str | None, match: str) -> None:
    """Missing or garbled Authorization → 403 AccessDeniedException, and no turn recorded."""
    tid = h.open()
    headers = h.headers(tid)
    if auth is None:
        del headers["authorization"]
    else:
        headers["authorization"] = auth
    r = await h.client.post("/sample", content=json.dumps(CHAT), headers=headers)
    assert_error(r, 403, "AccessDeniedException", match)
    assert h.emu.turn_count(tid) == 0


async def test_bearer_token_accepted(h: Harness) -> None:
    """A sagemaker-api-key bearer token (base64 of a presigned URL) is accepted."""
    tid = h.open()
    assert (await h.chat(tid, auth=bearer())).status_code == 200


async def test_shared_secret(emulator: Emulator) -> None:
    """With a secret, a request needs it as header or as the credential's access key id."""
    async for h in _harness(emulator, secret="s3cret"):
        tid = h.open()
        assert (await h.client.get("/health")).status_code == 200
        assert_error(await h.chat(tid), 403, "AccessDeniedException", "secret")
        assert (await h.chat(tid, auth=bearer("s3cret"))).status_code == 200
        assert (await h.chat(tid, auth=SIGV4.replace("AKIDTEST", "s3cret"))).status_code == 200
        ok = await h.client.post(
            "/sample",
            content=json.dumps(CHAT),
            headers=h.headers(tid) | {"x-agent-kit-secret": "s3cret"},
        )
        assert ok.status_code == 200
        assert_error(await h.client.post("/_emulator/rollouts"), 403, "AccessDeniedException")


async def test_body_size_cap(emulator: Emulator) -> None:
    """Bodies over max_body_bytes → 400, by Content-Length or while streaming the body."""
    emulator.max_body_bytes = 2048
    async for h in _harness(emulator):
        tid = h.open()
        big = dict(CHAT, messages=[{"role": "user", "content": "x" * 4096}])
        assert_error(await h.chat(tid, big), 400, "ValidationException", "limit")

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(10):
                yield b" " * 512

        r = await h.client.post("/sample", content=chunks(), headers=h.headers(tid))
        assert_error(r, 400, "ValidationException", "limit")
        assert h.emu.turn_count(tid) == 0


async def test_closed_gate_waits_for_requests_in_flight_then_turns_new_ones_away(
    emulator: Emulator, emulator_policy: CannedPolicy
) -> None:
    """The driver's gate: closing waits for the request in flight (its turn lands), then every
    new request gets a ValidationException in its route's shape and records nothing."""
    entered, release = asyncio.Event(), asyncio.Event()
    answer = emulator_policy.complete

    async def held(request: Any) -> Any:
        entered.set()
        await release.wait()
        return await answer(request)

    emulator_policy.complete = held  # type: ignore[method-assign]
    gate = RequestGate()
    async for h in _harness(emulator, gate=gate):
        tid = h.open()
        in_flight = asyncio.create_task(h.chat(tid))
        await entered.wait()
        assert gate.inflight == 1
        closing = asyncio.create_task(gate.close(timeout_s=30))
        await asyncio.sleep(0)  # the gate is shut at once, while the request is still held
        assert not gate.open
        assert not closing.done()
        late = await h.chat(h.open())
        assert_error(late, 400, "ValidationException", "job has ended")
        late_sample = await h.client.post("/sample", content=b"{}", headers=h.headers(tid))
        assert_error(late_sample, 400, "ValidationException", "job has ended")
        release.set()
        assert (await in_flight).status_code == 200
        assert await closing == 0
        assert h.emu.turn_count(tid) == 1  # the held turn landed; the late ones did not


async def test_gate_close_gives_up_after_its_timeout(emulator: Emulator) -> None:
    """A request that never finishes does not hold the gate's close past its timeout."""
    gate = RequestGate()
    assert gate.enter()
    assert await gate.close(timeout_s=0.01) == 1
    assert not gate.enter()
    gate.leave()
    assert gate.inflight == 0


async def test_a_request_the_job_ended_under_is_answered_without_a_traceback(
    emulator: Emulator,
    emulator_policy: CannedPolicy,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A turn still waiting on the policy when the gate's close gave up on it, and failing
    because the run closed its policy and its store meanwhile (as a rollout whose agent hit its
    wall-clock budget does), gets the "job has ended" answer and logs no traceback."""
    entered, release = asyncio.Event(), asyncio.Event()

    def store_closed(*args: Any, **kwargs: Any) -> None:
        raise sqlite3.ProgrammingError("Cannot operate on a closed database.")

    async def closed_under(request: Any) -> Any:
        entered.set()
        await release.wait()
        monkeypatch.setattr(emulator.store, "record_turn", store_closed)
        raise RuntimeError("cannot schedule new futures after shutdown")

    emulator_policy.complete = closed_under  # type: ignore[method-assign]
    gate = RequestGate()
    async for h in _harness(emulator, gate=gate):
        in_flight = asyncio.create_task(h.chat(h.open()))
        await entered.wait()
        assert await gate.close(timeout_s=0.01) == 1
        with caplog.at_level(logging.DEBUG, logger="agent_kit.emulator"):
            release.set()
            late = await in_flight
        assert_error(late, 400, "ValidationException", "job has ended")
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert any("request ended with the job" in r.getMessage() for r in caplog.records)


async def test_turn_cap(emulator: Emulator) -> None:
    """The per-trajectory turn cap answers 400 once reached."""
    emulator.max_turns_per_trajectory = 2
    async for h in _harness(emulator):
        tid = h.open()
        assert [(await h.chat(tid)).status_code for _ in range(2)] == [200, 200]
        assert_error(await h.chat(tid), 400, "ValidationException", "limit of 2 turns")


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ([1, 2], "JSON object"),
        ({"messages": "hi"}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": [{"content": "x"}]}, "role"),
        ({"messages": [{"role": "user", "content": 5}]}, "content"),
        (dict(CHAT, temperature="hot"), "temperature"),
        (dict(CHAT, temperature=True), "temperature"),
        (dict(CHAT, top_p=3), "top_p"),
        (dict(CHAT, max_tokens=-1), "max_tokens"),
        (dict(CHAT, tools="x"), "tools"),
        (dict(CHAT, stream="yes"), "stream"),
    ],
)
async def test_wrong_types_are_validation_errors(h: Harness, body: Any, match: str) -> None:
    """A chat body with wrong types → 400 ValidationException naming the field."""
    tid = h.open()
    assert_error(await h.chat(tid, body), 400, "ValidationException", match)


async def test_control_bodies_and_job_arn_sources(h: Harness) -> None:
    """CompleteRollout/UpdateReward take the ARN from the body or header; a mismatch is 400."""
    tid = h.open()
    await h.chat(tid)
    auth = {"authorization": SIGV4}
    bad = await h.client.post(
        "/complete-rollout",
        json={"TrajectoryId": tid, "Status": "READY"},
        headers=auth | {"x-amzn-sagemaker-job-arn": h.job_arn},
    )
    assert_error(bad, 400, "ValidationException", "Status")
    assert_error(
        await h.client.post("/complete-rollout", json={"TrajectoryId": tid}, headers=auth),
        400,
        "ValidationException",
        "JobArn is required",
    )
    other = h.job_arn + "x"
    mismatch = await h.client.post(
        "/complete-rollout",
        json={"TrajectoryId": tid, "JobArn": other},
        headers=auth | {"x-amzn-sagemaker-job-arn": h.job_arn},
    )
    assert_error(mismatch, 400, "ValidationException", "differ")
    ok = await h.client.post(
        "/complete-rollout", json={"TrajectoryId": tid, "JobArn": h.job_arn}, headers=auth
    )
    assert ok.status_code == 200
    assert ok.json() == {}
    rewards = await h.client.post(
        "/update-reward",
        json={"TrajectoryId": tid, "Rewards": ["1"]},
        headers=auth | {"x-amzn-sagemaker-job-arn": h.job_arn},
    )
    assert_error(rewards, 400, "ValidationException", "Rewards")
    nan = await h.client.post(
        "/update-reward",
        content=b'{"TrajectoryId": "%s", "Rewards": [NaN]}' % tid.encode(),
        headers=auth | {"x-amzn-sagemaker-job-arn": h.job_arn},
    )
    assert_error(nan, 400, "ValidationException", "not valid JSON")
    big = await h.client.post(
        "/update-reward",
        content=b'{"TrajectoryId": "%s", "Rewards": [1e999]}' % tid.encode(),
        headers=auth | {"x-amzn-sagemaker-job-arn": h.job_arn},
    )
    assert_error(big, 400, "ValidationException", "finite")
    assert h.emu.state(tid) is TrajectoryState.READY


async def test_update_reward_refuses_rewards_without_a_finite_total(h: Harness) -> None:
    """Rewards [1e308, 1e308] (each finite, their sum inf) are a 400 ValidationException in the
    contract's shape and nothing is stored: the trajectory stays READY without a reward."""
    tid = h.open()
    await h.chat(tid)
    await h.chat(tid)
    auth = {"authorization": SIGV4, "x-amzn-sagemaker-job-arn": h.job_arn}
    ok = await h.client.post("/complete-rollout", json={"TrajectoryId": tid}, headers=auth)
    assert ok.status_code == 200, ok.text
    for rewards in ([1e308, 1e308], [-1e308, -1e308]):
        r = await h.client.post(
            "/update-reward", json={"TrajectoryId": tid, "Rewards": rewards}, headers=auth
        )
        assert_error(r, 400, "ValidationException", "finite total")
    assert h.emu.state(tid) is TrajectoryState.READY
    assert h.emu.store.get_reward(tid) is None


async def test_policy_errors_map_to_contract(h: Harness, emulator_policy: CannedPolicy) -> None:
    """A backend's JobRuntimeError passes through (429); any other exception is a recorded 500."""
    tid = h.open()
    emulator_policy.fail_with = ThrottlingError("slow down")
    assert_error(await h.chat(tid), 429, "ThrottlingException", "slow down")
    emulator_policy.fail_with = ValueError("bad")
    assert_error(await h.chat(tid), 500, "InternalServiceError", "ValueError: bad")
    kinds = [e.detail["error"] for e in h.emu.store.list_events(tid, kind="policy_error")]
    assert kinds == ["ThrottlingException", "ValueError"]
    emulator_policy.fail_with = None
    assert (await h.chat(tid)).status_code == 200


async def test_lenient_mode_creates_trajectory_on_first_turn(
    emulator: Emulator, run_store: RunStore
) -> None:
    """Strict mode answers 404 for an unknown id; lenient mode opens it on its first turn."""
    async for h in _harness(emulator):
        assert_error(await h.chat("made-up-id"), 404, "ResourceNotFoundException")
        emulator.lenient = True
        assert (await h.chat("made-up-id")).status_code == 200
        assert emulator.state("made-up-id") is TrajectoryState.OPEN
        assert emulator.turn_count("made-up-id") == 1
        assert run_store.list_events("made-up-id", kind="lenient_open")


async def test_admin_mint_and_show(h: Harness) -> None:
    """POST /_emulator/rollouts mints an OPEN trajectory and returns a §2 payload."""
    r = await h.client.post("/_emulator/rollouts", json={"prompt": {"prompt": "hi", "answer": "x"}})
    assert r.status_code == 200, r.text
    payload = r.json()
    meta = payload["metadata"]
    assert json.loads(payload["prompt"]) == {"prompt": "hi", "answer": "x"}
    assert meta["jobArn"] == h.job_arn
    assert meta["endpoint"] == "http://emu.test"
    assert meta["region"] == "us-west-2"
    assert payload["inferenceParams"] == {"temperature": 1.0, "topP": 1.0, "maxTokens": 4096}
    assert h.emu.state(meta["rolloutId"]) is TrajectoryState.OPEN
    fixed = await h.client.post("/_emulator/rollouts", json={"rolloutId": "mine"})
    assert fixed.json()["metadata"]["rolloutId"] == "mine"
    assert_error(
        await h.client.post("/_emulator/rollouts", json={"rolloutId": "mine"}),
        400,
        "ValidationException",
        "exists",
    )
    assert_error(
        await h.client.post("/_emulator/rollouts", content=b"[1]"), 400, "ValidationException"
    )
    shown = (await h.client.get("/_emulator/trajectories/mine")).json()
    assert shown["state"] == "OPEN"
    assert shown["turns"] == 0
    assert_error(
        await h.client.get("/_emulator/trajectories/zzz"), 404, "ResourceNotFoundException"
    )


async def test_wait_state_across_threads(emulator: Emulator, run_store: RunStore) -> None:
    """wait_state wakes on a transition made from another thread, and times out with the state."""
    tid = emulator.open_trajectory(emulator.default_job_arn or "", "").id
    assert (
        await emulator.wait_state(tid, {TrajectoryState.READY}, timeout=0.01)
        is TrajectoryState.OPEN
    )
    waiting = asyncio.ensure_future(
        emulator.wait_state(tid, {TrajectoryState.TIMED_OUT}, timeout=30)
    )
    await asyncio.sleep(0)  # let the waiter register
    threading.Thread(target=emulator.expire, args=(tid, "rollout_timeout")).start()
    assert await waiting is TrajectoryState.TIMED_OUT
    assert emulator.expire(tid, "again") is TrajectoryState.TIMED_OUT
    row = run_store.get_trajectory(tid)
    assert row is not None
    assert row.reason == "rollout_timeout"
    with pytest.raises(UsageError):
        await emulator.wait_state("nope", {TrajectoryState.READY}, timeout=1)


def test_emulator_rejects_bad_configuration(tmp_path: Path) -> None:
    """Bad account ids, foreign job ARNs and unknown jobs are UsageErrors."""
    store = RunStore.open(":memory:")
    with pytest.raises(UsageError):
        Emulator(store, CannedPolicy(), account_id="12")
    emu = Emulator(store, CannedPolicy())
    with pytest.raises(UsageError, match="not in account"):
        emu.create_job("x", arn="arn:aws:sagemaker:us-west-2:999999999999:job/AgentRFT/x")
    with pytest.raises(UsageError, match="unknown job"):
        emu.open_trajectory("arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/x", "")


def test_state_survives_restart_on_same_store(tmp_path: Path) -> None:
    """A new Emulator on the same store sees earlier trajectories' states and turn counts."""
    store = RunStore.open(tmp_path / "run")
    emu = Emulator(store, CannedPolicy())
    emu.create_job("j")
    tid = emu.open_trajectory(emu.default_job_arn or "", "").id
    asyncio.run(emu.turn(emu.default_job_arn, tid, CHAT, route="/sample"))
    store.close()
    again = Emulator(RunStore.open(tmp_path / "run"), CannedPolicy())
    assert again.turn_count(tid) == 1
    assert again.state(tid) is TrajectoryState.OPEN
    again.check_job(emu.default_job_arn)
    again.store.close()


# -- CLI ---------------------------------------------------------------------------------------

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "--allow-remote"),  # noqa: S104 - refused on purpose
        (["--host", "0.0.0.0", "--allow-remote"], "shared secret"),  # noqa: S104
        (["--job-arn", "arn:nope"], "not a SageMaker job ARN"),
        (["--policy", "nonsense:x"], "unknown policy spec"),
    ],
)
def test_cli_rejects_bad_arguments(args: list[str], message: str, tmp_path: Path) -> None:
    """`agent-kit emulate` refuses remote binds without flag+secret, bad ARNs and bad policies."""
    result = runner.invoke(cli_app, ["emulate", "--store", str(tmp_path / "s"), *args])
    assert result.exit_code != 0
    assert message in str(result.exception) + result.output


def test_cli_port_validation() -> None:
    """An out-of-range port is a usage error from Typer."""
    result = runner.invoke(cli_app, ["emulate", "--port", "70000"])
    assert result.exit_code == 2


def test_cli_serves_until_terminated(tmp_path: Path) -> None:
    """A real `agent-kit emulate` process prints endpoint, payload, env lines and the per-run
    AWS keys and rollout token an agent must use: those are accepted, a made-up bearer is 403
    naming --lenient-auth; SIGTERM stops it gracefully (exit 0, the store's path said)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RFT_"))}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from agent_kit.cli import main; main()",
            "emulate",
            "--port",
            "0",
            "--store",
            str(tmp_path / "run"),
            "--policy",
            "random:3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while not any(line.startswith("Ctrl-C") for line in lines):
            line = proc.stdout.readline()
            assert line, f"emulate exited early: {proc.stderr.read() if proc.stderr else ''}"
            lines.append(line.strip())
            assert time.monotonic() < deadline
        text = "\n".join(lines)
        url = re.search(r"serving (http://127\.0\.0\.1:\d+)", text)
        assert url, text
        assert f"RFT_RUNTIME_ENDPOINT={url[1]}" in text
        assert f"AWS_ENDPOINT_URL_SAGEMAKERJOBRUNTIME={url[1]}" in text
        payload = json.loads(next(line for line in lines if line.startswith("{")))
        assert payload["metadata"]["endpoint"] == url[1]
        while True:
            try:
                if httpx.get(url[1] + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.05)  # polling with a deadline
        meta = payload["metadata"]
        headers = {
            "x-amzn-sagemaker-job-arn": meta["jobArn"],
            "x-amzn-sagemaker-trajectory-id": meta["rolloutId"],
        }
        chat = {"messages": [{"role": "user", "content": "hi"}]}
        made_up = httpx.post(
            url[1] + "/v1/chat/completions",
            json=chat,
            headers=headers | {"authorization": bearer()},
        )
        assert_error(made_up, 403, "AccessDeniedException", "--lenient-auth")
        r = httpx.post(
            url[1] + "/v1/chat/completions",
            json=chat,
            headers=headers | {"authorization": "Bearer " + meta["apiKey"]},
        )
        assert r.status_code == 200, r.text
        assert r.json()["object"] == "chat.completion"
        keys = dict(
            line.split("=", 1) for line in lines if line.startswith("AWS_") and "KEY" in line
        )
        sm = boto3.client(
            "sagemakerjobruntime",
            endpoint_url=url[1],
            region_name="us-west-2",
            aws_access_key_id=keys["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"],
        )
        sm.complete_rollout(JobArn=meta["jobArn"], TrajectoryId=meta["rolloutId"])
        proc.terminate()
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert "emulator stopped; run store at" in rest
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        assert store.count_turns(payload["metadata"]["rolloutId"]) == 1


async def test_admin_mint_takes_json_only(h: Harness) -> None:
    """POST /_emulator/rollouts refuses a body that is not application/json (a cross-site
    text/plain or form POST) with 400 and mints nothing."""
    before = len(h.emu.store.list_trajectories())
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {} if content_type is None else {"content-type": content_type}
        r = await h.client.post("/_emulator/rollouts", content=b'{"prompt": "x"}', headers=headers)
        assert_error(r, 400, "ValidationException", "application/json")
    assert len(h.emu.store.list_trajectories()) == before
    ok = await h.client.post(
        "/_emulator/rollouts",
        content=b"{}",
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert ok.status_code == 200, ok.text


async def test_admin_mint_keeps_a_bounded_number_of_rollouts(emulator: Emulator) -> None:
    """Past max_minted rollouts POST /_emulator/rollouts is 402 ServiceQuotaExceededException
    in the contract's shape and opens nothing more."""
    async for h in _harness(emulator, max_minted=3):
        for _ in range(3):
            ok = await h.client.post("/_emulator/rollouts", json={"prompt": "p"})
            assert ok.status_code == 200, ok.text
        before = len(h.emu.store.list_trajectories())
        over = await h.client.post("/_emulator/rollouts", json={"prompt": "p"})
        assert_error(over, 402, "ServiceQuotaExceededException", "3 rollouts")
        assert len(h.emu.store.list_trajectories()) == before


async def test_admin_mint_keeps_a_bounded_number_of_prompt_bytes(emulator: Emulator) -> None:
    """Prompts are counted in bytes: one that would pass max_minted_bytes is 402 and opens
    nothing, while a smaller one still fits."""
    async for h in _harness(emulator, max_minted_bytes=1000):
        first = await h.client.post("/_emulator/rollouts", json={"prompt": "x" * 600})
        assert first.status_code == 200, first.text
        before = len(h.emu.store.list_trajectories())
        big = await h.client.post("/_emulator/rollouts", json={"prompt": "y" * 600})
        assert_error(big, 402, "ServiceQuotaExceededException", "1000 bytes")
        assert len(h.emu.store.list_trajectories()) == before
        small = await h.client.post("/_emulator/rollouts", json={"prompt": "z" * 300})
        assert small.status_code == 200, small.text


async def test_admin_mint_ignores_host_header(h: Harness) -> None:
    """The minted payload's endpoint is the server's own address, not the request's Host."""
    r = await h.client.post("/_emulator/rollouts", json={}, headers={"host": "evil.example:9"})
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["endpoint"] == "http://emu.test"


RUN_KEYS = {"AKIDRUN": "run-secret-key"}


def _signed_bearer(secret: str = RUN_KEYS["AKIDRUN"], expires: int = 3600) -> str:
    """A bearer token as the sagemaker SDK signs it, with access key AKIDRUN and ``secret``."""
    from botocore.credentials import Credentials
    from sagemaker.core.token_generator.token_generator import _generate_token

    return "Bearer " + _generate_token(Credentials("AKIDRUN", secret), "us-west-2", expires)


def _forged_bearer() -> str:
    """A well-formed token for AKIDRUN whose signature was made up."""
    url = base64.b64decode(_signed_bearer().removeprefix("Bearer sagemaker-api-key-")).decode()
    forged = re.sub(r"X-Amz-Signature=[0-9a-f]+", "X-Amz-Signature=" + "0" * 64, url)
    return "Bearer sagemaker-api-key-" + base64.b64encode(forged.encode()).decode()


async def test_verify_accepts_a_token_signed_with_the_run_credentials(emulator: Emulator) -> None:
    """In verify mode a bearer presigned with the run's credentials passes (again from cache)."""
    async for h in _harness(emulator, credentials=RUN_KEYS):
        tid = h.open()
        token = _signed_bearer()
        assert (await h.chat(tid, auth=token)).status_code == 200
        assert (await h.chat(tid, auth=token)).status_code == 200
        assert h.emu.turn_count(tid) == 2


@pytest.mark.parametrize(
    ("auth", "match"),
    [
        (_forged_bearer(), "signature does not match.*lenient"),
        (bearer(), "AKIDTEST.*not given.*lenient"),
        (_signed_bearer(secret="guessed"), "signature does not match"),
        (SIGV4.replace("AKIDTEST", "AKIDRUN"), "signature does not match"),
    ],
)
async def test_verify_refuses_forged_credentials(emulator: Emulator, auth: str, match: str) -> None:
    """In verify mode a forged bearer or SigV4 signature is 403 (saying how to run lenient) and
    records no turn."""
    async for h in _harness(emulator, credentials=RUN_KEYS):
        tid = h.open()
        headers = h.headers(tid, auth=auth) | {"x-amz-date": "20261202T000000Z"}
        r = await h.client.post("/sample", content=json.dumps(CHAT), headers=headers)
        assert_error(r, 403, "AccessDeniedException", match)
        assert h.emu.turn_count(tid) == 0


async def test_verify_refuses_an_expired_token(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A correctly signed bearer whose X-Amz-Expires has passed (signed a day ago) is 403."""
    import datetime

    import botocore.auth

    day_ago = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: day_ago)
    token = _signed_bearer(expires=3600)
    monkeypatch.undo()
    async for h in _harness(emulator, credentials=RUN_KEYS):
        assert_error(await h.chat(h.open(), auth=token), 403, "AccessDeniedException", "expired")


def test_verify_mode_without_credentials_is_refused(emulator: Emulator) -> None:
    """auth='verify' with no credentials to verify against is refused, naming the lenient way."""
    with pytest.raises(ValueError, match="lenient"):
        create_app(emulator, auth="verify")


@pytest.mark.parametrize(
    ("offset_s", "match"),
    [
        (
            -301,
            "Signature expired: X-Amz-Date 20261202T115459Z is now earlier than "
            r"20261202T115500Z \(20261202T120000Z - 5 min.\)",
        ),
        (
            301,
            "Signature not yet current: X-Amz-Date 20261202T120501Z is still later than "
            r"20261202T120500Z \(20261202T120000Z \+ 5 min.\)",
        ),
        (-300, None),
        (300, None),
        (0, None),
    ],
)
def test_verifier_keeps_aws_five_minute_window_and_accepts_a_repeated_signature(
    monkeypatch: pytest.MonkeyPatch, offset_s: int, match: str | None
) -> None:
    """AWS's window, to the second: X-Amz-Date 5 minutes off either way is accepted, a second
    more is refused in AWS's words; an accepted signature verified again (botocore's identical
    retry within one second) is accepted every time, never refused as a repeat."""
    import datetime

    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from agent_kit.emulator.sigv4 import Verifier

    now = datetime.datetime(2026, 12, 2, 12, 0, tzinfo=datetime.timezone.utc)
    at = now + datetime.timedelta(seconds=offset_s)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: at)
    verifier = Verifier(RUN_KEYS, clock=now.timestamp, region="us-west-2")
    request = AWSRequest(method="POST", url="http://emu.test/sample", data=b"{}")
    botocore.auth.SigV4Auth(
        Credentials("AKIDRUN", RUN_KEYS["AKIDRUN"]), "sagemaker", "us-west-2"
    ).add_auth(request)
    headers = {k.lower(): str(v) for k, v in request.headers.items()} | {"host": "emu.test"}
    value = headers["authorization"]
    if match is not None:
        with pytest.raises(AccessDeniedError, match=match):
            verifier.verify_header(value, "POST", "/sample", "", headers, b"{}")
        return
    for _ in range(3):
        assert verifier.verify_header(value, "POST", "/sample", "", headers, b"{}") == "AKIDRUN"
