"""The `agent-kit` entry point: every exit code, through a CliRunner and through a real process.

Each case runs twice (the ``cli`` fixture): in-process with ``typer.testing.CliRunner`` on the
real app, and in a process of its own running the console script's ``main()`` (forked from one
interpreter that imported the CLI). The Ctrl-C and signal checks run `.venv/bin/agent-kit`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_gone
from typer.testing import CliRunner

from agent_kit import __version__, errors
from agent_kit.cli import app
from agent_kit.store import RunStore
from agent_kit.store.runlock import RunLock

pytestmark = pytest.mark.e2e

AGENTS = Path(__file__).parents[1] / "agents"
GOOD = str(AGENTS / "good_agent.py")

#: A RolloutApp: reset raises on {"broken": true} (an environment failure) and needs "target"
#: (a task without it cannot be played: ContractError).
ROLLOUT_APP = textwrap.dedent(
    '''
    """Test agent: an environment that can break, or refuse a task."""
    from agent_kit import Environment, RolloutApp, tool


    class Target(Environment):
        def reset(self, task: dict) -> str:
            if task.get("broken"):
                raise RuntimeError("the board is on fire")
            self.target = task["target"]
            return "Call ping."

        @tool
        def ping(self) -> str:
            """Ping."""
            self.finish()
            return "pong"


    app = RolloutApp(Target, reward=lambda env, episode: 1.0, max_turns=2)
    if __name__ == "__main__":
        app.run()
    '''
)

#: A process that imported the CLI once, then forks one child per request, each the console
#: script in a process of its own: a JSON line {"argv", "cwd"} on stdin → a child in ``cwd``
#: (stdin /dev/null, stdout and stderr sent to files) runs the real ``main(argv)`` and exits the
#: way the console script does, ``sys.exit(main(...))``; the parent answers the JSON line
#: {"code", "out", "err"}. It also registers a hidden ``raise-error NAME`` command raising the
#: agent_kit.errors class NAME (for the exit-code checks; hidden, so no help text shows it).
FORK_SERVER = textwrap.dedent(
    """
    import gc
    import json
    import os
    import sys
    import tempfile

    from agent_kit import errors
    from agent_kit.cli import app, main

    @app.command("raise-error", hidden=True)
    def raise_error(name: str) -> None:
        raise getattr(errors, name)(f"{name} raised on purpose")

    gc.freeze()  # what the CLI's import made is permanent: a child's exit does not collect it
    for request in sys.stdin:
        asked = json.loads(request)
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                os.chdir(asked["cwd"])
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.exit(main(asked["argv"]))
            _, status = os.waitpid(pid, 0)
            out.seek(0)
            err.seek(0)
            code = os.waitstatus_to_exitcode(status)
            answer = {"code": code, "out": out.read(), "err": err.read()}
        print(json.dumps(answer), flush=True)
    """
)


@dataclass(frozen=True)
class Ran:
    """What one `agent-kit` run left: its exit code and its two output streams."""

    code: int
    out: str
    err: str


Cli = Callable[..., Ran]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RFT_"))}


@pytest.fixture(scope="module")
def main_in_a_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Ran]]:
    """``run(cwd, *argv)``: `agent-kit ARGV…` as a real process running the console script's
    ``main()`` in ``cwd``, forked from one that imported the CLI (one interpreter start-up for
    the module, not one per case; see :data:`FORK_SERVER`)."""
    log = tmp_path_factory.mktemp("fork-server") / "stderr.txt"
    with log.open("w") as server_err:
        server = subprocess.Popen(
            [sys.executable, "-c", FORK_SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=server_err,
            env=_env(),
            text=True,
        )
    requests, answers = server.stdin, server.stdout
    assert requests is not None
    assert answers is not None

    def run(cwd: Path, *argv: str) -> Ran:
        requests.write(json.dumps({"argv": list(argv), "cwd": str(cwd)}) + "\n")
        requests.flush()
        ready, _, _ = select.select([answers], [], [], 180)
        if not ready:
            pytest.fail(f"`agent-kit {' '.join(argv)}` did not end in 180 s")
        line = answers.readline()
        assert line, f"the fork server ended: {log.read_text()}"
        answer = json.loads(line)
        return Ran(answer["code"], answer["out"], answer["err"])

    try:
        yield run
    finally:
        requests.close()
        try:
            server.wait(timeout=30)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait(timeout=10)
            answers.close()


@pytest.fixture(params=["runner", "process"])
def cli(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """`agent-kit ARGV…` in tmp_path, in-process (CliRunner) or as a real process."""
    monkeypatch.chdir(tmp_path)
    if request.param == "process":
        in_a_process: Callable[..., Ran] = request.getfixturevalue("main_in_a_process")
        return lambda *argv: in_a_process(tmp_path, *argv)

    def run(*argv: str) -> Ran:
        result = CliRunner().invoke(app, list(argv))
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return Ran(result.exit_code, result.stdout, result.stderr)

    return run


def _one_error_line(ran: Ran) -> str:
    lines = [line for line in ran.err.splitlines() if line.strip()]
    assert len(lines) == 1, ran.err
    assert lines[0].startswith("error: "), ran.err
    return lines[0]


def _dataset(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps({"prompt": json.dumps(t)}) + "\n" for t in tasks))
    return path


# -- click's usage errors, --version, bare agent-kit -----------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["rnu"], "error: No such command 'rnu'. Did you mean 'run'?"),
        (["run", "--bogus"], "error: No such option: --bogus"),
        (["run", GOOD, "--group-size", "abc"], "error: Invalid value for '--group-size'"),
        (["invoke"], "error: Missing argument 'entrypoint'"),
        (["replay", "export", "somewhere"], "error: Missing option '--out'"),
    ],
    ids=["unknown-command", "unknown-option", "bad-integer", "missing-argument", "missing-option"],
)
def test_usage_errors_are_one_line_exit_2(cli: Cli, argv: list[str], message: str) -> None:
    """A click usage error prints one `error:` line with click's hint and exits 2."""
    ran = cli(*argv)
    assert ran.code == 2, ran
    assert _one_error_line(ran).startswith(message)
    assert "Traceback" not in ran.err + ran.out


def test_version(cli: Cli) -> None:
    """`agent-kit --version` prints the package version on stdout and exits 0."""
    ran = cli("--version")
    assert (ran.code, ran.out, ran.err) == (0, f"agent-kit {__version__}\n", "")


@pytest.mark.parametrize("argv", [[], ["replay"]], ids=["agent-kit", "agent-kit-replay"])
def test_bare_group_prints_help(cli: Cli, argv: list[str]) -> None:
    """A bare `agent-kit` (or command group) prints its help and exits 2, as click does."""
    ran = cli(*argv)
    assert ran.code == 2, ran
    assert f"Usage: agent-kit {' '.join(argv)}".rstrip() in " ".join(ran.out.split())
    assert "error:" not in ran.err
    assert "Traceback" not in ran.err + ran.out


# -- each AgentKitError class, by its exit code ----------------------------------------------


_SIGNALLED = (errors.Aborted, errors.WarmStartStopped)


def _error_classes() -> list[type[errors.AgentKitError]]:
    """The error classes raised with a message (not Aborted nor WarmStartStopped: signals, whose
    exit is the signal's; see test_second_ctrl_c_aborts_at_once and tests/train)."""
    found: list[type[errors.AgentKitError]] = []
    todo: list[type[errors.AgentKitError]] = [errors.AgentKitError]
    while todo:
        cls = todo.pop()
        if cls.__module__ == errors.__name__ and cls not in _SIGNALLED:
            found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: (c.exit_code, c.__name__))


ERROR_CLASSES = _error_classes()


def test_exit_codes_are_the_documented_ones() -> None:
    """agent_kit.errors defines exactly the exit codes 1..12 and 14 (13 is doctor's verdict,
    not an exception; keep README's list in step)."""
    assert {cls.exit_code for cls in ERROR_CLASSES} == {*range(1, 13), 14}
    assert errors.Aborted.exit_code == 130
    assert errors.WarmStartStopped.exit_code == 130


@pytest.fixture
def raising_command() -> Iterator[None]:
    """A hidden `agent-kit raise-error NAME` command on the real app, for this test only."""

    def raise_error(name: str) -> None:
        raise getattr(errors, name)(f"{name} raised on purpose")

    app.command("raise-error", hidden=True)(raise_error)
    yield
    app.registered_commands[:] = [c for c in app.registered_commands if c.name != "raise-error"]


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: f"{c.__name__}-{c.exit_code}")
@pytest.mark.usefixtures("raising_command")
def test_every_error_class_in_process(cls: type[errors.AgentKitError]) -> None:
    """Through a CliRunner, each agent_kit error prints `error: <message>` and exits its code."""
    result = CliRunner().invoke(app, ["raise-error", cls.__name__])
    assert result.exit_code == cls.exit_code, result.output
    assert result.stderr == f"error: {cls.__name__} raised on purpose\n"


ONE_PER_CODE = list({c.exit_code: c for c in reversed(ERROR_CLASSES)}.values())


@pytest.fixture(scope="module")
def exits_through_main(
    main_in_a_process: Callable[..., Ran], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Ran]:
    """{error name: what its process left} for `agent-kit raise-error NAME`, a process per error
    of :data:`ONE_PER_CODE` (each forked from one that imported the CLI)."""
    cwd = tmp_path_factory.mktemp("exits")
    return {c.__name__: main_in_a_process(cwd, "raise-error", c.__name__) for c in ONE_PER_CODE}


@pytest.mark.parametrize(
    "cls",
    ONE_PER_CODE,
    ids=lambda c: f"{c.__name__}-{c.exit_code}",
)
def test_every_exit_code_through_main(
    cls: type[errors.AgentKitError], exits_through_main: dict[str, Ran]
) -> None:
    """Through the real main() in a process, an error of each exit code exits with that code."""
    ran = exits_through_main[cls.__name__]
    assert ran.code == cls.exit_code, ran.err
    assert ran.err == f"error: {cls.__name__} raised on purpose\n"


# -- real triggers, one per exit code ----------------------------------------------------------


def test_bad_policy_spec_exit_2(cli: Cli, tmp_path: Path) -> None:
    """An unknown policy scheme is a usage error (2) before any agent starts."""
    data = _dataset(tmp_path / "d.jsonl", [{"turns": 1}])
    ran = cli("run", GOOD, "--dataset", str(data), "--policy", "nope:1", "--out", "runs")
    assert ran.code == 2, ran
    assert "unknown policy spec 'nope:1'" in _one_error_line(ran)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def _cassette(path: Path, prompt: dict[str, Any]) -> Path:
    """A one-episode cassette of tmp agent.py, recorded with no turns and reward 1."""
    (path.parent / "agent.py").write_text(ROLLOUT_APP)
    header = {
        "format": "agent_kit.cassette/1",
        "created_at": "2026-12-03T00:00:00Z",
        "entrypoint": "agent.py",
        "episodes": 1,
    }
    episode = {
        "trajectory_id": "t0",
        "prompt": json.dumps(prompt),
        "reward": {"rewards": [1.0], "total": 1.0},
        "turns": [],
    }
    path.write_text(json.dumps(header) + "\n" + json.dumps(episode) + "\n")
    return path


def test_contract_error_exit_3(cli: Cli, tmp_path: Path) -> None:
    """Replaying a recorded task the environment cannot play is a contract error (3)."""
    cassette = _cassette(tmp_path / "bad.jsonl", {"no": "target"})
    ran = cli("replay", str(cassette), "--in-process")
    assert ran.code == 3, ran
    assert "the environment cannot play this task (KeyError: 'target')" in _one_error_line(ran)


def test_environment_failure_exit_6(cli: Cli, tmp_path: Path) -> None:
    """`invoke` of a rollout whose environment raised prints the outcome, then exits 6."""
    (tmp_path / "agent.py").write_text(ROLLOUT_APP)
    ran = cli("invoke", "agent.py", "--prompt", json.dumps({"broken": True}))
    assert ran.code == 6, ran
    assert "state: REWARDED" in ran.out
    line = _one_error_line(ran)
    assert "the environment failed: reset raised RuntimeError: the board is on fire" in line


def test_reporting_error_exit_7(cli: Cli) -> None:
    """`invoke` of a rollout that never got its reward prints the outcome, then exits 7."""
    agent = str(AGENTS / "noreward_agent.py")
    ran = cli("invoke", agent, "--prompt", json.dumps({"bad": True}), "--timeout", "4", "--json")
    assert ran.code == 7, ran
    assert json.loads(ran.out.splitlines()[-1])["state"] == "TIMED_OUT"
    line = _one_error_line(ran)
    assert "was not reported: The rollout completed but no reward was received in time" in line


def test_invoker_error_exit_8(cli: Cli) -> None:
    """`invoke` of an agent that cannot start exits 8 with the agent's log tail."""
    ran = cli("invoke", str(AGENTS / "broken_import_agent.py"), "--prompt", "{}")
    assert ran.code == 8, ran
    assert ran.err.startswith("error: agent ")
    assert "this entrypoint is broken on purpose" in ran.err


def test_job_failed_exit_9(cli: Cli, tmp_path: Path) -> None:
    """A job the agent fails exits 9 after printing the summary JSON."""
    data = _dataset(tmp_path / "d.jsonl", [{"bad": True}])
    agent = str(AGENTS / "failed_agent.py")
    ran = cli("run", agent, "--dataset", str(data), "--group-size", "2", "--out", "runs", "--json")
    assert ran.code == 9, ran
    assert json.loads(ran.out.splitlines()[-1])["run"]["status"] == "failed"
    assert "The agent signaled that the trajectory failed" in ran.err


def test_replay_mismatch_exit_10(cli: Cli, tmp_path: Path) -> None:
    """A replay that diverges from its recording exits 10 after the report."""
    cassette = _cassette(tmp_path / "div.jsonl", {"target": 1})
    ran = cli("replay", str(cassette), "--in-process", "--json")
    assert ran.code == 10, ran
    assert json.loads(ran.out.splitlines()[-1])["counts"]["diverged"] == 1
    assert "1 diverged (of 1 episode)" in _one_error_line(ran)


def test_deploy_error_exit_11(cli: Cli, tmp_path: Path) -> None:
    """Packaging an entrypoint with a syntax error is refused by the preflight (11)."""
    (tmp_path / "agent.py").write_text("def broken(:\n")
    ran = cli("package", "agent.py", "--out", "build")
    assert ran.code == 11, ran
    assert "agent.py:1: syntax error" in _one_error_line(ran)


def test_run_in_use_exit_12(cli: Cli, tmp_path: Path) -> None:
    """A run directory whose lock another driver holds is refused (12) before anything runs."""
    data = _dataset(tmp_path / "d.jsonl", [{"turns": 1}])
    lock = RunLock.acquire(tmp_path / "runs" / "busy")
    try:
        ran = cli("run", GOOD, "--dataset", str(data), "--out", "runs", "--name", "busy")
    finally:
        lock.release()
    assert ran.code == 12, ran
    assert _one_error_line(ran).startswith("error: ")
    assert not (tmp_path / "runs" / "busy" / "run.sqlite").exists()


# -- Ctrl-C --------------------------------------------------------------------------------------


def test_ctrl_c_in_process_exits_130(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a CliRunner, a KeyboardInterrupt inside `run` exits 130, saying so."""

    async def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr("agent_kit.driver.local.run_local", interrupted)
    data = _dataset(tmp_path / "d.jsonl", [{"turns": 1}])
    result = CliRunner().invoke(app, ["run", GOOD, "--dataset", str(data), "--out", str(tmp_path)])
    assert result.exit_code == 130, result.output
    assert result.stderr == "interrupted\n"


def _popen_interruptible(argv: list[str], **options: Any) -> subprocess.Popen[str]:
    """Popen whose child takes SIGINT as Ctrl-C (a shell's background job inherits it ignored)."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        return subprocess.Popen(argv, **options)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # exec resets it to SIG_DFL
    try:
        return subprocess.Popen(argv, **options)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _sampled(run_dir: Path) -> int:
    """Rollouts of the run in run_dir that made at least one policy call so far."""
    if not (run_dir / "run.sqlite").exists():
        return 0
    with (
        contextlib.suppress(sqlite3.OperationalError, errors.UsageError, errors.RunStoreError),
        RunStore.open(run_dir, readonly=True) as store,
    ):  # the schema may not be written yet
        return sum(1 for t in store.list_trajectories() if store.count_turns(t.id))
    return 0


def _interrupt_when(
    proc: subprocess.Popen[str], ready: Callable[[], bool], late: str
) -> tuple[str, str]:
    """SIGINT ``proc`` once ``ready()`` holds (polled with a 60 s deadline); its output. The
    process is killed if anything goes wrong on the way."""
    try:
        deadline = time.monotonic() + 60
        while not ready():
            assert proc.poll() is None, "the run ended before it could be interrupted"
            assert time.monotonic() < deadline, f"{late} in time"
            time.sleep(0.05)  # polling the store of another process, with a deadline
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def test_ctrl_c_real_process_exits_130(tmp_path: Path) -> None:
    """SIGINT to a real `agent-kit run` mid-job: exit 130, the interrupted run's summary
    written, the agent process gone."""
    data = _dataset(tmp_path / "d.jsonl", [{"bad": True}])
    run_dir = tmp_path / "runs" / "hang"
    argv = ["run", str(AGENTS / "hang_agent.py"), "--dataset", str(data), "--group-size", "2"]
    argv += ["--out", "runs", "--name", "hang", "--rollout-timeout", "120", "--json"]
    proc = _popen_interruptible(
        [sys.executable, "-m", "agent_kit.cli", *argv],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # both rollouts are now hanging in the agent
    _, err = _interrupt_when(proc, lambda: _sampled(run_dir) >= 2, "the rollouts did not start")
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "interrupted"
    assert "Traceback" not in err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    with RunStore.open(run_dir, readonly=True) as store:
        agent_pids = [e.detail["pid"] for e in store.list_events(kind="agent_start")]
    assert agent_pids
    wait_gone(agent_pids, "the agent process outlived the interrupted run")


def _rewarded(run_dir: Path) -> int:
    """Rollouts of the run in run_dir that are REWARDED so far."""
    if not (run_dir / "run.sqlite").exists():
        return 0
    with (
        contextlib.suppress(sqlite3.OperationalError, errors.UsageError, errors.RunStoreError),
        RunStore.open(run_dir, readonly=True) as store,
    ):  # the schema may not be written yet
        return len(store.list_trajectories(states=["REWARDED"]))
    return 0


def test_interrupted_run_counts_the_planned_slots(tmp_path: Path) -> None:
    """SIGINT to a real `agent-kit run` of a 256-slot job once its 8 playable rollouts are
    rewarded: the end summary and summary.json count all 256 planned slots, the 248 left, and
    name the `--resume` command of this run directory."""
    tasks = [{"turns": 1}] * 2 + [{"hold": "start"}] * 62  # 64 prompts × 4 samples, 1 step
    data = _dataset(tmp_path / "big.jsonl", tasks)
    run_dir = tmp_path / "runs" / "big"
    argv = ["run", str(AGENTS / "hold_agent.py"), "--dataset", str(data), "--group-size", "4"]
    argv += ["--concurrency", "12", "--workers", "1", "--out", "runs", "--name", "big"]
    argv += ["--rollout-timeout", "300", "--grace", "0"]
    proc = _popen_interruptible(
        [sys.executable, "-m", "agent_kit.cli", *argv],
        cwd=tmp_path,
        env={**_env(), "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # the two playable prompts' slots are rewarded; the rest hold
    out, err = _interrupt_when(
        proc, lambda: _rewarded(run_dir) >= 8, "the rollouts were not rewarded"
    )
    assert proc.returncode == 130, err
    text = " ".join(out.split())
    assert "8 / 256 rewarded · 0 lost (no reward) · 248 pending" in text, out
    assert "248 slots not played or cut short; --resume plays them" in text, out
    resume = [line.split() for line in out.splitlines() if "run --resume" in line]
    # started as `python -m agent_kit.cli`, so the printed command is that one (runs as pasted)
    assert resume == [[sys.executable, "-m", "agent_kit.cli", "run", "--resume", "runs/big"]], out
    assert (tmp_path / resume[0][-1] / "run.sqlite").is_file()
    counts = json.loads((run_dir / "summary.json").read_text())["counts"]
    assert (counts["slots"], counts["rewarded"], counts["lost"], counts["pending"]) == (
        256,
        8,
        0,
        248,
    )


AGENT_KIT = str(Path(sys.executable).parent / "agent-kit")


def _start_hanging_run(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    """`.venv/bin/agent-kit run --json` on two prompts (one hangs in the agent on its first
    attempt), returned once both of its rollouts have made a policy call."""
    data = _dataset(tmp_path / "d.jsonl", [{"bad": True}, {"turns": 1}])
    run_dir = tmp_path / "runs" / "sig"
    argv = [AGENT_KIT, "run", str(AGENTS / "hang_agent.py"), "--dataset", str(data)]
    argv += ["--group-size", "2", "--concurrency", "4", "--workers", "1", "--out", "runs"]
    argv += ["--name", "sig", "--rollout-timeout", "300", "--json", *extra]
    proc = _popen_interruptible(
        argv, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while _sampled(run_dir) < 2:  # the bad task's two rollouts now hang in the agent
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"the run did not reach its rollouts (exit {proc.returncode}): {err}")
        time.sleep(0.05)  # polling the store of another process, with a deadline
    return proc, run_dir


def _finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def _assert_resume_completes(main_in_a_process: Callable[..., Ran], run_dir: Path) -> None:
    """`--resume` plays every remaining slot: each of the 4 slots rewarded exactly once."""
    done = main_in_a_process(run_dir.parents[1], "run", "--resume", str(run_dir), "--json")
    assert done.code == 0, done.err
    assert json.loads(done.out.splitlines()[-1])["job"]["status"] == "completed"
    with RunStore.open(run_dir, readonly=True) as store:
        rewarded = [
            (t.step, t.prompt_index, t.sample_index)
            for t in store.list_trajectories()
            if t.state == "REWARDED"
        ]
    assert sorted(rewarded) == [(0, p, g) for p in range(2) for g in range(2)]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_gracefully_then_resume_completes(
    tmp_path: Path, sig: signal.Signals, code: int, main_in_a_process: Callable[..., Ran]
) -> None:
    """First Ctrl-C / SIGTERM on `run --json`: the graceful stop (grace 0.5 s for the hanging
    rollouts), summary.json with status interrupted, the JSON line on stdout, exit 130 / 143;
    the cut rollouts count as pending (not failed); `--resume` then rewards every slot once."""
    proc, run_dir = _start_hanging_run(tmp_path, "--grace", "0.5")
    proc.send_signal(sig)
    out, err = _finish(proc)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "interrupted"
    assert f"{sig.name}: stopping" in err
    line = json.loads(out.strip().splitlines()[-1])
    assert line["job"]["status"] == "interrupted"
    assert line["counts"]["lost"] == 0
    assert line["counts"]["pending"] == 2
    assert line["counts"]["by_state"].get("INTERRUPTED") == 2
    assert line["failures"] == []
    assert json.loads((run_dir / "summary.json").read_text())["job"]["status"] == "interrupted"
    _assert_resume_completes(main_in_a_process, run_dir)


def test_second_ctrl_c_aborts_at_once(
    tmp_path: Path, main_in_a_process: Callable[..., Ran]
) -> None:
    """A second Ctrl-C during a long grace aborts at once (the 600 s grace is not waited for):
    exit 130, a consistent store (the summary written, status interrupted), then `--resume`
    finishes every slot."""
    proc, run_dir = _start_hanging_run(tmp_path, "--grace", "600")
    proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 30
    while True:  # wait for the driver to enter its graceful stop
        with RunStore.open(run_dir, readonly=True) as store:
            if store.list_events(kind="job_interrupt"):
                break
        assert proc.poll() is None, "the run ended before the second Ctrl-C"
        assert time.monotonic() < deadline, "the graceful stop did not begin"
        time.sleep(0.05)  # polling the store of another process, with a deadline
    proc.send_signal(signal.SIGINT)
    _, err = _finish(proc)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "aborted" in err
    assert err.strip().splitlines()[-1] == "interrupted"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["job"]["status"] == "interrupted"
    _assert_resume_completes(main_in_a_process, run_dir)
