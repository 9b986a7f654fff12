"""Test agent for the rl-toolkit driver's edge cases (no agent_kit inside).

Like ``rltoolkit_agent.py`` it answers ``processing`` + ``result_key`` at once and makes one
policy call in the background, then writes the result object the dataset row asks for in its
``write`` field: ``"null"`` (the JSON ``null``), ``"overflow"`` (``rewards`` [1e308, 1e308]),
``"large"`` (a valid result padded with ``size`` bytes) or ``"shared"`` (rewards 1.0 under a
key every rollout of the prompt shares: ``<exp_id>/<input_id>.json``).
"""

import asyncio
import json
import uuid

import boto3
import httpx
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()
_tasks = set()


def _document(payload, key):
    block = payload["_rollout"]
    write = payload.get("write")
    if write == "null":
        return b"null"
    result = {"rewards": 1.0, "status_code": 200, "input_id": block["input_id"]}
    result.update(s3_bucket=block["s3_bucket"], result_key=key)
    if write == "overflow":
        result["rewards"] = [1e308, 1e308]
    if write == "large":
        result["padding"] = "x" * int(payload.get("size", 4096))
    return json.dumps(result).encode()


async def _play(payload, key):
    block = payload["_rollout"]
    busy = app.add_async_task("rollout")
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            await client.post(
                block["base_url"] + "/chat/completions",
                headers={"Authorization": f"Bearer {block.get('api_key') or 'EMPTY'}"},
                json={
                    "model": block["model_id"],
                    "messages": [{"role": "user", "content": payload["prompt"]}],
                },
            )
        s3 = boto3.client("s3")
        body = _document(payload, key)
        await asyncio.to_thread(s3.put_object, Bucket=block["s3_bucket"], Key=key, Body=body)
    finally:
        app.complete_async_task(busy)


@app.entrypoint
async def invoke(payload, context):
    """Start the rollout in the background; answer where its result will be."""
    block = payload["_rollout"]
    session = context.session_id or str(uuid.uuid4())
    key = f"{block['exp_id']}/{block['input_id']}/{session}.json"
    if payload.get("write") == "shared":
        key = f"{block['exp_id']}/{block['input_id']}.json"
    task = asyncio.get_running_loop().create_task(_play(payload, key))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return {"status": "processing", "s3_bucket": block["s3_bucket"], "result_key": key}


if __name__ == "__main__":
    app.run()
