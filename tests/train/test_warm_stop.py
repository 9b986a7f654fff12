"""``agent-kit train`` says why a holdout row sits on the floor, and its warm start stops on the
first Ctrl-C, resumably. Real runs of tiny random models (tests/hf_tiny.py) through the real
commands, agent processes and emulator; the signal goes through the command's own handler."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sys
import threading
from pathlib import Path

import pytest
from helpers import SUBMIT_AGENT, SUBMIT_EXPERT, id_dataset
from hf_tiny import HERMES_TOOLS_TEMPLATE, build_tool_model

from agent_kit.cli import main
from agent_kit.errors import RewardError
from agent_kit.store.layout import RunLayout

AGENT, EXPERT = SUBMIT_AGENT, SUBMIT_EXPERT
pytestmark = pytest.mark.e2e


def test_a_holdout_on_the_floor_says_the_token_limit_capped_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --max-tokens 2 every holdout rollout is cut (MaxTokensReachedException; the model
    has no end-of-turn bias, so no turn ends by itself): a line names the cap and the remedy,
    train.json's row carries it, and the missing trained row is explained."""
    model = build_tool_model(tmp_path / "model")
    data = id_dataset(tmp_path / "data.jsonl", 2)
    holdout = id_dataset(tmp_path / "holdout.jsonl", 2)
    runs = tmp_path / "runs"
    argv = [
        "train", AGENT, "--dataset", str(data), "--out", str(runs), "--name", "t",
        "--model", str(model), "--steps", "1", "--group-size", "2", "--batch-size", "2",
        "--max-tokens", "2", "--eval", str(holdout), "--eval-samples", "2", "--device", "cpu",
        "--workers", "1", "--force",
    ]  # fmt: skip
    assert main(argv) == RewardError.exit_code
    out, err = capsys.readouterr()
    [line] = [x for x in err.splitlines() if x.startswith("base model holdout:")]
    assert "every rollout ended at the token limit" in line
    assert "--max-tokens 2: MaxTokensReachedException ×4" in line
    assert line.endswith("raise --max-tokens")
    assert "trained adapter holdout: not played (the training job ended rollouts_failed)" in err
    [row] = [x for x in out.splitlines() if x.startswith("holdout, base:")]
    assert "--max-tokens 2" in row
    assert "(4 of 4 base rollouts hit the token limit)" in row
    document = json.loads((runs / "t" / "train.json").read_text(encoding="utf-8"))
    assert "--max-tokens 2" in document["eval"]["base"]["failure"]


class _SignalOnProgress(io.StringIO):
    """A stderr that sends this process SIGINT the first time the warm start's progress line
    is written (from the warm start's own thread, as a user's Ctrl-C would arrive)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = threading.Event()

    def write(self, text: str) -> int:
        if "warm start: step " in text and not self.sent.is_set():
            self.sent.set()
            os.kill(os.getpid(), signal.SIGINT)
        return super().write(text)


@pytest.mark.usefixtures("handled_signals")
def test_the_first_ctrl_c_stops_the_warm_start_and_resume_trains_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGINT during the warm start (at its first progress line) stops it at the next step,
    saying so in the warm start's own line (not the run's "no new rollouts"): exit 130, one
    "interrupted: …" line naming the --resume command and one bare "interrupted"
    (the root command's), no adapter saved, the run's directory kept with its settings and no
    job, no thread left running, SIGINT's handler given back. That --resume then starts the run
    over in place (its lock free): the warm start whole, the preflight, the GRPO step."""
    model = build_tool_model(tmp_path / "model", HERMES_TOOLS_TEMPLATE)
    data = id_dataset(tmp_path / "data.jsonl", 2)
    runs = tmp_path / "runs"
    common = ["--dataset", str(data), "--out", str(runs), "--group-size", "2", "--workers", "1"]
    assert main(["run", AGENT, *common, "--policy", EXPERT, "--name", "expert", "--json"]) == 0
    threads = set(threading.enumerate())
    before = signal.getsignal(signal.SIGINT)
    stderr = _SignalOnProgress()
    monkeypatch.setattr(sys, "stderr", stderr)
    code = main(
        [
            "train", AGENT, *common, "--name", "warm", "--model", str(model),
            "--warm-start", str(runs / "expert"), "--warm-start-epochs", "5",
            "--steps", "1", "--batch-size", "1", "--max-tokens", "24", "--device", "cpu",
            "--force",
        ]
    )  # fmt: skip
    monkeypatch.undo()
    err = stderr.getvalue()
    assert stderr.sent.is_set(), err
    assert code == 130, err
    [line] = [x for x in err.splitlines() if x.startswith("interrupted:")]
    assert line.startswith("interrupted: the warm start was stopped after step ")
    assert "no adapter was saved" in line
    stopped, total = map(int, re.findall(r"after step (\d+) of (\d+)", line)[0])
    assert stopped < total
    run = RunLayout(runs / "warm")
    assert line.endswith(f"; continue with {run.resume_command()} (the warm start starts over)")
    assert err.splitlines().count("interrupted") == 1, err
    [said] = [x for x in err.splitlines() if x.startswith("SIGINT: ")]
    assert said.startswith("SIGINT: stopping the warm start after its current step"), said
    assert "rollouts" not in said  # the run's line ("no new rollouts, …") is not this one
    stopping = [x for x in err.splitlines() if x.startswith("warm start: stopping after step")]
    assert len(stopping) == 1
    assert sorted(p.name for p in runs.iterdir()) == ["expert", "warm"]
    assert run.train_config.is_file()
    assert not run.warm_adapter.exists()
    assert not run.store.exists()  # no job recorded: nothing for --resume to skip
    # the warm start's worker is gone (libraries' daemon threads do not hold the process)
    assert not [t for t in threading.enumerate() if t not in threads and not t.daemon]
    assert signal.getsignal(signal.SIGINT) == before

    capsys.readouterr()
    resumed = main(["train", "--resume", str(run.root), "--device", "cpu", "--workers", "1"])
    err = capsys.readouterr().err
    # the tiny random model's rollouts reach --max-tokens 24: the step is trained, with no reward
    assert resumed == RewardError.exit_code, err
    assert f"{run.root} was stopped before its training job started: it starts over" in err
    assert "step 0 (of 0-0): reward " in err
    assert (run.adapters / "step-0000" / "adapter_config.json").is_file()
    assert (run.warm_adapter / "adapter_config.json").is_file()
    document = json.loads(run.train_json.read_text(encoding="utf-8"))
    assert document["warm_start"]["steps"] == total  # whole, from its first step
    assert document["warm_start"]["examples"] == 4
    assert document["settings"]["warm_start_epochs"] == 5
