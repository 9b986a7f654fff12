"""A contract agent that starts helper processes and never ends them.

On every rollout it starts two children in its own process group (one ignores SIGTERM) and one
child that starts a grandchild in a session of its own (``setsid``); every pid is appended to
the file named by the task's ``"pids"`` key. Then it plays the rollout by the contract, except
on attempt 0 of a task with ``"crash": true``, where the agent process exits at once (and is
restarted by the driver).
"""

import json
import os
import subprocess
import sys

from _contract import attempt, good_rollout, task
from bedrock_agentcore.runtime import BedrockAgentCoreApp

app = BedrockAgentCoreApp()

SLEEPER = "import time\nwhile True: time.sleep(1)\n"
STUBBORN = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + SLEEPER
PARENT = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', sys.argv[1]], start_new_session=True)\n"
    "print(child.pid, flush=True)\n"
    "while True: time.sleep(1)\n"
)


def _spawn(code, *args):
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)


@app.entrypoint
def invoke(payload):
    """Start the helpers, note their pids, then play one rollout by the contract."""
    plain, stubborn, parent = _spawn(SLEEPER), _spawn(STUBBORN), _spawn(PARENT, SLEEPER)
    grandchild = int(parent.stdout.readline())
    with open(task(payload)["pids"], "a") as fh:
        fh.write(json.dumps([plain.pid, stubborn.pid, parent.pid, grandchild]) + "\n")
    if task(payload).get("crash") and attempt(payload) == 0:
        os._exit(1)
    return good_rollout(payload)


if __name__ == "__main__":
    app.run()
