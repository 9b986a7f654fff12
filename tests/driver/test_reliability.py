"""The reliability suite: real ``agent-kit run`` processes, real signals, the store as witness.

Earlier modules already cover, and this one does not repeat: the run lock itself and a live
resume in-process (test_run_lock.py), one SIGKILL mid-job then an in-process resume
(test_cli_run.py), Ctrl-C → 130 (test_cli_main.py, test_driver.py), agents that crash or hang
(test_driver.py), floor and NaN rewards (test_agent_failures.py), huge agent output
(test_agent_logs.py). Here, every driver is the console script ``.venv/bin/agent-kit`` in a
subprocess:

- SIGKILL of the driver at three moments the store shows — every rollout started and none
  rewarded; half the slots rewarded and half waiting for their reward; every slot rewarded and
  the driver still waiting for the agent's answers (no summary yet) — then a ``--resume``
  process: every slot rewarded exactly once, one reward row per slot, each retry linked to the
  attempt it replaces, nothing recorded before the kill changed;
- ``--resume`` (and a new run under the same name) while the run is live: exit 12, one line
  naming the holder, nothing written;
- SIGKILL of one of ``--workers 2`` agent processes mid-run: exactly its rollouts retried,
  nothing lost, the run completes;
- unusable run directories — ``--out`` under a file, a read-only run directory (on resume and
  made read-only mid-run), a run directory deleted mid-run: one ``error:`` line, an exit code
  the errors module documents, no traceback.

The moments are deterministic: tests/agents/hold_agent.py holds a rollout at a chosen point
until a gate file exists or its process dies, and the tests poll the store (read-only; WAL
readers never block the writer) with deadlines. No mocks anywhere.

As root, ``chmod`` does not stop writes; the driver of a read-only test is then started with
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped from its capability bounding set (``prctl
(PR_CAPBSET_DROP)`` before ``exec``), so file permissions bind it as they bind any user.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_gone

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.local import run_local
from agent_kit.errors import AgentKitError, RunStoreError, UsageError
from agent_kit.store import RUN_FILE, RunStore, TrajectoryRow
from agent_kit.store.layout import RunLayout

pytestmark = pytest.mark.e2e

AGENTS = Path(__file__).parents[1] / "agents"
HOLD = str(AGENTS / "hold_agent.py")
GOOD = str(AGENTS / "good_agent.py")
AGENT_KIT = Path(sys.executable).with_name("agent-kit")

Slot = tuple[int, int, int]

#: Runs ``argv[1:]`` with CAP_DAC_OVERRIDE (1) and CAP_DAC_READ_SEARCH (2) dropped from the
#: capability bounding set (``prctl(PR_CAPBSET_DROP=24, cap)``): after ``exec`` even uid 0 is
#: bound by file permissions.
DROP_DAC = (
    "import ctypes, os, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "for cap in (1, 2):\n"
    "    if libc.prctl(24, cap, 0, 0, 0) != 0:\n"
    "        sys.exit(f'prctl(PR_CAPBSET_DROP, {cap}): errno {ctypes.get_errno()}')\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


def _exit_codes(cls: type[AgentKitError]) -> set[int]:
    codes = {cls.exit_code}
    for sub in cls.__subclasses__():
        codes |= _exit_codes(sub)
    return codes


#: The exit codes agent_kit.errors documents for a specific failure (1 is its catch-all base,
#: also what a Python traceback exits with, so it does not count).
DOCUMENTED_EXIT_CODES = frozenset(_exit_codes(AgentKitError) - {1})


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RFT_"))}


def _dataset(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps({"prompt": json.dumps(t)}) + "\n" for t in tasks))
    return path


def _command(
    argv: list[str], *, drop_dac: bool = False, program: str = str(AGENT_KIT)
) -> list[str]:
    """``program ARGV…``; with ``drop_dac``, run so that file permissions bind it (as root too)."""
    command = [program, *argv]
    if drop_dac and os.geteuid() == 0:
        command = [sys.executable, "-c", DROP_DAC, *command]
    return command


@dataclass
class Driver:
    """A live ``agent-kit`` process; its stdout and stderr go to files (no pipe to fill)."""

    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def stdout(self) -> str:
        """What it printed on stdout so far."""
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        """What it printed on stderr so far."""
        return self.err.read_text(errors="replace")

    def wait(self, timeout: float) -> int:
        """Its exit code, waiting at most ``timeout`` seconds."""
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL it (if still alive) and reap it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@contextlib.contextmanager
def _driver(cwd: Path, label: str, argv: list[str], *, drop_dac: bool = False) -> Iterator[Driver]:
    """Start ``agent-kit ARGV…`` in ``cwd``; on leaving, SIGKILL it if it still runs."""
    out, err = cwd / f"{label}.out", cwd / f"{label}.err"
    with out.open("wb") as fh_out, err.open("wb") as fh_err:
        proc = subprocess.Popen(
            _command(argv, drop_dac=drop_dac), cwd=cwd, env=_env(), stdout=fh_out, stderr=fh_err
        )
    driver = Driver(proc, out, err)
    try:
        yield driver
    finally:
        driver.kill()


@dataclass(frozen=True)
class Ran:
    """A finished ``agent-kit`` process: exit code and output."""

    code: int
    out: str
    err: str

    def summary(self) -> dict[str, Any]:
        """The ``--json`` summary: the last line of stdout."""
        lines = [line for line in self.out.splitlines() if line.strip()]
        assert lines, self.err
        value = json.loads(lines[-1])
        assert isinstance(value, dict)
        return value

    def one_error_line(self) -> str:
        """The single ``error: …`` line on stderr (asserting there is exactly that)."""
        assert "Traceback" not in self.err, self.err
        lines = [line for line in self.err.splitlines() if line.strip()]
        assert len(lines) == 1, self.err
        assert lines[0].startswith("error: "), self.err
        return lines[0]


def _run(cwd: Path, argv: list[str], *, drop_dac: bool = False, timeout: float = 120) -> Ran:
    proc = subprocess.run(
        _command(argv, drop_dac=drop_dac),
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Ran(proc.returncode, proc.stdout, proc.stderr)


def _finished(driver: Driver, timeout: float = 90) -> Ran:
    code = driver.wait(timeout)
    return Ran(code, driver.stdout(), driver.stderr())


def _peek(run_dir: Path, check: Callable[[RunStore], bool]) -> bool:
    """``check`` on a read-only view of the run's store; False while there is no store yet."""
    if not (run_dir / RUN_FILE).exists():
        return False
    with (
        contextlib.suppress(sqlite3.OperationalError, UsageError, RunStoreError),
        RunStore.open(run_dir, readonly=True) as store,
    ):  # the schema may not be written yet
        return check(store)
    return False


def _wait_for(
    what: str, run_dir: Path, check: Callable[[RunStore], bool], driver: Driver, timeout: float = 60
) -> None:
    """Poll the store of a live driver until ``check`` holds (fail at the deadline or if the
    driver exits first)."""
    deadline = time.monotonic() + timeout
    while not _peek(run_dir, check):
        if driver.proc.poll() is not None:
            pytest.fail(
                f"the driver exited ({driver.proc.returncode}) before {what}:\n"
                f"{driver.stderr()[-3000:]}"
            )
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout:g} s:\n{driver.stderr()[-3000:]}")
        time.sleep(0.02)  # polling another process's store, with a deadline


def _agent_pids(run_dir: Path) -> dict[tuple[int, int], int]:
    """``(worker, start) -> pid`` of every agent process the run started."""
    with RunStore.open(run_dir, readonly=True) as store:
        return {
            (int(e.detail["worker"]), int(e.detail["start"])): int(e.detail["pid"])
            for e in store.list_events(kind="agent_start")
        }


def _children(pid: int) -> set[int]:
    """Direct children of a process, from /proc/<pid>/task/*/children."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found |= {int(p) for p in (task / "children").read_text().split()}
    return found


def _count(states: list[str], n: int) -> Callable[[RunStore], bool]:
    return lambda store: len(store.list_trajectories(states=states)) == n


def _slots(store: RunStore) -> dict[Slot, list[TrajectoryRow]]:
    slots: dict[Slot, list[TrajectoryRow]] = {}
    for row in store.list_trajectories():
        slots.setdefault((row.step, row.prompt_index, row.sample_index), []).append(row)
    return {slot: sorted(rows, key=lambda r: r.attempt) for slot, rows in slots.items()}


def _assert_each_slot_rewarded_once(store: RunStore, n_slots: int) -> dict[Slot, list[str]]:
    """Every slot ends in exactly one REWARDED attempt, the last one, the only one with a reward
    row; attempts are numbered 0.. and each links to the one before. Returns the states."""
    slots = _slots(store)
    assert len(slots) == n_slots
    for slot, rows in slots.items():
        assert [r.attempt for r in rows] == list(range(len(rows))), slot
        assert [r.state for r in rows].count("REWARDED") == 1, (slot, rows)
        assert rows[-1].state == "REWARDED", (slot, rows)
        with_reward = [r.id for r in rows if store.get_reward(r.id) is not None]
        assert with_reward == [rows[-1].id], (slot, with_reward)  # no duplicate reward
        assert rows[0].retry_of is None
        for before, after in itertools.pairwise(rows):
            assert after.retry_of == before.id, (slot, after)
    return {slot: [r.state for r in rows] for slot, rows in slots.items()}


# -- kill -9 of the driver at three moments, then --resume --------------------------------------


def _in_step(
    step: int, states: list[str], n: int, prompt: int | None = None
) -> Callable[[RunStore], bool]:
    """Store check: ``n`` trajectories of ``step`` (and ``prompt``) are in one of ``states``."""

    def check(store: RunStore) -> bool:
        rows = store.list_trajectories(states=states)
        return n == sum(1 for r in rows if r.step == step and prompt in (None, r.prompt_index))

    return check


def _rewarded(store: RunStore) -> int:
    return len(store.list_trajectories(states=["REWARDED"]))


#: Three steps of 2 prompts × 2 samples; on attempt 0 the hold agent stops each at a moment
#: the store shows, and the driver is killed there (the three moments of the test below).
KILL_TASKS: list[dict[str, Any]] = [
    {"id": 0, "hold": "start"},  # step 0: every rollout started (OPEN), nothing rewarded
    {"id": 1, "hold": "start"},
    {"id": 2},  # step 1: half the slots rewarded, the other half READY, waiting for a reward
    {"id": 3, "hold": "reward"},
    {"id": 4, "hold": "answer"},  # step 2: every slot rewarded, the answers (and summary) due
    {"id": 5, "hold": "answer"},
]
KILL_MOMENTS: list[tuple[str, Callable[[RunStore], bool], int]] = [
    # (moment, what the store shows then, trajectories a resume must expire as stale)
    ("before the first reward", lambda s: _in_step(0, ["OPEN"], 4)(s) and not _rewarded(s), 4),
    (
        "mid-run",
        lambda s: _in_step(1, ["REWARDED"], 2, 2)(s) and _in_step(1, ["READY"], 2, 3)(s),
        2,
    ),
    ("after the last reward, before the summary", _in_step(2, ["REWARDED"], 4), 0),
]


def test_sigkill_at_three_moments_then_resume_rewards_every_slot_once(tmp_path: Path) -> None:
    """SIGKILL of `agent-kit run` before the first reward, mid-run, and after the last reward
    but before the summary, each followed by `agent-kit run --resume` in a new process: every
    slot rewarded exactly once, retries linked to what they replace, earlier rewards intact."""
    data = _dataset(tmp_path / "d.jsonl", KILL_TASKS)
    run_dir = tmp_path / "runs" / "k"
    argv = ["run", HOLD, "--dataset", str(data), "--group-size", "2", "--batch-size", "2"]
    argv += ["--steps", "3", "--concurrency", "4", "--workers", "1", "--rollout-timeout", "120"]
    argv += ["--out", "runs", "--name", "k", "--json"]
    resume = ["run", "--resume", str(run_dir), "--json"]
    recorded: dict[str, tuple[Any, int]] = {}
    for i, (moment, shows, _) in enumerate(KILL_MOMENTS):
        with _driver(tmp_path, f"driver-{i}", resume if i else argv) as driver:
            _wait_for(moment, run_dir, shows, driver)
            driver.proc.send_signal(signal.SIGKILL)
            assert driver.wait(10) == -signal.SIGKILL
        assert not (run_dir / "summary.json").exists(), moment
        with RunStore.open(run_dir, readonly=True) as store:
            (job,) = store.list_jobs()
            assert job.status == "running", moment  # nobody wrote an end state
            rewarded = store.list_trajectories(states=["REWARDED"])
            assert len(rewarded) == [0, 6, 12][i], moment
            recorded |= {t.id: (store.get_reward(t.id), store.count_turns(t.id)) for t in rewarded}
        wait_gone(list(_agent_pids(run_dir).values()), "agent processes outlived their driver")

    resumed = _run(tmp_path, resume)
    assert resumed.code == 0, resumed.err
    run = resumed.summary()["run"]
    assert (run["status"], run["slots_total"], run["slots_succeeded"]) == (
        "completed",
        12,
        12,
    )
    assert run["retries"] == 0  # replaying what a kill cut short is not a retry
    assert json.loads((run_dir / "summary.json").read_text())["run"]["status"] == "completed"
    with RunStore.open(run_dir, readonly=True) as store:
        (job,) = store.list_jobs()
        assert job.status == "completed"
        states = _assert_each_slot_rewarded_once(store, 12)
        attempts = {p: len(states[(p // 2, p, 0)]) for p in range(6)}
        assert attempts == {0: 2, 1: 2, 2: 1, 3: 2, 4: 1, 5: 1}
        stale = store.list_trajectories(states=["TIMED_OUT"])
        assert [t.reason for t in stale] == ["resumed"] * 6
        resumes = [e.detail["stale_trajectories"] for e in store.list_events(kind="job_resumed")]
        assert resumes == [n for _, _, n in KILL_MOMENTS]
        for tid, (reward, turns) in recorded.items():  # nothing recorded before a kill changed
            row = store.get_trajectory(tid)
            assert row is not None
            assert row.state == "REWARDED"
            assert store.get_reward(tid) == reward
            assert store.count_turns(tid) == turns


# -- a live run refuses a second driver ---------------------------------------------------------


def _snapshot(run_dir: Path) -> tuple[Any, ...]:
    """What a driver could have written: the files, the lock's holder and the store's rows.
    SQLite's ``-wal``/``-shm`` side files are left out: any reader (this one too) makes them."""
    files = sorted(
        str(p.relative_to(run_dir))
        for p in run_dir.rglob("*")
        if not p.name.endswith(("-wal", "-shm"))
    )
    with RunStore.open(run_dir, readonly=True) as store:
        rows = (
            [(j.arn, j.status) for j in store.list_jobs()],
            [(t.id, t.state, t.reason) for t in store.list_trajectories()],
            [(e.kind, e.trajectory_id) for e in store.list_events()],
        )
    return files, RunLayout(run_dir).lock.read_text(), rows


def test_resume_of_a_live_run_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """While `agent-kit run` plays, `--resume` of its directory and a new run under its name
    each exit 12 with one line naming the holder's pid; nothing in the directory changes."""
    data = _dataset(tmp_path / "d.jsonl", [{"id": 0, "hold": "start"}, {"id": 1, "hold": "start"}])
    run_dir = tmp_path / "runs" / "live"
    argv = ["run", HOLD, "--dataset", str(data), "--group-size", "2", "--concurrency", "4"]
    argv += ["--workers", "1", "--out", "runs", "--name", "live", "--json"]
    with _driver(tmp_path, "live", argv) as live:
        _wait_for("every rollout started", run_dir, _count(["OPEN"], 4), live)
        before = _snapshot(run_dir)
        seconds = {
            f"run directory {run_dir}": ["run", "--resume", str(run_dir), "--json"],
            "run directory runs/live": argv,  # a new run under the live one's name
        }
        with contextlib.ExitStack() as stack:  # both at once: they only read the lock
            refused = {
                named: stack.enter_context(_driver(tmp_path, f"second-{i}", second))
                for i, (named, second) in enumerate(seconds.items())
            }
            for named, second in refused.items():
                ran = _finished(second, timeout=60)
                assert ran.code == 12, ran
                line = ran.one_error_line()
                assert line.startswith(f"error: {named} is in use by pid {live.proc.pid} "), line
                assert f"kill -INT {live.proc.pid}" in line
                assert ran.out == ""
        assert _snapshot(run_dir) == before
        assert live.proc.poll() is None  # the live run was not disturbed
        live.kill()
    wait_gone(list(_agent_pids(run_dir).values()), "agent processes outlived their driver")


# -- one of two agent processes killed mid-run --------------------------------------------------


def test_killed_agent_worker_has_its_rollouts_retried(tmp_path: Path) -> None:
    """SIGKILL of one of `--workers 2` agent processes (a child of the driver) while it serves
    two rollouts: exactly those two are retried, the worker restarts, every slot is rewarded."""
    gate = tmp_path / "go"
    tasks = [{"id": i, "hold": "reward", "until": str(gate)} for i in range(4)]
    data = _dataset(tmp_path / "d.jsonl", tasks)
    run_dir = tmp_path / "runs" / "w"
    argv = ["run", HOLD, "--dataset", str(data), "--group-size", "2", "--concurrency", "4"]
    argv += ["--workers", "2", "--rollout-timeout", "120", "--out", "runs", "--name", "w", "--json"]
    with _driver(tmp_path, "w", argv) as driver:
        # READY: each rollout has sampled and completed inside its agent, and waits there.
        _wait_for("4 rollouts held in the agents", run_dir, _count(["READY"], 4), driver)
        pids = _agent_pids(run_dir)
        assert set(pids) == {(0, 1), (1, 1)}
        assert set(pids.values()) <= _children(driver.proc.pid)
        os.kill(pids[(0, 1)], signal.SIGKILL)  # worker 0 serves 2 of the 4 (least busy first)
        _wait_for("the killed worker's rollouts retried", run_dir, _count(["TIMED_OUT"], 2), driver)
        gate.touch()
        ran = _finished(driver)
    assert ran.code == 0, ran.err
    run = ran.summary()["run"]
    assert (run["status"], run["slots_total"], run["slots_succeeded"]) == ("completed", 8, 8)
    assert run["retries"] == 2
    with RunStore.open(run_dir, readonly=True) as store:
        states = _assert_each_slot_rewarded_once(store, 8)
        assert sorted(len(s) for s in states.values()) == [1] * 6 + [2] * 2
        for row in store.list_trajectories(states=["TIMED_OUT"]):
            assert row.reason is not None
            assert "crashed" in row.reason
            assert "agent worker 0" in row.reason
        exits = [e.detail for e in store.list_events(kind="agent_exit")]
        assert [(e["worker"], e["returncode"]) for e in exits] == [(0, -signal.SIGKILL)]
        starts = [
            (e.detail["worker"], e.detail["start"]) for e in store.list_events(kind="agent_start")
        ]
    assert sorted(starts) == [(0, 1), (0, 2), (1, 1)]  # worker 0 restarted once, worker 1 never


# -- unusable run directories -------------------------------------------------------------------


def test_out_under_a_file_is_one_error_line(tmp_path: Path) -> None:
    """`--out` naming a path under a regular file: one `error:` line, a documented exit code, no
    traceback, nothing created."""
    data = _dataset(tmp_path / "d.jsonl", [{"id": 0, "turns": 1}])
    (tmp_path / "afile").write_text("not a directory\n")
    ran = _run(
        tmp_path,
        [
            "run",
            GOOD,
            "--dataset",
            str(data),
            "--group-size",
            "2",
            "--out",
            "afile/runs",
            "--name",
            "x",
            "--json",
        ],
    )
    assert ran.code in DOCUMENTED_EXIT_CODES, ran
    assert "afile/runs" in ran.one_error_line()
    assert (tmp_path / "afile").read_text() == "not a directory\n"


def _check_permissions_bind(run_dir: Path) -> None:
    """A process started the way the read-only tests start the driver cannot write run_dir."""
    probe = run_dir / "probe"
    ran = subprocess.run(
        _command(["-c", f"open({str(probe)!r}, 'w')"], drop_dac=True, program=sys.executable),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert ran.returncode != 0, f"file permissions do not bind the test's driver: {ran}"
    assert not probe.exists()


@contextlib.contextmanager
def _read_only(run_dir: Path) -> Iterator[None]:
    """Make ``run_dir`` (mode 0o500) and its files (0o400) read-only; restore on leaving."""
    modes = {p: p.stat().st_mode for p in [run_dir, *run_dir.iterdir()] if p.is_file()}
    run_mode = run_dir.stat().st_mode
    for path in modes:
        path.chmod(0o400)
    run_dir.chmod(0o500)
    try:
        yield
    finally:
        run_dir.chmod(run_mode)
        for path, mode in modes.items():
            path.chmod(mode)


def test_resume_of_a_read_only_run_directory_is_one_error_line(tmp_path: Path) -> None:
    """`--resume` of a run directory the driver may not write: one `error:` line naming it, a
    documented exit code, no traceback, and the store as it was."""
    data = _dataset(tmp_path / "d.jsonl", [{"id": 0, "turns": 1}])
    run_dir = tmp_path / "runs" / "ro"
    config = JobConfig(name="ro", group_size=2, concurrency=2)  # made in-process: faster
    first = asyncio.run(
        run_local(
            RunConfig(entrypoint=GOOD, dataset=data, job=config, out=tmp_path / "runs", workers=1)
        )
    )
    assert first.status == "completed"
    before = _snapshot(run_dir)
    with _read_only(run_dir):
        _check_permissions_bind(run_dir)
        ran = _run(tmp_path, ["run", "--resume", str(run_dir), "--json"], drop_dac=True)
    assert ran.code in DOCUMENTED_EXIT_CODES, ran
    assert str(run_dir) in ran.one_error_line()
    assert _snapshot(run_dir) == before


def test_run_directory_made_read_only_mid_run_is_one_error_line(tmp_path: Path) -> None:
    """A run directory made read-only while the run plays: the rollouts still land in the open
    store, and the summary that cannot be written is one `error:` line with a documented exit
    code, no traceback."""
    gate = tmp_path / "go"
    data = _dataset(tmp_path / "d.jsonl", [{"id": 0, "hold": "start", "until": str(gate)}])
    run_dir = tmp_path / "runs" / "rm"
    argv = ["run", HOLD, "--dataset", str(data), "--group-size", "2", "--concurrency", "2"]
    argv += ["--workers", "1", "--out", "runs", "--name", "rm", "--json"]
    with _driver(tmp_path, "rm", argv, drop_dac=True) as driver:
        _wait_for("both rollouts in flight", run_dir, _count(["OPEN"], 2), driver)
        run_dir.chmod(0o500)
        try:
            _check_permissions_bind(run_dir)
            gate.touch()
            ran = _finished(driver)
        finally:
            run_dir.chmod(0o755)
    assert ran.code in DOCUMENTED_EXIT_CODES, ran
    line = ran.one_error_line()
    assert str(run_dir) in line or "runs/rm" in line, line
    with RunStore.open(run_dir, readonly=True) as store:
        _assert_each_slot_rewarded_once(store, 2)  # nothing the agent reported was lost


def test_run_directory_deleted_mid_run_is_an_error(tmp_path: Path) -> None:
    """A run directory deleted while the run plays (its store gone with it) is not a success:
    one `error:` line naming the directory, a documented exit code, no traceback."""
    gate = tmp_path / "go"
    data = _dataset(tmp_path / "d.jsonl", [{"id": 0, "hold": "start", "until": str(gate)}])
    out = tmp_path / "runs"
    run_dir = out / "gone"
    argv = ["run", HOLD, "--dataset", str(data), "--group-size", "2", "--concurrency", "2"]
    argv += ["--workers", "1", "--out", str(out), "--name", "gone", "--json"]
    with _driver(tmp_path, "gone", argv) as driver:
        _wait_for("both rollouts in flight", run_dir, _count(["OPEN"], 2), driver)
        shutil.rmtree(run_dir)
        gate.touch()
        ran = _finished(driver)
    assert ran.code in DOCUMENTED_EXIT_CODES, ran
    assert str(run_dir) in ran.one_error_line()


def test_run_killed_before_it_recorded_its_job_can_be_started_again(tmp_path: Path) -> None:
    """A SIGKILL between creating run.sqlite and recording the job (a real process that takes
    the lock and opens the store as `agent-kit run` does, then is killed) leaves a directory
    the same `agent-kit run` command starts in: `--resume` has nothing to resume there."""
    run_dir = tmp_path / "runs" / "early"
    code = (
        "import sys, time; from pathlib import Path; "
        "from agent_kit.store.runlock import RunLock; from agent_kit.store import "
        "RunStore; d = Path(sys.argv[1]); RunLock.acquire(d); RunStore.open(d); "
        "print('opened', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(run_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "opened"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert proc.stdout is not None
        proc.stdout.close()
    with RunStore.open(run_dir, readonly=True) as store:
        assert store.list_jobs() == []  # what the kill left: a store without a job
    data = _dataset(tmp_path / "d.jsonl", [{"id": 0, "turns": 1}])
    argv = ["run", GOOD, "--dataset", str(data), "--group-size", "2", "--workers", "1"]
    ran = _run(tmp_path, [*argv, "--out", "runs", "--name", "early", "--json"])
    assert ran.code == 0, ran
    assert ran.summary()["run"]["slots_succeeded"] == 2


# -- what an agent starts ends with the run ------------------------------------------------------


def _gone(pid: int) -> bool:
    """True when ``pid`` has exited (a zombie not yet reaped by its new parent counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2 :].startswith("Z")


def test_processes_an_agent_starts_end_with_the_run(tmp_path: Path) -> None:
    """Children an agent forks (one ignoring SIGTERM, one whose child left for its own session)
    are all ended: those of a crashed worker before it restarts, the rest as the run ends, and
    the run prints no "Event loop is closed" traceback."""
    pids_file = tmp_path / "pids.jsonl"
    tasks = [{"id": 0, "pids": str(pids_file), "crash": True}, {"id": 1, "pids": str(pids_file)}]
    data = _dataset(tmp_path / "d.jsonl", tasks)
    argv = ["run", str(AGENTS / "fork_agent.py"), "--dataset", str(data), "--group-size", "2"]
    argv += ["--workers", "1", "--concurrency", "1"]  # one rollout at a time: 6 known attempts
    ran = _run(tmp_path, [*argv, "--out", "runs", "--name", "fork", "--json"])
    assert ran.code == 0, ran
    assert "Event loop is closed" not in ran.err, ran.err
    assert "Traceback" not in ran.err, ran.err
    started = [json.loads(line) for line in pids_file.read_text().splitlines()]
    assert len(started) == 6  # 4 rewarded rollouts and the 2 crashed attempts before them
    pids = [pid for group in started for pid in group]
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in pids):
        alive = [pid for pid in pids if not _gone(pid)]
        assert time.monotonic() < deadline, f"processes the agent started outlived it: {alive}"
        time.sleep(0.05)  # polling process liveness, with a deadline


# -- a store that cannot grow (disk full) -----------------------------------------------------

#: Runs ``argv[2:]`` with its file size limit (RLIMIT_FSIZE) set to ``argv[1]`` bytes: a write
#: past it fails with EFBIG (Python ignores SIGXFSZ), as a full disk fails it with ENOSPC.
LIMIT_FSIZE = (
    "import os, resource, sys\n"
    "limit = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def test_a_store_that_cannot_grow_stops_the_run_resumably(tmp_path: Path) -> None:
    """A run whose store stops taking writes mid-run (file size limit of 600 kB, as a full
    disk) starts no rollout it cannot record, ends with one `error:` line and exit 14, and a
    `--resume` without the limit plays every slot exactly once."""
    notes = tmp_path / "played.txt"
    data = _dataset(tmp_path / "d.jsonl", [{"id": i, "note": str(notes)} for i in range(16)])
    run_dir = tmp_path / "runs" / "full"
    argv = ["run", GOOD, "--dataset", str(data), "--group-size", "2", "--concurrency", "2"]
    argv += ["--workers", "1", "--out", "runs", "--name", "full", "--json"]
    limited = [sys.executable, "-c", LIMIT_FSIZE, str(600_000), str(AGENT_KIT), *argv]
    proc = subprocess.run(
        limited, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120, check=False
    )
    ran = Ran(proc.returncode, proc.stdout, proc.stderr)
    assert ran.code == RunStoreError.exit_code, ran
    line = ran.one_error_line()
    assert "cannot write run store" in line, line
    assert "runs/full" in line, line
    played = notes.read_text().split()
    with RunStore.open(run_dir, readonly=True) as store:
        recorded = {row.id for row in store.list_trajectories()}
    assert set(played) <= recorded  # no rollout started that the store does not know
    assert len(played) < 32  # the run stopped starting rollouts
    resumed = _run(tmp_path, ["run", "--resume", str(run_dir), "--json"])
    assert resumed.code == 0, resumed
    with RunStore.open(run_dir, readonly=True) as store:
        _assert_each_slot_rewarded_once(store, 32)
    played = notes.read_text().split()
    assert len(played) == len(set(played))  # no attempt was played twice
