"""The job plan's arithmetic on hand-made rollouts: shape, token bands, train share, cost,
wall clock and flags (agent_kit.reporting.plan)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest

from agent_kit.errors import UsageError
from agent_kit.reporting.plan import (
    JobShape,
    PlanSettings,
    job_shape,
    plan_job,
    session_quota,
)
from agent_kit.reporting.pricing import Pricing, default_pricing
from agent_kit.store import RewardRow, Rollout, TrajectoryRow, TurnRow, TurnTotals

ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/plan"


def _rollout(
    prompt: int,
    sample: int,
    *,
    reward: float | None = 1.0,
    prefill: int = 100,
    completion: int = 10,
    turns: int = 2,
    seconds: float = 2.0,
    latency_s: float = 0.5,
    attempt: int = 0,
) -> Rollout:
    tid = f"t-{prompt}-{sample}-{attempt}"
    row = TrajectoryRow(
        id=tid,
        job_arn=ARN,
        state="REWARDED" if reward is not None else "FAILED",
        prompt="{}",
        prompt_index=prompt,
        sample_index=sample,
        attempt=attempt,
        created_at=1000.0,
        updated_at=1000.0 + seconds,
    )
    reward_row = None if reward is None else RewardRow(tid, [reward], reward, None, None, 0.0)
    turn_rows = tuple(
        TurnRow(
            trajectory_id=tid,
            idx=i,
            route="/v1/chat/completions",
            request={},
            response={},
            prompt_tokens=prefill // turns,
            completion_tokens=completion // turns,
            usage_estimated=False,
            latency_ms=latency_s * 1000,
        )
        for i in range(turns)
    )
    usage = TurnTotals(turns, prefill // turns * turns, completion // turns * turns, 0)
    return Rollout(trajectory=row, reward_row=reward_row, usage=usage, turn_rows=turn_rows)


def _run(prompts: int = 12, group: int = 4, **kwargs: float) -> list[Rollout]:
    """Groups whose rewards differ within each group (every group gives a gradient)."""
    return [
        _rollout(p, s, reward=float(s), prefill=100 + 10 * p, **kwargs)  # type: ignore[arg-type]
        for p in range(prompts)
        for s in range(group)
    ]


def _shape(**values: int | None) -> JobShape:
    base: dict[str, int | None] = {
        "global_batch_size": 32,
        "group_size": 4,
        "max_steps": 10,
        "max_epochs": 1,
        "rollout_max_concurrency": 96,
        "rollout_timeout": 600,
        "sampling_max_tokens": 4096,
        "dataset_rows": 320,
    }
    base.update(values)
    return JobShape(**base)  # type: ignore[arg-type]


def _codes(flags: Sequence[object]) -> set[str]:
    return {getattr(f, "code", "") for f in flags}


def test_steps_end_at_max_steps_or_max_epochs_whichever_first() -> None:
    """Steps are min(max_steps, max_epochs × ⌈rows / global_batch_size⌉)."""
    assert _shape(dataset_rows=640, max_steps=50, max_epochs=1).steps == 20
    assert _shape(dataset_rows=640, max_steps=50, max_epochs=1).ends_by == "max_epochs"
    assert _shape(dataset_rows=650, max_steps=50, max_epochs=1).steps_per_epoch == 21
    capped = _shape(dataset_rows=640, max_steps=30, max_epochs=5)
    assert (capped.steps, capped.ends_by, capped.epochs) == (30, "max_steps", 1.5)
    assert _shape(dataset_rows=None, max_steps=7).steps == 7
    assert _shape(global_batch_size=64, group_size=8).rollouts_per_step == 512


def test_job_shape_takes_documented_defaults() -> None:
    """Hyperparameters not given take the documented defaults (128 × 8, 50 steps, 1 epoch)."""
    shape, typed, unknown = job_shape({"learning_rate": "1e-5"}, 640)
    assert (shape.global_batch_size, shape.group_size) == (128, 8)
    assert (shape.max_steps, shape.max_epochs, shape.steps) == (50, 1, 5)
    assert shape.rollout_max_concurrency == 96
    assert shape.sampling_max_tokens == 4096
    assert unknown == ["learning_rate"]
    assert typed["learning_rate"] == "1e-5"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("global_batch_size", "48"),
        ("group_size", "1"),
        ("group_size", "33"),
        ("max_steps", "1001"),
        ("sampling_max_tokens", "256"),
        ("sampling_max_tokens", "8193"),
        ("max_epochs", "31"),
    ],
)
def test_job_shape_refuses_values_outside_mtrl_ranges(name: str, value: str) -> None:
    """A value outside MTRL's documented range is a usage error naming the hyperparameter."""
    with pytest.raises(UsageError, match=name):
        job_shape({name: value}, 100)


def test_token_bands_are_ordered_and_centred_on_the_recorded_mean() -> None:
    """p10 ≤ p50 ≤ p90; p50 is groups × the mean planned group; the same run plans the same."""
    rollouts = _run()
    shape = _shape()
    plan = plan_job(rollouts, shape, default_pricing())
    mean_prefill = sum(100 + 10 * p for p in range(12)) / 12
    groups = shape.steps * shape.global_batch_size
    prefill = plan.tokens["prefill"]
    assert prefill.p10 < prefill.p50 < prefill.p90
    assert prefill.p50 == pytest.approx(groups * 4 * mean_prefill)
    assert plan.tokens["sample"].p50 == pytest.approx(groups * 4 * 10)
    total = plan.tokens["total"]
    assert total.p50 == pytest.approx(
        sum(plan.tokens[k].p50 for k in ("prefill", "sample", "train"))
    )
    assert plan_job(rollouts, shape, default_pricing()).document() == plan.document()


def test_more_recorded_groups_narrow_the_band() -> None:
    """Recording more prompt groups narrows the band (the recorded mean is better known)."""
    few = plan_job(_run(prompts=4), _shape(), default_pricing()).tokens["prefill"]
    many = plan_job(_run(prompts=40), _shape(), default_pricing()).tokens["prefill"]
    assert (many.p90 - many.p10) / many.p50 < (few.p90 - few.p10) / few.p50


def test_train_tokens_follow_the_planned_group_size() -> None:
    """All-equal groups train nothing; distinct rewards keep every train token at G ≤ n."""
    equal = [_rollout(p, s, reward=1.0) for p in range(12) for s in range(4)]
    assert plan_job(equal, _shape(), default_pricing()).tokens["train"].p90 == 0
    distinct = plan_job(_run(), _shape(group_size=2), default_pricing()).tokens
    assert distinct["train"].p50 == pytest.approx(distinct["prefill"].p50 + distinct["sample"].p50)
    # two of four rewards equal: a planned pair is all-equal with chance C(2,2)/C(4,2) = 1/6
    half = [
        _rollout(p, s, reward=[0.0, 0.0, 1.0, 2.0][s], prefill=100)
        for p in range(12)
        for s in range(4)
    ]
    train = plan_job(half, _shape(group_size=2), default_pricing()).tokens["train"]
    assert train.p50 == pytest.approx(320 * 2 * 110 * (1 - 1 / 6))


def test_retries_and_lost_slots_count_their_tokens() -> None:
    """Every attempt's prefill and sample is planned; a lost slot adds no train tokens."""
    rollouts = _run(prompts=12, group=4)
    rollouts.append(_rollout(0, 4, reward=None, prefill=1000, attempt=0))
    plan = plan_job(rollouts, _shape(), default_pricing())
    assert plan.document()["source"]["recorded"]["attempts_per_slot"] == pytest.approx(49 / 49)
    retried = [*_run(prompts=12, group=4), _rollout(0, 0, reward=None, attempt=1)]
    doc = plan_job(retried, _shape(), default_pricing()).document()
    assert doc["source"]["recorded"]["attempts_per_slot"] == pytest.approx(49 / 48)
    assert doc["shape"]["attempts"] == pytest.approx(doc["shape"]["rollouts"] * 49 / 48)


def test_cost_prices_each_category() -> None:
    """Per-category prices multiply each token band; the total is their sum at p50."""
    prices = Pricing(prefill_per_million=1.0, sample_per_million=10.0, train_per_million=2.0)
    plan = plan_job(_run(), _shape(), prices)
    assert plan.cost["prefill"].p50 == pytest.approx(plan.tokens["prefill"].p50 / 1e6)
    assert plan.cost["sample"].p90 == pytest.approx(plan.tokens["sample"].p90 * 10 / 1e6)
    assert plan.cost["total"].p50 == pytest.approx(
        sum(plan.cost[k].p50 for k in ("prefill", "sample", "train"))
    )
    assert plan.cost["total"].p10 <= plan.cost["total"].p50 <= plan.cost["total"].p90
    assert plan.cost["currency"] == "USD"
    assert plan.cost["source"] == "default"


def test_wall_clock_is_paced_by_the_invocation_rate_or_by_concurrency() -> None:
    """Short sessions are paced by 25 starts/s; long ones by concurrency; low ≤ high."""
    shape = _shape(global_batch_size=128, group_size=8, max_steps=10, dataset_rows=None)
    quick = plan_job(_run(seconds=1.0, latency_s=0.1), shape, default_pricing())
    wall = quick.wall_clock
    assert wall["paced_by"] == "invocation rate"
    assert wall["step_rollouts_s"]["low"] == pytest.approx(1024 / 25)
    assert "invocation-rate" in _codes(quick.flags)
    slow = plan_job(_run(seconds=300.0, latency_s=1.0), shape, default_pricing()).wall_clock
    assert slow["paced_by"] == "concurrency"
    assert slow["step_rollouts_s"]["low"] == pytest.approx(1024 * 300 / 96)
    assert slow["step_rollouts_s"]["high"] == pytest.approx(1024 / 25 + 1024 * 300 / 96 + 300)
    assert slow["total_s"]["low"] == pytest.approx(10 * (1024 * 300 / 96 + 60))
    assert slow["total_s"]["low"] <= slow["total_s"]["high"]


def test_turn_latency_and_agent_scale_replace_the_local_timing() -> None:
    """Session time = agent time × agent_scale + turns × turn_latency when given."""
    settings = PlanSettings(turn_latency_s=20.0, agent_scale=2.0)
    plan = plan_job(
        _run(seconds=3.0, latency_s=0.5, turns=2), _shape(), default_pricing(), settings
    )
    # agent time 3 − 2 × 0.5 = 2 s, doubled, plus 2 turns × 20 s
    assert plan.document()["source"]["recorded"]["session_s"]["max"] == pytest.approx(44.0)


def test_sessions_over_fifteen_minutes_do_not_fit() -> None:
    """A p99 session over 900 s is an error (AgentCore's synchronous limit); so is one over the
    rollout timeout, and concurrency over the region's session quota."""
    plan = plan_job(_run(seconds=1000.0), _shape(rollout_timeout=900), default_pricing())
    assert {"sync-request-limit", "rollout-timeout"} <= _codes(plan.flags)
    assert not plan.fits
    assert plan.document()["fits"] is False
    crowded = PlanSettings(region="eu-west-1", other_sessions=450)
    plan = plan_job(_run(), _shape(), default_pricing(), crowded)
    assert "session-quota" in _codes(plan.flags)
    assert not plan.fits
    assert plan.wall_clock["session_quota"] == 500 == session_quota("eu-west-1")
    assert plan.wall_clock["concurrency"] == 50
    assert session_quota("us-east-1") == session_quota("us-west-2") == 1000


def test_flags_for_truncation_dataset_and_few_groups() -> None:
    """A turn longer than sampling_max_tokens is an error; a missing dataset size and few
    recorded groups are warnings."""
    long_turns = _run(prompts=4, completion=2000, turns=1)
    plan = plan_job(
        long_turns, _shape(sampling_max_tokens=1024, dataset_rows=None), default_pricing()
    )
    codes = _codes(plan.flags)
    assert {"sampling-max-tokens", "dataset-size-unknown", "few-recorded-groups"} <= codes
    assert plan.fits is False
    small = plan_job(_run(), _shape(dataset_rows=10), default_pricing(), local_max_tokens=512)
    assert {"dataset-smaller-than-batch", "local-max-tokens"} <= _codes(small.flags)
    assert small.fits


def test_a_run_without_rewards_cannot_be_planned() -> None:
    """A run with no rewarded rollout is a usage error; so are nonsense settings."""
    with pytest.raises(UsageError, match="no rewarded rollout"):
        plan_job([_rollout(0, 0, reward=None)], _shape(), default_pricing())
    with pytest.raises(UsageError, match="agent scale"):
        PlanSettings(agent_scale=float("nan"))
    with pytest.raises(UsageError, match="at least one row"):
        job_shape({}, 0)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"turn_latency_s": 1e308}, "--turn-latency"),
        ({"agent_scale": 1e308}, "--agent-scale"),
        ({"train_step_s": 1e308}, "--train-step-s"),
        ({"other_sessions": 10**9}, "--other-sessions"),
        ({"region": "mars"}, "--region 'mars'"),
        ({"region": "US-WEST-2"}, "--region"),
    ],
)
def test_settings_beyond_any_real_job_are_refused(settings: dict[str, Any], message: str) -> None:
    """A setting no real job can have (a policy call longer than the longest rollout_timeout, an
    agent a billion times slower, a region name that is not one) is a usage error naming the
    option, before any figure can overflow into inf or NaN."""
    with pytest.raises(UsageError, match=re.escape(message)):
        PlanSettings(**settings)


def test_the_largest_settings_give_finite_figures_that_do_not_fit() -> None:
    """At the largest accepted turn latency and agent scale the plan is finite (strict JSON)
    and does not fit: its sessions outlast AgentCore's 15-minute limit."""
    largest = PlanSettings(turn_latency_s=86_400.0, agent_scale=10_000.0, train_step_s=86_400.0)
    plan = plan_job(_run(), _shape(), default_pricing(), largest)
    json.dumps(plan.document(), allow_nan=False)
    assert "sync-request-limit" in _codes(plan.flags)
    assert plan.document()["fits"] is False


def test_plan_names_the_hyperparameters_left_to_service_defaults() -> None:
    """The document lists the shape hyperparameters nobody gave (the service's defaults) apart
    from the given ones."""
    shape, typed, _ = job_shape({"group_size": "4"}, 320)
    plan = plan_job(_run(), shape, default_pricing(), hyperparameters=typed)
    document = plan.document()
    assert document["defaulted"] == [
        "global_batch_size",
        "max_steps",
        "max_epochs",
        "rollout_max_concurrency",
        "rollout_timeout",
        "sampling_max_tokens",
    ]
    assert document["hyperparameters"]["group_size"] == 4


@pytest.mark.parametrize(
    ("policy", "latency_s", "turn_latency", "flagged"),
    [
        ("scripted:/p/policies.py:Solver", 0.5, None, True),  # no model, whatever its speed
        ("random", 0.001, None, True),
        ("openai:http://127.0.0.1:8000/v1", 0.02, None, True),  # a model's call is not 20 ms
        ("openai:http://127.0.0.1:8000/v1", 2.0, None, False),
        ("scripted:/p/policies.py:Solver", 0.01, 4.0, False),  # --turn-latency replaces it
    ],
)
def test_a_latency_that_is_no_models_is_flagged(
    policy: str, latency_s: float, turn_latency: float | None, flagged: bool
) -> None:
    """The plan flags ``policy-latency`` (a warning naming --turn-latency) when the recorded
    calls are a scripted, random or replayed policy's or faster than a model's, unless
    ``--turn-latency`` replaces them; it names the planned wall clock, not where it is printed
    (the table comes before the flags)."""
    settings = PlanSettings(turn_latency_s=turn_latency)
    plan = plan_job(_run(latency_s=latency_s), _shape(), default_pricing(), settings, policy=policy)
    assert ("policy-latency" in _codes(plan.flags)) is flagged
    for flag in plan.flags:
        if flag.code == "policy-latency":
            assert flag.level == "warning"
            assert "--turn-latency" in flag.message
            # printed after the wall clock table (and in --json): it points nowhere
            assert "the planned wall clock is the agent's time alone" in flag.message
            assert "below" not in flag.message
