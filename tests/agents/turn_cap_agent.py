"""Fault agent: on a bad task it calls the policy until the emulator refuses a turn (its turn
cap), then fails the invocation with that error; other tasks behave."""

from _contract import good_rollout, play, task
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()


@app.entrypoint
def invoke(payload):
    """Play one-message turns until a policy call is refused, then raise (HTTP 500)."""
    if not task(payload).get("bad"):
        return good_rollout(payload)
    while True:
        play(payload, 1)  # raises httpx.HTTPStatusError once the cap refuses the call


if __name__ == "__main__":
    app.run()
