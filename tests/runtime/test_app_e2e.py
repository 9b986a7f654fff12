"""The foundation example end to end: RolloutApp (TestClient) → real loopback Job Runtime fake.

The fake (`tests/fakes/job_runtime.py`) stands in for the AWS boundary we cannot reach: it is a
real HTTP server on 127.0.0.1 that records every request, so the wire behaviour is asserted
exactly. Dummy AWS credentials come from the environment; nothing leaves the machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.job_runtime import FakeJobRuntime, tool
from starlette.testclient import TestClient

from agent_kit.policy_client import PolicyConfig
from agent_kit.testing import load_app

EXAMPLE = Path(__file__).parents[1] / "example_counter.py"
ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/counter-e2e"
SECRET = "hidden-answer-zebra"


@pytest.fixture(autouse=True)
def dummy_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dummy credentials and region; no real AWS configuration is read."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("RFT_RUNTIME_ENDPOINT", raising=False)


def payload(fake: FakeJobRuntime, rollout_id: str, **extra: object) -> dict[str, object]:
    """A full MTRL payload pointing at the fake; the task carries a hidden field."""
    body: dict[str, object] = {
        "prompt": json.dumps({"target": 3, "answer": SECRET}),
        "metadata": {
            "jobArn": ARN,
            "rolloutId": rollout_id,
            "endpoint": fake.url,
            "region": "us-west-2",
        },
        "inferenceParams": {"temperature": 0.7, "topP": 0.9, "maxTokens": 256},
    }
    body.update(extra)
    return body


@pytest.fixture
def client_for() -> Iterator[object]:
    """Build a TestClient of the example app with a given PolicyConfig."""
    app = load_app(EXAMPLE)
    saved = app.policy_config
    clients: list[TestClient] = []

    def make(config: PolicyConfig) -> TestClient:
        app.policy_config = config
        client = TestClient(app)
        clients.append(client.__enter__())
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)
    app.policy_config = saved


@pytest.mark.parametrize(
    ("transport", "stream", "route"),
    [
        ("openai", False, "/v1/chat/completions"),
        ("openai", True, "/v1/chat/completions"),
        ("sample", False, "/sample"),
        ("sample", True, "/sample-with-response-stream"),
    ],
)
def test_rollout_speaks_the_contract(client_for, transport: str, stream: bool, route: str) -> None:
    """Every turn carries both headers and auth; reward is reported after CompleteRollout."""
    with FakeJobRuntime([tool("add", {"n": 1}), tool("add", {"n": 2})]) as fake:
        client = client_for(PolicyConfig(transport=transport, stream=stream, max_retries=0))
        response = client.post("/invocations", json=payload(fake, f"traj-{transport}-{stream}"))
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["reported"] is True, body
        assert body["turns"] == 2
        assert body["stop_reason"] == "finished"
        assert body["reward"] == pytest.approx(0.98)

        turns = fake.requests_to(route)
        assert len(turns) == 2
        for turn in turns:
            assert turn.header("X-Amzn-SageMaker-Job-Arn") == ARN
            assert turn.header("X-Amzn-SageMaker-Trajectory-Id") == f"traj-{transport}-{stream}"
            auth = turn.header("Authorization") or ""
            if transport == "openai":
                assert auth.startswith("Bearer sagemaker-api-key-")
                sent = turn.json()
                assert sent["model"] == "default"
                assert sent["temperature"] == 0.7
                assert sent["top_p"] == 0.9
                assert sent["max_tokens"] == 256
            else:
                assert auth.startswith("AWS4-HMAC-SHA256 ")
                assert "/sagemaker/aws4_request" in auth
            assert SECRET not in turn.body.decode()

        paths = [r.path for r in fake.requests]
        complete = paths.index("/complete-rollout")
        reward = paths.index("/update-reward")
        assert complete < reward
        assert all(p == route for p in paths[:complete])
        complete_body = fake.requests_to("/complete-rollout")[0].json()
        reward_body = fake.requests_to("/update-reward")[0].json()
        assert complete_body["Status"] == "ready"
        assert complete_body["ClientToken"]
        assert reward_body["Rewards"] == [pytest.approx(0.98)]
        assert reward_body["ClientToken"]
        assert fake.states[f"traj-{transport}-{stream}"] == "REWARDED"


def test_policy_500_reports_the_floor_and_answers_200(client_for) -> None:
    """A policy endpoint failing every call gives HTTP 200, floor reward, reason, and a report."""
    with FakeJobRuntime() as fake:
        fake.fail("/v1/chat/completions", 500, "InternalServiceError", "model crashed", times=10)
        client = client_for(PolicyConfig(max_retries=0))
        response = client.post("/invocations", json=payload(fake, "traj-500"))
        assert response.status_code == 200
        body = response.json()
        assert body["floor_reward"] is True
        assert body["reward"] == -1.0
        assert body["failure"]["boundary"] == "policy"
        assert "model crashed" in body["failure"]["reason"] or "500" in body["failure"]["reason"]
        assert body["attempts"] == 2  # no policy call succeeded: retried once
        assert body["reported"] is True
        assert fake.requests_to("/update-reward")[0].json()["Rewards"] == [-1.0]
        assert fake.requests_to("/complete-rollout")[0].json()["Status"] == "ready"


def test_policy_timeout_reports_the_floor(client_for) -> None:
    """A policy call that hangs past the timeout is a recorded policy failure, not a hang."""
    with FakeJobRuntime([tool("add", {"n": 3})]) as fake:
        fake.hang("/v1/chat/completions", times=2)
        client = client_for(PolicyConfig(max_retries=0, timeout_s=0.5, connect_timeout_s=1))
        response = client.post("/invocations", json=payload(fake, "traj-hang"))
        fake.release()
        body = response.json()
        assert response.status_code == 200
        assert body["failure"]["boundary"] == "policy"
        assert "tim" in body["failure"]["reason"].lower()
        assert body["reported"] is True


def test_retry_after_a_failed_first_call_still_samples(client_for) -> None:
    """The first attempt fails before any turn; the retry plays the episode and reports it."""
    with FakeJobRuntime([tool("add", {"n": 3})]) as fake:
        fake.fail("/v1/chat/completions", 503, "InternalServiceError", "warming up", times=1)
        client = client_for(PolicyConfig(max_retries=0))
        body = client.post("/invocations", json=payload(fake, "traj-retry")).json()
        assert body["attempts"] == 2
        assert body["turns"] == 1
        assert "failure" not in body
        assert body["reward"] == pytest.approx(0.99)


def test_reporting_failure_is_visible_in_the_body(client_for) -> None:
    """If UpdateReward fails for good, the body says reported=false with the error."""
    with FakeJobRuntime([tool("add", {"n": 3})]) as fake:
        fake.fail("/update-reward", 400, "ValidationException", "bad rewards", times=10)
        client = client_for(PolicyConfig(max_retries=0))
        body = client.post("/invocations", json=payload(fake, "traj-noreport")).json()
        assert body["reported"] is False
        assert "bad rewards" in body["report_error"]


def test_no_endpoint_configured_for_plain_payload_is_a_policy_failure(client_for) -> None:
    """A payload without metadata and no policy URL configured gets a clear floor, not a 500."""
    client = client_for(PolicyConfig())
    response = client.post("/invocations", json={"prompt": json.dumps({"target": 1})})
    assert response.status_code == 200
    body = response.json()
    assert body["failure"]["boundary"] == "policy"
    assert "AGENT_KIT_POLICY_URL" in body["failure"]["reason"]
    assert "reported" not in body
