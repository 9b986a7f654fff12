"""`--advertise-url`: a token-guarded emulator reached by a deployed agent through a tunnel.

The tunnel is a tiny reverse proxy on another loopback port; the deployed runtime is the fake
AgentCore data plane of ``test_invokers`` forwarding to a real agent process.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError
from conftest import RunningEmulator, serve_app
from fakes.clients import runtime_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from test_invokers import AGENTS, RUNTIME_ARN, _fake_agentcore, _serve_agent

from agent_kit.cli import main
from agent_kit.contract import TrajectoryState
from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.local import run_local
from agent_kit.driver.tunnel import advertised_endpoint, redact, validate_advertise_url
from agent_kit.emulator.core import Emulator
from agent_kit.emulator.server import create_app
from agent_kit.errors import UsageError
from agent_kit.store import RunStore

pytestmark = pytest.mark.e2e

PREFIX = "tok-Abc_123"
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dummy credentials so boto3 signs requests to the local fakes."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def test_validate_advertise_url() -> None:
    """https URLs (http only for loopback) are accepted; anything else is a clear UsageError."""
    assert (
        validate_advertise_url("https://abc.trycloudflare.com/") == "https://abc.trycloudflare.com"
    )
    assert validate_advertise_url("https://h.example/base/") == "https://h.example/base"
    assert validate_advertise_url("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
    assert validate_advertise_url("http://localhost:1") == "http://localhost:1"
    assert validate_advertise_url("http://[::1]:9") == "http://[::1]:9"
    bad = {
        "http://example.com": "must use https",
        "ftp://example.com": "must be an http",
        "example.com": "must be an http",
        "https://": "has no host",
        "https://h.example/?a=1": "query or fragment",
        "https://h.example/#x": "query or fragment",
        "https://h.example:99999": "not a valid URL",
    }
    for url, message in bad.items():
        with pytest.raises(UsageError, match=message):
            validate_advertise_url(url)
    assert advertised_endpoint("https://h.example/", "T") == "https://h.example/T"
    assert redact("see https://h.example/T/x", "T") == "see https://h.example/<token>/x"


def test_create_app_path_prefix(emulator: Emulator, run_store: RunStore) -> None:
    """Routes answer only under the prefix (root is a contract 404); boto3 keeps the path."""
    with pytest.raises(UsageError, match="path_prefix"):
        create_app(emulator, path_prefix="a b")
    with serve_app(create_app(emulator, path_prefix=PREFIX)) as url:
        run = RunningEmulator(url, emulator, str(emulator.default_job_arn), run_store)
        assert httpx.get(url + "/health").status_code == 200
        root = httpx.post(url + "/complete-rollout", content=b"{}", headers={"authorization": "x"})
        assert root.status_code == 404
        assert root.headers["x-amzn-errortype"] == "ResourceNotFoundException"
        assert set(root.json()) == {"Message"}
        minted = httpx.post(url + f"/{PREFIX}/_emulator/rollouts", json={}).json()
        assert minted["metadata"]["endpoint"] == f"{url}/{PREFIX}"
        assert httpx.post(url + "/_emulator/rollouts", json={}).status_code == 404
        missing = httpx.post(url + f"/{PREFIX}/nope", content=b"{}")
        assert missing.status_code == 404
        assert PREFIX not in missing.json()["Message"]

        tid = run.mint()["metadata"]["rolloutId"]
        rooted, prefixed = runtime_client(url), runtime_client(f"{url}/{PREFIX}")
        try:
            with pytest.raises(ClientError) as info:
                rooted.complete_rollout(JobArn=run.job_arn, TrajectoryId=tid, Status="ready")
            assert info.value.response["Error"]["Code"] == "ResourceNotFoundException"
            prefixed.sample(JobArn=run.job_arn, TrajectoryId=tid, Body=BODY)
            prefixed.complete_rollout(JobArn=run.job_arn, TrajectoryId=tid, Status="ready")
            prefixed.update_reward(JobArn=run.job_arn, TrajectoryId=tid, Rewards=[0.5])
        finally:
            rooted.close()
            prefixed.close()
        assert emulator.state(tid) is TrajectoryState.REWARDED
        assert emulator.turn_count(tid) == 1


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tunnel(upstream: str, seen: list[str], probes: list[httpx.Response]) -> Starlette:
    """A reverse proxy to ``upstream``; the first request(s) are also replayed at the root path."""

    async def forward(request: Request) -> Response:
        path = request.url.path
        seen.append(path)
        body = await request.body()
        headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
        async with httpx.AsyncClient(timeout=30, trust_env=False) as http:
            if not probes:  # what the tunnel's root exposes: the same request without the token
                root = "/" + path.strip("/").split("/", 1)[1]
                probes.append(await http.post(upstream + root, content=body, headers=headers))
            answer = await http.request(
                request.method, upstream + path, content=body, headers=headers
            )
        keep = {k: v for k, v in answer.headers.items() if k.lower().startswith("x-amzn")}
        return Response(
            answer.content,
            status_code=answer.status_code,
            headers=keep,
            media_type=answer.headers.get("content-type"),
        )

    return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])])


@pytest.mark.usefixtures("aws_env")
async def test_job_through_tunnel(tmp_path: Path) -> None:
    """A job via AgentCore whose agent calls back through a tunnel to the token-guarded emulator."""
    tasks = [{"turns": 1, "reward": 0.5}, {"turns": 2, "reward": 1.0}]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": json.dumps(t)}) + "\n" for t in tasks))
    port = _free_port()
    seen: list[str] = []
    probes: list[httpx.Response] = []
    calls: list[dict[str, Any]] = []
    with (
        _serve_agent(AGENTS / "good_agent.py", tmp_path / "agent.log") as agent,
        serve_app(_fake_agentcore(agent, calls)) as fake,
        serve_app(_tunnel(f"http://127.0.0.1:{port}", seen, probes)) as tunnel,
    ):
        config = JobConfig(name="tunnel", group_size=2, concurrency=4, rollout_timeout=30)
        result = await run_local(
            RunConfig(
                entrypoint=RUNTIME_ARN,
                dataset=data,
                job=config,
                out=tmp_path,
                endpoint_url=fake,
                rate=100,
                advertise_url=tunnel + "/",
                emulator_port=port,
            )
        )
        resumed = await run_local(
            RunConfig(resume=tmp_path / "tunnel", endpoint_url=fake, rate=100)
        )
    assert result.status == "completed", result.failure
    assert resumed.status == "completed", resumed.failure
    with RunStore.open(tmp_path / "tunnel", readonly=True) as store:
        rows = store.list_trajectories()
        job = store.list_jobs()[-1]
        resume_events = store.list_events(kind="job_resumed")
    assert len(rows) == 4
    assert {r.state for r in rows} == {"REWARDED"}
    endpoints = {r.payload["metadata"]["endpoint"] for r in rows}  # the store keeps the audit
    (endpoint,) = endpoints
    assert endpoint.startswith(tunnel + "/")
    token = endpoint[len(tunnel) + 1 :]
    assert len(token) >= 32
    assert job.config["advertise_url"] == tunnel
    assert job.config["emulator_port"] == port
    assert resume_events[-1].detail["advertise_url"] == tunnel
    assert seen
    assert all(p.startswith(f"/{token}/") for p in seen)
    assert {p.split("/", 2)[2] for p in seen} == {
        "v1/chat/completions",
        "complete-rollout",
        "update-reward",
    }
    assert probes  # concurrent first requests may each have probed
    for probe in probes:
        assert probe.status_code == 404
        assert probe.headers["x-amzn-errortype"] == "ResourceNotFoundException"
        assert set(probe.json()) == {"Message"}
    for text in (
        (tmp_path / "tunnel" / "summary.json").read_text(),
        (tmp_path / "tunnel" / "report.html").read_text(),
        json.dumps(result.written_summary().document()),
        json.dumps(resumed.written_summary().document()),
    ):
        assert token not in text
    assert tunnel in (tmp_path / "tunnel" / "summary.json").read_text()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--advertise-url", "https://t.example"], "needs --emulator-port"),
        (["--advertise-url", "http://t.example", "--emulator-port", "8999"], "must use https"),
        (["--advertise-url", "https://t.example", "--emulator-port", "70000"], "0..65535"),
    ],
)
def test_cli_advertise_usage_errors(
    tmp_path: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad --advertise-url / --emulator-port combinations exit with a usage error."""
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": "{}"}) + "\n")
    argv = ["run", RUNTIME_ARN, "--dataset", str(data), "--out", str(tmp_path), *extra]
    assert main(argv) == UsageError.exit_code
    assert message in capsys.readouterr().err
    assert not list(tmp_path.glob("*/run.sqlite"))
