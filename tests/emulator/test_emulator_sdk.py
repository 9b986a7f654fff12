"""Official clients against the emulator: the sagemaker-train SDK agent and Strands' parser.

The SDK agent is written as the AWS docs show it (``BedrockAgentCoreApp`` + ``@app.entrypoint``
+ ``sagemaker_rft_handler`` + ``wrap_model(OpenAIModel(...))``, bearer token from
``generate_token`` with dummy credentials) and runs as a real subprocess; the emulator runs on a
real loopback socket. Nothing is mocked.
"""

from __future__ import annotations

import json
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
from conftest import RunningEmulator

from agent_kit.contract import TrajectoryState

AGENT = '''
import json, os
from bedrock_agentcore.runtime import BedrockAgentCoreApp
from strands import Agent, tool
from strands.models.openai import OpenAIModel
from sagemaker.train.rft import sagemaker_rft_handler
from sagemaker.train.rft.adapters.strands import wrap_model
from sagemaker.core.token_generator import generate_token

app = BedrockAgentCoreApp()


@tool
def guess(word: str) -> str:
    """Guess the secret word.

    Args:
        word: a five-letter word
    """
    return "correct" if word == "crane" else "wrong"


@app.entrypoint
@sagemaker_rft_handler
async def invoke_agent(payload):
    metadata = payload["metadata"]
    model = wrap_model(
        OpenAIModel(
            client_args={
                "api_key": generate_token(region=metadata["region"]),
                "base_url": metadata["endpoint"] + "/v1",
                "max_retries": 0,
            },
            model_id="default",
            params={"max_tokens": 64},
            stream=os.environ.get("AGENT_STREAM", "1") == "1",
        )
    )
    agent = Agent(model=model, tools=[guess], callback_handler=None)
    task = json.loads(payload["prompt"])
    result = await agent.invoke_async(task["prompt"])
    tools_ok = any(
        block.get("toolResult", {}).get("content", [{}])[0].get("text") == "correct"
        for message in agent.messages
        for block in message["content"]
    )
    return {"reward": 1.0 if tools_ok and "final answer" in str(result) else 0.0}


if __name__ == "__main__":
    app.run(port=int(os.environ["AGENT_PORT"]))
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(params=["1", "0"], ids=["stream", "no-stream"])
def sdk_agent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The docs-style SDK agent served by its own ``app.run()`` in a subprocess; yields its URL."""
    file = tmp_path / "agent.py"
    file.write_text(AGENT)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RFT_"))} | {
        "AGENT_PORT": str(port),
        "AGENT_STREAM": request.param,
        "AWS_ACCESS_KEY_ID": "AKIDSDKTEST",
        "AWS_SECRET_ACCESS_KEY": "dummy-secret",
        "AWS_REGION": "us-west-2",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    proc = subprocess.Popen(
        [sys.executable, str(file)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"agent exited: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            try:
                if httpx.get(url + "/ping", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("agent did not become healthy")
            time.sleep(0.05)  # polling with a deadline
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def test_sdk_agent_completes_rollouts(running_emulator: RunningEmulator, sdk_agent: str) -> None:
    """The docs-style SDK agent completes rollouts; the store holds its turns and its reward."""
    run = running_emulator
    for _ in range(2):
        payload = run.mint(json.dumps({"prompt": "Find the word", "answer": "crane"}))
        tid = payload["metadata"]["rolloutId"]
        response = httpx.post(sdk_agent + "/invocations", json=payload, timeout=60)
        assert response.status_code == 200, response.text
        assert response.json() == {"reward": 1.0}
        assert run.emulator.state(tid) is TrajectoryState.REWARDED
        turns = run.run_store.list_turns(tid)
        assert [t.route for t in turns] == ["/v1/chat/completions"] * 2
        assert turns[1].request["messages"][-1]["role"] == "tool"
        reward = run.run_store.get_reward(tid)
        assert reward is not None
        assert reward.rewards == [1.0]


@pytest.mark.parametrize("stream", [True, False])
async def test_strands_reconstructs_text_and_tool_calls(
    running_emulator: RunningEmulator,
    monkeypatch: pytest.MonkeyPatch,
    emulator_policy: Any,
    stream: bool,
) -> None:
    """Strands' OpenAIModel parses the emulator's SSE (and JSON) into tool calls and final text."""
    from sagemaker.core.token_generator import generate_token
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDSTRANDS")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "dummy")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    run = running_emulator
    payload = run.mint()
    meta = payload["metadata"]
    seen: list[str] = []

    @tool
    def guess(word: str) -> str:
        """Guess the word.

        Args:
            word: five letters
        """
        seen.append(word)
        return "correct"

    model = OpenAIModel(
        client_args={
            "api_key": generate_token(region="us-west-2"),
            "base_url": meta["endpoint"] + "/v1",
            "max_retries": 0,
            "default_headers": {
                "X-Amzn-SageMaker-Job-Arn": meta["jobArn"],
                "X-Amzn-SageMaker-Trajectory-Id": meta["rolloutId"],
            },
        },
        model_id="default",
        stream=stream,
    )
    agent = Agent(model=model, tools=[guess], callback_handler=None)
    result = await agent.invoke_async("play")
    assert seen == ["crane"]
    assert str(result).strip() == "final answer"
    tool_use = agent.messages[1]["content"][0]["toolUse"]
    assert tool_use["name"] == "guess"
    assert tool_use["input"] == {"word": "crane"}
    usage = result.metrics.accumulated_usage
    assert usage["outputTokens"] == 6  # 3 per turn from the canned policy's usage
    turns = run.run_store.list_turns(meta["rolloutId"])
    assert [t.stream for t in turns] == [stream, stream]
    # list-of-parts user content arrived flattened at the policy
    assert emulator_policy.seen[0].messages[-1]["content"] == "play"


def _fresh_example_app(name: str) -> Any:
    """A fresh import of the foundation issue's RolloutApp example (tests/example_counter.py)."""
    import importlib.util

    path = Path(__file__).parents[1] / "example_counter.py"
    spec = importlib.util.spec_from_file_location(f"example_counter_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


@pytest.mark.parametrize(
    ("transport", "stream"),
    [("openai", False), ("openai", True), ("sample", False), ("sample", True)],
)
def test_rollout_app_example_over_both_transports(
    running_emulator: RunningEmulator,
    monkeypatch: pytest.MonkeyPatch,
    emulator_policy: Any,
    transport: str,
    stream: bool,
) -> None:
    """The RolloutApp example completes a rollout over the OpenAI and Sample transports."""
    from starlette.testclient import TestClient

    emulator_policy.args = {"n": 3}
    for key in [k for k in os.environ if k.startswith(("AWS_", "RFT_", "AGENT_KIT_POLICY_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLEAPP")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "dummy")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AGENT_KIT_POLICY_TRANSPORT", transport)
    monkeypatch.setenv("AGENT_KIT_POLICY_STREAM", "1" if stream else "0")
    payload = running_emulator.mint(json.dumps({"target": 3}))
    tid = payload["metadata"]["rolloutId"]
    with TestClient(_fresh_example_app(f"{transport}_{stream}")) as client:
        response = client.post("/invocations", json=payload)
    assert response.status_code == 200, response.text
    assert response.json()["reward"] > 0.9
    run = running_emulator.emulator
    assert run.state(tid) is TrajectoryState.REWARDED
    turns = running_emulator.run_store.list_turns(tid)
    expected = {"openai": "/v1/chat/completions", "sample": "/sample"}[transport]
    if transport == "sample" and stream:
        expected = "/sample-with-response-stream"
    assert turns
    assert all(t.route == expected and t.stream is stream for t in turns)
    reward = running_emulator.run_store.get_reward(tid)
    assert reward is not None
    assert reward.total == pytest.approx(response.json()["reward"])
