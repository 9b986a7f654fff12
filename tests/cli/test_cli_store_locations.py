"""Run stores in places they cannot be: ``emulate --store`` on a file that is not a store or
where nothing can be created, ``replay`` of a run whose location is read-only.

The read-only case runs ``agent-kit`` as a real subprocess with file permissions binding it
(as root too: :mod:`fakes.permissions`); the emulator case stops before it binds a socket.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.permissions import run_unprivileged

from agent_kit.cli import main
from agent_kit.store import RunStore, TrajectoryRow

AGENTS = Path(__file__).parents[1] / "agents"


@pytest.mark.parametrize("kind", ["regular-file", "proc"])
def test_emulate_store_that_cannot_be_a_store_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """``emulate --store`` naming a regular file (like /etc/passwd) or a place nothing can be
    created (/proc) prints one ``error:`` line naming it and exits 2; the file is untouched."""
    if kind == "regular-file":
        store = tmp_path / "passwd"
        store.write_text("root:x:0:0::/root:/bin/sh\n")
    else:
        store = Path("/proc/agent-kit-store")
    code = main(["emulate", "--store", str(store), "--port", "0"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: cannot open the run store {store}")
    assert len(err.strip().splitlines()) == 1
    if kind == "regular-file":
        assert store.read_text() == "root:x:0:0::/root:/bin/sh\n"


@pytest.mark.e2e
def test_replay_of_a_run_on_a_read_only_location_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``replay`` of a run whose directory and parent are read-only cannot write its replay run
    beside it: one ``error:`` line that names the place and ``--out``, exit 14 (the run store
    error), no traceback; with ``--out`` elsewhere it replays."""
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": json.dumps({"turns": 1})}) + "\n")
    runs = tmp_path / "runs"
    argv = ["run", str(AGENTS / "good_agent.py"), "--dataset", str(data), "--group-size", "2"]
    assert main([*argv, "--out", str(runs), "--name", "rec", "--json"]) == 0
    capsys.readouterr()
    modes = {path: path.stat().st_mode for path in [runs, *runs.rglob("*")]}
    for path in modes:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        done = run_unprivileged(["replay", str(runs / "rec"), "--limit", "1"])
        elsewhere = run_unprivileged(
            ["replay", str(runs / "rec"), "--limit", "1", "--out", str(tmp_path / "out")]
        )
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
    assert done.returncode == 14, done.stderr
    assert done.stderr.startswith(f"error: cannot write the replay run under {runs}")
    assert "--out" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert elsewhere.returncode == 0, elsewhere.stderr


def _small_run(run_dir: Path) -> None:
    """A finished one-job run of two rewarded rollouts, written through the store."""
    arn = "arn:aws:sagemaker:us-west-2:000000000000:rl-job/ro"
    with RunStore.open(run_dir) as store:
        store.create_job(arn, "ro", {"entrypoint": "agent.py", "job": {"group_size": 2}})
        for sample in range(2):
            row = TrajectoryRow(f"t{sample}", arn, "OPEN", "{}", sample_index=sample)
            store.create_trajectory(row)
            store.set_reward(f"t{sample}", [float(sample)], None, None, state="REWARDED")
        store.update_job(arn, status="completed")


@pytest.mark.e2e
def test_report_html_of_a_read_only_run_is_one_error_line(tmp_path: Path) -> None:
    """``report --html`` of a run in a read-only directory: one ``error:`` line naming the
    directory and ``--out``, exit 14 (an output that cannot be written), no traceback; with
    ``--out DIR`` somewhere writable it writes the summary and report there."""
    run_dir = tmp_path / "run"
    _small_run(run_dir)
    out = tmp_path / "elsewhere"
    out.mkdir()
    out.chmod(0o777)
    modes = {path: path.stat().st_mode for path in [run_dir, *run_dir.rglob("*")]}
    for path in modes:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        refused = run_unprivileged(["report", str(run_dir), "--html"])
        elsewhere = run_unprivileged(["report", str(run_dir), "--html", "--out", str(out)])
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
    assert refused.returncode == 14, refused.stderr
    assert "Traceback" not in refused.stderr
    assert refused.stderr.startswith(
        f"error: cannot write summary.json and report.html into {run_dir}"
    )
    assert refused.stderr.strip().endswith("give --out DIR somewhere writable")
    assert len(refused.stderr.strip().splitlines()) == 1
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "summary.json"]
    assert not (run_dir / "report.html").exists()


def test_report_out_without_html_or_a_second_run_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out`` alone still names the comparison page: without a second run or ``--html``
    it is one usage line."""
    run_dir = tmp_path / "run"
    _small_run(run_dir)
    assert main(["report", str(run_dir), "--out", str(tmp_path / "x")]) == 2
    assert "with --html, the directory the report goes into" in capsys.readouterr().err


def test_report_piped_to_a_file_is_not_wrapped_cut_or_padded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Output that goes to no terminal (COLUMNS unset) keeps each line whole: no wrap at 80
    columns, no cut text, no trailing spaces; the metric columns stay at most 100 wide."""
    monkeypatch.delenv("COLUMNS", raising=False)
    run_dir = tmp_path / "run"
    _small_run(run_dir)
    assert main(["report", str(run_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines
    assert not [line for line in lines if line != line.rstrip()]
    (cost,) = [line for line in lines if line.startswith("  cost ")]
    assert cost.endswith("blended rate of the published AWS reference run (GPT-OSS-20B)")
    (note,) = [line for line in lines if "eval/* are the figures" in line]
    assert note.endswith("pass@k over each group's samples")
    assert max(len(line) for line in lines if "rollout/reward/" in line) <= 100
