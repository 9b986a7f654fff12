"""Policy transports, token provider and wire decoding (agent_kit.policy_client,
agent_kit.transport).

Every transport test runs a real Strands ``OpenAIModel`` (AsyncOpenAI/httpx or boto3) over real
loopback sockets against :class:`fakes.job_runtime.FakeJobRuntime`, with dummy AWS credentials.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import botocore.session
import pytest
from botocore.credentials import CredentialProvider, RefreshableCredentials
from fakes.job_runtime import FakeJobRuntime, Reply, encode_event, stream_events, text, tool
from strands import Agent
from strands import tool as strands_tool

from agent_kit.contract import parse_payload
from agent_kit.errors import PolicyError, UsageError
from agent_kit.policy_client import (
    PolicyConfig,
    PolicyHandle,
    TokenProvider,
    build_model,
    default_token_provider,
    find_policy_error,
)
from agent_kit.settings import Settings
from agent_kit.transport import EventStreamDecoder, SSEDecoder, parse_chunk, parse_completion

CHAT = "/v1/chat/completions"
JOB_ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/my-job"


pytestmark = pytest.mark.usefixtures("offline_aws")


def _short_for_hangs(match: str) -> dict[str, float]:
    """A 0.5 s timeout where the case is a hang that never answers (``match`` "timed out");
    the default elsewhere, so a busy box cannot turn an error answer into a timeout."""
    return {"timeout_s": 0.5} if match == "timed out" else {}


@pytest.fixture
def fake() -> Iterator[FakeJobRuntime]:
    """A running fake Job Runtime."""
    with FakeJobRuntime() as server:
        yield server


@pytest.fixture
def provider() -> TokenProvider:
    """A token provider on its own botocore session (env credentials)."""
    return TokenProvider(botocore.session.Session(), region="us-west-2")


def payload(endpoint: str | None, tid: str = "traj-1", **extra: Any) -> Any:
    """A rollout payload for the fake (no metadata when endpoint is None)."""
    raw: dict[str, Any] = {"prompt": json.dumps({"target": 3, "answer": "secret"}), **extra}
    if endpoint is not None:
        raw["metadata"] = {"jobArn": JOB_ARN, "rolloutId": tid, "endpoint": endpoint}
    return parse_payload(raw)


@strands_tool
def add(n: int) -> str:
    """Add n to the counter.

    Args:
        n: amount to add
    """
    return f"value={n}"


async def play(handle: PolicyHandle, prompt: str = "go") -> Any:
    """Run a Strands agent with the ``add`` tool on the handle's model, then close it."""
    async with handle:
        agent = Agent(model=handle.model, tools=[add], callback_handler=None)
        return await agent.invoke_async(prompt)


async def one_call(handle: PolicyHandle) -> list[Any]:
    """One raw model call (no agent), returning the Strands stream events."""
    async with handle:
        messages: Any = [{"role": "user", "content": [{"text": "hi"}]}]
        return [event async for event in handle.model.stream(messages)]


def decode(token: str) -> dict[str, list[str]]:
    """The query parameters of the presigned URL inside a bearer token."""
    assert token.startswith("sagemaker-api-key-")
    url = base64.b64decode(token.removeprefix("sagemaker-api-key-")).decode()
    assert url.startswith("sagemaker.amazonaws.com/?")
    return parse_qs(urlsplit("https://" + url).query)


# -- token provider ----------------------------------------------------------------------------


def test_token_has_the_sdk_format(provider: TokenProvider) -> None:
    """The token is a base64 SigV4-presigned URL with the parameters the sagemaker SDK signs."""
    from sagemaker.core.token_generator.token_generator import _generate_token

    ours = decode(provider.token())
    creds = botocore.session.Session().get_credentials()
    sdk = decode(_generate_token(creds, "us-west-2", 3600))
    assert ours.keys() == sdk.keys()
    for key in ours.keys() - {"X-Amz-Date", "X-Amz-Signature"}:
        assert ours[key] == sdk[key], key
    assert ours["Action"] == ["CallWithBearerToken"]
    assert ours["Version"] == ["1"]
    assert ours["X-Amz-Expires"] == ["3600"]
    assert ours["X-Amz-Credential"][0].endswith("/us-west-2/sagemaker/aws4_request")
    assert ours["X-Amz-Security-Token"] == ["dummy-session-token"]
    assert len(ours["X-Amz-Signature"][0]) == 64


def test_token_is_cached_and_refreshed_before_expiry() -> None:
    """A token is reused until refresh_margin_s before it expires, then re-signed."""
    now = [1000.0]
    provider = TokenProvider(
        botocore.session.Session(), "us-west-2", lifetime_s=600, refresh_margin_s=60,
        clock=lambda: now[0],
    )  # fmt: skip
    first = provider.token()
    assert decode(first)["X-Amz-Expires"] == ["600"]
    now[0] = 1000.0 + 539
    assert provider.token() == first
    assert provider.sign_count == 1
    now[0] = 1000.0 + 540
    provider.token()
    assert provider.sign_count == 2
    now[0] = 1000.0 + 540 + 539
    provider.token()
    assert provider.sign_count == 2


def test_token_lifetime_is_capped_by_credential_expiry() -> None:
    """With refreshable credentials expiring in 20 min, a 1 h token is re-signed after ~15 min."""
    expiry = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=20)
    creds = RefreshableCredentials.create_from_metadata(
        {"access_key": "A", "secret_key": "S", "token": "T", "expiry_time": expiry.isoformat()},
        refresh_using=lambda: pytest.fail("no refresh expected"),
        method="test",
    )
    session = botocore.session.Session()
    session._credentials = creds
    now = [0.0]
    provider = TokenProvider(session, "us-west-2", clock=lambda: now[0])
    provider.token()
    now[0] = 850.0
    provider.token()
    assert provider.sign_count == 1
    now[0] = 950.0
    provider.token()
    assert provider.sign_count == 2


def test_invalidate_drops_only_the_named_token(provider: TokenProvider) -> None:
    """invalidate(token) re-signs only if that token is the cached one; invalidate() always."""
    token = provider.token()
    provider.invalidate("sagemaker-api-key-other")
    assert provider.token() == token
    assert provider.sign_count == 1
    provider.invalidate(token)
    provider.token()
    assert provider.sign_count == 2
    provider.invalidate()
    provider.token()
    assert provider.sign_count == 3


def test_bad_token_settings_are_refused() -> None:
    """Lifetimes above 12 h or margins not below the lifetime raise ValueError."""
    with pytest.raises(ValueError, match="12 h"):
        TokenProvider(lifetime_s=50_000)
    with pytest.raises(ValueError, match="refresh_margin_s"):
        TokenProvider(lifetime_s=60, refresh_margin_s=60)


def test_missing_credentials_are_a_policy_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without any AWS credentials the token provider raises a PolicyError that says so."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    for name in ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(name, raising=False)
    provider = TokenProvider(botocore.session.Session(), "us-west-2")
    with pytest.raises(PolicyError, match="no AWS credentials"):
        provider.token()


def test_failing_credential_refresh_is_a_policy_error() -> None:
    """Expired refreshable credentials whose refresh fails give a PolicyError, not a crash."""

    def refresh() -> dict[str, str]:
        raise RuntimeError("credential endpoint down")

    expired = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1)
    session = botocore.session.Session()
    session._credentials = RefreshableCredentials.create_from_metadata(
        {"access_key": "A", "secret_key": "S", "token": "T", "expiry_time": expired.isoformat()},
        refresh_using=refresh,
        method="test",
    )
    with pytest.raises(PolicyError, match="credential endpoint down"):
        TokenProvider(session, "us-west-2").token()


def test_default_token_provider_is_one_per_process() -> None:
    """Every thread gets the same default provider."""
    seen: list[TokenProvider] = []
    threads = [
        threading.Thread(target=lambda: seen.append(default_token_provider())) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(p) for p in seen}) == 1


class CountingProvider(CredentialProvider):  # type: ignore[misc]
    """A credential provider that counts loads and refreshes (refreshable credentials)."""

    METHOD = "counting"

    def __init__(self) -> None:
        self.loads = 0
        self.refreshes = 0
        self.lock = threading.Lock()

    def _metadata(self) -> dict[str, str]:
        expiry = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=6)
        return {
            "access_key": "AKIDCOUNT",
            "secret_key": "S",
            "token": "T",
            "expiry_time": expiry.isoformat(),
        }

    def _refresh(self) -> dict[str, str]:
        with self.lock:
            self.refreshes += 1
        return self._metadata()

    def load(self) -> RefreshableCredentials:
        with self.lock:
            self.loads += 1
        return RefreshableCredentials.create_from_metadata(
            self._metadata(), refresh_using=self._refresh, method=self.METHOD
        )


def test_one_botocore_session_shared_by_64_concurrent_rollouts(fake: FakeJobRuntime) -> None:
    """64 rollouts in 64 threads (own loops) share one session, one credential load, one token."""
    counting = CountingProvider()
    sessions: list[botocore.session.Session] = []

    def make_session() -> botocore.session.Session:
        session = botocore.session.Session()
        session.get_component("credential_provider").insert_before("env", counting)
        sessions.append(session)
        return session

    provider = TokenProvider(region="us-west-2", session_factory=make_session)
    config = PolicyConfig(max_retries=0)
    barrier = threading.Barrier(64)
    errors: list[BaseException] = []

    def rollout(i: int) -> None:
        try:
            handle = build_model(payload(fake.url, f"traj-{i}"), config, token_provider=provider)
            barrier.wait(timeout=30)
            asyncio.run(one_call(handle))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=rollout, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert len(sessions) == 1
    assert counting.loads == 1
    assert counting.refreshes == 0
    assert provider.sign_count == 1
    requests = fake.requests_to(CHAT)
    assert len(requests) == 64
    assert len({r.header("authorization") for r in requests}) == 1
    assert {r.header("x-amzn-sagemaker-trajectory-id") for r in requests} == {
        f"traj-{i}" for i in range(64)
    }


# -- openai transport --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_transport_sends_headers_token_and_params_every_turn(
    fake: FakeJobRuntime, provider: TokenProvider, stream: bool
) -> None:
    """Every turn carries both SageMaker headers, the bearer token, model "default", params."""
    fake.reply(tool("add", {"n": 2}), text("done"))
    p = payload(fake.url, inferenceParams={"temperature": 0.5, "topP": 0.9, "maxTokens": 64})
    handle = build_model(p, PolicyConfig(stream=stream, max_retries=0), token_provider=provider)
    assert handle.transport == "openai"
    assert handle.endpoint == fake.url + "/v1"
    result = await play(handle)
    assert str(result).strip() == "done"
    assert result.metrics.accumulated_usage["totalTokens"] == 36
    requests = fake.requests_to(CHAT)
    assert len(requests) == 2
    for request in requests:
        assert request.header("X-Amzn-SageMaker-Job-Arn") == JOB_ARN
        assert request.header("X-Amzn-SageMaker-Trajectory-Id") == "traj-1"
        assert request.header("Authorization") == f"Bearer {provider.token()}"
        body = request.json()
        assert body["model"] == "default"
        assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.5, 0.9, 64)
        assert body["stream"] is stream
        assert "secret" not in request.body.decode()
    assert requests[1].json()["messages"][-1]["content"] == "value=2"


async def test_default_provider_signs_when_none_is_given(fake: FakeJobRuntime) -> None:
    """Without token_provider the process-wide provider's token is sent."""
    await one_call(build_model(payload(fake.url), PolicyConfig(max_retries=0)))
    (request,) = fake.requests_to(CHAT)
    expected = f"Bearer {default_token_provider().token('us-west-2')}"
    assert request.header("Authorization") == expected


@pytest.mark.parametrize("stream", [False, True])
async def test_a_403_re_signs_once_and_retries(
    fake: FakeJobRuntime, provider: TokenProvider, stream: bool
) -> None:
    """A 403 invalidates the token, re-signs once and resends the same request, which succeeds."""
    fake.fail(CHAT, 403, "AccessDeniedException", "token expired")
    fake.reply("hello")
    config = PolicyConfig(stream=stream, max_retries=0)
    events = await one_call(build_model(payload(fake.url), config, token_provider=provider))
    texts = [e.get("contentBlockDelta", {}).get("delta", {}).get("text") for e in events]
    assert "".join(t for t in texts if t) == "hello"
    requests = fake.requests_to(CHAT)
    assert len(requests) == 2
    assert provider.sign_count == 2
    assert requests[0].body == requests[1].body
    for request in requests:
        assert request.header("Authorization").startswith("Bearer sagemaker-api-key-")
        assert request.header("X-Amzn-SageMaker-Trajectory-Id") == "traj-1"


async def test_a_second_403_is_a_policy_error(
    fake: FakeJobRuntime, provider: TokenProvider
) -> None:
    """Two 403s in a row: one re-sign only, then a PolicyError naming HTTP 403."""
    fake.fail(CHAT, 403, "AccessDeniedException", "denied", times=3)
    handle = build_model(payload(fake.url), PolicyConfig(max_retries=2), token_provider=provider)
    with pytest.raises(PolicyError, match="HTTP 403"):
        await one_call(handle)
    assert len(fake.requests_to(CHAT)) == 2
    assert provider.sign_count == 2


@pytest.mark.parametrize(
    ("setup", "stream", "match"),
    [
        (lambda f: f.fail(CHAT, 500, times=5), False, "HTTP 500"),
        (lambda f: f.throttle(CHAT, times=5), True, "HTTP 429"),
        (lambda f: f.raw(CHAT, b"<html>oops</html>"), False, "garbage"),
        (lambda f: f.raw(CHAT, b'{"choices": []}'), False, "garbage"),
        (
            lambda f: f.raw(CHAT, b"data: {nope\n\n", content_type="text/event-stream"),
            True,
            "garbage",
        ),
        (
            lambda f: f.raw(CHAT, b"data: [DONE]\n\n", content_type="text/event-stream"),
            True,
            "without any choice",
        ),
        (lambda f: f.hang(CHAT), False, "timed out"),
        (lambda f: f.drop(CHAT), False, "cannot reach"),
    ],
    ids=["500", "429", "html", "no-choices", "bad-sse", "empty-stream", "hang", "drop"],
)
async def test_openai_failures_are_policy_errors(
    fake: FakeJobRuntime, provider: TokenProvider, setup: Any, stream: bool, match: str
) -> None:
    """5xx, throttling, garbage, empty streams, timeouts and dropped connections → PolicyError."""
    setup(fake)
    config = PolicyConfig(stream=stream, max_retries=0, **_short_for_hangs(match))
    with pytest.raises(PolicyError, match=match):
        await play(build_model(payload(fake.url), config, token_provider=provider))


async def test_retries_of_the_openai_client_absorb_a_transient_500(
    fake: FakeJobRuntime, provider: TokenProvider
) -> None:
    """With max_retries=1 one 500 is retried by the OpenAI client and the episode goes on."""
    fake.fail(CHAT, 500)
    fake.reply("fine")
    result = await play(
        build_model(payload(fake.url), PolicyConfig(max_retries=1), token_provider=provider)
    )
    assert str(result).strip() == "fine"
    assert len(fake.requests_to(CHAT)) == 2


async def test_a_garbage_answer_is_asked_again_within_the_retries(
    fake: FakeJobRuntime, provider: TokenProvider
) -> None:
    """A 200 whose body is not JSON (cut short, a proxy's page) is asked again when retries are
    allowed (the OpenAI client itself retries only statuses and transport errors)."""
    fake.raw(CHAT, b"<html>oops</html>")
    fake.reply("fine")
    result = await play(
        build_model(payload(fake.url), PolicyConfig(max_retries=1), token_provider=provider)
    )
    assert str(result).strip() == "fine"
    assert len(fake.requests_to(CHAT)) == 2


async def test_unreachable_endpoint_is_a_policy_error(provider: TokenProvider) -> None:
    """A closed port gives a PolicyError saying the endpoint cannot be reached."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    handle = build_model(
        payload(f"http://127.0.0.1:{port}"), PolicyConfig(max_retries=0), token_provider=provider
    )
    with pytest.raises(PolicyError, match="cannot reach"):
        await play(handle)


async def test_a_failure_after_a_tool_turn_is_found_inside_strands_wrapper(
    fake: FakeJobRuntime, provider: TokenProvider
) -> None:
    """A PolicyError on turn 2 comes wrapped by Strands; find_policy_error still finds it."""
    fake.reply(tool("add", {"n": 1}))
    original = fake._next_reply

    def then_fail(body: dict[str, Any]) -> Reply:
        fake.fail(CHAT, 502, "BadGateway", "upstream died")
        return original(body)

    fake._next_reply = then_fail  # type: ignore[method-assign]
    with pytest.raises(Exception, match="HTTP 502") as info:
        await play(
            build_model(payload(fake.url), PolicyConfig(max_retries=0), token_provider=provider)
        )
    found = find_policy_error(info.value)
    assert found is not None
    assert "HTTP 502" in str(found)
    assert find_policy_error(ValueError("x")) is None


async def test_episode_clients_share_one_ssl_context(
    fake: FakeJobRuntime, provider: TokenProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Episodes after the first create no new SSL context; aclose closes each episode's client."""
    await one_call(build_model(payload(fake.url), PolicyConfig(), token_provider=provider))
    created: list[object] = []
    real = ssl.create_default_context
    monkeypatch.setattr(
        ssl, "create_default_context", lambda *a, **k: created.append(1) or real(*a, **k)
    )
    handles = [
        build_model(payload(fake.url), PolicyConfig(), token_provider=provider) for _ in range(5)
    ]
    for handle in handles:
        await one_call(handle)
        assert handle.client.openai.is_closed()
    assert created == []


# -- plain mode --------------------------------------------------------------------------------


async def test_plain_mode_uses_the_configured_server(fake: FakeJobRuntime) -> None:
    """Without metadata the model calls config.base_url with its model id and key only."""
    config = PolicyConfig(base_url=fake.url + "/v1/", model_id="local-model", api_key="sk-local")
    handle = build_model(payload(None, inferenceParams={"temperature": 0.0}), config)
    assert handle.transport == "plain"
    result = await play(handle)
    assert str(result).strip() == "ok"
    (request,) = fake.requests_to(CHAT)
    assert request.header("Authorization") == "Bearer sk-local"
    assert request.header("X-Amzn-SageMaker-Job-Arn") is None
    assert request.json()["model"] == "local-model"
    assert request.json()["temperature"] == 0.0
    assert "sk-local" not in repr(config)


def test_plain_mode_without_a_server_says_how_to_configure_one() -> None:
    """No metadata and no base URL: a PolicyError naming AGENT_KIT_POLICY_URL."""
    with pytest.raises(PolicyError, match="AGENT_KIT_POLICY_URL"):
        build_model(payload(None), PolicyConfig())


def test_config_from_settings() -> None:
    """from_settings takes the AGENT_KIT_POLICY_* settings (OPENAI_* their fallbacks); overrides
    win; a bad value is refused where the settings are read, naming the variable."""
    env = {
        "AGENT_KIT_POLICY_TRANSPORT": "Sample",
        "AGENT_KIT_POLICY_STREAM": "true",
        "AGENT_KIT_POLICY_TIMEOUT": "12.5",
        "AGENT_KIT_POLICY_MAX_RETRIES": "4",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_API_KEY": "sk-x",
        "AGENT_KIT_POLICY_MODEL": "m",
    }
    config = PolicyConfig.from_settings(Settings.from_environ(env), max_retries=1)
    assert (config.transport, config.stream, config.timeout_s, config.max_retries) == (
        "sample",
        True,
        12.5,
        1,
    )
    assert (config.base_url, config.api_key, config.model_id) == (
        "http://127.0.0.1:9/v1",
        "sk-x",
        "m",
    )
    env["AGENT_KIT_POLICY_URL"] = "http://127.0.0.1:8/v1"
    assert (
        PolicyConfig.from_settings(Settings.from_environ(env)).base_url
        == env["AGENT_KIT_POLICY_URL"]
    )
    assert PolicyConfig.from_settings() == PolicyConfig()  # the defaults
    with pytest.raises(UsageError, match="AGENT_KIT_POLICY_STREAM"):
        Settings.from_environ({"AGENT_KIT_POLICY_STREAM": "maybe"})
    with pytest.raises(UsageError, match="AGENT_KIT_POLICY_TIMEOUT"):
        Settings.from_environ({"AGENT_KIT_POLICY_TIMEOUT": "soon"})
    with pytest.raises(UsageError, match="AGENT_KIT_POLICY_TRANSPORT"):
        Settings.from_environ({"AGENT_KIT_POLICY_TRANSPORT": "carrier-pigeon"})
    with pytest.raises(UsageError, match="transport"):
        PolicyConfig(transport="carrier-pigeon")  # type: ignore[arg-type]


# -- sample transport --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "stream_format", "route"),
    [
        (False, "sse", "/sample"),
        (True, "sse", "/sample-with-response-stream"),
        (True, "eventstream", "/sample-with-response-stream"),
    ],
)
async def test_sample_transport_plays_an_episode(
    stream: bool, stream_format: Any, route: str
) -> None:
    """The OpenAI body goes through boto3 Sample(/stream) with SigV4, both headers and params."""
    with FakeJobRuntime([tool("add", {"n": 2}), text("done")], stream_format=stream_format) as fake:
        config = PolicyConfig(transport="sample", stream=stream, max_retries=0)
        p = payload(fake.url, inferenceParams={"temperature": 0.25, "maxTokens": 32})
        handle = build_model(p, config)
        assert handle.transport == "sample"
        result = await play(handle)
        assert str(result).strip() == "done"
        assert result.metrics.accumulated_usage["totalTokens"] == 36
        requests = fake.requests_to(route)
        assert len(requests) == 2
        assert len(fake.requests) == 2
        for request in requests:
            assert request.header("Authorization").startswith(
                "AWS4-HMAC-SHA256 Credential=AKIDTESTTEST/"
            )
            assert "/us-west-2/sagemaker/aws4_request" in request.header("Authorization")
            assert request.header("X-Amzn-SageMaker-Job-Arn") == JOB_ARN
            assert request.header("X-Amzn-SageMaker-Trajectory-Id") == "traj-1"
            body = request.json()
            assert (body["model"], body["stream"], body["temperature"], body["max_tokens"]) == (
                "default", stream, 0.25, 32,
            )  # fmt: skip


async def test_sample_eventstream_exception_frame_is_a_policy_error() -> None:
    """An exception frame inside an event-stream body ends the call with a PolicyError."""
    with FakeJobRuntime(stream_format="eventstream", stream_exception="ModelStreamError") as fake:
        handle = build_model(
            payload(fake.url), PolicyConfig(transport="sample", stream=True, max_retries=0)
        )
        with pytest.raises(PolicyError, match="ModelStreamError: model stream failed"):
            await play(handle)


@pytest.mark.parametrize(
    ("setup", "stream", "match"),
    [
        (lambda f: f.fail("/sample", 500), False, "HTTP 500: InternalServiceError"),
        (lambda f: f.fail("/sample", 403, "AccessDeniedException", "no"), False, "HTTP 403"),
        (lambda f: f.raw("/sample", b"nonsense"), False, "garbage"),
        (
            lambda f: f.raw(
                "/sample-with-response-stream", b"data: 42\n\n", content_type="text/event-stream"
            ),
            True,
            "garbage",
        ),
        (lambda f: f.hang("/sample"), False, "timed out"),
    ],
    ids=["500", "403", "garbage", "bad-chunk", "hang"],
)
async def test_sample_failures_are_policy_errors(setup: Any, stream: bool, match: str) -> None:
    """Sample errors, garbage bodies and timeouts surface as PolicyError with the reason."""
    with FakeJobRuntime() as fake:
        setup(fake)
        config = PolicyConfig(
            transport="sample", stream=stream, max_retries=0, **_short_for_hangs(match)
        )
        with pytest.raises(PolicyError, match=match):
            await play(build_model(payload(fake.url), config))


async def test_sample_transport_keeps_botocore_retries() -> None:
    """With max_retries=1 botocore retries one throttled Sample call and the episode succeeds."""
    with FakeJobRuntime(["after retry"]) as fake:
        fake.throttle("/sample")
        handle = build_model(payload(fake.url), PolicyConfig(transport="sample", max_retries=1))
        assert str(await play(handle)).strip() == "after retry"
        assert len(fake.requests_to("/sample")) == 2


# -- wire decoding -----------------------------------------------------------------------------


def test_sse_decoder_handles_any_split() -> None:
    """Events come out identical however the byte stream is split (CRLF, comments, multi-line)."""
    body = (
        b': hello\r\ndata: {"a": 1}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n'
    )
    expected = ['{"a": 1}', "line1\nline2", "[DONE]"]
    for cut in range(len(body) + 1):
        decoder = SSEDecoder()
        assert decoder.feed(body[:cut]) + decoder.feed(body[cut:]) + decoder.close() == expected
    decoder = SSEDecoder()
    assert [e for b in body for e in decoder.feed(bytes([b]))] == expected
    tail = SSEDecoder()
    assert tail.feed(b"data: last") == []
    assert tail.close() == ["last"]


def test_eventstream_decoder_reassembles_frames_split_anywhere() -> None:
    """PayloadPart frames split at every byte position decode to the original SSE bytes."""
    events = stream_events(Reply(content="hi"), 0, include_usage=True)
    body = b"".join(encode_event("PayloadPart", e) for e in events)
    for cut in range(0, len(body) + 1, 7):
        decoder = EventStreamDecoder()
        assert b"".join(decoder.feed(body[:cut]) + decoder.feed(body[cut:])) == b"".join(events)


def test_eventstream_decoder_rejects_errors_and_corruption() -> None:
    """Exception frames and CRC-corrupted frames raise PolicyError."""
    frame = encode_event(
        "ThrottlingException", b'{"Message": "slow down"}', message_type="exception",
        type_key=":exception-type", content_type="application/json",
    )  # fmt: skip
    with pytest.raises(PolicyError, match="ThrottlingException: slow down"):
        EventStreamDecoder().feed(frame)
    good = bytearray(encode_event("PayloadPart", b"data: {}\n\n"))
    good[-1] ^= 0xFF
    with pytest.raises(PolicyError, match="not a valid AWS event stream"):
        EventStreamDecoder().feed(bytes(good))


def test_chunk_and_completion_parsing_is_lenient_on_ids_and_strict_on_shape() -> None:
    """Minimal chunks/completions parse; errors, non-objects and no choices are PolicyErrors."""
    chunk = parse_chunk('{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}')
    assert chunk.choices[0].delta.content == "x"
    assert chunk.choices[0].index == 0
    assert (
        parse_chunk(
            '{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}'
        ).usage.total_tokens
        == 3
    )  # type: ignore[union-attr]
    done = parse_completion(b'{"choices":[{"message":{"content":"y"}}]}')
    assert done.choices[0].message.content == "y"
    assert done.choices[0].message.role == "assistant"
    for bad in ("[1]", '{"choices": "x"}', '{"error": {"message": "overloaded"}}', "nan-json"):
        with pytest.raises(PolicyError):
            parse_chunk(bad)
    with pytest.raises(PolicyError, match="no choices"):
        parse_completion(b'{"choices": []}')
