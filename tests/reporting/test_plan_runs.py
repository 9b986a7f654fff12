"""``agent-kit job plan`` on real runs of examples/wordle (agent subprocesses, scripted Solver).

Two runs of the same agent, made once for the module, differently sized: A plays the first 16
holdout prompts in groups of 4 (64 rollouts), B all 32 in groups of 2 (64 rollouts, half of
them on prompts A never saw). A plan from A in B's shape must hold B's actual token totals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import HOLDOUT, holdout, play_wordle, wordle_config

from agent_kit.cli import main

pytestmark = pytest.mark.e2e

B_SHAPE = ["-H", "global_batch_size=32", "-H", "group_size=2", "-H", "max_steps=1"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run directories of run A (16 prompts × 4) and run B (32 prompts × 2)."""
    base = tmp_path_factory.mktemp("wordle-plan")
    sixteen = holdout(base / "sixteen.jsonl", 16)
    return {
        "a": play_wordle(sixteen, base / "runs", wordle_config("plan-a")),
        "b": play_wordle(HOLDOUT, base / "runs", wordle_config("plan-b", group_size=2)),
    }


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["job", "plan", *args, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_plan_from_run_a_holds_run_b_token_totals(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Planned from run A in run B's shape, B's actual prefill, sample, train and total tokens
    each fall inside the plan's p10–p90 band."""
    plan = _plan(capsys, str(runs["a"]), *B_SHAPE, "--dataset", str(HOLDOUT))
    assert plan["shape"]["rollouts"] == 64
    assert plan["shape"]["steps"] == 1
    actual = json.loads((runs["b"] / "summary.json").read_text(encoding="utf-8"))["tokens"]
    for name in ("prefill", "sample", "train", "total"):
        band = plan["tokens"][name]
        assert band["p10"] <= actual[name] <= band["p90"], (name, band, actual[name])


def test_plan_document_shape_and_defaults(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a dataset option the run's own dataset sizes the epochs; the document carries
    the schema, the recorded figures, the assumptions and the verdict."""
    plan = _plan(capsys, str(runs["b"]), "-H", "max_epochs=30", "-H", "global_batch_size=32")
    assert plan["schema"] == "agent_kit.job_plan/1"
    assert plan["shape"]["dataset_rows"] == 32
    assert plan["shape"]["steps_per_epoch"] == 1
    assert (plan["shape"]["steps"], plan["shape"]["ends_by"]) == (30, "max_epochs")
    assert plan["source"]["dataset_rows_from"].endswith("(the run's dataset)")
    assert plan["source"]["recorded"]["slots"] == 64
    assert plan["wall_clock"]["region"] == "us-west-2"
    assert plan["assumptions"]["train_step_s"] == 60.0
    assert plan["fits"] is True
    assert {f["code"] for f in plan["flags"]} >= {"estimated-tokens"}


def test_plan_prints_tables(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """The terminal plan shows the job, tokens and cost, wall clock and the verdict."""
    code = main(["job", "plan", str(runs["a"]), "--dataset-rows", "640", "--region", "eu-west-1"])
    out = capsys.readouterr().out
    assert code == 0
    for text in ("planned job", "tokens and cost", "wall clock", "quota 500 in eu-west-1"):
        assert text in out
    assert "the plan fits the quotas" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-H", "global_batch_size=100"], "global_batch_size"),
        (["--dataset-rows", "10", "--dataset", "x.jsonl"], "not both"),
        (["--job", "nope"], "no job 'nope'"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """Bad hyperparameters, conflicting options or an unknown job exit 2 with one error line."""
    assert main(["job", "plan", str(runs["a"]), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1


def test_missing_run_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A directory without a run store is a usage error."""
    assert main(["job", "plan", str(tmp_path)]) == 2
    assert "no run store" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent-scale", "1e308"], "--agent-scale"),
        (["--turn-latency", "1e308"], "--turn-latency"),
        (["--agent-scale", "1e308", "--json"], "--agent-scale"),
        (["--region", "mars"], "--region 'mars' is not an AWS region name"),
        (["--dataset", "/dev/zero"], "/dev/zero is not a regular file"),
    ],
)
def test_absurd_input_exits_2_with_one_line(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """An assumption no real job has (it overflowed into "fits: true" and NaN/Infinity in
    --json), a region that is not one, or a dataset that is a device (it said "not found")
    exits 2 with one error line naming it, and prints no plan."""
    assert main(["job", "plan", str(runs["a"]), *args]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert message in err
    assert len(err.splitlines()) == 1
    assert "Traceback" not in err
    assert captured.out == ""


def test_plan_labels_defaults_explains_epochs_and_cost_and_names_next(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan says which hyperparameters are the service's defaults beside the shape the
    run played, says how a batch larger than the dataset repeats rows (never "4.00 epochs"
    against max_epochs=1), says what the run summary's projection priced instead, and names
    the next commands (plan the shape that ran, then job submit)."""
    monkeypatch.setenv("COLUMNS", "300")  # no cell wraps, so the text reads as one line
    assert main(["job", "plan", str(runs["a"]), "--dataset-rows", "32"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "service defaults (not given with -H): global_batch_size=128, group_size=8" in out
    assert "the recorded run played 16 prompts × 4 a step" in out
    assert "epochs)" not in out
    assert "each row ≈ 4 times" in out
    summary = json.loads((runs["a"] / "summary.json").read_text(encoding="utf-8"))
    projection = summary["projection"]
    assert f"{projection['cost']['total']:,.2f}" in out
    assert "run summary's projection" in out
    assert f"agent-kit job plan {runs['a']} -H group_size=4" in out
    assert "agent-kit job submit --runtime-arn" in out


def test_a_scripted_policys_latency_is_flagged_with_the_turn_latency_to_pass(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of the scripted Solver records calls of a few ms: the plan warns that its wall
    clock is the agent's time alone and names --turn-latency; given --turn-latency, no flag."""
    plan = _plan(capsys, str(runs["a"]), "--dataset-rows", "32")
    (flag,) = [f for f in plan["flags"] if f["code"] == "policy-latency"]
    assert flag["level"] == "warning"
    assert "the scripted policy, not a model's latency" in flag["message"]
    assert "pass --turn-latency S" in flag["message"]
    monkeypatch.setenv("COLUMNS", "300")
    assert main(["job", "plan", str(runs["a"]), "--dataset-rows", "32"]) == 0
    assert "--turn-latency 4 for a 20B model" in capsys.readouterr().out
    given = _plan(capsys, str(runs["a"]), "--dataset-rows", "32", "--turn-latency", "4")
    assert "policy-latency" not in {f["code"] for f in given["flags"]}
