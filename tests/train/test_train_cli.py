"""``agent-kit train`` refuses bad input with one line and a non-zero exit, before loading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_kit.cli import main

AGENT = str(Path(__file__).parents[1] / "agents" / "train_agent.py")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--group-size", "1"], "--group-size must be 2..32"),
        (["--lora-r", "0"], "--lora-r must be 1..256"),
        (["--micro-batch", "3"], "--micro-batch must divide"),
        (["--eval", "missing.jsonl"], "--eval file missing.jsonl not found"),
    ],
)
def test_bad_settings_are_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    """An out-of-range flag exits 2 with one line naming it, and creates no run directory."""
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"prompt": "{}"}) + "\n", encoding="utf-8")
    argv = ["train", AGENT, "--dataset", str(data), "--out", str(tmp_path / "runs"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_missing_entrypoint_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Without an entrypoint and a dataset (and no --resume) the command says what it needs."""
    assert main(["train"]) == 2
    assert "an entrypoint and --dataset are required" in capsys.readouterr().err


def test_resume_of_a_folder_without_a_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--resume of a directory that holds no training run is one clear line."""
    assert main(["train", "--resume", str(tmp_path), "--device", "cpu"]) == 2
    assert "nothing to resume" in capsys.readouterr().err
