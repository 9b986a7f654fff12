"""The Wordle entrypoint under agentcore-rl-toolkit's contract: ``_config`` and ``_rollout``.

The app runs in-process (TestClient); the trainer's policy is a real loopback OpenAI-compatible
server (`tests/fakes/job_runtime.py`, which records every request) and moto's server on
127.0.0.1 stands in for S3, reached by a real botocore client through ``AWS_ENDPOINT_URL_S3``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.job_runtime import FakeJobRuntime, tool
from fakes.moto_s3 import MotoS3
from starlette.testclient import TestClient

from agent_kit.contract import HEADER_SESSION_ID
from agent_kit.policy_client import PolicyConfig
from agent_kit.runtime_client import reset_shared_session
from agent_kit.testing import load_app

pytestmark = pytest.mark.e2e

WORDLE = Path(__file__).parents[2] / "examples" / "wordle" / "agent.py"
BUCKET = "rl-results"
API_KEY = "sk-trainer-secret-1234"
SESSION = "trainer-session-" + "0123456789abcdef" * 2
ROW = {"prompt": "Let's play Wordle. Make your first guess.", "answer": "baton", "id": "w_7"}


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoS3]:
    """moto's S3 server on loopback; the app's S3 client reaches it through the environment."""
    with MotoS3(BUCKET) as server:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("AWS_REGION", "us-west-2")
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", server.url)
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        reset_shared_session()
        yield server
    reset_shared_session()


@pytest.fixture
def client() -> Iterator[TestClient]:
    """The Wordle entrypoint's app in-process, its policy client without retries."""
    app = load_app(WORDLE)
    saved = app.policy_config
    app.policy_config = PolicyConfig(max_retries=0, timeout_s=30.0)
    with TestClient(app) as test_client:
        yield test_client
    app.policy_config = saved


def trainer_block(fake: FakeJobRuntime, **extra: Any) -> dict[str, Any]:
    """The policy fields a trainer sends: its base_url, model, bearer key, sampling params."""
    return {
        "base_url": fake.url + "/v1",
        "model_id": "trainer/qwen-7b",
        "api_key": API_KEY,
        "sampling_params": {"temperature": 0.3, "max_tokens": 200},
        **extra,
    }


def s3_block(fake: FakeJobRuntime) -> dict[str, Any]:
    """A ``_rollout`` block: the policy plus where the result object goes."""
    return trainer_block(fake, exp_id="exp-1", input_id="w_7", s3_bucket=BUCKET)


def assert_trainer_policy_calls(fake: FakeJobRuntime) -> None:
    """Every policy call used the trainer's model and bearer, and no Job Runtime route."""
    turns = fake.requests_to("/v1/chat/completions")
    assert turns
    for turn in turns:
        assert turn.header("Authorization") == f"Bearer {API_KEY}"
        assert turn.header("X-Amzn-SageMaker-Trajectory-Id") is None
        sent = turn.json()
        assert sent["model"] == "trainer/qwen-7b"
        assert sent["temperature"] == 0.3
        assert sent["max_tokens"] == 200
        assert "baton" not in turn.body.decode()
    assert {r.path for r in fake.requests} == {"/v1/chat/completions"}


@pytest.mark.parametrize(
    "row", [ROW, {"prompt": json.dumps(ROW)}], ids=["top-level-fields", "json-prompt"]
)
def test_config_answers_reward_and_float_metrics(client: TestClient, row: dict[str, Any]) -> None:
    """HTTP mode plays against the trainer's base_url and answers a reward and float metrics."""
    with FakeJobRuntime([tool("guess_word", {"guess": "baton"})]) as fake:
        response = client.post("/invocations", json={**row, "_config": trainer_block(fake)})
        assert response.status_code == 200, response.text
        body = response.json()
        assert_trainer_policy_calls(fake)
    assert math.isfinite(body["reward"])
    assert body["reward"] >= 1.0
    assert body["stop_reason"] == "finished"
    assert body["metrics"]
    assert all(type(v) is float for v in body["metrics"].values()), body["metrics"]
    assert body["metrics"]["turns"] == 1.0
    assert "reported" not in body
    assert API_KEY not in response.text


def test_rollout_answers_processing_then_writes_the_result(client: TestClient, s3: MotoS3) -> None:
    """S3 mode answers processing + result_key at once, then writes the reward to S3."""
    with FakeJobRuntime([tool("guess_word", {"guess": "baton"})]) as fake:
        payload = {**ROW, "_rollout": s3_block(fake)}
        response = client.post("/invocations", json=payload, headers={HEADER_SESSION_ID: SESSION})
        assert response.status_code == 200, response.text
        key = f"exp-1/w_7/{SESSION}.json"
        assert response.json() == {"status": "processing", "s3_bucket": BUCKET, "result_key": key}
        doc = s3.wait_for(BUCKET, key)
        assert_trainer_policy_calls(fake)
    assert math.isfinite(doc["rewards"])
    assert doc["rewards"] >= 1.0
    assert doc["status_code"] == 200
    assert doc["stop_reason"] == "finished"
    assert (doc["input_id"], doc["s3_bucket"], doc["result_key"]) == ("w_7", BUCKET, key)
    assert all(type(v) is float for v in doc["metrics"].values())
    assert doc["payload"]["answer"] == "baton"
    assert doc["payload"]["_rollout"]["api_key"] == "<redacted>"
    assert API_KEY not in json.dumps(doc)


def test_ping_is_busy_until_the_result_is_written(client: TestClient, s3: MotoS3) -> None:
    """/ping says HealthyBusy while the background episode runs, Healthy once it is stored."""
    with FakeJobRuntime([tool("guess_word", {"guess": "baton"})]) as fake:
        fake.hang("/v1/chat/completions")
        payload = {**ROW, "_rollout": s3_block(fake)}
        response = client.post("/invocations", json=payload, headers={HEADER_SESSION_ID: SESSION})
        assert response.json()["status"] == "processing"
        assert fake.wait_for("/v1/chat/completions")
        assert client.get("/ping").json()["status"] == "HealthyBusy"
        assert s3.keys(BUCKET) == []
        fake.release()
        s3.wait_for(BUCKET, response.json()["result_key"])
    deadline = time.monotonic() + 30
    while client.get("/ping").json()["status"] != "Healthy":
        assert time.monotonic() < deadline, "ping stayed HealthyBusy after the result"
        time.sleep(0.01)


def test_a_task_the_environment_refuses_writes_an_error_object(
    client: TestClient, s3: MotoS3
) -> None:
    """A row the environment cannot play ends as a status_code 400 object without rewards."""
    with FakeJobRuntime() as fake:
        payload = {**ROW, "answer": "zzzzz", "_rollout": s3_block(fake)}
        response = client.post("/invocations", json=payload, headers={HEADER_SESSION_ID: SESSION})
        doc = s3.wait_for(BUCKET, response.json()["result_key"])
        assert fake.requests == []
    assert doc["status_code"] == 400
    assert "five-letter word" in doc["stop_reason"] or "word list" in doc["stop_reason"]
    assert "rewards" not in doc


def test_a_failing_policy_is_a_floor_reward(client: TestClient) -> None:
    """HTTP mode: a policy that answers 500 ends the episode on the floor reward, as data."""
    with FakeJobRuntime() as fake:
        fake.fail("/v1/chat/completions", 500, "InternalServiceError", "boom", times=10)
        response = client.post("/invocations", json={**ROW, "_config": trainer_block(fake)})
    body = response.json()
    assert response.status_code == 200, body
    assert body["reward"] == -1.5
    assert body["metrics"]["floor_reward"] == 1.0
    assert body["failure"]["boundary"] == "policy"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"_config": {}, "_rollout": {}}, "not both"),
        ({"_config": "http://x"}, "_config must be a JSON object"),
        ({"_config": {"base_url": "http://127.0.0.1:1/v1"}}, "model_id"),
        ({"_config": {"base_url": "ftp://x", "model_id": "m"}}, "http:// or https://"),
        (
            {"_config": {"base_url": "http://x/v1", "model_id": "m", "sampling_params": []}},
            "sampling_params",
        ),
        (
            {"_rollout": {"base_url": "http://x/v1", "model_id": "m", "exp_id": "e"}},
            "s3_bucket",
        ),
        (
            {
                "_rollout": {
                    "base_url": "http://x/v1",
                    "model_id": "m",
                    "exp_id": "../e",
                    "input_id": "i",
                    "s3_bucket": "bkt",
                }
            },
            "exp_id may hold",
        ),
    ],
)
def test_bad_trainer_blocks_are_400(
    client: TestClient, payload: dict[str, Any], message: str
) -> None:
    """A malformed _config/_rollout is a 400 in the contract's error shape, naming the field."""
    body = {**ROW, **payload}
    for block in ("_config", "_rollout"):
        if isinstance(body.get(block), dict) and body[block]:
            body[block] = {**body[block], "api_key": API_KEY}
    response = client.post("/invocations", json=body)
    assert response.status_code == 400
    error = response.json()
    assert error["error_type"] == "ValidationError"
    assert message in error["error"], error
    assert API_KEY not in response.text


async def test_the_wordle_process_answers_both_trainer_modes(tmp_path: Path) -> None:
    """The unchanged Wordle file as a real agent process: _config answers, _rollout writes S3."""
    from agent_kit.driver.invokers import SubprocessInvoker

    with MotoS3(BUCKET) as s3, FakeJobRuntime() as fake:
        fake.reply(tool("guess_word", {"guess": "baton"}), tool("guess_word", {"guess": "baton"}))
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-west-2",
            "AWS_ENDPOINT_URL_S3": s3.url,
        }
        agent = SubprocessInvoker(WORDLE, env=env, log_dir=tmp_path)
        await agent.spawn()
        try:
            await agent.start()
            answered = await agent.invoke({**ROW, "_config": trainer_block(fake)}, SESSION, 60)
            started = await agent.invoke({**ROW, "_rollout": s3_block(fake)}, SESSION, 60)
            key = f"exp-1/w_7/{SESSION}.json"
            doc = await asyncio.to_thread(s3.wait_for, BUCKET, key)
        finally:
            await agent.aclose()
        assert_trainer_policy_calls(fake)
    assert answered.ok, answered.error
    reward = answered.body["reward"]
    assert math.isfinite(reward)
    assert reward >= 1.0
    assert all(type(v) is float for v in answered.body["metrics"].values())
    assert started.body == {"status": "processing", "s3_bucket": BUCKET, "result_key": key}
    assert doc["rewards"] == reward
