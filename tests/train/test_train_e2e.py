"""``agent-kit train`` end to end: a tiny model trained through the real entrypoint and emulator."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import mlflow_client
from safetensors.torch import load_file

from agent_kit.driver.config import RunConfig
from agent_kit.export.mlflow import export_run
from agent_kit.model.loading import load_model, parse_model_spec
from agent_kit.model.turns import TurnTokens
from agent_kit.store import RunStore, load_rollouts
from agent_kit.store.events import TRAIN_EVAL_EVENT, TRAIN_STEP_EVENT, TRAIN_TOKENS_EVENT
from agent_kit.train import TrainConfig, TrainResult, train
from agent_kit.train.config import TRAIN_JOB
from agent_kit.train.samples import step_batch

AGENT = Path(__file__).parents[1] / "agents" / "train_agent.py"
pytestmark = pytest.mark.e2e


@dataclass
class Trained:
    """The run after its interrupted first play and its resume, and the process's settings
    before and after both (:func:`_process`)."""

    first: TrainResult
    resumed: TrainResult
    model: Path
    process: tuple[dict[str, Any], dict[str, Any]] = ({}, {})


def _process() -> dict[str, Any]:
    """The settings of this process a library call must leave alone: the environment, torch's
    threads, TRL's LM head tiles, transformers' log level and progress bar."""
    import transformers

    from agent_kit.model.seam import lm_head_tiles

    return {
        "env": dict(os.environ),
        "threads": torch.get_num_threads(),
        "tiles": lm_head_tiles(),
        "verbosity": transformers.logging.get_verbosity(),
        "bar": transformers.utils.logging.is_progress_bar_enabled(),
    }


@pytest.fixture(scope="module")
def trained(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Trained:
    """Three steps: stopped after the second update, then resumed for the third; a holdout of
    two prompts, two samples each, played by the base model first, by every step's checkpoint
    after its update (``eval_every=1``) and by the adapter last."""
    folder = tmp_path_factory.mktemp("train")
    data = folder / "data.jsonl"
    rows = [json.dumps({"prompt": json.dumps({"target": i})}) for i in range(4)]
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    holdout = folder / "holdout.jsonl"
    holdout.write_text("\n".join(rows[:2]) + "\n", encoding="utf-8")
    job = replace(TRAIN_JOB, name="tiny", steps=3, group_size=2, batch_size=2, max_tokens=8)
    run = RunConfig(
        entrypoint=str(AGENT),
        dataset=data,
        job=replace(job, concurrency=4),
        out=folder / "runs",
        workers=1,
    )
    config = TrainConfig(
        run=run,
        model=str(tiny_model),
        learning_rate=1e-3,
        device="cpu",
        eval=holdout,
        eval_samples=2,
        eval_every=1,
    )

    async def first_play() -> TrainResult:
        stop = asyncio.Event()

        def echo(line: str) -> None:
            if line.startswith("step 1 "):
                stop.set()  # as the first Ctrl-C would, once the second update is saved

        return await train(config, stop, echo)

    before = _process()
    first = asyncio.run(first_play())
    resumed = asyncio.run(train(TrainConfig(RunConfig(resume=first.run_dir), device="cpu")))
    return Trained(first, resumed, tiny_model, (before, _process()))


def test_train_leaves_the_calling_process_as_it_found_it(trained: Trained) -> None:
    """train() called from Python (two runs) changes neither the environment, torch's thread
    count, TRL's LM head tiles nor transformers' log level and progress bar."""
    before, after = trained.process
    assert before["tiles"] is not None
    assert after == before


def test_two_steps_train_the_adapter_and_a_resume_trains_the_third(trained: Trained) -> None:
    """Steps 1-2 update and save the adapter; the resumed run trains step 3 from the last one."""
    run = trained.first.run_dir
    assert trained.first.job.status == "interrupted"
    assert trained.resumed.job.status == "completed"
    adapters = sorted(p.name for p in (run / "adapters").iterdir())
    assert adapters == ["step-0000", "step-0001", "step-0002"]
    weights = [load_file(str(run / "adapters" / a / "adapter_model.safetensors")) for a in adapters]
    lora_b = [k for k in weights[0] if "lora_B" in k]
    assert lora_b
    assert any(weights[0][k].abs().sum() > 0 for k in lora_b)  # moved away from B = 0
    assert any(not torch.equal(weights[1][k], weights[2][k]) for k in lora_b)
    steps = trained.resumed.document["steps"]
    assert [s["step"] for s in steps] == [0, 1, 2]
    for step in steps:
        assert step["adapter"].startswith("adapters/step-")
        assert {"train/loss", "train/grad_norm", "rollout/reward/mean"} <= set(step)
        assert step["rollout/tokens/prefill"] > 0
    store = RunStore.open(run, readonly=True)
    try:
        events = store.list_events(kind=TRAIN_STEP_EVENT)
    finally:
        store.close()
    assert sorted(int(e.detail["step"]) for e in events) == [0, 1, 2]
    assert (run / "train.json").is_file()
    assert (run / "train.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert (run / "summary.json").is_file()


def test_recorded_tokens_are_exactly_what_the_model_sampled(trained: Trained) -> None:
    """Every step-0 turn's ids, usage and log-probabilities match a teacher-forced replay."""
    run = trained.first.run_dir
    model = load_model(parse_model_spec(str(trained.model)), "cpu")  # step 0 samples the base
    store = RunStore.open(run, readonly=True)
    try:
        job = store.list_jobs()[-1].arn
        rollouts = [r for r in load_rollouts(store, job, with_turns=True) if r.step == 0]
        events = store.list_events(kind=TRAIN_TOKENS_EVENT)
        batch = step_batch(store, job, 0, group_size=2, prompts=[0, 1], pad_id=2)
    finally:
        store.close()
    records = {
        (e.trajectory_id, int(e.detail["turn"])): TurnTokens.from_dict(
            str(e.trajectory_id), e.detail
        )
        for e in events
    }
    checked = 0
    for rollout in rollouts:
        for row in rollout.turn_rows:
            tokens = records[(rollout.id, row.idx)]
            assert row.prompt_tokens == len(tokens.prompt_ids)
            assert row.completion_tokens == len(tokens.completion_ids)
            ids = torch.tensor([[*tokens.prompt_ids, *tokens.completion_ids]])
            with torch.no_grad():
                logits = model.model(input_ids=ids).logits[0].float()
            start = len(tokens.prompt_ids) - 1
            logp = torch.log_softmax(logits[start : start + len(tokens.completion_ids)], -1)
            replay = logp[torch.arange(len(tokens.completion_ids)), list(tokens.completion_ids)]
            assert torch.allclose(replay, torch.tensor(tokens.logprobs), atol=1e-4)
            checked += 1
    assert checked >= 4
    sampled = {tuple(t.completion_ids) for t in records.values()}
    for sample in batch.samples:
        model_ids = tuple(
            i for i, m in zip(sample.completion_ids, sample.env_mask, strict=True) if m
        )
        if model_ids:
            assert any(model_ids[: len(s)] == s for s in sampled)


def test_report_of_the_training_run_shows_the_training_and_train_vs_eval(trained: Trained) -> None:
    """report.html has the Training section: reward over steps vs the holdout (the checkpoints
    with their SE band), loss, every holdout mean, the paired differences."""
    run = trained.first.run_dir
    evals = trained.resumed.document["eval"]
    assert set(evals) == {"base", "step-0000", "step-0001", "adapter"}
    store = RunStore.open(run, readonly=True)
    try:
        labels = [e.detail["label"] for e in store.list_events(kind=TRAIN_EVAL_EVENT)]
    finally:
        store.close()
    # the resume did not store the base and the first checkpoint again; the checkpoint of
    # step 1, played as the stop came (and cut short by it unless it ended within the grace),
    # is played again by the resume, whose model holds that step's adapter
    assert list(dict.fromkeys(labels)) == ["base", "step-0000", "step-0001", "adapter"]
    assert (labels.count("base"), labels.count("step-0000"), labels[-1]) == (1, 1, "adapter")
    assert evals["step-0001"]["state"] != "interrupted"
    page = (run / "report.html").read_text(encoding="utf-8")
    assert '<a href="#training">Training</a>' in page
    start = page.index('<section id="training">')
    training = page[start : page.index("</section>", start)]
    assert "Reward per step: train vs holdout" in training
    assert "holdout base" in training
    assert "holdout adapter" in training
    assert "holdout checkpoints" in training
    assert 'class="band"' in training
    assert 'id="train-differences"' in training
    # a step's button opens its groups in the group view (the Groups section)
    assert 'class="show show-group" data-group="s2-p0"' in training
    assert '<section id="groups">' in page
    assert "Loss per step (train/loss)" in training
    assert "Tokens per step (prefill, sample, train)" in training
    for label in ("base", "adapter"):
        mean, se = evals[label]["mean"], evals[label]["se"]
        assert f'<td>{label}</td><td class="n" data-v="{mean!r}">' in training
        assert f'data-v="{se!r}"' in training
    assert 'id="train-verdict"' in training
    for step in range(3):
        assert f"adapters/step-{step:04d}" in training


def test_mlflow_export_of_the_training_run_logs_train_metrics_and_the_holdout(
    trained: Trained, tmp_path: Path, mlflow_store: Callable[[Path], str]
) -> None:
    """export mlflow of the run logs train/* at steps 0-2 and both holdout means as metrics."""
    uri = mlflow_store(tmp_path / "mlflow.db")
    result = export_run(trained.first.run_dir, tracking_uri=uri, experiment="train")
    with mlflow_client(uri) as client:
        steps = trained.resumed.document["steps"]
        for name in ("train/loss", "train/grad_norm", "train/tokens", "rollout/reward/mean"):
            history = sorted(client.get_metric_history(result.run_id, name), key=lambda m: m.step)
            assert [m.step for m in history] == [0, 1, 2], name
            assert [m.value for m in history] == pytest.approx([s[name] for s in steps]), name
        evals = trained.resumed.document["eval"]
        for label, step in (("base", 0), ("adapter", 2)):
            (point,) = client.get_metric_history(result.run_id, f"holdout/{label}/reward_mean")
            assert (point.step, point.value) == (step, pytest.approx(evals[label]["mean"]))
            (point,) = client.get_metric_history(result.run_id, f"holdout/{label}/reward_se")
            assert point.value == pytest.approx(evals[label]["se"])
            assert client.get_metric_history(result.run_id, f"holdout/{label}/pass_at_k")
        (diff,) = client.get_metric_history(result.run_id, "holdout/difference")
        assert diff.value == pytest.approx(evals["adapter"]["mean"] - evals["base"]["mean"])
        (paired,) = client.get_metric_history(result.run_id, "holdout/difference/adapter-base")
        assert paired.value == pytest.approx(diff.value)
        (point,) = client.get_metric_history(result.run_id, "holdout/step-0001/reward_mean")
        assert (point.step, point.value) == (1, pytest.approx(evals["step-0001"]["mean"]))
        params = client.get_run(result.run_id).data.params
        artifacts = {a.path for a in client.list_artifacts(result.run_id)}
    for label in ("base", "adapter"):
        assert params[f"holdout.{label}.status"] == evals[label]["state"]
    assert params["holdout.beats_base_by_2se"] in {"True", "False"}
    assert {"train.json", "train.html", "report.html", "summary.json"} <= artifacts


def test_the_holdout_is_one_grid_with_paired_differences(trained: Trained) -> None:
    """RUN_DIR/eval is an evaluation grid: grid.json, a cell per label, table.json whose figures
    are train.json's and whose differences are paired by prompt (trained − base, each
    checkpoint − base), eval.html with the checkpoint curve and its SE band."""
    run, doc = trained.first.run_dir, trained.resumed.document
    table = json.loads((run / "eval" / "table.json").read_text(encoding="utf-8"))
    cells = {c["label"]: c["figures"] for c in table["cells"]}
    assert list(cells) == ["base", "step-0000", "step-0001", "adapter"]
    for label, figures in cells.items():
        assert figures["mean"] == pytest.approx(doc["eval"][label]["mean"])
        assert set(figures["per_prompt"]) == {"0", "1"}
    found = {(d["a"], d["b"]): d for d in doc["differences"]}
    assert set(found) == {("adapter", "base"), ("step-0000", "base"), ("step-0001", "base")}
    for d in found.values():
        assert d["paired"] is True
        assert d["prompts"] == 2
    adapter, base = cells["adapter"]["per_prompt"], cells["base"]["per_prompt"]
    per_prompt = [adapter[p] - base[p] for p in ("0", "1")]
    assert found["adapter", "base"]["se"] == pytest.approx(abs(per_prompt[0] - per_prompt[1]) / 2)
    assert doc["holdout"]["page"] == str(run / "eval" / "eval.html")
    page = (run / "eval" / "eval.html").read_text(encoding="utf-8")
    assert "Holdout reward per checkpoint" in page
    assert 'class="band"' in page


def test_eval_takes_the_runs_checkpoints_and_draws_the_curve(
    trained: Trained, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``agent-kit eval --checkpoints RUN_DIR:every=2``: the base, step 1 and the last step
    (2) are the policies, the run's agent and holdout are the grid's; the table marks the best
    step and differences every checkpoint from the base, paired. (The tiny random model's
    rollouts fail as a whole, so the cells end ``rollouts_failed`` and the command exits 9
    after the table.)"""
    from agent_kit.cli import main

    out = tmp_path / "ckpt"
    argv = [
        "eval", "--checkpoints", f"{trained.first.run_dir}:every=2", "--samples", "2",
        "--max-tokens", "8", "--workers", "1", "--out", str(out), "--json",
    ]  # fmt: skip
    assert main(argv) in (0, 9)
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [c["label"] for c in doc["cells"]] == ["base", "step-0001", "step-0002"]
    assert all(c["figures"]["mean"] is not None for c in doc["cells"])
    assert doc["best"]["base"] in {"step-0001", "step-0002"}
    assert [(d["a"], d["b"]) for d in doc["differences"]] == [
        ("step-0001", "base"),
        ("step-0002", "base"),
    ]
    assert all(d["paired"] for d in doc["differences"])
    page = (out / "eval.html").read_text(encoding="utf-8")
    assert "Holdout reward per checkpoint" in page
    assert "(best)" in page
