"""Test agent written by hand against agentcore-rl-toolkit's contract (no agent_kit inside).

A plain BedrockAgentCoreApp, shaped like the toolkit's ``@rollout_entrypoint``: it answers
``processing`` + ``result_key`` at once, keeps /ping HealthyBusy while one policy call runs in
the background, and ``put_object``\\ s the result (``rewards`` 1.0 when the policy answered).
"""

import asyncio
import json
import uuid

import boto3
import httpx
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()
_tasks = set()


async def _play(payload, key):
    block = payload["_rollout"]
    busy = app.add_async_task("rollout")
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(
                block["base_url"] + "/chat/completions",
                headers={"Authorization": f"Bearer {block.get('api_key') or 'EMPTY'}"},
                json={
                    "model": block["model_id"],
                    "messages": [{"role": "user", "content": payload["prompt"]}],
                    **block.get("sampling_params", {}),
                },
            )
        answered = response.status_code == 200
        result = {"rewards": 1.0 if answered else 0.0, "status_code": 200}
        result.update(input_id=block["input_id"], s3_bucket=block["s3_bucket"], result_key=key)
        body = json.dumps(result).encode()
        s3 = boto3.client("s3")
        await asyncio.to_thread(s3.put_object, Bucket=block["s3_bucket"], Key=key, Body=body)
    finally:
        app.complete_async_task(busy)


@app.entrypoint
async def invoke(payload, context):
    """Start the rollout in the background; answer where its result will be."""
    block = payload["_rollout"]
    session = context.session_id or str(uuid.uuid4())
    key = f"{block['exp_id']}/{block['input_id']}/{session}.json"
    task = asyncio.get_running_loop().create_task(_play(payload, key))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return {"status": "processing", "s3_bucket": block["s3_bucket"], "result_key": key}


if __name__ == "__main__":
    app.run()
