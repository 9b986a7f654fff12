"""What a group can teach, from plain records (no model): its rollouts' outcomes, the group's
signal, a step's shares, the outcome gate's advantages, the preflight's shaping warning, and the
small rules of dynamic sampling and the prompt filter."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from agent_kit.reporting.metrics import build_groups
from agent_kit.reward import Reward
from agent_kit.store import RewardRow, Rollout, TrajectoryRow
from agent_kit.train.outcomes import (
    gated_advantages,
    group_outcomes,
    group_signal,
    outcome_terms,
    signal_shares,
)
from agent_kit.train.preflight import Preflight
from agent_kit.train.prompt_filter import kept_prompts
from agent_kit.train.provenance import AdapterLedger, stale_line, unmoved_line
from agent_kit.train.refill import Refill, fresh_prompts, has_signal
from agent_kit.train.warm import estimate_seconds


def _rollout(
    prompt: int,
    sample: int,
    total: float,
    breakdown: Reward | None = None,
    *,
    floor: bool = False,
    adapter: str | None = None,
) -> Rollout:
    """A rewarded rollout of step 0 whose agent answered with ``breakdown``'s components (a
    plain number without one; the floor with ``floor``)."""
    tid = f"t-{prompt}-{sample}"
    row = TrajectoryRow(
        tid, "arn", "REWARDED", "p", step=0, prompt_index=prompt, sample_index=sample,
        adapter=adapter,
    )  # fmt: skip
    body: dict[str, Any] = {"reward": total}
    if breakdown is not None:
        body["reward_breakdown"] = breakdown.breakdown()
    if floor:
        body.update(floor_reward=True, failure={"boundary": "agent", "reason": "boom"})
    reward = RewardRow(tid, [total], total, None, None, 0.0)
    return Rollout(row, reward, invocation={"status": "ok", "body": body})


def _wordle(outcome: float, shaping: float) -> Reward:
    return Reward.weighted(outcome=(outcome, 1.0), strategy=(shaping, 0.15))


def _group(*rollouts: Rollout) -> Any:
    (group,) = build_groups(rollouts)
    return group


def test_declared_outcome_terms_are_the_outcome_and_a_floor_keeps_its_total() -> None:
    """A Reward with an outcome term: the outcome is that term; a floor reward in the group
    (no breakdown) is its total, the worst outcome."""
    a = _rollout(0, 0, -0.5 + 0.15 * 0.4, _wordle(-0.5, 0.4))
    b = _rollout(0, 1, -1.5, floor=True)
    assert outcome_terms(a) == pytest.approx(-0.5)
    assert outcome_terms(b) is None
    assert group_outcomes([a, b], 1.0) == pytest.approx([-0.5, -1.5])


def test_without_declared_terms_the_outcome_is_success_at_the_threshold() -> None:
    """Plain-number rewards: the outcome is 1 at or above the success threshold, else 0."""
    rollouts = [_rollout(0, 0, 0.6), _rollout(0, 1, 1.0), _rollout(0, 2, 0.4)]
    assert group_outcomes(rollouts, 1.0) == [0.0, 1.0, 0.0]


def test_groups_are_all_equal_shaping_only_or_differ_in_outcome() -> None:
    """Equal rewards: all equal; rewards that differ only by shaping: shaping; a solve beside a
    loss: outcome. The shares count them, and the gate gives shaping-only groups no advantage."""
    equal = _group(_rollout(0, 0, 0.3), _rollout(0, 1, 0.3))
    shaping = _group(
        _rollout(1, 0, -0.5 + 0.15 * 0.2, _wordle(-0.5, 0.2)),
        _rollout(1, 1, -0.5 + 0.15 * 0.6, _wordle(-0.5, 0.6)),
    )
    outcome = _group(
        _rollout(2, 0, 1.25 + 0.04 * 0.3, _wordle(1.25, 0.3)),
        _rollout(2, 1, -0.5 + 0.15 * 0.6, _wordle(-0.5, 0.6)),
    )
    assert [group_signal(g, 1.0) for g in (equal, shaping, outcome)] == [
        "equal",
        "shaping",
        "outcome",
    ]
    shares = signal_shares([equal, shaping, outcome], 1.0)
    assert (shares.groups, shares.equal, shares.shaping, shares.outcome) == (3, 1, 1, 1)
    assert shares.metrics() == pytest.approx(
        {"train/signal/all_equal": 1 / 3, "train/signal/shaping_only": 1 / 3}
    )
    assert "1 of 3 groups all equal, 1 shaping only" in shares.phrase()
    assert any(a != 0 for a in shaping.advantages)  # the service's advantages follow the shaping
    assert gated_advantages(shaping, 1.0) == (0.0, 0.0)
    gated = gated_advantages(outcome, 1.0)
    assert gated[0] > 0 > gated[1]
    assert has_signal(shaping, lambda g: g.advantages)
    assert not has_signal(shaping, lambda g: gated_advantages(g, 1.0))
    assert not has_signal(None, lambda g: g.advantages)


def test_the_preflight_warns_when_shaping_dominates_and_the_gate_counts_it_as_nothing() -> None:
    """Most probe groups differing only by shaping: a warning naming --outcome-gate; with the
    gate on, all-equal plus shaping-only groups leave nothing to learn."""
    probe = Preflight(
        groups=4,
        equal_groups=1,
        rollouts=16,
        reward_min=-0.6,
        reward_max=-0.4,
        tool_call_rate=1.0,
        success_threshold=1.0,
        shaping_groups=3,
    )
    assert probe.shaping_dominates
    assert not probe.nothing_to_learn
    assert "shaping dominates the outcome" in probe.line()
    assert "--outcome-gate" in probe.line()
    gated = replace(probe, outcome_gate=True)
    assert gated.nothing_to_learn
    assert "outcomes alike" in gated.line()


def test_dynamic_sampling_reads_fresh_prompts_past_the_step_and_says_what_it_did() -> None:
    """Fresh prompts skip the step's own (unless there is no other) and cycle the dataset; the
    phrase names the dropped groups, the prompts, the rounds and the places left empty."""
    assert fresh_prompts([0, 1], 5, 4, 3) == [4, 2, 3]
    assert fresh_prompts([0, 1], 2, 0, 3) == [0, 1, 0]
    refill = Refill(places=4, dropped=2, cap=3, prompts=3, rounds=2)
    assert refill.phrase() == (
        "dynamic sampling: 2 of 4 groups without signal dropped, 3 extra prompts in 2 rounds "
        "(cap 3), 0 places filled, 2 left empty"
    )
    assert refill.metrics()["train/refill/prompts"] == 3.0


def test_the_prompt_filter_keeps_the_prompts_solved_sometimes() -> None:
    """Always solved and never solved prompts are dropped; the rest kept in dataset order."""
    verdict = kept_prompts(
        {0: [True, True], 1: [False, False], 2: [True, False], 3: [False, True]}, 2
    )
    assert verdict.kept == (2, 3)
    assert (verdict.always, verdict.never) == (1, 1)
    assert verdict.line().startswith("prompt filter: 2 of 4 prompts solved sometimes")
    assert verdict.to_dict() == {"prompts": 4, "plays": 2, "always": 1, "never": 1, "kept": 2}


def test_adapters_are_named_by_their_weights_and_stale_ones_are_warned_about() -> None:
    """The ledger names a digest it recorded (by its latest name: unmoved weights are the same
    policy) and calls others unknown; a step whose rollouts name another adapter than the
    expected one gets a warning, as does an unmoved update."""
    ledger = AdapterLedger()
    ledger.record("base", "aa")
    ledger.record("step-0000", "bb")
    assert (ledger.label_of("aa"), ledger.label_of("bb"), ledger.latest) == (
        "base",
        "step-0000",
        "step-0000",
    )
    assert ledger.label_of("cc") == "unknown"
    ledger.record("step-0001", "bb")  # an update that did not move the weights
    assert (ledger.label_of("bb"), ledger.latest) == ("step-0001", "step-0001")
    assert stale_line(1, "step-0000", ["step-0000", "step-0000"]) is None
    line = stale_line(1, "step-0000", ["base", "step-0000", None])
    assert line is not None
    assert line.startswith("warning: step 1: 2 rollouts")
    assert "base ×1" in line
    assert "unknown ×1" in line
    assert "did not move (every advantage was 0)" in unmoved_line(3, "every advantage was 0")


def test_the_warm_start_guess_scales_with_the_model_and_is_none_on_an_accelerator() -> None:
    """Twice the parameters, twice the guess; twice the epochs too; no guess on a GPU."""
    one = estimate_seconds(47_516, 1, 135_000_000, "cpu")
    assert one is not None
    assert one > 0
    assert estimate_seconds(47_516, 1, 270_000_000, "cpu") == pytest.approx(2 * one)
    assert estimate_seconds(47_516, 2, 135_000_000, "cpu") == pytest.approx(2 * one)
    assert estimate_seconds(47_516, 1, 135_000_000, "cuda") is None
