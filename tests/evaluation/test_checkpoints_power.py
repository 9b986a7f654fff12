"""A training run's checkpoints as policies (``--checkpoints``), and how many prompts are enough
(``--plan --spread/--pilot --target``), against figures computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_kit.cli import main
from agent_kit.errors import UsageError
from agent_kit.evaluation.checkpoints import checkpoint_step, parse_checkpoints

WORDLE = Path(__file__).resolve().parents[2] / "examples" / "wordle"
SOLVER = f"scripted:{WORDLE / 'policies.py'}:Solver"


def _train_run(tmp_path: Path, steps: int, *, warm: bool = False) -> Path:
    """A training run's folder as ``agent-kit train`` leaves it: its settings and adapters
    (only what ``--checkpoints`` reads: the config and each adapter's ``adapter_config.json``)."""
    run = tmp_path / "run"
    config = {"model": "smollm2-135m", "entrypoint": "agent.py", "eval": "holdout.jsonl"}
    (run / "adapters").mkdir(parents=True)
    (run / "train_config.json").write_text(json.dumps(config), encoding="utf-8")
    folders = [f"step-{s:04d}" for s in range(steps)] + (["warm"] if warm else [])
    for name in folders:
        (run / "adapters" / name).mkdir()
        (run / "adapters" / name / "adapter_config.json").write_text("{}", encoding="utf-8")
    (run / "adapters" / "step-0099").mkdir()  # an adapter cut short: no config, not a checkpoint
    return run


def test_checkpoints_select_every_nth_named_or_all_steps(tmp_path: Path) -> None:
    """every=2 of steps 0-4 is steps 1, 3 and the last (4); steps=0,2 names them; the base
    and the warm start come first, labelled; the run's agent and holdout come along."""
    run = _train_run(tmp_path, 5, warm=True)
    found = parse_checkpoints(f"{run}:every=2")
    assert list(found.names.values()) == ["base", "warm", "step-0001", "step-0003", "step-0004"]
    assert found.policies[0] == "hf:smollm2-135m"
    assert found.policies[2] == f"hf:smollm2-135m+{run / 'adapters' / 'step-0001'}"
    assert [checkpoint_step(p) for p in found.policies] == [None, None, 1, 3, 4]
    assert (found.entrypoint, found.holdout) == ("agent.py", "holdout.jsonl")
    assert found.pairs == [(label, "base") for label in list(found.names.values())[1:]]
    named = parse_checkpoints(f"{run}:steps=0,2")
    assert list(named.names.values())[2:] == ["step-0000", "step-0002"]
    assert len(parse_checkpoints(str(run)).policies) == 7  # base, warm, five steps


@pytest.mark.parametrize(
    ("suffix", "message"),
    [
        (":steps=7", r"no saved adapter for step 7 \(saved: 0, 1, 2\)"),
        (":every=0", "every=N needs N ≥ 1"),
    ],
)
def test_bad_checkpoints_are_one_clear_error(tmp_path: Path, suffix: str, message: str) -> None:
    run = _train_run(tmp_path, 3)
    with pytest.raises(UsageError, match=message):
        parse_checkpoints(f"{run}{suffix}")


def test_a_folder_that_is_not_a_training_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is not an agent-kit train run"):
        parse_checkpoints(str(tmp_path))
    run = _train_run(tmp_path, 0)
    with pytest.raises(UsageError, match="holds no saved adapter yet"):
        parse_checkpoints(str(run))


def _holdout(tmp_path: Path, rows: int) -> Path:
    path = tmp_path / "holdout.jsonl"
    lines = [json.dumps({"prompt": "{}", "answer": "crane", "id": str(i)}) for i in range(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    argv = [
        "eval", str(WORDLE / "agent.py"), "--dataset", str(_holdout(tmp_path, 36)),
        "--policy", SOLVER, "--samples", "4", "--out", str(tmp_path / "ev"),
        "--plan", "--json", *extra,
    ]  # fmt: skip
    assert main(argv) == 0
    return dict(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["power"])


def test_plan_states_the_detectable_difference_and_the_prompts_a_target_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """sd 0.3 over 36 prompts: 2·0.3/√36 = 0.1 is the smallest difference beyond two SE; a
    target of 0.05 needs ceil((2.8·0.3/0.05)²) = ceil(282.24) = 283 prompts."""
    power = _plan(tmp_path, capsys, "--spread", "0.3", "--target", "0.05")
    assert power["detectable_difference"] == pytest.approx(0.1)
    assert power["prompts_needed"] == 283
    assert power["source"] == "stated (--spread)"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--target", "0.1"], "--target needs the spread"),
        (["--spread", "0.3", "--pilot", "x"], "give --pilot or --spread, not both"),
        (["--spread", "nan"], "--spread must be a finite number"),
        (["--spread", "0.3", "--target", "0"], "--target must be a finite, non-zero"),
    ],
)
def test_bad_plan_options_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    argv = [
        "eval", str(WORDLE / "agent.py"), "--dataset", str(_holdout(tmp_path, 4)),
        "--policy", SOLVER, "--out", str(tmp_path / "ev"), "--plan", *extra,
    ]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1


def test_plan_options_without_plan_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "eval", str(WORDLE / "agent.py"), "--dataset", str(_holdout(tmp_path, 4)),
        "--policy", SOLVER, "--out", str(tmp_path / "ev"), "--spread", "0.2",
    ]  # fmt: skip
    assert main(argv) == 2
    assert "go with --plan" in capsys.readouterr().err
    assert not (tmp_path / "ev").exists()
