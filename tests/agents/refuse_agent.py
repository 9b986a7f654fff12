"""Fault agent: a bad task is a row it cannot play, so it answers HTTP 400 (after ``turns``
policy calls, none by default)."""

from _contract import good_rollout, play, task
from bedrock_agentcore.runtime import BedrockAgentCoreApp
from starlette.responses import JSONResponse

app = BedrockAgentCoreApp()


@app.entrypoint
def invoke(payload):
    """Refuse a bad task with a 400, else behave."""
    t = task(payload)
    if t.get("bad"):
        play(payload, int(t.get("turns", 0)))
        return JSONResponse({"error": "unplayable row: no secret word"}, status_code=400)
    return good_rollout(payload)


if __name__ == "__main__":
    app.run()
