"""Fault agent: on a bad task it samples and completes the rollout but never sends the reward."""

from _contract import complete, good_rollout, play, task
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()


@app.entrypoint
def invoke(payload):
    """Forget UpdateReward on a bad task, else behave."""
    if task(payload).get("bad"):
        play(payload, 1)
        complete(payload)
        return {"reward": 1.0}
    return good_rollout(payload)


if __name__ == "__main__":
    app.run()
