"""``agent-kit dev`` end to end: a copy of examples/wordle in a temp dir, the loop a real
process (its agents real subprocesses, the emulator on loopback), edited the way a user edits,
each verdict read from its output by polling with a deadline."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import WORDLE, holdout, play_wordle, wordle_config

from agent_kit.dev.loadcheck import check_entrypoint

# a suite started as a shell's background job inherits SIGINT ignored, and so would the commands
# the tests Ctrl-C: handled_signals gives them a live one
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("handled_signals")]

#: Seconds one verdict may take on a loaded 2-core machine (a cold start included).
_VERDICT_S = 240.0
_ROWS = 3


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recorded run of the unchanged Wordle example: 3 holdout words × 2 with the Solver."""
    folder = tmp_path_factory.mktemp("baseline")
    data = holdout(folder / "d.jsonl", _ROWS)
    return play_wordle(data, folder / "runs", wordle_config("base", group_size=2))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of examples/wordle (agent, policies, words) with a 3-row dataset ``d.jsonl``."""
    folder = tmp_path / "wordle"
    folder.mkdir()
    for name in ("agent.py", "policies.py"):
        shutil.copy(WORDLE / name, folder / name)
    shutil.copytree(WORDLE / "words", folder / "words")
    holdout(folder / "d.jsonl", _ROWS)
    return folder


def _agent_pids(entrypoint: Path) -> set[int]:
    """The agent processes serving ``entrypoint`` (read from /proc)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"agent_kit.driver._serve" in cmdline and str(entrypoint).encode() in cmdline:
            found.add(int(proc.name))
    return found


class DevLoop:
    """``agent-kit dev`` as a process; its stdout read line by line in a thread."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent_kit.cli", "dev", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def verdict(self) -> list[str]:
        """The next verdict's lines: a load error's one line, else up to its ``→`` line."""
        deadline = time.monotonic() + _VERDICT_S
        lines: list[str] = []
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no verdict within {_VERDICT_S:g} s; so far {lines}"
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, f"the loop exited {self.proc.wait()}: {self._stderr()}"
            if not lines and line.startswith("watching "):
                continue
            lines.append(line)
            assert lines[0].startswith("#"), lines
            if ": does not load: " in lines[0] or line.startswith("  → "):
                return lines

    def _stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def stop(self) -> tuple[int, str]:
        """Ctrl-C, then the exit code and stderr."""
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=_VERDICT_S)
        return code, self._stderr()

    def close(self) -> None:
        """Kill it if it still runs (a failed test), then close its pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(timeout=_VERDICT_S)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def _verdict_json(out: Path, lines: list[str]) -> dict[str, Any]:
    match = re.match(r"#(\d+) ", lines[0])
    assert match, lines
    path = out / f"dev-{int(match.group(1)):04d}" / "verdict.json"
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


_REWARD_OLD = "WEIGHT_SOLVED = 0.04"
_REWARD_NEW = "WEIGHT_SOLVED = 0.02"
#: An extra line in the tool's answer to the second guess: the third policy call (turn 2)
#: of every game that gets there sees a request its recording does not have.
_FEEDBACK_OLD = "        if word == self.answer:\n"
_FEEDBACK_NEW = (
    '        if n == 2:\n            lines.append("Two guesses made.")\n' + _FEEDBACK_OLD
)


def test_the_loop_reports_a_syntax_error_a_reward_change_and_a_divergence(
    project: Path, baseline: Path, tmp_path: Path
) -> None:
    """On every save one verdict: a syntax error is one line naming file and line and the
    loop goes on; a reward change shows the paired difference and the changed rollouts
    against the previous iteration and the baseline; a dataset save plays again on the same
    agent processes; a changed tool answer diverges the baseline's replay at turn 2; Ctrl-C
    ends the loop with the last verdict's path and no agent process left."""
    out = tmp_path / "runs" / "dev"
    agent = project / "agent.py"
    args = ["--dataset", "d.jsonl", "--baseline", str(baseline), "--out", str(out)]
    loop = DevLoop(project, "agent.py", *args, "--prompts", str(_ROWS))
    try:
        first = loop.verdict()
        assert first[0].startswith("#1 start · agents restarted"), first
        assert "  replay of the baseline: 6 episodes: 6 identical" in first
        assert first[-1] == "  → ok (exit 0)"
        pids = _agent_pids(agent)
        assert pids

        source = agent.read_text(encoding="utf-8")
        agent.write_text(source + "\nbroken = (\n", encoding="utf-8")
        lines = source.count("\n") + 2
        assert loop.verdict() == [
            f"#2 agent.py: does not load: agent.py:{lines}: SyntaxError: '(' was never closed"
        ]

        agent.write_text(source.replace(_REWARD_OLD, _REWARD_NEW), encoding="utf-8")
        changed = loop.verdict()
        text = "\n".join(changed)
        assert changed[0].startswith("#3 agent.py · agents restarted"), changed
        assert re.search(r"vs #1: Δ -0\.\d+ ± 0\.\d+ \(paired, 3 prompts\)", text), text
        assert re.search(r"6 of 6 rollouts changed: p0-g0 \d\.\d+ → \d\.\d+", text), text
        assert re.search(r"vs baseline: Δ -0\.\d+ ± 0\.\d+ \(paired, 3 prompts\)", text), text
        assert "terms strategy " in text
        assert "6 episodes: 6 reward changed" in text
        assert changed[-1] == "  → changed against the baseline (exit 10)"
        document = _verdict_json(out, changed)
        assert document["code"] == 10
        assert len(document["previous"]["rollouts"]) == 6
        now = _agent_pids(agent)
        assert now
        assert not now & pids, "the agents run the new code in new processes"

        with (project / "d.jsonl").open("a", encoding="utf-8") as fh:
            fh.write((WORDLE / "holdout.jsonl").read_text(encoding="utf-8").splitlines()[5])
            fh.write("\n")
        again = loop.verdict()
        assert again[0].startswith("#4 d.jsonl · "), again
        assert "  vs #3: no change (6 rollouts compared)" in again
        assert now <= _agent_pids(agent), "a dataset save keeps the agent processes"

        _edit(agent, _FEEDBACK_OLD, _FEEDBACK_NEW)
        diverged = loop.verdict()
        assert any("diverged at turn 2" in line for line in diverged), diverged
        document = _verdict_json(out, diverged)
        episodes = document["replay"]["episodes"]
        turns = {e["turn"] for e in episodes if e["status"] == "diverged"}
        assert turns == {2}, episodes
        assert all(e["new_reward"] is not None for e in episodes)

        code, stderr = loop.stop()
        assert code == 0, stderr
        last = out / "dev-0005" / "verdict.json"
        assert f"stopped; last verdict: {last}" in stderr
        assert _agent_pids(agent) == set()
    finally:
        loop.close()


def test_once_exits_with_the_verdicts_code(project: Path, baseline: Path, tmp_path: Path) -> None:
    """``--once`` plays one iteration and exits with its code: 2 and one line for code that
    does not load, 10 for a reward that changed against the baseline; no agent is left."""
    out = tmp_path / "dev"
    agent = project / "agent.py"
    source = agent.read_text(encoding="utf-8")
    command = [sys.executable, "-m", "agent_kit.cli", "dev", "agent.py", "--dataset", "d.jsonl"]
    command += ["--baseline", str(baseline), "--out", str(out), "--once"]
    agent.write_text(source.replace("import functools", "import functools, nowhere_to_be_found"))
    done = subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr
    line = source.splitlines().index("import functools") + 1  # where the import fails
    assert done.stdout.splitlines() == [
        f"#1 start: does not load: agent.py:{line}: ModuleNotFoundError: No module named "
        "'nowhere_to_be_found'"
    ]
    agent.write_text(source.replace(_REWARD_OLD, _REWARD_NEW), encoding="utf-8")
    done = subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
    assert done.returncode == 10, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "  → changed against the baseline (exit 10)"
    assert _agent_pids(agent) == set()


def test_an_app_that_fails_its_own_checks_is_named_at_its_line(tmp_path: Path) -> None:
    """The load check imports the entrypoint in a fresh interpreter: an app that fails its
    own checks is the line that built it, with the check's words."""
    agent = tmp_path / "agent.py"
    agent.write_text(
        "from agent_kit.app import RolloutApp\n\n\nclass Env:\n    pass\n\n\n"
        "app = RolloutApp(Env, reward=lambda env, ep: 1.0, max_turns=0)\n",
        encoding="utf-8",
    )
    error = asyncio.run(check_entrypoint(agent, dict(os.environ)))
    assert error is not None
    assert error.text(tmp_path) == "agent.py:8: ValueError: max_turns must be at least 1"
    agent.write_text(agent.read_text(encoding="utf-8").replace("max_turns=0", "max_turns=3"))
    assert asyncio.run(check_entrypoint(agent, dict(os.environ))) is None
