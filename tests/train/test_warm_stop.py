"""``agent-kit train`` says why a holdout row sits on the floor, and its warm start stops on the
first Ctrl-C. Real runs of tiny random models (tests/hf_tiny.py) through the real commands,
agent processes and emulator; the signal goes through the command's own handler."""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import threading
from pathlib import Path

import pytest
from helpers import SUBMIT_AGENT, SUBMIT_EXPERT, id_dataset
from hf_tiny import HERMES_TOOLS_TEMPLATE, build_tool_model

from agent_kit.cli import main
from agent_kit.errors import RewardError

AGENT, EXPERT = SUBMIT_AGENT, SUBMIT_EXPERT
pytestmark = pytest.mark.e2e


def test_a_holdout_on_the_floor_says_the_token_limit_capped_it(
    tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --max-tokens 2 every holdout rollout is cut (MaxTokensReachedException): a line
    names the cap and the remedy, train.json's row carries it, and the missing trained row is
    explained."""
    data = id_dataset(tmp_path / "data.jsonl", 2)
    holdout = id_dataset(tmp_path / "holdout.jsonl", 2)
    runs = tmp_path / "runs"
    argv = [
        "train", AGENT, "--dataset", str(data), "--out", str(runs), "--name", "t",
        "--model", str(tiny_model), "--steps", "1", "--group-size", "2", "--batch-size", "2",
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
def test_the_first_ctrl_c_stops_the_warm_start_at_the_next_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT during the warm start (at its first progress line) stops it at the next step:
    exit 130, one "interrupted: …" line (the root command adds its bare "interrupted"), no
    adapter saved, the new run's directory gone, no thread left running, SIGINT's handler
    given back."""
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
            "--warm-start", str(runs / "expert"), "--warm-start-epochs", "200",
            "--steps", "1", "--batch-size", "2", "--max-tokens", "24", "--device", "cpu",
        ]
    )  # fmt: skip
    monkeypatch.undo()
    err = stderr.getvalue()
    assert stderr.sent.is_set(), err
    assert code == 130, err
    [line] = [x for x in err.splitlines() if x.startswith("interrupted:")]
    assert line.startswith("interrupted: the warm start was stopped after step ")
    assert "no adapter was saved" in line
    stopping = [x for x in err.splitlines() if x.startswith("warm start: stopping after step")]
    assert len(stopping) == 1
    assert not (runs / "warm").exists()
    assert sorted(p.name for p in runs.iterdir()) == ["expert"]
    # the warm start's worker is gone (libraries' daemon threads do not hold the process)
    assert not [t for t in threading.enumerate() if t not in threads and not t.daemon]
    assert signal.getsignal(signal.SIGINT) == before
