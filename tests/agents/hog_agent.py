"""A contract agent that leaks: ``"hog": N`` makes it keep N MB (in 8 MB steps) after one
policy call, then it plays on; other tasks are played by the contract."""

import time

from _contract import good_rollout, play, task
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()
_kept = []


@app.entrypoint
def invoke(payload):
    """Grow by ``hog`` MB (a leak), then play the rollout by the contract."""
    megabytes = int(task(payload).get("hog", 0))
    if megabytes:
        play(payload, 1)
        for _ in range(megabytes // 8):
            _kept.append(bytearray(8 * 2**20))  # zero-filled: every page is touched
            time.sleep(0.01)  # a leak that grows over time, not at once
    return good_rollout(payload)


if __name__ == "__main__":
    app.run()
