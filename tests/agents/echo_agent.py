"""Test agent for the invokers: echoes the payload, session id and pid; can fail on demand."""

import os
import threading

from bedrock_agentcore.runtime import BedrockAgentCoreApp
from starlette.exceptions import HTTPException

app = BedrockAgentCoreApp()
_never = threading.Event()


@app.entrypoint
def invoke(payload, context):
    """Echo; ``crash`` kills the process, ``hang`` never answers, ``fail`` answers HTTP 500."""
    if payload.get("crash"):
        os._exit(5)
    if payload.get("hang"):
        _never.wait(3600)
    if payload.get("fail"):
        raise HTTPException(500, str(payload["fail"]))
    if payload.get("stream"):
        return ({"i": i} for i in range(3))
    return {"echo": payload, "session": context.session_id, "pid": os.getpid()}


if __name__ == "__main__":
    app.run()
