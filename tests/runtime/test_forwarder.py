"""The Lambda forwarder handler and the agent-side ``/rollout`` + ``/health`` routes.

The handler (``agent_kit/deploy/lambda_template/lambda_function.py``, the exact source the forwarder
zip ships) is invoked in-process like Lambda would; the agent behind ``AGENT_ENDPOINT`` is a real
subprocess serving a BedrockAgentCoreApp with :func:`enable_forwarder_routes`, and it plays the
rollout against the emulator served on loopback.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bedrock_agentcore.runtime import BedrockAgentCoreApp
from conftest import RunningEmulator, serve_app
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from agent_kit.deploy.lambda_template import lambda_function
from agent_kit.forwarder import enable_forwarder_routes

SECRET = "s3cr3t-forwarder-token"
AGENTS = Path(__file__).resolve().parents[1] / "agents"
AGENT_SOURCE = """\
import os

from bedrock_agentcore.runtime import BedrockAgentCoreApp

from _contract import good_rollout
from agent_kit.forwarder import enable_forwarder_routes

app = BedrockAgentCoreApp()


@app.entrypoint
def invoke(payload):
    return good_rollout(payload)


enable_forwarder_routes(app, os.environ.get("AGENT_KIT_FORWARDER_SECRET"))

if __name__ == "__main__":
    app.run(port=int(os.environ["AGENT_PORT"]))
"""
JOB_ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/my-job"


def free_port() -> int:
    """An ephemeral loopback port number (bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def agent_url(tmp_path: Path) -> Iterator[str]:
    """A real agent subprocess with forwarder routes on loopback; yields its base URL."""
    (tmp_path / "fwd_agent.py").write_text(AGENT_SOURCE)
    port = free_port()
    env = dict(os.environ)
    env.update(
        AGENT_PORT=str(port),
        AGENT_KIT_FORWARDER_SECRET=SECRET,
        # The agent signs its calls like the SDK; this emulator checks only their shape.
        AWS_ACCESS_KEY_ID="AKIDFORWARDERTEST",
        AWS_SECRET_ACCESS_KEY="forwarder-test-secret",
        PYTHONPATH=os.pathsep.join([str(AGENTS), str(Path(__file__).resolve().parents[2])]),
    )
    log = tmp_path / "agent.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, str(tmp_path / "fwd_agent.py")],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"agent did not start: {log.read_text()[-2000:]}")
        time.sleep(0.05)  # polling a readiness probe with a deadline
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@pytest.fixture
def lambda_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Forwarder environment with the shared secret; AGENT_ENDPOINT set by each test."""
    monkeypatch.setenv("AGENT_SECRET", SECRET)
    monkeypatch.setenv("ROLLOUT_TIMEOUT_SECONDS", "600")
    return monkeypatch


def test_forwarder_completes_a_rollout_against_the_emulator(
    running_emulator: RunningEmulator, agent_url: str, lambda_env: pytest.MonkeyPatch
) -> None:
    """handler → agent /rollout → emulator: the rollout is sampled, completed and rewarded."""
    lambda_env.setenv("AGENT_ENDPOINT", agent_url)
    payload = running_emulator.mint('{"prompt": "play", "turns": 2, "reward": 0.75}')
    result = lambda_function.handler(payload, None)
    assert result == {"reward": 0.75, "turns": 2}
    tid = payload["metadata"]["rolloutId"]
    row = running_emulator.run_store.get_trajectory(tid)
    assert row is not None
    assert row.state == "REWARDED"
    assert running_emulator.emulator.turn_count(tid) == 2


def test_wrong_secret_is_access_denied(agent_url: str, lambda_env: pytest.MonkeyPatch) -> None:
    """The agent refuses a wrong bearer secret; the forwarder reports AccessDenied."""
    lambda_env.setenv("AGENT_ENDPOINT", agent_url)
    lambda_env.setenv("AGENT_SECRET", "wrong")
    result = lambda_function.handler({"prompt": "x"}, None)
    assert result["errorType"] == "AccessDenied"
    assert "401" in result["errorMessage"]


@pytest.mark.parametrize(
    ("event", "fragment"),
    [
        ("not json", "not valid JSON"),
        ([1, 2], "JSON object"),
        ({"metadata": {}}, "prompt"),
        ({"prompt": 3}, "prompt"),
        ({"prompt": "x", "metadata": {"jobArn": "arn:bad", "rolloutId": "r"}}, "jobArn"),
        ({"prompt": "x", "metadata": {"jobArn": JOB_ARN, "rolloutId": ""}}, "rolloutId"),
        ({"prompt": "x", "metadata": {"jobArn": JOB_ARN}}, "rolloutId"),
        ({"prompt": "x", "metadata": "m"}, "metadata"),
        ({"prompt": "x", "inferenceParams": [1]}, "inferenceParams"),
    ],
)
def test_bad_events_are_validation_errors(
    lambda_env: pytest.MonkeyPatch, event: Any, fragment: str
) -> None:
    """Malformed payloads are refused before any request, as ValidationError."""
    lambda_env.setenv("AGENT_ENDPOINT", "http://127.0.0.1:9")
    result = lambda_function.handler(event, None)
    assert result["errorType"] == "ValidationError"
    assert fragment in result["errorMessage"]


def test_unreachable_agent_is_internal_error(lambda_env: pytest.MonkeyPatch) -> None:
    """Nothing listening at AGENT_ENDPOINT → InternalServerError naming the cause."""
    lambda_env.setenv("AGENT_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    result = lambda_function.handler({"prompt": "x"}, None)
    assert result["errorType"] == "InternalServerError"
    assert "unreachable" in result["errorMessage"]


def test_missing_configuration_is_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without AGENT_ENDPOINT / AGENT_SECRET the forwarder says which is missing."""
    monkeypatch.delenv("AGENT_ENDPOINT", raising=False)
    monkeypatch.delenv("AGENT_SECRET", raising=False)
    result = lambda_function.handler({"prompt": "x"}, None)
    assert result == {
        "errorType": "InternalServerError",
        "errorMessage": "AGENT_ENDPOINT is not an http(s) URL",
    }
    monkeypatch.setenv("AGENT_ENDPOINT", "http://127.0.0.1:9")
    assert lambda_function.handler({"prompt": "x"}, None)["errorMessage"] == (
        "AGENT_SECRET is not set"
    )


def _status_app(status: int, hang: bool = False) -> Starlette:
    async def rollout(request: Request) -> Response:
        if hang:
            await request.receive()  # body
            await request.receive()  # waits for the client to disconnect
        return JSONResponse({"message": "nope"}, status_code=status)

    return Starlette(routes=[Route("/rollout", rollout, methods=["POST"])])


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (429, "Throttling"),
        (503, "Throttling"),
        (403, "AccessDenied"),
        (400, "ValidationError"),
        (500, "InternalServerError"),
    ],
)
def test_agent_statuses_map_to_error_types(
    lambda_env: pytest.MonkeyPatch, status: int, error_type: str
) -> None:
    """Each agent HTTP failure maps to its documented errorType, with the status in the text."""
    with serve_app(_status_app(status)) as url:
        lambda_env.setenv("AGENT_ENDPOINT", url)
        result = lambda_function.handler({"prompt": "x"}, None)
    assert result["errorType"] == error_type
    assert str(status) in result["errorMessage"]


def test_hanging_agent_times_out_below_rollout_timeout(lambda_env: pytest.MonkeyPatch) -> None:
    """The HTTP timeout is rollout_timeout minus the margin; a hang becomes InternalServerError."""
    lambda_env.setenv("ROLLOUT_TIMEOUT_SECONDS", "301")
    lambda_env.setenv("TIMEOUT_MARGIN_SECONDS", "300")
    with serve_app(_status_app(200, hang=True)) as url:
        lambda_env.setenv("AGENT_ENDPOINT", url)
        result = lambda_function.handler({"prompt": "x"}, None)
    assert result == {
        "errorType": "InternalServerError",
        "errorMessage": "agent did not answer in time",
    }


def _local_app(secret: str | None) -> BedrockAgentCoreApp:
    app = BedrockAgentCoreApp()

    @app.entrypoint
    def invoke(payload: dict[str, Any]) -> dict[str, Any]:
        return {"echo": payload.get("prompt")}

    enable_forwarder_routes(app, secret)
    enable_forwarder_routes(app, secret)  # idempotent
    return app


def test_routes_require_the_configured_secret() -> None:
    """/rollout: 500 without a configured secret, 401 on a wrong one, the entrypoint on a match."""
    unset = TestClient(_local_app(None))
    refused = unset.post("/rollout", json={"prompt": "hi"})
    assert refused.status_code == 500
    assert "AGENT_KIT_FORWARDER_SECRET" in refused.json()["errorMessage"]
    app = _local_app(SECRET)
    assert [getattr(r, "path", "") for r in app.router.routes].count("/rollout") == 1
    client = TestClient(app)
    denied = client.post("/rollout", json={"prompt": "hi"}, headers={"Authorization": "Bearer x"})
    assert denied.status_code == 401
    assert denied.json()["errorType"] == "AccessDenied"
    ok = client.post(
        "/rollout", json={"prompt": "hi"}, headers={"Authorization": f"Bearer {SECRET}"}
    )
    assert ok.status_code == 200
    assert ok.json() == {"echo": "hi"}


def test_health_mirrors_ping_without_secret() -> None:
    """/health answers like /ping and needs no secret."""
    client = TestClient(_local_app(None))
    health = client.get("/health")
    assert health.status_code == 200
    assert health.json()["status"] == client.get("/ping").json()["status"] == "Healthy"
