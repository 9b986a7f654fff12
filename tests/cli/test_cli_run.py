"""`agent-kit run` and `agent-kit invoke`: output contract, exit codes, kill -9 then --resume."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from helpers import SAY_AGENT, SAY_POLICY, SAY_RAISES_AT, wait_gone
from rich.console import Console

from agent_kit.cli import main
from agent_kit.cli.invoke import _outcome_error
from agent_kit.cli.live import LiveProgress
from agent_kit.driver.hooks import Progress
from agent_kit.driver.invokers import InvokeResult
from agent_kit.driver.one_rollout import InvokeOutcome
from agent_kit.errors import (
    EnvironmentFailure,
    ReportingError,
    RewardError,
    RunStoreError,
    UsageError,
)
from agent_kit.store import RunStore
from agent_kit.store.events import NO_REWARD_REASON

pytestmark = pytest.mark.e2e

AGENTS = Path(__file__).parents[1] / "agents"
GOOD = str(AGENTS / "good_agent.py")


def _dataset(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps({"prompt": json.dumps(t)}) + "\n" for t in tasks))
    return path


def _last_json_line(text: str) -> dict[str, Any]:
    lines = [line for line in text.splitlines() if line.strip()]
    value = json.loads(lines[-1])
    assert isinstance(value, dict)
    return value


def test_run_json_prints_summary_last(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`run --json` exits 0 and prints the summary JSON as the last stdout line."""
    data = _dataset(tmp_path / "d.jsonl", [{"turns": 1, "reward": 1.0}, {"turns": 2}])
    argv = ["run", GOOD, "--dataset", str(data), "--group-size", "2", "--out", str(tmp_path)]
    code = main([*argv, "--name", "cli", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    summary = _last_json_line(out)
    assert summary["run"]["status"] == "completed"
    assert summary["run"]["trajectories_by_state"] == {"REWARDED": 4}
    assert json.loads((tmp_path / "cli" / "summary.json").read_text())["run"]["turns"] == 6
    assert (tmp_path / "cli" / "report.html").is_file()


def test_run_table_without_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --json (and no TTY) the run prints one end summary: the headline, the metrics
    and the next steps (report link, the lowest-scoring rollout's transcript in it, reward
    audit)."""
    data = _dataset(tmp_path / "d.jsonl", [{"turns": 1}])
    argv = ["run", GOOD, "--dataset", str(data), "--group-size", "2", "--out", str(tmp_path)]
    assert main([*argv, "--name", "table"]) == 0
    out = capsys.readouterr().out
    run_dir = tmp_path / "table"
    lines = out.splitlines()
    assert "2 / 2 rewarded · 0 lost (no reward) · 0 pending · 0 retries" in out
    assert out.count("rollout/reward/mean") == 1  # one summary, not two tables
    assert f"    {(run_dir / 'report.html').resolve().as_uri()}" in lines
    summary = json.loads((run_dir / "summary.json").read_text())
    lowest = summary["lowest"][0]["id"]
    assert f"    {(run_dir / 'report.html').resolve().as_uri()}#tx-{lowest}" in lines
    assert f"    agent-kit doctor reward {run_dir}" in lines


def test_run_metrics_render_error_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An end summary that fails to render is one stderr line naming summary.json, and a
    one-line digest; exit 0."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("metrics")

    monkeypatch.setattr("agent_kit.cli.run.render_terminal", broken)
    data = _dataset(tmp_path / "d.jsonl", [{"turns": 1}])
    argv = ["run", GOOD, "--dataset", str(data), "--group-size", "2", "--out", str(tmp_path)]
    assert main([*argv, "--name", "norender"]) == 0
    captured = capsys.readouterr()
    summary = tmp_path / "norender" / "summary.json"
    assert captured.err.splitlines() == [
        "warning: the end summary could not be rendered (KeyError: 'metrics'); "
        f"the summary is in {summary}"
    ]
    assert "completed: 2 rewarded / 2 slots, 0 lost (no reward)" in captured.out
    assert json.loads(summary.read_text())["run"]["status"] == "completed"


def test_live_progress_renders_snapshots() -> None:
    """The rich.progress display shows step, rollouts done of total, rate, ETA and counts."""
    console = Console(file=StringIO(), force_terminal=True, width=120, color_system=None)
    live = LiveProgress(console)
    console.print(live.get_renderable())
    assert "starting the emulator and the agent…" in console.file.getvalue()
    snapshot = Progress(
        total=8,
        done=3,
        succeeded=2,
        failed=1,
        retried=1,
        in_flight=2,
        reward_mean=0.5,
        elapsed=2.0,
        rate=1.5,
        eta=75.0,
        step=0,
        steps=2,
        job_failures=1,
    )
    live.show(snapshot)
    console.file = StringIO()
    console.print(live.get_renderable())
    text = console.file.getvalue()
    assert "step 1/2" in text
    assert "3/8 rollouts" in text
    assert "1.50/s  ETA 1m15s" in text
    assert "rewarded 2  failed 1  retried 1  in flight 2  reward mean 0.5  job failures: 1" in text


def _outcome(state: str, body: Any, *, reason: str | None = None) -> InvokeOutcome:
    return InvokeOutcome(
        trajectory_id="t0",
        job_arn="arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/invoke",
        state=state,
        reason=reason,
        reward=None,
        result=InvokeResult(status="ok", body=body),
        store_path=Path("run.sqlite"),
    )


@pytest.mark.parametrize(
    ("outcome", "turns", "expected", "message"),
    [
        (_outcome("REWARDED", {"reward": 1.0, "reported": True}), 1, None, ""),
        (_outcome("FAILED", {"failed": True}, reason="failed"), 1, None, ""),
        (
            _outcome("REWARDED", {"reported": False, "report_error": "UpdateReward: 500"}),
            1,
            ReportingError,
            "rollout t0 was not reported: UpdateReward: 500",
        ),
        (
            _outcome("TIMED_OUT", {"reward": 1.0}, reason=NO_REWARD_REASON),
            1,
            ReportingError,
            f"rollout t0 was not reported: {NO_REWARD_REASON}",
        ),
        (
            _outcome("TIMED_OUT", None, reason="The agent answered without completing"),
            2,
            ReportingError,
            "rollout t0 was not reported: The agent answered without completing",
        ),
        (
            _outcome("TIMED_OUT", None, reason="No sampling requests were received"),
            0,
            None,
            "",
        ),
        (
            _outcome("REWARDED", {"failure": {"boundary": "environment", "reason": "boom"}}),
            0,
            EnvironmentFailure,
            "rollout t0: the environment failed: boom",
        ),
        (
            _outcome("REWARDED", {"failure": {"boundary": "reward", "reason": "NaN"}}),
            1,
            RewardError,
            "rollout t0: the reward function failed: NaN",
        ),
        (_outcome("REWARDED", {"failure": {"boundary": "policy", "reason": "5xx"}}), 1, None, ""),
    ],
    ids=[
        "rewarded",
        "agent-failed",
        "report-failed",
        "no-reward",
        "never-completed",
        "never-sampled",
        "environment",
        "reward",
        "policy",
    ],
)
def test_invoke_outcome_errors(
    outcome: InvokeOutcome, turns: int, expected: type[Exception] | None, message: str
) -> None:
    """`invoke` exits 7 for a rollout that was not reported, 6 for an environment or reward
    failure the agent names, and 0 otherwise."""
    error = _outcome_error(outcome, turns)
    if expected is None:
        assert error is None
    else:
        assert type(error) is expected
        assert str(error) == message


def test_run_failed_job_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A job-killing failure exits 9, still printing the summary JSON last on stdout."""
    data = _dataset(tmp_path / "d.jsonl", [{"bad": True}])
    argv = ["run", str(AGENTS / "failed_agent.py"), "--dataset", str(data), "--out", str(tmp_path)]
    code = main([*argv, "--group-size", "2", "--name", "bad", "--json"])
    captured = capsys.readouterr()
    assert code == 9
    assert _last_json_line(captured.out)["run"]["failure_reason"] == (
        "The agent signaled that the trajectory failed"
    )
    assert "The agent signaled that the trajectory failed" in captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", GOOD], "give ENTRYPOINT and --dataset"),
        (["run", GOOD, "--dataset", "nope.jsonl"], "dataset not found"),
        (["invoke", GOOD], "give exactly one of --prompt"),
        (["invoke", GOOD, "--prompt", "x", "--dataset", "d.jsonl"], "give exactly one of"),
        (["run", "--resume", "nowhere"], "nothing to resume"),
    ],
)
def test_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Bad arguments exit 2 with a one-line message, no traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_run_bad_group_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An out-of-range setting is reported by name before anything starts."""
    data = _dataset(tmp_path / "d.jsonl", [{"turns": 1}])
    assert main(["run", GOOD, "--dataset", str(data), "--group-size", "64"]) == 2
    assert "--group-size must be 2..32" in capsys.readouterr().err


def test_invoke_transcript(capsys: pytest.CaptureFixture[str]) -> None:
    """`invoke --prompt` plays one rollout and prints each turn, the tool calls and the reward."""
    code = main(["invoke", GOOD, "--prompt", json.dumps({"turns": 2, "reward": 0.5})])
    out = capsys.readouterr().out
    assert code == 0
    assert "turn 1" in out
    assert "turn 2" in out
    assert "tool result: no" in out
    assert "tools offered: guess" in out
    assert "state: REWARDED" in out
    assert "reward (UpdateReward): 0.5" in out


def test_invoke_dataset_row_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`invoke --dataset --row --json` returns the recorded turns of that row's rollout."""
    data = _dataset(tmp_path / "d.jsonl", [{"turns": 1}, {"turns": 3, "reward": 0.25}])
    code = main(["invoke", GOOD, "--dataset", str(data), "--row", "1", "--json"])
    assert code == 0
    outcome = _last_json_line(capsys.readouterr().out)
    assert outcome["state"] == "REWARDED"
    assert outcome["reward"] == 0.25
    assert len(outcome["turns"]) == 3
    assert outcome["agent_response"] == {"reward": 0.25, "turns": 3}
    assert main(["invoke", GOOD, "--dataset", str(data), "--row", "5"]) == 2


def test_kill_9_then_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SIGKILL of a real `agent-kit run` mid-job, then --resume: all slots once, none lost."""
    data = _dataset(tmp_path / "d.jsonl", [{"id": i, "turns": 3} for i in range(10)])
    run_dir = tmp_path / "killed"
    code = "from agent_kit.cli import main; import sys; sys.exit(main())"
    argv = ["run", GOOD, "--dataset", str(data), "--out", str(tmp_path), "--name", "killed"]
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *argv, "--group-size", "4", "--concurrency", "2", "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        rewarded = 0
        while rewarded < 4:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no rollouts finished in time"
            if (run_dir / "run.sqlite").exists():
                with (
                    contextlib.suppress(sqlite3.OperationalError, UsageError, RunStoreError),
                    RunStore.open(run_dir, readonly=True) as store,
                ):  # the schema may not be written yet
                    rewarded = len(store.list_trajectories(states=["REWARDED"]))
            time.sleep(0.05)  # polling the store of another process with a deadline
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    with RunStore.open(run_dir, readonly=True) as store:
        (job,) = store.list_jobs()
        assert job.status == "running"  # nobody got to write an end state
        rewarded_before = {t.id for t in store.list_trajectories(states=["REWARDED"])}
        open_before = {t.id for t in store.list_trajectories(states=["OPEN", "READY"])}
        agent_pids = [e.detail["pid"] for e in store.list_events(kind="agent_start")]
    assert 4 <= len(rewarded_before) < 40
    # The orphaned agent process notices its parent is gone and exits by itself.
    wait_gone(agent_pids, "agent process outlived the killed driver")

    assert main(["run", "--resume", str(run_dir), "--json"]) == 0
    summary = _last_json_line(capsys.readouterr().out)
    assert summary["run"]["slots_total"] == 40
    assert summary["run"]["slots_succeeded"] == 40
    with RunStore.open(run_dir, readonly=True) as store:
        (job,) = store.list_jobs()
        assert job.status == "completed"
        slots: dict[tuple[int, int, int], list[str]] = {}
        for row in store.list_trajectories():
            slots.setdefault((row.step, row.prompt_index, row.sample_index), []).append(row.state)
        assert len(slots) == 40
        assert all(states.count("REWARDED") == 1 for states in slots.values())
        assert not store.list_trajectories(states=["OPEN", "READY"])
        for tid in open_before:
            row = store.get_trajectory(tid)
            assert row is not None
            assert (row.state, row.reason) == ("TIMED_OUT", "resumed")
        for tid in rewarded_before:  # nothing recorded before the kill was lost or redone
            row = store.get_trajectory(tid)
            assert row is not None
            assert row.state == "REWARDED"
            assert store.count_turns(tid) == 3


# -- --out, --workers, --max-floor-rate ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "under-a-file"])
def test_unusable_out_is_one_line_exit_2(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--out` naming a file, or a path that cannot be created: one `error:` line, exit 2, and
    no run directory anywhere."""
    data = _dataset(tmp_path / "d.jsonl", [{"turns": 1}])
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    out = blocker if kind == "file" else blocker / "runs"
    before = sorted(p.name for p in tmp_path.iterdir())
    code = main(["run", GOOD, "--dataset", str(data), "--out", str(out), "--name", "nope"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: --out {out} ")
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert blocker.read_text() == "a file, not a folder"


def test_workers_default_is_the_drivers(tmp_path: Path) -> None:
    """Without --workers the run uses the driver's default (one agent process per usable core,
    at most --concurrency), as recorded in the run's config."""
    from agent_kit.driver.job_setup import default_workers

    data = _dataset(tmp_path / "d.jsonl", [{"turns": 1}])
    argv = ["run", GOOD, "--dataset", str(data), "--group-size", "2", "--out", str(tmp_path)]
    assert main([*argv, "--concurrency", "2", "--name", "w", "--json"]) == 0
    summary = json.loads((tmp_path / "w" / "summary.json").read_text())
    assert summary["config"]["workers"] == default_workers(2)


@pytest.mark.parametrize(("rate", "code"), [("0.25", 6), ("0.5", 0), (None, 0)])
def test_max_floor_rate(
    rate: str | None, code: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Half the rollouts' reward raises (floor reward): `--max-floor-rate 0.25` exits 6 with a
    one-line reason after the summary; 0.5 (not exceeded) and the default (off) exit 0."""
    data = _dataset(tmp_path / "d.jsonl", [{"bad": True}, {"ok": 1}])
    argv = ["run", str(SAY_AGENT), "--dataset", str(data), "--group-size", "2"]
    argv += ["--policy", SAY_POLICY, "--out", str(tmp_path)]
    argv += ["--name", "floor", "--json", "--workers", "1"]
    if rate is not None:
        argv += ["--max-floor-rate", rate]
    assert main(argv) == code
    captured = capsys.readouterr()
    summary = _last_json_line(captured.out)  # the summary line is printed either way
    assert summary["floor_rewards"] == 2
    if code:
        assert captured.err.strip().splitlines() == [
            "error: 2 of 4 finished rollouts got the floor reward (50.0% > --max-floor-rate "
            "0.25); most often: reward: ValueError: the reward function broke on purpose "
            f"{SAY_RAISES_AT}"
        ]
    else:
        assert "error" not in captured.err


def test_every_rollout_floored_is_rollouts_failed_exit_6(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every rollout's reward raises (all floor rewards): status rollouts_failed in summary.json
    and the end summary's headline, the reason on its failure line, then one error line, exit 6."""
    data = _dataset(tmp_path / "d.jsonl", [{"bad": True}, {"bad": True}])
    argv = ["run", str(SAY_AGENT), "--dataset", str(data), "--group-size", "2"]
    argv += ["--policy", SAY_POLICY, "--out", str(tmp_path)]
    argv += ["--name", "floors", "--workers", "1"]
    assert main(argv) == 6
    captured = capsys.readouterr()
    reason = (
        "every rollout failed: none of the 4 finished rollouts got a reward from the reward "
        "function (4 floor rewards, 0 without a reward); most often: reward: ValueError: the "
        f"reward function broke on purpose {SAY_RAISES_AT}"
    )
    assert captured.err.strip().splitlines() == [f"error: {reason}"]
    summary = json.loads((tmp_path / "floors" / "summary.json").read_text())
    assert summary["job"]["status"] == summary["run"]["status"] == "rollouts_failed"
    assert summary["run"]["failure_reason"] == reason
    assert "agent-kit run floors  rollouts_failed" in captured.out
    assert "every rollout failed: none of the 4" in captured.out
    assert "rollouts_failed" in (tmp_path / "floors" / "report.html").read_text()


@pytest.mark.parametrize(
    ("options", "code"),
    [([], 6), (["--max-floor-rate", "0.75"], 0), (["--max-floor-rate", "1"], 0)],
)
def test_default_floor_rate_is_one_half(
    options: list[str], code: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """6 of 8 rollouts floored: above the default rate 0.5, exit 6 naming it; --max-floor-rate
    0.75 or 1 accepts that share and the run is completed, exit 0."""
    data = _dataset(tmp_path / "d.jsonl", [{"bad": True}, {"bad": True}, {"bad": True}, {"ok": 1}])
    argv = ["run", str(SAY_AGENT), "--dataset", str(data), "--group-size", "2"]
    argv += ["--policy", SAY_POLICY, "--out", str(tmp_path)]
    argv += ["--name", "rate", "--workers", "1", "--json", *options]
    assert main(argv) == code
    captured = capsys.readouterr()
    summary = _last_json_line(captured.out)
    assert summary["floor_rewards"] == 6
    if code:
        assert summary["run"]["status"] == "rollouts_failed"
        assert captured.err.strip().splitlines() == [
            "error: 6 of 8 finished rollouts got the floor reward (75.0% > --max-floor-rate "
            "0.5, the default); most often: reward: ValueError: the reward function broke on "
            f"purpose {SAY_RAISES_AT}"
        ]
    else:
        assert summary["run"]["status"] == "completed"
        assert "error" not in captured.err


def _dead_port() -> int:
    """A loopback port nothing listens on: bound, then closed."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize("kind", ["openai-dead-port", "local-missing-file", "local-not-gguf"])
def test_unusable_policy_is_one_line_exit_5_and_no_run_directory(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An `openai:` URL that refuses connections, a missing `local:` model file and one that is
    not GGUF: one `error:` line, exit 5 (PolicyError) before any rollout, no run directory."""
    (tmp_path / "text.gguf").write_text("not a model")
    policy = {
        "openai-dead-port": f"openai:http://127.0.0.1:{_dead_port()}/v1#m",
        "local-missing-file": f"local:{tmp_path / 'nope.gguf'}",
        "local-not-gguf": f"local:{tmp_path / 'text.gguf'}",
    }[kind]
    data = _dataset(tmp_path / "d.jsonl", [{"turns": 1}])
    out = tmp_path / "runs"
    argv = ["run", GOOD, "--dataset", str(data), "--out", str(out), "--name", "dead"]
    assert main([*argv, "--policy", policy]) == 5
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    expected = {
        "openai-dead-port": "error: upstream policy openai:http://127.0.0.1:",
        "local-missing-file": "error: local model file ",
        "local-not-gguf": f"error: {tmp_path / 'text.gguf'} is not a GGUF model file",
    }[kind]
    assert err.startswith(expected), err
    if kind == "openai-dead-port":
        assert "is unreachable: ConnectError" in err
    assert not (out / "dead").exists()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--max-floor-rate", "1.5"], "--max-floor-rate must be 0..1, got 1.5"),
        (["--grace", "-1"], "--grace must be ≥ 0, got -1"),
    ],
)
def test_bad_stop_options(
    option: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Out-of-range --max-floor-rate / --grace: one line, exit 2, nothing written."""
    data = _dataset(tmp_path / "d.jsonl", [{"turns": 1}])
    out = tmp_path / "runs"
    assert main(["run", GOOD, "--dataset", str(data), "--out", str(out), *option]) == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"
    assert not out.exists()
