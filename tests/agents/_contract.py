"""The MTRL contract spoken by hand (raw httpx), shared by the small test agents in this folder.

These agents deliberately avoid agent_kit's runtime so the driver is tested against agents that
follow docs/contract.md on their own; each fault agent misbehaves only on tasks marked ``"bad":
true``
(and, for crash/hang, only on attempt 0 so that the retry can succeed).
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
from _tokens import presigned_token


def _token() -> str:
    """A ``sagemaker-api-key-…`` bearer as the SDK signs it: a SigV4-presigned URL made with
    the AWS keys of this process's environment (the run's keys, which the emulator verifies)."""
    import botocore.session

    session = botocore.session.get_session()
    credentials = session.get_credentials()
    assert credentials is not None, "the driver gives its agents AWS keys"
    region = os.environ.get("AWS_REGION", "us-west-2")
    return presigned_token(credentials.get_frozen_credentials(), region)


TOKEN = _token()
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "guess",
            "description": "Guess a five-letter word.",
            "parameters": {
                "type": "object",
                "properties": {"word": {"type": "string"}},
                "required": ["word"],
            },
        },
    }
]
_http = httpx.Client(timeout=30.0, trust_env=False)


def task(payload: dict[str, Any]) -> dict[str, Any]:
    """The JSON object packed in the prompt."""
    return json.loads(payload["prompt"])


def attempt(payload: dict[str, Any]) -> int:
    """The attempt number encoded at the end of the driver's trajectory ids (``…-aN``)."""
    return int(payload["metadata"]["rolloutId"].rsplit("-a", 1)[1])


def _post(payload: dict[str, Any], route: str, body: dict[str, Any]) -> httpx.Response:
    meta = payload["metadata"]
    response = _http.post(
        meta["endpoint"] + route,
        json=body,
        headers={
            "Authorization": f"Bearer {TOKEN}",
            "X-Amzn-SageMaker-Job-Arn": meta["jobArn"],
            "X-Amzn-SageMaker-Trajectory-Id": meta["rolloutId"],
        },
    )
    response.raise_for_status()
    return response


def play(payload: dict[str, Any], turns: int) -> int:
    """Make ``turns`` policy calls through /v1/chat/completions, answering tool calls."""
    params = payload.get("inferenceParams") or {}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Play a word game."},
        {"role": "user", "content": "Guess the word."},
    ]
    for _ in range(turns):
        body = {
            "model": "default",
            "messages": messages,
            "tools": TOOLS,
            "temperature": params.get("temperature", 1.0),
            "max_tokens": params.get("maxTokens", 256),
        }
        reply = _post(payload, "/v1/chat/completions", body).json()
        message = reply["choices"][0]["message"]
        messages.append({k: v for k, v in message.items() if v is not None})
        for call in message.get("tool_calls") or []:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": "no"})
        if not message.get("tool_calls"):
            messages.append({"role": "user", "content": "Keep guessing."})
    return turns


def complete(payload: dict[str, Any], status: str = "ready") -> None:
    """CompleteRollout with the Job ARN in the body, as the SDK sends it."""
    meta = payload["metadata"]
    body = {"JobArn": meta["jobArn"], "TrajectoryId": meta["rolloutId"], "Status": status}
    _post(payload, "/complete-rollout", body)


def reward(payload: dict[str, Any], value: float) -> None:
    """UpdateReward with one episode reward."""
    meta = payload["metadata"]
    body = {"JobArn": meta["jobArn"], "TrajectoryId": meta["rolloutId"], "Rewards": [value]}
    _post(payload, "/update-reward", body)


def good_rollout(payload: dict[str, Any]) -> dict[str, Any]:
    """A well-behaved rollout: sample, complete, reward; returns the agent's answer body.

    A task with ``"note": PATH`` first appends the rollout id to that file (a witness of every
    rollout the agent was asked to play)."""
    t = task(payload)
    if t.get("note"):
        with open(t["note"], "a") as fh:
            fh.write(payload["metadata"]["rolloutId"] + "\n")
    turns = play(payload, int(t.get("turns", 2)))
    value = float(t.get("reward", 1.0))
    complete(payload)
    reward(payload, value)
    return {"reward": value, "turns": turns}
