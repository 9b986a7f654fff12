"""A grid whose scripted policy blocks (``time.sleep`` in a sync ``__call__``) still stops:
the rollout timeout fires, and Ctrl-C and SIGTERM end the command with their exit codes.

``agent-kit eval`` runs in a subprocess (its own signal handling, real agent processes of
``tests/agents/say_agent.py``, the emulator on loopback) with a policy that touches a marker
file and then sleeps an hour; the test waits for the marker (polling with a deadline) before it
signals. A frozen event loop would run past the deadline of ``wait``, failing the test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import SAY_AGENT

# a suite started as a shell's background job inherits SIGINT ignored, and so would the commands
# the tests Ctrl-C: handled_signals gives them a live one
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("handled_signals")]

AGENT_KIT = Path(sys.executable).with_name("agent-kit")
BLOCKING = """
import pathlib
import time


class Blocking:
    def __call__(self, request):
        pathlib.Path(__file__).with_name("called").touch()
        time.sleep(3600)
        return "done"
"""


def _start(tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    policy = tmp_path / "blocking.py"
    policy.write_text(BLOCKING, encoding="utf-8")
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": json.dumps({"n": 1})}) + "\n", encoding="utf-8")
    argv = [
        str(AGENT_KIT), "eval", str(SAY_AGENT), "--dataset", str(data),
        "--policy", f"scripted:{policy}:Blocking", "--samples", "2", "--workers", "1",
        "--max-retries", "0", "--out", str(tmp_path / "ev"), "--json", *extra,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RFT_"))}
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[str], timeout: float = 180) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"agent-kit eval did not end with a blocking policy:\n{err}")
    return proc.returncode, out, err


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_a_grid_whose_policy_blocks(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    """Once the policy is blocking, SIGTERM (Ctrl-C) ends the grid gracefully: the table, then
    exit 143 (130)."""
    proc = _start(tmp_path, "--rollout-timeout", "600")
    deadline = time.monotonic() + 120
    while not (tmp_path / "called").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"the policy was never called:\n{proc.communicate()[1]}")
        time.sleep(0.05)  # polling for the marker file, with a deadline
    proc.send_signal(sig)
    returncode, out, err = _finish(proc)
    assert returncode == code, err
    assert "Traceback" not in err
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["cells"][0]["figures"]["state"] == "interrupted"


def test_the_rollout_timeout_fires_with_a_blocking_policy(tmp_path: Path) -> None:
    """With --rollout-timeout 3 the blocked rollouts time out, the cell ends without a reward
    and the command exits 9 after the table, by itself."""
    returncode, out, err = _finish(_start(tmp_path, "--rollout-timeout", "3"))
    assert returncode == 9, err
    assert "Traceback" not in err
    (cell,) = json.loads(out.strip().splitlines()[-1])["cells"]
    assert cell["figures"]["state"] != "completed"
    assert cell["figures"]["mean"] is None
