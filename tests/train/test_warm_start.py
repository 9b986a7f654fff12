"""Learning the agent you have: a warm start on an expert's episodes, and the preflight.

The agent (tests/agents/submit_agent.py) rewards one constant tool call that a base model
never writes; its expert is a scripted policy. Real parts throughout: the run and train
commands, the agent subprocesses, the emulator, TRL's SFTTrainer and GRPOTrainer on a tiny
random model (tests/hf_tiny.py) saved with a tool template of its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import SUBMIT_AGENT, SUBMIT_EXPERT, id_dataset
from hf_tiny import HERMES_TOOLS_TEMPLATE, build_tool_model

from agent_kit.cli import main
from agent_kit.driver.config import RunConfig
from agent_kit.model.loading import load_model, parse_model_spec
from agent_kit.store.layout import RunLayout
from agent_kit.train.config import TrainConfig
from agent_kit.train.warm import prepare_warm_start

AGENT, EXPERT = SUBMIT_AGENT, SUBMIT_EXPERT
pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def warm_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict, Path]:
    """An expert recorded with `agent-kit run`, then `agent-kit train --warm-start` on it."""
    folder = tmp_path_factory.mktemp("warm")
    model = build_tool_model(folder / "model", HERMES_TOOLS_TEMPLATE)
    data = id_dataset(folder / "data.jsonl", 2)
    holdout = id_dataset(folder / "holdout.jsonl", 2)
    runs = folder / "runs"
    common = ["--dataset", str(data), "--out", str(runs), "--group-size", "2", "--workers", "1"]
    assert main(["run", AGENT, *common, "--policy", EXPERT, "--name", "expert", "--json"]) == 0
    code = main(
        [
            "train", AGENT, *common, "--name", "trained", "--model", str(model),
            "--warm-start", str(runs / "expert"), "--warm-start-epochs", "30",
            "--warm-start-lr", "1e-2", "--lora-r", "16", "--steps", "1", "--batch-size", "2",
            "--temperature", "0.2", "--max-tokens", "24", "--eval", str(holdout),
            "--eval-samples", "2", "--device", "cpu", "--force", "--json",
        ]
    )  # fmt: skip
    doc = json.loads((runs / "trained" / "train.json").read_text(encoding="utf-8"))
    return code, doc, runs / "trained"


def test_a_warm_start_teaches_the_tool_call_the_base_never_makes(
    warm_run: tuple[int, dict, Path],
) -> None:
    """The warm adapter and the trained one beat the base on the holdout, calling the tool."""
    code, doc, run = warm_run
    assert code == 0
    evals = doc["eval"]
    assert set(evals) == {"base", "warm", "adapter"}
    assert evals["base"]["mean"] <= 0.0  # no call: nothing earned, or the floor (cut turns)
    assert evals["base"]["tool_call_rate"] == 0.0
    for label in ("warm", "adapter"):
        assert evals[label]["mean"] >= 0.75, label
        assert evals[label]["tool_call_rate"] > 0.0, label
    assert doc["comparison"]["difference"] >= 0.75
    assert (RunLayout(run).warm_adapter / "adapter_config.json").is_file()
    assert doc["warm_start"]["examples"] == 4  # 2 prompts × 2 expert rollouts, one turn each
    assert doc["warm_start"]["loss_last"] < doc["warm_start"]["loss_first"]
    page = RunLayout(run).report.read_text(encoding="utf-8")
    training = page[page.index('<section id="training">') :]
    assert "<td>warm</td>" in training
    assert "tool-call rate" in training


def test_the_preflight_of_a_warm_run_sees_the_tool_calls(warm_run: tuple[int, dict, Path]) -> None:
    """The probe step played the warm adapter: tool calls, and its figures in train.json."""
    _, doc, _ = warm_run
    preflight = doc["preflight"]
    assert preflight["groups"] == 2
    assert preflight["tool_call_rate"] > 0.0


def test_a_run_with_a_warm_adapter_does_not_fine_tune_again(
    warm_run: tuple[int, dict, Path],
) -> None:
    """A run directory that holds adapters/warm reuses it (what --resume relies on)."""
    _, doc, run = warm_run
    loaded = load_model(parse_model_spec(doc["settings"]["model"]), "cpu")
    config = TrainConfig(run=RunConfig(), warm_start=(run,))
    lines: list[str] = []
    adapter, figures = prepare_warm_start(config, loaded, run, lines.append)
    assert adapter == RunLayout(run).warm_adapter
    assert figures == {"reused": True}
    assert "already trained" in lines[0]


def test_the_preflight_stops_a_run_with_nothing_to_learn(
    tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every probe group equal (the base never calls the tool): one line, exit 2, no step."""
    data = id_dataset(tmp_path / "data.jsonl", 2)
    argv = [
        "train", AGENT, "--dataset", str(data), "--out", str(tmp_path / "runs"), "--name", "t",
        "--model", str(tiny_model), "--steps", "1", "--group-size", "2", "--batch-size", "2",
        "--max-tokens", "64", "--device", "cpu", "--workers", "1",
    ]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert "nothing to learn" in line
    assert "--warm-start" in line
    assert "--model" in line
    assert "graded reward" in line
    assert "--force" in line
    run = RunLayout(tmp_path / "runs" / "t")
    assert not run.adapters.exists()
    assert not run.train_json.exists()


def test_the_warm_start_says_its_steps_first_and_prints_its_last_step_once(
    warm_run: tuple[int, dict, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before its first step the warm start prints its optimiser steps and a first guess of its
    time; with a line due at every step (the minute cut to 0), each step has one line and the
    last ("step N of N") is printed once, not again for the trainer's closing log."""
    import agent_kit.train.warm as warm

    monkeypatch.setattr(warm, "PROGRESS_EVERY_S", 0.0)
    _, doc, run = warm_run
    loaded = load_model(parse_model_spec(doc["settings"]["model"]), "cpu")
    config = TrainConfig(run=RunConfig(), warm_start=(run.parent / "expert",), warm_start_epochs=4)
    lines: list[str] = []
    adapter, figures = prepare_warm_start(config, loaded, tmp_path / "fresh", lines.append)
    assert adapter is not None
    assert (adapter / "adapter_config.json").is_file()
    steps = figures["steps"]
    progress = [x for x in lines if x.startswith("warm start: step ")]
    assert [x for x in progress if x.startswith(f"warm start: step {steps} of {steps} ")] == [
        progress[-1]
    ]
    assert len(progress) == len(set(progress)) == steps
    (plan,) = [x for x in lines if "optimiser steps over" in x]
    assert lines.index(plan) < lines.index(progress[0])
    assert plan.startswith(f"warm start: {steps} optimiser steps over 4 epochs, about ")
