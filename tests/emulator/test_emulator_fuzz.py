"""Bad input never crashes the emulator: random bytes, bad JSON, wrong types, huge bodies.

Most of it runs in-process through httpx's ASGITransport (fast enough for 1,000 examples); one
suite repeats the nastiest inputs over a real loopback socket and checks the server still serves.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import CannedPolicy, RunningEmulator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_kit.emulator.core import Emulator
from agent_kit.emulator.server import create_app
from agent_kit.store import RunStore

SIGV4 = (
    "AWS4-HMAC-SHA256 Credential=AKIDFUZZ/20261202/us-west-2/sagemaker/aws4_request, "
    "SignedHeaders=host, Signature=0"
)
ROUTES = [
    "/sample",
    "/sample-with-response-stream",
    "/v1/chat/completions",
    "/complete-rollout",
    "/update-reward",
    "/_emulator/rollouts",
]
CONTRACT_TYPES = {
    "ValidationException",
    "AccessDeniedException",
    "ResourceNotFoundException",
    "ConflictException",
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
chat_like = st.fixed_dictionaries(
    {},
    optional={
        "messages": st.one_of(
            json_values,
            st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "role": json_values,
                        "content": json_values,
                        "tool_calls": json_values,
                    },
                ),
                max_size=3,
            ),
        ),
        "tools": json_values,
        "temperature": json_values,
        "top_p": json_values,
        "max_tokens": json_values,
        "stream": json_values,
        "stream_options": json_values,
        "TrajectoryId": json_values,
        "Status": json_values,
        "Rewards": json_values,
        "ClientToken": json_values,
        "JobArn": json_values,
    },
)


class Target:
    """An in-process emulator app with a job and one OPEN trajectory."""

    def __init__(self) -> None:
        self.emu = Emulator(RunStore.open(":memory:"), CannedPolicy(), max_body_bytes=64 << 10)
        self.emu.create_job("fuzz")
        self.job = self.emu.default_job_arn or ""
        self.tid = self.emu.open_trajectory(self.job, "").id
        self.app = create_app(self.emu)

    def headers(self, job: str | None = None, tid: str | None = None) -> dict[str, str]:
        """Auth plus the job/trajectory headers."""
        return {
            "authorization": SIGV4,
            "x-amzn-sagemaker-job-arn": self.job if job is None else job,
            "x-amzn-sagemaker-trajectory-id": self.tid if tid is None else tid,
        }


@pytest.fixture(scope="module")
def target() -> Target:
    """One emulator shared by the module's hypothesis examples."""
    return Target()


def check(response: httpx.Response) -> None:
    """Either a success or a 4xx in the route's shape (the contract's; OpenAI's on the chat
    route, with the contract's name as its code); never a 5xx."""
    if response.status_code == 200:
        return
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    name = response.headers["x-amzn-ErrorType"]
    assert name in CONTRACT_TYPES
    body = response.json()
    if response.request.url.path == "/v1/chat/completions":
        assert list(body) == ["error"]
        assert body["error"]["code"] == name
        assert body["error"]["type"] == "invalid_request_error"
        assert isinstance(body["error"]["message"], str)
    else:
        assert list(body) == ["Message"]


async def _send(
    target: Target, route: str, content: bytes, headers: dict[str, str]
) -> httpx.Response:
    transport = httpx.ASGITransport(app=target.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fuzz") as client:
        return await client.post(route, content=content, headers=headers)


@settings(
    max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(route=st.sampled_from(ROUTES), body=st.binary(max_size=512))
async def test_random_bytes(target: Target, route: str, body: bytes) -> None:
    """1,000 random byte bodies on every route → 200 or a contract-shaped 4xx."""
    check(await _send(target, route, body, target.headers()))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(route=st.sampled_from(ROUTES), body=chat_like)
async def test_wrong_types(target: Target, route: str, body: dict[str, Any]) -> None:
    """Structurally plausible JSON with arbitrary field types never produces a 5xx."""
    check(await _send(target, route, json.dumps(body).encode(), target.headers()))


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    route=st.sampled_from(ROUTES[:3]),
    job=st.text(max_size=80),
    tid=st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=300),
)
async def test_invalid_arns_and_ids(target: Target, route: str, job: str, tid: str) -> None:
    """Arbitrary job ARNs and trajectory ids are 4xx (never 5xx), leaving good ones working."""
    headers = target.headers(job=job.encode("ascii", "ignore").decode() or "x", tid=tid or "t")
    check(await _send(target, route, b'{"messages": [{"role": "user", "content": "x"}]}', headers))


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b'{"messages": ',
        b"[" * 100_000,
        b'{"a": ' * 50_000,
        b"\x00\xff" * 100,
        b"null",
        b'"s"',
        b'{"messages": [{"role": "user", "content": "x"}], "x": NaN}',
        b'{"messages": [{"role": "user", "content": "x"}], "x": -Infinity}',
    ],
    ids=[
        "open-brace",
        "truncated",
        "deep-list",
        "deep-object",
        "binary",
        "null",
        "string",
        "nan",
        "infinity",
    ],
)
async def test_malformed_json(target: Target, body: bytes) -> None:
    """Malformed, deeply nested or non-object JSON → 400 ValidationException on each route."""
    for route in ROUTES:
        response = await _send(target, route, body, target.headers())
        check(response)
        assert response.status_code == 400


async def test_oversize_and_unknown_routes(target: Target) -> None:
    """Oversize bodies → 400; unknown routes → 404; all in the contract shape."""
    huge = b'{"messages": "' + b"x" * (70 << 10) + b'"}'
    for route in ROUTES:
        response = await _send(target, route, huge, target.headers())
        check(response)
        assert response.status_code == 400
    for path in ["/", "/v1/models", "/sample/../x", "/%ff", "/_emulator"]:
        response = await _send(target, path, b"{}", target.headers())
        check(response)
        assert response.status_code == 404


# -- the same nasties over a real socket ------------------------------------------------------


@pytest.fixture
def emulator_options() -> dict[str, Any]:
    """A small body cap for the real-socket suite."""
    return {"max_body_bytes": 32 << 10}


@pytest.fixture
def socket_client(running_emulator: RunningEmulator) -> Iterator[httpx.Client]:
    """A real HTTP client on the emulator's loopback socket."""
    with httpx.Client(base_url=running_emulator.url, timeout=30) as client:
        yield client


def test_real_socket_survives_bad_input(
    running_emulator: RunningEmulator, socket_client: httpx.Client
) -> None:
    """Over a real socket: garbage, oversize, bad ARNs and unknown routes are 4xx; still serving."""
    run = running_emulator
    tid = run.mint()["metadata"]["rolloutId"]
    headers = {
        "authorization": SIGV4,
        "x-amzn-sagemaker-job-arn": run.job_arn,
        "x-amzn-sagemaker-trajectory-id": tid,
    }
    cases = [
        ("/sample", b"\xff\xfe\x00garbage", headers),
        ("/v1/chat/completions", b'{"messages": [', headers),
        ("/sample-with-response-stream", b"x" * (64 << 10), headers),
        ("/update-reward", b'{"TrajectoryId": 5, "Rewards": "x"}', headers),
        ("/complete-rollout", b'{"TrajectoryId": "t", "Status": 1}', headers),
        ("/sample", b"{}", headers | {"x-amzn-sagemaker-job-arn": "arn:aws:nope"}),
        ("/nowhere", b"{}", headers),
        ("/sample", b"{}", {}),
    ]
    for route, body, hdrs in cases:
        check(socket_client.post(route, content=body, headers=hdrs))

    def chunked() -> Iterator[bytes]:
        for _ in range(100):
            yield b"y" * 1024

    check(socket_client.post("/sample", content=chunked(), headers=headers))
    ok = socket_client.post(
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "still there?"}]},
        headers=headers,
    )
    assert ok.status_code == 200
    assert ok.json()["choices"][0]["message"]["content"] == "final answer"
    assert socket_client.get("/health").status_code == 200
    assert run.emulator.turn_count(tid) == 1
