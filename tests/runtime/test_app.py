"""RolloutApp over HTTP, in-process through Starlette's TestClient (no sockets)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agent_kit import RolloutApp
from agent_kit.emulator import PolicyReply, PolicyRequest, ToolCall
from agent_kit.testing import load_app, scripted_model_factory

EXAMPLE = Path(__file__).parents[1] / "example_counter.py"


def policy(request: PolicyRequest) -> PolicyReply | str:
    """Add 1 until the counter says value=2."""
    if request.tool_results() and request.tool_results()[-1] == "value=2":
        return "done"
    return PolicyReply(tool_calls=(ToolCall("add", {"n": 1}),))


@pytest.fixture
def client() -> Iterator[TestClient]:
    """The example app with a scripted in-process policy, behind a TestClient."""
    app = load_app(EXAMPLE)
    saved = app._model_factory
    app._model_factory = scripted_model_factory(policy)
    with TestClient(app) as test_client:
        yield test_client
    app._model_factory = saved


def test_app_is_an_agentcore_app_named_app() -> None:
    """The example's module variable `app` is a RolloutApp (a BedrockAgentCoreApp)."""
    from bedrock_agentcore.runtime import BedrockAgentCoreApp

    app = load_app(EXAMPLE)
    assert isinstance(app, RolloutApp)
    assert isinstance(app, BedrockAgentCoreApp)


def test_ping_reports_healthy_with_a_current_timestamp(client: TestClient) -> None:
    """GET /ping answers Healthy with time_of_last_update in epoch seconds."""
    response = client.get("/ping")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "Healthy"
    assert abs(body["time_of_last_update"] - time.time()) < 3600


def test_plain_invocation_plays_and_returns_the_reward(client: TestClient) -> None:
    """A payload without metadata plays the episode and returns reward, breakdown and usage."""
    response = client.post("/invocations", json={"prompt": json.dumps({"target": 2})})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["turns"] == 2
    assert body["reward"] == pytest.approx(0.98)
    assert set(body) >= {"reward", "reward_breakdown", "turns", "usage", "stop_reason"}
    assert "reported" not in body


def test_play_takes_the_model_factory_of_one_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    """``app.play(payload, model_factory=…)`` plays that episode with the given model and
    leaves the app's own model in place for the next one."""
    import asyncio

    from agent_kit.contract import RolloutPayload

    for name in ("AGENT_KIT_POLICY_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    app = load_app(EXAMPLE)
    seen: list[int] = []

    def counting(request: PolicyRequest) -> PolicyReply | str:
        seen.append(request.turn)
        return policy(request)

    payload = RolloutPayload.for_rollout(json.dumps({"target": 2}), inference_params={})
    body = asyncio.run(app.play(payload, model_factory=scripted_model_factory(counting)))
    assert body["turns"] == 2
    assert seen == [0, 1]
    assert body["reward"] == pytest.approx(0.98)
    own = asyncio.run(app.play(payload))  # no policy configured: the app's own model fails
    assert own["failure"]["boundary"] == "policy"
    assert seen == [0, 1]


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ({}, "prompt"),
        ({"prompt": 42}, "prompt"),
        ({"prompt": "not json at all"}, "cannot play this task"),
        (
            {"prompt": json.dumps({"target": 2}), "inferenceParams": {"temperature": "x"}},
            "temperature",
        ),
        ([1, 2], "JSON object"),
        (
            {"prompt": "{}", "metadata": {"jobArn": "nope", "rolloutId": "r"}},
            "job ARN",
        ),
    ],
)
def test_bad_payloads_get_400_with_a_message(
    client: TestClient, payload: object, needle: str
) -> None:
    """Malformed payloads are refused with HTTP 400 and a message naming the problem."""
    response = client.post("/invocations", json=payload)
    assert response.status_code == 400
    body = response.json()
    assert needle.lower() in body["error"].lower()
    assert "Traceback" not in response.text


def test_invalid_json_gets_400(client: TestClient) -> None:
    """A body that is not JSON at all is a 400, not a 500."""
    response = client.post(
        "/invocations", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400


def test_huge_body_is_refused_before_parsing(client: TestClient) -> None:
    """A body over the payload limit gets 400 with the limit in the message."""
    response = client.post("/invocations", json={"prompt": "x" * (2 << 20)})
    assert response.status_code == 400
    assert "too large" in response.json()["error"]


def test_huge_chunked_body_is_refused(client: TestClient) -> None:
    """A body without Content-Length is counted while streaming and refused past the limit."""

    def chunks() -> Iterator[bytes]:
        yield b'{"prompt": "'
        for _ in range(40):
            yield b"x" * 65536
        yield b'"}'

    response = client.post("/invocations", content=chunks())
    assert response.status_code == 400
    assert "too large" in response.json()["error"]


def test_ping_is_healthy_busy_while_a_rollout_runs() -> None:
    """/ping answers HealthyBusy while an episode is in flight, Healthy again after it."""
    import threading

    entered, release = threading.Event(), threading.Event()

    def slow_policy(request: PolicyRequest) -> str:
        entered.set()
        assert release.wait(30), "the test never released the policy"
        return "done"

    app = load_app(EXAMPLE)
    saved = app._model_factory
    app._model_factory = scripted_model_factory(slow_policy)
    try:
        with TestClient(app) as client:
            result: dict[str, object] = {}

            def invoke() -> None:
                result["response"] = client.post(
                    "/invocations", json={"prompt": json.dumps({"target": 2})}
                )

            worker = threading.Thread(target=invoke)
            worker.start()
            assert entered.wait(30)
            assert client.get("/ping").json()["status"] == "HealthyBusy"
            release.set()
            worker.join(30)
            assert result["response"].status_code == 200  # type: ignore[attr-defined]
            assert client.get("/ping").json()["status"] == "Healthy"
    finally:
        release.set()
        app._model_factory = saved
