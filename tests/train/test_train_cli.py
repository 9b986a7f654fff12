"""``agent-kit train`` refuses bad input with one line and a non-zero exit, before loading."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from agent_kit.cli import main
from agent_kit.driver.config import RunConfig
from agent_kit.errors import RunInUse, RunStoreError
from agent_kit.store import RunStore
from agent_kit.store.events import TRAIN_TOKENS_EVENT
from agent_kit.store.layout import RunLayout
from agent_kit.store.runlock import RunLock
from agent_kit.train import TrainConfig
from agent_kit.train.config import TRAIN_JOB

AGENT = str(Path(__file__).parents[1] / "agents" / "train_agent.py")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--group-size", "1"], "--group-size must be 2..32"),
        (["--lora-r", "0"], "--lora-r must be 1..256"),
        (["--eval-samples", "1"], "--eval-samples must be 2..32"),  # was refused after training
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


# -- a training run directory, its settings and its lock ------------------------------------------


def _data(tmp_path: Path, name: str = "data.jsonl") -> Path:
    data = tmp_path / name
    rows = [json.dumps({"prompt": json.dumps({"target": i})}) for i in range(2)]
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return data


def _recorded_run(tmp_path: Path, model: Path, *, eval_file: Path | None = None) -> Path:
    """A training run as a live or stopped `agent-kit train` leaves it: its settings in
    train_config.json and a store holding its job (no adapter yet)."""
    data = _data(tmp_path)
    job = replace(TRAIN_JOB, name="tiny", steps=2, group_size=2, batch_size=1, max_tokens=8)
    run = RunConfig(entrypoint=AGENT, dataset=data, job=job, out=tmp_path / "runs", workers=1)
    config = TrainConfig(run=run, model=str(model), device="cpu", eval=eval_file)
    run_dir = tmp_path / "runs" / "tiny"
    run_dir.mkdir(parents=True)
    text = json.dumps(config.to_dict(), indent=2) + "\n"
    RunLayout(run_dir).train_config.write_text(text, encoding="utf-8")
    recorded = {"job": job.to_dict(), "entrypoint": AGENT, "dataset": str(data), "workers": 1}
    with RunLock.acquire(run_dir), RunStore.open(run_dir) as store:  # as the driver does
        store.create_job(
            f"arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/{job.name}", "tiny", recorded
        )
    return run_dir


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its bytes (SQLite's -wal/-shm side files left out: any
    reader makes them)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    }


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: "), err
    return err


def test_resume_of_a_live_run_is_refused_before_anything_changes(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`train --resume` of a run another process still plays (it holds the run lock, its base
    evaluation under way) exits 12 with one line, before the model loads, and leaves the live
    run's files, its evaluation included, as they were."""
    holdout = _data(tmp_path, "holdout.jsonl")
    run_dir = _recorded_run(tmp_path, tiny_model, eval_file=holdout)
    base = RunLayout(run_dir).evals / "base"
    base.mkdir(parents=True)
    (base / "run.sqlite").write_bytes(b"")  # the live run's evaluation, not finished
    with RunLock.acquire(run_dir):
        before = _snapshot(run_dir)
        code = main(["train", "--resume", str(run_dir), "--device", "cpu"])
        assert _snapshot(run_dir) == before
    assert code == RunInUse.exit_code
    assert "is in use by pid" in _one_error_line(capsys)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ("STEPS", "steps is 'ten'"),
    ],
)
def test_damaged_train_config_on_resume_is_one_line(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str], content: str, why: str
) -> None:
    """A train_config.json that cannot be read back is one line naming the file (exit 14),
    not a traceback, and nothing in the run changes."""
    run_dir = _recorded_run(tmp_path, tiny_model)
    path = RunLayout(run_dir).train_config
    if content == "STEPS":  # the recorded settings with one value of the wrong type
        content = json.dumps({**json.loads(path.read_text(encoding="utf-8")), "steps": "ten"})
    path.write_text(content, encoding="utf-8")
    before = _snapshot(run_dir)
    assert main(["train", "--resume", str(run_dir), "--device", "cpu"]) == RunStoreError.exit_code
    line = _one_error_line(capsys)
    assert str(RunLayout(run_dir).train_config) in line
    assert why in line
    assert _snapshot(run_dir) == before


@pytest.mark.parametrize("damage", ["config", "weights"])
def test_damaged_adapter_on_resume_is_one_line(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """A last adapter whose adapter_config.json is not JSON, or whose weights file is cut
    short, is one line naming the adapter folder (exit 14) before the model loads, and nothing
    in the run changes."""
    run_dir = _recorded_run(tmp_path, tiny_model)
    adapter = RunLayout(run_dir).adapters / "step-0000"
    adapter.mkdir(parents=True)
    config = {"peft_type": "LORA", "r": 8} if damage == "weights" else None
    (adapter / "adapter_config.json").write_text(
        json.dumps(config) if config else "{cut", encoding="utf-8"
    )
    header = json.dumps({"w": {"dtype": "F32", "shape": [64], "data_offsets": [0, 256]}}).encode()
    weights = len(header).to_bytes(8, "little") + header + b"\0" * 100  # 156 of 256 bytes
    (adapter / "adapter_model.safetensors").write_bytes(weights)
    before = _snapshot(run_dir)
    assert main(["train", "--resume", str(run_dir), "--device", "cpu"]) == RunStoreError.exit_code
    line = _one_error_line(capsys)
    assert str(adapter) in line
    assert _snapshot(run_dir) == before


def test_resume_refuses_flags_that_define_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--resume` with flags that define the run (--steps, --model, --learning-rate) exits 2
    with one line naming each of them and the flags that do apply, and reads nothing."""
    argv = ["train", "--resume", str(tmp_path), "--steps", "3", "--model", "other"]
    assert main([*argv, "--learning-rate", "0.001", "--workers", "1"]) == 2
    line = _one_error_line(capsys)
    for flag in ("--steps", "--model", "--learning-rate"):
        assert flag in line
    assert "--workers" not in line.split(";")[0]  # it applies, so it is not refused
    assert "--device" in line  # the line says what does apply
    assert list(tmp_path.iterdir()) == []


def test_run_resume_of_a_training_run_names_train_resume(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`agent-kit run --resume` of a training run exits 2 with one line naming `agent-kit
    train --resume RUN_DIR` (it would play the steps without training them), and changes
    nothing."""
    run_dir = _recorded_run(tmp_path, tiny_model)
    before = _snapshot(run_dir)
    assert main(["run", "--resume", str(run_dir)]) == 2
    assert f"agent-kit train --resume {run_dir}" in _one_error_line(capsys)
    assert _snapshot(run_dir) == before


def test_name_of_an_existing_run_is_refused_before_anything_is_written(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`train --name X` where X already holds a run exits 2 with one line before the model
    loads, and X's train_config.json and store are untouched."""
    run_dir = _recorded_run(tmp_path, tiny_model)
    before = _snapshot(run_dir)
    argv = ["train", AGENT, "--dataset", str(_data(tmp_path, "other.jsonl")), "--name", "tiny"]
    argv += ["--out", str(tmp_path / "runs"), "--model", str(tiny_model), "--device", "cpu"]
    assert main([*argv, "--group-size", "2", "--batch-size", "1", "--steps", "1"]) == 2
    assert "already holds a run; use --resume or --name" in _one_error_line(capsys)
    assert _snapshot(run_dir) == before


@pytest.mark.parametrize("name", ["../x", "ABSOLUTE"])
def test_name_outside_out_is_refused_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """A --name that is a path (`../x`, an absolute one) exits 2 with one line and writes
    nothing, inside --out or outside it."""
    work = tmp_path / "work"
    work.mkdir()
    name = str(tmp_path / "abs") if name == "ABSOLUTE" else name
    argv = ["train", AGENT, "--dataset", str(_data(tmp_path)), "--name", name]
    assert main([*argv, "--out", str(work / "runs"), "--batch-size", "1"]) == 2
    assert "is not valid" in _one_error_line(capsys)
    assert list(work.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.jsonl", "work"]


@pytest.mark.parametrize("which", ["--eval", "--dataset"])
def test_unreadable_eval_or_dataset_is_refused_before_loading(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str], which: str
) -> None:
    """A --eval or --dataset file whose rows are not JSON exits 2 with one line naming it,
    before the model loads, and leaves no run directory."""
    good, bad = _data(tmp_path), tmp_path / "bad.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    files = {"--dataset": good, "--eval": good, which: bad}
    argv = ["train", AGENT, "--dataset", str(files["--dataset"]), "--eval", str(files["--eval"])]
    argv += ["--out", str(tmp_path / "runs"), "--model", str(tiny_model), "--device", "cpu"]
    assert main([*argv, "--group-size", "2", "--batch-size", "1", "--steps", "1"]) == 2
    assert str(bad) in _one_error_line(capsys)
    assert not (tmp_path / "runs").exists()


def test_full_store_of_a_training_run_names_train_resume(tmp_path: Path, tiny_model: Path) -> None:
    """A training run's store that cannot grow (SQLite's page limit reached: SQLITE_FULL, as a
    full disk) says to continue with `agent-kit train --resume RUN_DIR`."""
    run_dir = _recorded_run(tmp_path, tiny_model)
    with RunStore.open(run_dir) as store:
        pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
        store._conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(RunStoreError) as caught:
            store.add_event(TRAIN_TOKENS_EVENT, {"blob": "x" * 100_000})
    assert f"agent-kit train --resume {run_dir}" in caught.value.message
