"""Fault agent: on a bad task it samples, then completes the rollout with Status failed."""

from _contract import complete, good_rollout, play, task
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()


@app.entrypoint
def invoke(payload):
    """Report `failed` on a bad task, else behave."""
    if task(payload).get("bad"):
        play(payload, 1)
        complete(payload, "failed")
        return {"reward": None, "failed": True}
    return good_rollout(payload)


if __name__ == "__main__":
    app.run()
