"""Invokers: local entrypoint processes, a running URL, AgentCore and Lambda through boto3.

The AWS invokers run real boto3 clients (dummy credentials, ``endpoint_url``) against small
local fakes of the AgentCore data plane and the Lambda Invoke API — the AWS boundary we cannot
reach — which forward to a real agent served by uvicorn on loopback.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import serve_app
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.invokers import (
    AgentCoreInvoker,
    HttpInvoker,
    LambdaInvoker,
    RateLimiter,
    SubprocessInvoker,
    make_invoker,
    parse_response_body,
)
from agent_kit.driver.local import run_local
from agent_kit.errors import InvokerError, UsageError

pytestmark = pytest.mark.e2e

AGENTS = Path(__file__).parents[1] / "agents"
SESSION = "s" * 40
SERVE = [sys.executable, "-m", "agent_kit.driver._serve"]
RUNTIME_ARN = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/demo-abcdefghij"
LAMBDA_ARN = "arn:aws:lambda:us-west-2:123456789012:function:forwarder"


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dummy credentials so boto3 signs requests to the local fakes."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@contextmanager
def _serve_agent(entrypoint: Path, log_path: Path) -> Iterator[str]:
    """Serve an entrypoint with `python -m agent_kit.driver._serve` on a loopback socket."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [*SERVE, str(entrypoint), "--fd", str(sock.fileno())],
        pass_fds=(sock.fileno(),),
        stdout=log,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, "agent exited"
            assert time.monotonic() < deadline, "agent did not answer /ping"
            try:
                if httpx.get(url + "/ping", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)  # polling /ping with a deadline
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
        sock.close()


@pytest.fixture(scope="module")
def echo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The echo agent served in its own process on loopback."""
    log = tmp_path_factory.mktemp("echo") / "agent.log"
    with _serve_agent(AGENTS / "echo_agent.py", log) as url:
        yield url


async def test_subprocess_invoker_round_trip_and_workers(tmp_path: Path) -> None:
    """Two workers start, answer /invocations with the session header, and share the load."""
    events: list[tuple[str, dict[str, Any]]] = []
    inv = SubprocessInvoker(
        AGENTS / "echo_agent.py",
        workers=2,
        log_dir=tmp_path,
        on_event=lambda kind, detail: events.append((kind, detail)),
    )
    await inv.start()
    try:
        first, second = await asyncio.gather(
            inv.invoke({"prompt": "a"}, SESSION, 30), inv.invoke({"prompt": "b"}, SESSION, 30)
        )
        assert first.ok
        assert second.ok
        assert first.body["echo"] == {"prompt": "a"}
        assert first.body["session"] == SESSION
        assert {first.body["pid"], second.body["pid"]} == set(inv.pids)
        assert len(set(inv.pids)) == 2
        stream = await inv.invoke({"stream": True}, SESSION, 30)
        assert stream.body == [{"i": 0}, {"i": 1}, {"i": 2}]
        failed = await inv.invoke({"fail": "boom"}, SESSION, 30)
        assert failed.status == "error"
        assert failed.http_status == 500
        assert "boom" in (failed.error or "")
    finally:
        await inv.aclose()
    assert [k for k, _ in events].count("agent_start") == 2
    assert all(p.is_file() for p in inv.log_paths)
    assert inv.pids == []


async def test_subprocess_invoker_restarts_a_crashed_agent(tmp_path: Path) -> None:
    """A crash makes the invocation `unreachable`; the worker is restarted and serves again."""
    events: list[str] = []
    inv = SubprocessInvoker(
        AGENTS / "echo_agent.py", log_dir=tmp_path, on_event=lambda k, d: events.append(k)
    )
    await inv.start()
    try:
        (old_pid,) = inv.pids
        crashed = await inv.invoke({"crash": True}, SESSION, 30)
        assert crashed.status == "unreachable"
        assert "crashed or restarted" in (crashed.error or "")
        after = await inv.invoke({"prompt": "again"}, SESSION, 30)
        assert after.ok, after.error
        assert after.body["pid"] != old_pid
        assert inv.restarts == 1
    finally:
        await inv.aclose()
    assert events.count("agent_exit") == 1
    assert events.count("agent_start") == 2


async def test_a_standby_agent_imports_the_entrypoint_only_when_started(tmp_path: Path) -> None:
    """A standby worker is up before its entrypoint is final: the file, broken when the process
    was spawned, is imported as it is at start(); a standby never started ends with the
    invoker."""
    entrypoint = tmp_path / "agent.py"
    entrypoint.write_text("this is not python (yet)\n", encoding="utf-8")
    inv = SubprocessInvoker(entrypoint, log_dir=tmp_path / "a", standby=True)
    await inv.spawn()
    try:
        (pid,) = inv.pids
        entrypoint.write_text((AGENTS / "echo_agent.py").read_text(encoding="utf-8"))
        await inv.start()
        assert inv.pids == [pid]
        answer = await inv.invoke({"prompt": "ready"}, SESSION, 30)
        assert answer.ok, answer.error
        assert answer.body["echo"] == {"prompt": "ready"}
    finally:
        await inv.aclose()
    unused = SubprocessInvoker(entrypoint, log_dir=tmp_path / "b", standby=True)
    await unused.spawn()
    (waiting,) = unused.pids
    await unused.aclose()
    assert unused.pids == []
    with pytest.raises(ProcessLookupError):
        os.kill(waiting, 0)


async def test_a_start_cancelled_while_waiting_for_ping_leaves_no_task(tmp_path: Path) -> None:
    """A start cancelled while the agent still imports (a stop during start-up) ends with no
    task left behind and no error unread (asyncio reports none), and ends the process."""
    slow = tmp_path / "slow_agent.py"
    echo = (AGENTS / "echo_agent.py").read_text(encoding="utf-8")
    slow.write_text('print("importing", flush=True)\nimport time\ntime.sleep(60)\n' + echo)
    unread: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _, context: unread.append(context))
    inv = SubprocessInvoker(slow, log_dir=tmp_path)
    starting = asyncio.ensure_future(inv.start())
    deadline = time.monotonic() + 60
    while "importing" not in "".join(p.read_text() for p in inv.log_paths if p.is_file()):
        assert time.monotonic() < deadline, "the agent never started importing"
        await asyncio.sleep(0.05)  # polling the agent's log, with a deadline
    pids = inv.pids
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    await inv.aclose()
    gc.collect()  # an unread task error is reported as the task is collected
    assert unread == []
    assert pids
    assert inv.pids == []


async def test_subprocess_invoker_timeout(tmp_path: Path) -> None:
    """An agent that does not answer within the timeout gives status `timeout`."""
    inv = SubprocessInvoker(AGENTS / "echo_agent.py", log_dir=tmp_path)
    await inv.start()
    try:
        result = await inv.invoke({"hang": True}, SESSION, 0.5)
        assert result.status == "timeout"
    finally:
        await inv.aclose()


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ("broken_import_agent.py", "this entrypoint is broken on purpose"),
        ("no_app_agent.py", "has no module-level ASGI `app`"),
    ],
)
async def test_subprocess_invoker_startup_failure(tmp_path: Path, agent: str, message: str) -> None:
    """An entrypoint that cannot start gives InvokerError carrying its log tail."""
    inv = SubprocessInvoker(AGENTS / agent, log_dir=tmp_path)
    with pytest.raises(InvokerError, match="before answering /ping") as info:
        await inv.start()
    assert message in str(info.value)


async def test_http_invoker(echo_url: str) -> None:
    """An already running agent is reached by URL (with or without /invocations)."""
    inv = HttpInvoker(echo_url + "/invocations")
    await inv.start()
    try:
        result = await inv.invoke({"prompt": "x"}, SESSION, 10)
        assert result.ok
        assert result.body["echo"] == {"prompt": "x"}
    finally:
        await inv.aclose()


async def test_http_invoker_nothing_listening() -> None:
    """A URL with no agent behind it fails fast at start with InvokerError."""
    inv = HttpInvoker("http://127.0.0.1:9/", startup_timeout=0.5)
    with pytest.raises(InvokerError, match="no agent answering"):
        await inv.start()
    await inv.aclose()


def _fake_agentcore(agent_url: str, calls: list[dict[str, Any]]) -> Starlette:
    async def invocations(request: Request) -> Response:
        body = await request.body()
        calls.append(
            {
                "op": "invoke",
                "arn": request.path_params["arn"],
                "qualifier": request.query_params.get("qualifier"),
                "session": request.headers.get("x-amzn-bedrock-agentcore-runtime-session-id"),
            }
        )
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                f"{agent_url}/invocations",
                content=body,
                headers={"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": calls[-1]["session"]},
            )
        return Response(
            answer.content,
            status_code=answer.status_code,
            media_type=answer.headers.get("content-type"),
        )

    async def stop(request: Request) -> Response:
        calls.append(
            {
                "op": "stop",
                "arn": request.path_params["arn"],
                "session": request.headers.get("x-amzn-bedrock-agentcore-runtime-session-id"),
            }
        )
        return Response(b"{}", media_type="application/json")

    return Starlette(
        routes=[
            Route("/runtimes/{arn:path}/invocations", invocations, methods=["POST"]),
            Route("/runtimes/{arn:path}/stopruntimesession", stop, methods=["POST"]),
        ]
    )


@pytest.mark.usefixtures("aws_env")
async def test_agentcore_invoker_offline(echo_url: str) -> None:
    """invoke_agent_runtime reaches the agent (JSON and SSE); each rollout stops its session."""
    calls: list[dict[str, Any]] = []
    with serve_app(_fake_agentcore(echo_url, calls)) as fake:
        inv = AgentCoreInvoker(RUNTIME_ARN, endpoint_url=fake, rate=50)
        await inv.start()
        try:
            result = await inv.invoke({"prompt": "hi"}, SESSION, 30)
            streamed = await inv.invoke({"stream": True}, SESSION + "2", 30)
        finally:
            await inv.aclose()
    assert result.ok, result.error
    assert result.body["echo"] == {"prompt": "hi"}
    assert result.body["session"] == SESSION
    assert streamed.body == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert [c["op"] for c in calls] == ["invoke", "stop", "invoke", "stop"]
    assert all(c["arn"] == RUNTIME_ARN for c in calls)
    assert calls[0]["qualifier"] == "DEFAULT"
    assert calls[1]["session"] == SESSION


@pytest.mark.usefixtures("aws_env")
async def test_agentcore_invoker_via_environment(
    echo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS_ENDPOINT_URL_BEDROCK_AGENTCORE points make_invoker's client at the fake runtime."""
    calls: list[dict[str, Any]] = []
    with serve_app(_fake_agentcore(echo_url, calls)) as fake:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", fake)
        inv = make_invoker(RUNTIME_ARN + ":live")
        assert isinstance(inv, AgentCoreInvoker)
        await inv.start()
        try:
            result = await inv.invoke({"fail": "nope"}, SESSION, 30)
        finally:
            await inv.aclose()
    assert result.status in ("error", "unreachable")
    assert calls[0]["qualifier"] == "live"


def _fake_lambda(agent_url: str, calls: list[str]) -> Starlette:
    async def invoke(request: Request) -> Response:
        calls.append(request.path_params["name"])
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                f"{agent_url}/invocations",
                content=await request.body(),
                headers={"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": SESSION},
            )
        headers = {} if answer.is_success else {"X-Amz-Function-Error": "Unhandled"}
        body = (
            answer.content
            if answer.is_success
            else json.dumps(
                {"errorMessage": answer.json().get("error"), "errorType": "HTTPError"}
            ).encode()
        )
        return Response(body, media_type="application/json", headers=headers)

    return Starlette(
        routes=[Route("/2015-03-31/functions/{name:path}/invocations", invoke, methods=["POST"])]
    )


@pytest.mark.usefixtures("aws_env")
async def test_lambda_invoker_offline(echo_url: str) -> None:
    """A Lambda forwarder is invoked RequestResponse; a FunctionError becomes status `error`."""
    calls: list[str] = []
    with serve_app(_fake_lambda(echo_url, calls)) as fake:
        inv = LambdaInvoker(LAMBDA_ARN, endpoint_url=fake)
        await inv.start()
        try:
            ok = await inv.invoke({"prompt": "hi"}, SESSION, 30)
            bad = await inv.invoke({"fail": "kaput"}, SESSION, 30)
        finally:
            await inv.aclose()
    assert ok.ok
    assert ok.body["echo"] == {"prompt": "hi"}
    assert bad.status == "error"
    assert "kaput" in (bad.error or "")
    assert calls == [LAMBDA_ARN, LAMBDA_ARN]


async def test_rate_limiter_spaces_calls() -> None:
    """Past its burst, the token bucket makes callers wait 1/rate per call (fake clock)."""
    clock = [100.0]
    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock[0] += seconds

    limiter = RateLimiter(25.0, clock=lambda: clock[0], sleep=fake_sleep)
    for _ in range(27):
        await limiter.acquire()
    assert len(sleeps) == 2
    assert sleeps == pytest.approx([0.04, 0.04])


def test_make_invoker_dispatch(tmp_path: Path) -> None:
    """Targets map to the right invoker; anything else is a UsageError."""
    assert isinstance(make_invoker(str(AGENTS / "echo_agent.py")), SubprocessInvoker)
    assert isinstance(make_invoker("http://127.0.0.1:8080"), HttpInvoker)
    assert isinstance(make_invoker(RUNTIME_ARN), AgentCoreInvoker)
    assert isinstance(make_invoker(LAMBDA_ARN), LambdaInvoker)
    with pytest.raises(UsageError, match="don't know how to invoke"):
        make_invoker("ftp://x")
    with pytest.raises(UsageError, match="unsupported ARN"):
        make_invoker("arn:aws:s3:::bucket")
    with pytest.raises(UsageError, match="entrypoint not found"):
        make_invoker(str(tmp_path / "missing.py"))
    with pytest.raises(UsageError, match="rate limit must be positive"):
        RateLimiter(0)


def test_parse_response_body() -> None:
    """JSON bodies decode to values, SSE bodies to the list of their data events."""
    assert parse_response_body("application/json", b'{"a": 1}') == {"a": 1}
    sse = b'data: {"i": 0}\n\ndata: "x"\n\ndata: [DONE]\n\n'
    assert parse_response_body("text/event-stream; charset=utf-8", sse) == [{"i": 0}, "x"]
    assert parse_response_body(None, b"") is None
    assert parse_response_body("text/plain", b"hello") == "hello"


@pytest.mark.usefixtures("aws_env")
async def test_driver_through_agentcore_invoker(tmp_path: Path) -> None:
    """A whole job runs through the AgentCore invoker (fake runtime → real agent → emulator)."""
    tasks = [{"turns": 1, "reward": 0.5}, {"turns": 2, "reward": 1.0}]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": json.dumps(t)}) + "\n" for t in tasks))
    calls: list[dict[str, Any]] = []
    with (
        _serve_agent(AGENTS / "good_agent.py", tmp_path / "agent.log") as agent,
        serve_app(_fake_agentcore(agent, calls)) as fake,
    ):
        config = JobConfig(name="remote", group_size=2, concurrency=4, rollout_timeout=30)
        result = await run_local(
            RunConfig(
                entrypoint=RUNTIME_ARN,
                dataset=data,
                job=config,
                out=tmp_path,
                endpoint_url=fake,
                rate=100,
            )
        )
    assert result.status == "completed", result.failure
    assert result.succeeded == 4
    invokes = [c for c in calls if c["op"] == "invoke"]
    stops = [c for c in calls if c["op"] == "stop"]
    assert len(invokes) == len(stops) == 4
    assert {c["session"] for c in invokes} == {c["session"] for c in stops}
    assert all(len(c["session"]) >= 33 for c in invokes)
