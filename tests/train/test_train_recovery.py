"""``agent-kit train`` when things go wrong: an adapter that cannot be saved, rollouts that
failed as a whole. Real runs of a tiny model through the real entrypoint, agent processes and
emulator (nothing is mocked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_kit.cli import main
from agent_kit.errors import RewardError, RunStoreError
from agent_kit.store import RunStore
from agent_kit.store.events import TRAIN_STEP_EVENT
from agent_kit.store.layout import RunLayout

AGENT = str(Path(__file__).parents[1] / "agents" / "train_agent.py")
pytestmark = pytest.mark.e2e


def _data(path: Path, targets: list[int], **task: object) -> Path:
    rows = [json.dumps({"prompt": json.dumps({"target": t, **task})}) for t in targets]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _argv(tmp_path: Path, model: Path, data: Path) -> list[str]:
    """One step of one prompt × two rollouts of the tiny model, one agent process (``--force``:
    a tiny random model's probe groups may all score alike, and these tests are about what
    comes after the preflight)."""
    return [
        *("train", AGENT, "--dataset", str(data), "--out", str(tmp_path / "runs")),
        *("--name", "tiny", "--model", str(model), "--device", "cpu", "--steps", "1"),
        *("--group-size", "2", "--batch-size", "1", "--max-tokens", "64", "--workers", "1"),
        *("--concurrency", "2", "--learning-rate", "1e-3", "--force"),
    ]


def _error_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]


def test_an_adapter_that_cannot_be_saved_stops_the_run_resumably(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """When the step's adapter cannot be written (a file stands where the adapters folder
    goes, as a full disk or a file size limit stops the write), the run exits 14 with one
    line naming `agent-kit train --resume`, its job is left resumable (not failed), and once
    the way is clear `train --resume --device cpu --workers 1` trains the step and completes."""
    run_dir = tmp_path / "runs" / "tiny"
    run_dir.mkdir(parents=True)
    blocker = RunLayout(run_dir).adapters
    blocker.write_text("in the way\n", encoding="utf-8")
    data = _data(tmp_path / "data.jsonl", [1, 2])
    assert main(_argv(tmp_path, tiny_model, data)) == RunStoreError.exit_code
    [line] = _error_lines(capsys)
    assert f"cannot save adapter {blocker / 'step-0000'}" in line
    assert f"agent-kit train --resume {run_dir}" in line
    with RunStore.open(run_dir, readonly=True) as store:
        assert store.list_jobs()[-1].status == "stopped"
        assert store.list_events(kind=TRAIN_STEP_EVENT) == []
    blocker.unlink()
    resume = ["train", "--resume", str(run_dir), "--device", "cpu", "--workers", "1"]
    assert main(resume) == 0, capsys.readouterr().err
    assert (blocker / "step-0000" / "adapter_config.json").is_file()
    assert not list(blocker.glob("*.partial"))
    with RunStore.open(run_dir, readonly=True) as store:
        assert store.list_jobs()[-1].status == "completed"
        steps = [e.detail["step"] for e in store.list_events(kind=TRAIN_STEP_EVENT)]
    assert steps == [0]


def test_rollouts_that_failed_as_a_whole_exit_6(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A training run whose every rollout got the floor reward (the reward function raises on
    every task) ends with status rollouts_failed and exits 6 with one line saying why, as
    `agent-kit run` does."""
    data = _data(tmp_path / "data.jsonl", [1, 2], explode=True)
    assert main([*_argv(tmp_path, tiny_model, data), "--json"]) == RewardError.exit_code
    out = capsys.readouterr()
    [line] = [row for row in out.err.splitlines() if row.startswith("error:")]
    assert "every rollout failed" in line
    assert "this task's reward fails on purpose" in line
    document = json.loads(out.out.strip().splitlines()[-1])
    assert document["status"] == "rollouts_failed"
