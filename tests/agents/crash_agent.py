"""Fault agent: on a bad task's first attempt, the process dies mid-rollout (after sampling)."""

import os

from _contract import attempt, good_rollout, play, task
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()


@app.entrypoint
def invoke(payload):
    """Crash hard on attempt 0 of a bad task, else behave."""
    if task(payload).get("bad") and attempt(payload) == 0:
        play(payload, 1)
        os._exit(3)
    return good_rollout(payload)


if __name__ == "__main__":
    app.run()
