"""``agent-kit train`` with the outcome gate and dynamic sampling, end to end on a tiny model:
every step reports its signal, groups without outcome signal are refilled with fresh prompts,
and every rollout names the adapter that sampled it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from helpers import mlflow_client

from agent_kit.driver.config import RunConfig
from agent_kit.export.mlflow import export_run
from agent_kit.export.spans import rollout_traces
from agent_kit.reporting.breakdown import load_run_data
from agent_kit.reporting.metrics import build_groups, is_degenerate
from agent_kit.store import RunStore, load_rollouts
from agent_kit.store.events import TRAIN_STEP_EVENT
from agent_kit.store.layout import RunLayout
from agent_kit.train import TrainConfig, TrainResult, train
from agent_kit.train.config import TRAIN_JOB
from agent_kit.train.outcomes import group_outcomes

AGENT = Path(__file__).parents[1] / "agents" / "train_agent.py"
pytestmark = pytest.mark.e2e


@dataclass
class Gated:
    """The run and the lines it printed."""

    result: TrainResult
    lines: list[str]


@pytest.fixture(scope="module")
def gated(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Gated:
    """The 8 prompts filtered by 4 plays each, then two steps of 2 prompts × 2 rollouts,
    advantages on the outcome, at most 2 extra prompts a step; a holdout of two prompts, two
    samples each."""
    folder = tmp_path_factory.mktemp("gated")
    data = folder / "data.jsonl"
    rows = [json.dumps({"prompt": json.dumps({"target": i, "shaped": True})}) for i in range(8)]
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    holdout = folder / "holdout.jsonl"
    holdout.write_text("\n".join(rows[:2]) + "\n", encoding="utf-8")
    job = replace(
        TRAIN_JOB, name="gated", steps=2, group_size=2, batch_size=2, max_tokens=8, concurrency=4
    )
    config = TrainConfig(
        run=RunConfig(entrypoint=str(AGENT), dataset=data, job=job, out=folder, workers=1),
        model=str(tiny_model),
        learning_rate=1e-3,
        device="cpu",
        eval=holdout,
        eval_samples=2,
        outcome_gate=True,
        dynamic_sampling=2,
        filter_prompts=4,
        force=True,
    )
    lines: list[str] = []
    return Gated(asyncio.run(train(config, echo=lines.append)), lines)


def test_every_step_reports_its_signal_in_its_line_its_record_and_train_json(
    gated: Gated,
) -> None:
    """Each step's line, train_step record and train.json row carry the shares of groups all
    equal and shaping only, as counted from the step's own groups."""
    run = gated.result.run_dir
    with RunStore.open(run, readonly=True) as store:
        job = store.list_jobs()[-1].arn
        records = load_rollouts(store, job)
        events = {int(e.detail["step"]): e.detail for e in store.list_events(kind=TRAIN_STEP_EVENT)}
    assert sorted(events) == [0, 1]
    for step, detail in events.items():
        groups = [g for g in build_groups(records) if g.step == step and g.rewards]
        equal = sum(g.degenerate for g in groups)
        shaping = sum(
            not g.degenerate and is_degenerate(group_outcomes(g.rollouts, 1.0)) for g in groups
        )
        assert detail["train/signal/all_equal"] == pytest.approx(equal / len(groups))
        assert detail["train/signal/shaping_only"] == pytest.approx(shaping / len(groups))
        row = gated.result.document["steps"][step]
        assert row["train/signal/all_equal"] == detail["train/signal/all_equal"]
        (line,) = [x for x in gated.lines if x.startswith(f"step {step} (of 0-1)")]
        assert f"signal: {equal} of {len(groups)} groups all equal, {shaping} shaping only" in line
        assert "dynamic sampling:" in line
        assert "(sampling " in line
        assert ", update " in line


def test_groups_without_outcome_signal_are_refilled_within_the_cap(gated: Gated) -> None:
    """A step whose groups lacked outcome signal played at most 2 fresh prompts, as run
    directories of their own whose rollouts name the adapter the step sampled with."""
    run = RunLayout(gated.result.run_dir)
    for row in gated.result.document["steps"]:
        dropped = row["train/refill/dropped_groups"]
        assert 0 <= row["train/refill/prompts"] <= 2
        assert row["train/refill/filled"] <= dropped
        if not dropped:
            assert row["train/refill/prompts"] == 0
            continue
        assert row["train/refill/rounds"] >= 1
        refill = run.refill(row["step"], 1)
        with RunStore.open(refill, readonly=True) as store:
            rollouts = load_rollouts(store, store.list_jobs()[-1].arn)
        assert rollouts
        assert {r.adapter for r in rollouts} == {row["sampled_by"]}


def test_every_rollout_names_the_adapter_that_sampled_it(gated: Gated) -> None:
    """Step 0 samples the base (a new adapter), step 1 the adapter step 0 saved; the holdouts
    name base and the last adapter; the rollout's trace carries the name; no warning."""
    run = RunLayout(gated.result.run_dir)
    with RunStore.open(run.root, readonly=True) as store:
        job = store.list_jobs()[-1].arn
        records = load_rollouts(store, job, with_turns=True)
        traces = rollout_traces(store, load_run_data(store, job))
    by_step = {step: {r.adapter for r in records if r.step == step} for step in (0, 1)}
    assert by_step == {0: {"base"}, 1: {"step-0000"}}
    assert [s["sampled_by"] for s in gated.result.document["steps"]] == ["base", "step-0000"]
    assert {t.root.attributes.get("agent_kit.adapter") for t in traces} == {"base", "step-0000"}
    for label, name in (("base", "base"), ("adapter", "step-0001")):
        with RunStore.open(run.evals / label, readonly=True) as store:
            rollouts = load_rollouts(store, store.list_jobs()[-1].arn)
        assert {r.adapter for r in rollouts} == {name}
    assert gated.result.document["warnings"] == []


def test_the_prompt_filter_trains_on_the_prompts_solved_sometimes(gated: Gated) -> None:
    """The filter run played every prompt 4 times; the training job plays exactly the prompts
    some but not all of whose rollouts succeeded (or, too few kept, every prompt)."""
    run = RunLayout(gated.result.run_dir)
    with RunStore.open(run.prompt_filter, readonly=True) as store:
        groups = build_groups(load_rollouts(store, store.list_jobs()[-1].arn))
    mixed = [g.rollouts[0].prompt for g in groups if 0 < sum(r >= 1.0 for r in g.rewards) < 4]
    assert sum(len(g.rewards) + g.lost for g in groups) == 32
    figures = gated.result.document["prompt_filter"]
    assert figures["kept"] == len(mixed)
    with RunStore.open(run.root, readonly=True) as store:
        dataset = store.list_jobs()[-1].config["dataset"]
    if figures.get("forced"):
        assert not run.train_prompts.exists()
        return
    assert dataset == str(run.train_prompts)
    kept = [json.loads(line)["prompt"] for line in run.train_prompts.read_text().splitlines()]
    assert kept == mixed


def test_the_signal_shares_reach_mlflow_at_their_steps(
    gated: Gated, tmp_path: Path, mlflow_store: Callable[[Path], str]
) -> None:
    """export mlflow logs train/signal/* and train/refill/* at steps 0 and 1."""
    uri = mlflow_store(tmp_path / "mlflow.db")
    result = export_run(gated.result.run_dir, tracking_uri=uri, experiment="signal")
    with mlflow_client(uri) as client:
        for name in ("train/signal/all_equal", "train/signal/shaping_only", "train/refill/prompts"):
            history = sorted(client.get_metric_history(result.run_id, name), key=lambda m: m.step)
            assert [m.step for m in history] == [0, 1], name
            steps = gated.result.document["steps"]
            assert [m.value for m in history] == pytest.approx([s[name] for s in steps]), name
