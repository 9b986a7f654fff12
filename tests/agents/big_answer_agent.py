"""A contract agent whose answer is huge: ``"big": N`` in the task makes it N MB.

With ``"report": false`` it makes one policy call and answers without completing the rollout;
otherwise it plays the rollout by the contract first. ``"stream": true`` sends the answer as
server-sent events (1 KB each) instead of one JSON body.
"""

from _contract import good_rollout, play, task
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()
KB = "x" * 1024


def _events(megabytes):
    for _ in range(megabytes * 1024):
        yield {"pad": KB}


@app.entrypoint
def invoke(payload):
    """Play (or only start) the rollout, then answer ``big`` megabytes."""
    t = task(payload)
    if t.get("report", True):
        good_rollout(payload)
    else:
        play(payload, 1)
    megabytes = int(t.get("big", 0))
    if t.get("stream"):
        return _events(megabytes)
    return {"reward": 1.0, "pad": KB * 1024 * megabytes}


if __name__ == "__main__":
    app.run()
