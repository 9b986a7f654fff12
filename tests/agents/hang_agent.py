"""Fault agent: on a bad task's first attempt, it samples once and then never answers."""

import threading

from _contract import attempt, good_rollout, play, task
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()
_never = threading.Event()


@app.entrypoint
def invoke(payload):
    """Hang (past any rollout_timeout) on attempt 0 of a bad task, else behave."""
    if task(payload).get("bad") and attempt(payload) == 0:
        play(payload, 1)
        _never.wait(3600)
    return good_rollout(payload)


if __name__ == "__main__":
    app.run()
