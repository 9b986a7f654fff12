"""Tests of agent_kit.reporting.metrics, agent_kit.reporting.pricing and the pure summary builder
(no store)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
from fakes.rollouts import rollout
from hypothesis import given
from hypothesis import strategies as st

from agent_kit.errors import UsageError
from agent_kit.reporting.metrics import (
    ADVANTAGE_EPS,
    build_groups,
    eval_metrics,
    group_advantages,
    is_degenerate,
    pass_at_k,
    pass_power_k,
    reward_metrics,
    token_usage,
    training_metrics,
)
from agent_kit.reporting.pricing import (
    DEFAULT_PRICING_LABEL,
    PUBLISHED_REFERENCE_RUN,
    TokenCounts,
    default_pricing,
    estimate_cost,
    load_pricing,
)
from agent_kit.reporting.summary import summarize_records
from agent_kit.reporting.summary_schema import SUMMARY_SCHEMA, Summary, read_summary
from agent_kit.store import JobRow, Rollout

rewards_lists = st.lists(
    st.floats(min_value=-100, max_value=100, allow_nan=False, allow_infinity=False),
    min_size=2,
    max_size=16,
)


def rec(
    step: int,
    prompt: int,
    sample: int,
    reward: float | None = 1.0,
    *,
    state: str | None = None,
    attempt: int = 0,
    turns: int = 1,
    prefill: int = 10,
    sample_tokens: int = 5,
    estimated: int = 0,
) -> Rollout:
    """A record; REWARDED when a reward is given, else FAILED unless ``state`` says otherwise."""
    return rollout(
        f"t{step}-{prompt}-{sample}-{attempt}",
        step=step,
        prompt_index=prompt,
        sample_index=sample,
        state=state or ("REWARDED" if reward is not None else "FAILED"),
        reward=reward,
        attempt=attempt,
        turns=turns,
        prefill_tokens=prefill,
        sample_tokens=sample_tokens,
        estimated_turns=estimated,
        started_at=100.0,
        ended_at=100.0 + turns,
        reason=None if reward is not None else "The agent signaled that the trajectory failed",
    )


# -- advantages ------------------------------------------------------------------------------


def test_grpo_hand_checked() -> None:
    """GRPO divides by the population std plus 1e-6: [1,2,3,4] → ±0.5, ±1.5 over √1.25."""
    got = group_advantages([1.0, 2.0, 3.0, 4.0], "group_based")
    denom = math.sqrt(1.25) + 1e-6
    assert got == pytest.approx([-1.5 / denom, -0.5 / denom, 0.5 / denom, 1.5 / denom], abs=1e-12)
    assert group_advantages([1.0, 0.0]) == pytest.approx([0.5 / 0.500001, -0.5 / 0.500001])


def test_rloo_hand_checked() -> None:
    """RLOO subtracts the mean of the other rewards: [1,2,3,4] → [-2, -2/3, 2/3, 2]."""
    got = group_advantages([1.0, 2.0, 3.0, 4.0], "rloo")
    assert got == pytest.approx([-2.0, -2 / 3, 2 / 3, 2.0], abs=1e-12)


@pytest.mark.parametrize("kind", ["group_based", "rloo"])
def test_equal_rewards_give_exact_zero(kind: str) -> None:
    """A group of equal rewards (or a single reward) gets exactly zero advantage."""
    assert group_advantages([0.1, 0.1, 0.1], kind) == [0.0, 0.0, 0.0]
    assert group_advantages([5.0], kind) == [0.0]
    assert is_degenerate([0.1, 0.1])
    assert is_degenerate([3.0])
    assert not is_degenerate([0, 1])


@given(rewards_lists, st.sampled_from(["group_based", "rloo"]))
def test_advantages_sum_to_zero(rewards: list[float], kind: str) -> None:
    """Every group's advantages sum to ~0, for both estimators."""
    adv = group_advantages(rewards, kind)
    scale = max(1.0, max(abs(a) for a in adv))
    assert abs(math.fsum(adv)) <= 1e-9 * scale * len(adv)


@given(rewards_lists)
def test_rloo_is_scaled_centering(rewards: list[float]) -> None:
    """RLOO equals n/(n−1) × (r − mean) for a non-degenerate group."""
    if is_degenerate(rewards):
        return
    n, mean = len(rewards), math.fsum(rewards) / len(rewards)
    expected = [n / (n - 1) * (r - mean) for r in rewards]
    assert group_advantages(rewards, "rloo") == pytest.approx(expected, abs=1e-9)


@given(rewards_lists)
def test_grpo_has_unit_rms_below_one(rewards: list[float]) -> None:
    """GRPO advantages have RMS std/(std+eps) ≤ 1 (population std)."""
    adv = group_advantages(rewards)
    if is_degenerate(rewards):
        assert adv == [0.0] * len(rewards)
        return
    mean = math.fsum(rewards) / len(rewards)
    std = math.sqrt(math.fsum((r - mean) ** 2 for r in rewards) / len(rewards))
    rms = math.sqrt(math.fsum(a * a for a in adv) / len(adv))
    assert rms == pytest.approx(std / (std + ADVANTAGE_EPS), rel=1e-9)


def test_bad_advantage_input() -> None:
    """An unknown estimator is a UsageError; a non-finite reward is a ValueError."""
    with pytest.raises(UsageError, match="unknown advantage"):
        group_advantages([1.0, 2.0], "ppo")
    with pytest.raises(ValueError, match="finite"):
        group_advantages([1.0, float("nan")])


# -- pass@k ----------------------------------------------------------------------------------


def _brute(n: int, c: int, k: int) -> tuple[float, float]:
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    return (
        sum(any(s) for s in subsets) / len(subsets),
        sum(all(s) for s in subsets) / len(subsets),
    )


@given(st.data())
def test_pass_at_k_matches_enumeration(data: st.DataObject) -> None:
    """pass@k and pass^k equal the fractions of all k-subsets with any / all successes."""
    n = data.draw(st.integers(1, 10))
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    at, power = _brute(n, c, k)
    assert pass_at_k(n, c, k) == pytest.approx(at, abs=1e-12)
    assert pass_power_k(n, c, k) == pytest.approx(power, abs=1e-12)


def test_pass_at_k_rejects_impossible_counts() -> None:
    """k > n or c > n is an error, not a silent number."""
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="c <= n"):
        pass_power_k(3, 4, 1)


def test_eval_metrics_hand_checked() -> None:
    """A group of 4 with 2 successes: pass@2 = 5/6, pass^2 = 1/6; a lost slot counts as failure."""
    groups = build_groups(
        [
            *(rec(0, 0, i, r) for i, r in enumerate([1.0, 1.2, 0.0, 0.5])),
            rec(0, 1, 0, 1.0),
            rec(0, 1, 1, None),
        ]
    )
    m = eval_metrics(groups, success_threshold=1.0, ks=(1, 2, 4))
    assert m["eval/reward/succeeded_rollouts"] == 3
    assert m["eval/reward/failed_rollouts"] == 3  # 0.0, 0.5 and the lost slot
    # group 0: n=4, c=2; group 1: n=2, c=1
    assert m["eval/reward/pass_at_2"] == pytest.approx((5 / 6 + 1.0) / 2)
    assert m["eval/reward/pass_power_2"] == pytest.approx((1 / 6 + 0.0) / 2)
    assert m["eval/reward/pass_at_1"] == pytest.approx((0.5 + 0.5) / 2)
    # only group 0 has n >= 4
    assert m["eval/reward/pass_at_4"] == 1.0
    assert m["eval/reward/pass_power_4"] == 0.0
    assert m["eval/reward/pass_at_k"] == m["eval/reward/pass_at_4"]
    assert m["eval/reward/mean"] == pytest.approx((1.0 + 1.2 + 0.0 + 0.5 + 1.0) / 5)
    high = eval_metrics(groups, success_threshold=1.1, ks=(8,))
    assert high["eval/reward/succeeded_rollouts"] == 1
    assert high["eval/reward/pass_at_8"] is None


# -- groups, metric names, tokens --------------------------------------------------------------


def test_build_groups_picks_rewarded_retry_and_counts_lost() -> None:
    """A retried slot uses its REWARDED attempt; unrecovered slots are lost or pending."""
    records = [
        rec(0, 0, 0, None, attempt=0),
        rec(0, 0, 0, 2.0, attempt=1),
        rec(0, 0, 1, 0.0),
        rec(0, 0, 2, None),
        rec(0, 0, 3, None, state="OPEN"),
    ]
    (group,) = build_groups(records)
    assert group.rewards == [2.0, 0.0]
    assert [r.attempt for r in group.rollouts] == [1, 0]
    assert (group.lost, group.pending, group.finished_slots) == (1, 1, 3)
    assert group.advantages == pytest.approx([1 / 1.000001, -1 / 1.000001])


def test_contract_metric_names_present() -> None:
    """training and eval metrics carry every name of docs/contract.md §6."""
    groups = build_groups([rec(0, 0, 0, 1.0), rec(0, 0, 1, 0.0)])
    names = set(training_metrics([], groups)) | set(eval_metrics(groups, ks=(1, 2)))
    required = {f"rollout/reward/{n}" for n in ("mean", "valid_mean", "std", "min", "max")}
    required |= {"rollout/reward/zero_frac", "rollout/turns/mean", "rollout/turns/min"}
    required |= {"rollout/turns/max", "rollout/tokens/prefill", "rollout/tokens/sample"}
    required |= {"rollout/tokens/train", "rollout/tokens/mean_per_rollout"}
    required |= {f"rollout/advantage/{n}" for n in ("mean", "std", "min", "max", "abs_mean")}
    required |= {f"eval/reward/{n}" for n in ("mean", "min", "max", "std", "pass_at_k")}
    required |= {"eval/reward/pass_power_k", "eval/reward/succeeded_rollouts"}
    required |= {"eval/reward/failed_rollouts"}
    assert required <= names


def test_reward_metrics_valid_mean_and_zero_frac() -> None:
    """valid_mean averages only non-degenerate groups; zero_frac counts degenerate groups."""
    groups = build_groups(
        [
            *(rec(0, 0, 0, 1.0), rec(0, 0, 1, 1.0)),  # degenerate
            *(rec(0, 1, 0, 0.0), rec(0, 1, 1, 2.0)),
            *(rec(0, 2, 0, 3.0), rec(0, 2, 1, 3.0)),  # degenerate
        ]
    )
    m = reward_metrics(groups)
    assert m["rollout/reward/valid_mean"] == 1.0
    assert m["rollout/reward/zero_frac"] == pytest.approx(2 / 3)
    assert m["rollout/reward/mean"] == pytest.approx(10 / 6)
    assert m["rollout/reward/min"] == 0.0
    assert m["rollout/reward/max"] == 3.0
    assert reward_metrics([])["rollout/reward/mean"] is None


def test_token_categories() -> None:
    """prefill/sample count every attempt; train counts turns of non-degenerate groups only."""
    records = [
        rec(0, 0, 0, 1.0, prefill=100, sample_tokens=10),
        rec(0, 0, 1, 0.0, prefill=200, sample_tokens=20, estimated=1),
        rec(0, 1, 0, 1.0, prefill=1000, sample_tokens=100),  # degenerate group
        rec(0, 1, 1, 1.0, prefill=2000, sample_tokens=200),
        rec(0, 1, 2, None, prefill=7, sample_tokens=3),  # failed attempt, still billed
    ]
    groups = build_groups(records)
    usage = token_usage(records, groups)
    assert (usage.prefill, usage.sample) == (3307, 333)
    assert usage.train == 100 + 10 + 200 + 20
    assert usage.estimated
    assert usage.estimated_turns == 1
    assert usage.per_rollout["total"] == pytest.approx((110 + 220 + 1100 + 2200) / 4)
    assert usage.per_rollout["max"] == 2200
    assert token_usage(records, groups, evaluation=True).train == 0
    m = training_metrics(records, groups)
    assert m["rollout/tokens/train"] == usage.train
    assert m["rollout/tokens/prefill"] == 3307


# -- pricing ---------------------------------------------------------------------------------


def test_default_pricing_reproduces_published_run() -> None:
    """The default is the blended rate derived from the published run (≈ $0.262/M), labelled."""
    pricing = default_pricing()
    rate = 339.0 / (491.6 + 159.7 + 643.3)
    assert pricing.prefill_per_million == pytest.approx(rate)
    assert round(rate, 3) == 0.262
    assert pricing.label == DEFAULT_PRICING_LABEL
    assert pricing.is_default
    cost = estimate_cost(PUBLISHED_REFERENCE_RUN.tokens, pricing)
    assert cost.total == pytest.approx(339.0)
    assert cost.currency == "USD"


def test_pricing_file_json_and_toml(tmp_path: Path) -> None:
    """Per-category prices from JSON and TOML files price each category separately."""
    prices = {"prefill_per_million": 0.1, "sample_per_million": 0.4, "train_per_million": 0.3}
    jf = tmp_path / "p.json"
    jf.write_text(json.dumps({**prices, "currency": "EUR", "label": "negotiated"}))
    tf = tmp_path / "p.toml"
    tf.write_text("\n".join(f"{k} = {v}" for k, v in prices.items()) + '\ncurrency = "EUR"\n')
    for path in (jf, tf):
        pricing = load_pricing(path)
        cost = estimate_cost(
            TokenCounts(prefill=2_000_000, sample=1_000_000, train=500_000), pricing
        )
        assert (cost.prefill, cost.sample, cost.train) == pytest.approx((0.2, 0.4, 0.15))
        assert cost.currency == "EUR"
        assert cost.source == str(path)
    blended = tmp_path / "b.json"
    blended.write_text('{"blended_per_million": 2.0}')
    assert (
        estimate_cost(TokenCounts(1_000_000, 1_000_000, 1_000_000), load_pricing(blended)).total
        == 6.0
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"prefill_per_million": 1, "sample_per_million": 1}', "train_per_million"),
        ('{"blended_per_million": 1, "prefill_per_million": 1}', "either"),
        ('{"blended_per_million": -1}', "greater than or equal"),
        ('{"blended_per_million": 1, "price": 3}', "price"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "object"),
    ],
)
def test_bad_pricing_files(tmp_path: Path, text: str, message: str) -> None:
    """A bad pricing file is a UsageError naming the problem, never a silent zero price."""
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_pricing(path)
    with pytest.raises(UsageError, match="cannot read"):
        load_pricing(tmp_path / "missing.json")


# -- the summary (pure) ----------------------------------------------------------------------

JOB = JobRow(
    arn="arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/unit",
    name="unit",
    created_at=1.0,
    config={"group_size": 2, "batch_size": 2, "steps": 2, "dataset_rows": 8},
    status="completed",
    summary=None,
)


def _records() -> list[Rollout]:
    return [
        rec(0, 0, 0, 1.0, prefill=100, sample_tokens=10, turns=2),
        rec(0, 0, 1, 0.0, prefill=100, sample_tokens=10, turns=3),
        rec(0, 1, 0, 1.0, prefill=100, sample_tokens=10),
        rec(0, 1, 1, 1.0, prefill=100, sample_tokens=10),
        rec(1, 0, 0, None, prefill=50, sample_tokens=0),
        rec(1, 0, 0, 2.0, attempt=1, prefill=50, sample_tokens=40),
        rec(1, 0, 1, 0.5, prefill=100, sample_tokens=10),
        rec(1, 1, 0, 0.0, prefill=100, sample_tokens=10),
        rec(1, 1, 1, 0.0, prefill=100, sample_tokens=10),
    ]


def test_summary_projection_arithmetic() -> None:
    """Projection = per-slot tokens × steps × batch × group, priced per category."""
    pricing = default_pricing()
    s = summarize_records(JOB, _records(), pricing=pricing, projection_steps=10).document()
    p = s["projection"]
    slots = 8
    prefill, sample = 800, 110
    assert s["tokens"]["prefill"] == prefill
    assert s["tokens"]["sample"] == sample
    train = 110 * 2 + 90 + 110  # step 0 group 0, step 1 group 0 (non-degenerate)
    assert s["tokens"]["train"] == train
    assert p["slots"] == 10 * 2 * 2
    assert p["tokens"]["prefill"] == round(prefill / slots * 40)
    assert p["tokens"]["train"] == round(train / slots * 40)
    assert p["cost"]["total"] == pytest.approx(
        p["tokens"]["total"] / 1e6 * pricing.prefill_per_million, rel=1e-6
    )
    assert p["epochs"] == pytest.approx(10 * 2 / 8)
    assert "10 steps" in p["text"]
    assert DEFAULT_PRICING_LABEL in p["text"]


def test_summary_is_versioned_and_validates() -> None:
    """The summary round-trips through the Summary model and JSON with no NaN."""
    s = summarize_records(JOB, _records(), advantage="rloo").document()
    assert s["schema"] == SUMMARY_SCHEMA
    Summary.model_validate(json.loads(json.dumps(s, allow_nan=False)))
    assert s["counts"]["by_state"] == {"FAILED": 1, "REWARDED": 8}
    assert s["counts"]["retries"] == 1
    assert s["counts"]["lost"] == 0
    assert s["counts"]["degenerate_groups"] == 2
    assert s["failures"] == [
        {"reason": "The agent signaled that the trajectory failed", "count": 1}
    ]
    assert [row["step"] for row in s["steps"]] == [0, 1]
    assert s["steps"][1]["reward_mean"] == pytest.approx((2.0 + 0.5 + 0 + 0) / 4)
    assert s["settings"]["pass_k"] == [1, 2]
    assert s["metrics"]["rollout/advantage/max"] == pytest.approx(1.5)  # rloo: 2.0 − 0.5


def test_summary_of_empty_job_has_nulls() -> None:
    """A job with no trajectories summarizes to nulls and no projection, not NaN or a crash."""
    s = summarize_records(JOB, []).document()
    assert s["metrics"]["rollout/reward/mean"] is None
    assert s["projection"] is None
    assert s["timing"]["rollouts_per_s"] is None
    json.dumps(s, allow_nan=False)


def test_evaluation_job_has_no_train_tokens() -> None:
    """A job configured as evaluation bills no train tokens."""
    job = JobRow(JOB.arn, "ev", 1.0, {"mode": "evaluation"}, "completed", None)
    s = summarize_records(job, _records()).document()
    assert s["job"]["mode"] == "evaluation"
    assert s["tokens"]["train"] == 0


def test_driver_config_layout_and_threshold_default() -> None:
    """Settings nested under "job" (the driver's layout) are read; the threshold defaults to it."""
    config = {"job": {"group_size": 2, "batch_size": 2, "steps": 300, "success_threshold": 1.5}}
    job = JobRow(JOB.arn, "nested", 1.0, config, "completed", None)
    s = summarize_records(job, _records()).document()
    assert s["settings"]["success_threshold"] == 1.5
    assert s["metrics"]["eval/reward/succeeded_rollouts"] == 1  # only the 2.0 reward
    assert s["projection"]["steps"] == 300
    assert (
        summarize_records(job, _records(), success_threshold=0.0).settings.success_threshold == 0.0
    )
    Summary.model_validate({**s, "run": {"elapsed_s": 1.5}})


@pytest.mark.parametrize("kind", ["group_based", "rloo"])
def test_nearly_equal_rewards_still_center_exactly(kind: str) -> None:
    """Rewards one ulp apart (where the rounded mean equals one of them) still sum to ~0."""
    adv = group_advantages([100.0, 99.99999999999999], kind)
    assert abs(math.fsum(adv)) <= 1e-15
    assert adv[0] > 0 > adv[1]


def test_summary_schema_tag_is_version_2() -> None:
    """summary.json documents carry the version-2 schema tag (its models: summary_schema)."""
    from agent_kit.reporting import summary_schema

    assert summary_schema.SUMMARY_SCHEMA == "agent_kit.summary/2"


def test_read_summary_trusts_only_a_valid_summary(tmp_path: Path) -> None:
    """read_summary gives the model of a valid summary.json and None for a missing file, bad
    JSON, another schema or an invalid document."""
    path = tmp_path / "summary.json"
    summary = summarize_records(JOB, _records())
    assert read_summary(path) is None
    path.write_text(json.dumps(summary.document()), encoding="utf-8")
    assert read_summary(path) == summary
    path.write_text("{not json", encoding="utf-8")
    assert read_summary(path) is None
    path.write_text(json.dumps({**summary.document(), "schema": "other/2"}), encoding="utf-8")
    assert read_summary(path) is None
    path.write_text(json.dumps({**summary.document(), "counts": {}}), encoding="utf-8")
    assert read_summary(path) is None


def test_summary_accessors_match_the_sections() -> None:
    """The typed accessors count what the sections hold."""
    s = summarize_records(JOB, _records())
    by_state = s.counts.by_state
    assert s.counts.failed_rollouts == by_state.get("FAILED", 0) + by_state.get("TIMED_OUT", 0)
    assert s.counts.timed_out == by_state.get("TIMED_OUT", 0)
    assert s.agent_failure_count == sum(a.count for a in s.agent_failures)
    config = {"steps": 3, "job": {"steps": 5, "group_size": 2}}
    nested = JobRow(JOB.arn, "nested", 1.0, config, "completed", None)
    assert summarize_records(nested, []).flat_config() == {**config, "steps": 5, "group_size": 2}


def test_summary_projection_is_job_plans_rule() -> None:
    """The summary's projection and ``job plan`` of the same job give the same tokens and
    cost: one rule (plan.project_tokens, its p50), stated in the projection's text."""
    from agent_kit.reporting.plan import PROJECTION_RULE, JobShape, plan_job

    records = _records()
    projection = summarize_records(JOB, records, projection_steps=10).projection
    assert projection is not None
    shape = JobShape(
        global_batch_size=projection.batch_size,
        group_size=projection.group_size,
        max_steps=10,
        max_epochs=1,
        rollout_max_concurrency=96,
        rollout_timeout=600,
        sampling_max_tokens=4096,
    )
    plan = plan_job(records, shape, default_pricing())
    for name in ("prefill", "sample", "train"):
        assert projection.tokens[name] == round(plan.tokens[name].p50)
    assert projection.cost.total == pytest.approx(plan.cost["total"].p50, rel=1e-6)
    assert PROJECTION_RULE in projection.text
    assert "(GPT-OSS-20B)" in projection.text
