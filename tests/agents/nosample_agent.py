"""Fault agent: on a bad task it returns a reward without ever calling the policy."""

from _contract import good_rollout, task
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()


@app.entrypoint
def invoke(payload):
    """Skip the policy entirely on a bad task, else behave."""
    if task(payload).get("bad"):
        return {"reward": 0.0, "turns": 0}
    return good_rollout(payload)


if __name__ == "__main__":
    app.run()
