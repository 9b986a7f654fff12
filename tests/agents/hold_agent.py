"""Fault agent: on attempt 0 of a task with ``"hold": POINT`` it stops at that point of the
rollout for as long as its process lives; later attempts and other tasks behave.

POINT is ``start`` (before the first policy call: the trajectory is OPEN with no turn),
``reward`` (after the turns and CompleteRollout, before UpdateReward: READY) or ``answer``
(after UpdateReward, before the invocation answers: REWARDED, and the driver still waiting).
With ``"until": PATH`` the hold ends once that file exists (the test creates it to let the
rollouts go on). The reliability suite uses this agent to SIGKILL a driver, or one of its
agent processes, at a moment it can see in the store.
"""

import threading
import time
from pathlib import Path

from _contract import attempt, complete, good_rollout, play, reward, task
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()
_never = threading.Event()


def _hold(t):
    """Wait for the task's ``until`` file, or (without one) for as long as the process lives."""
    gate = t.get("until")
    if gate is None:
        _never.wait(3600)
        return
    deadline = time.monotonic() + 3600
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.02)


@app.entrypoint
def invoke(payload):
    """Hold at the task's ``hold`` point on attempt 0; else play a good rollout."""
    t = task(payload)
    hold = t.get("hold")
    if hold is None or attempt(payload) != 0:
        return good_rollout(payload)
    if hold == "start":
        _hold(t)
        return good_rollout(payload)
    play(payload, int(t.get("turns", 2)))
    complete(payload)
    if hold == "reward":
        _hold(t)
    reward(payload, float(t.get("reward", 1.0)))
    if hold == "answer":
        _hold(t)
    return {"reward": float(t.get("reward", 1.0)), "turns": int(t.get("turns", 2))}


if __name__ == "__main__":
    app.run()
