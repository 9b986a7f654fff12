"""Reward composition: weighted components, finiteness, floors and wire values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_kit import Component, Reward
from agent_kit.errors import RewardError


def test_weighted_sums_contributions_and_tags_outcome_terms() -> None:
    """weighted() sums value×weight and marks names starting with 'outcome' as outcome terms."""
    reward = Reward.weighted(outcome=(1.0, 1.0), efficiency=(-0.3, 0.1))
    assert reward.total == pytest.approx(0.97)
    assert reward.components["outcome"].kind == "outcome"
    assert reward.components["efficiency"].kind == "strategy"
    breakdown = reward.breakdown()
    assert breakdown["efficiency"]["contribution"] == pytest.approx(-0.03)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_components_are_rejected(bad: float) -> None:
    """A NaN or infinite component raises RewardError instead of reaching the service."""
    with pytest.raises(RewardError, match="not finite"):
        Reward.weighted(outcome=(bad, 1.0))


def test_non_numeric_return_is_rejected() -> None:
    """Reward.of refuses values that are neither a Reward nor a number."""
    with pytest.raises(RewardError, match="must return a Reward or a number"):
        Reward.of("1.0")  # type: ignore[arg-type]
    with pytest.raises(RewardError):
        Reward.of(True)


def test_per_turn_must_sum_to_total_and_goes_on_the_wire() -> None:
    """Per-turn rewards must add up to the total; they are sent when their count matches turns."""
    reward = Reward(total=1.0, per_turn=[0.25, 0.75])
    assert reward.wire_values(2) == [0.25, 0.75]
    assert reward.wire_values(3) == [1.0]
    with pytest.raises(RewardError, match="sum to"):
        Reward(total=2.0, per_turn=[0.25, 0.75])


def test_floor_reward_is_flagged_with_its_reason() -> None:
    """The floor reward records that it is a floor and why."""
    floor = Reward.floor_reward(-1.5, "policy: timeout")
    assert floor.floor
    assert floor.total == -1.5
    assert floor.reason == "policy: timeout"


def test_explicit_components_keep_their_kind() -> None:
    """A Component passed to weighted() keeps its own kind and weight."""
    reward = Reward.weighted(speed=Component(2.0, 0.5, "outcome"))
    assert reward.total == pytest.approx(1.0)
    assert reward.components["speed"].kind == "outcome"


@given(
    st.dictionaries(
        st.from_regex(r"[a-z]{1,8}", fullmatch=True),
        st.tuples(st.floats(-1e6, 1e6, allow_nan=False), st.floats(-10, 10, allow_nan=False)),
        max_size=6,
    )
)
def test_total_is_the_sum_of_contributions(terms: dict[str, tuple[float, float]]) -> None:
    """For any finite terms the total equals the sum of weight×value."""
    reward = Reward.weighted(**terms)
    expected = math.fsum(v * w for v, w in terms.values())
    assert reward.total == pytest.approx(expected, rel=1e-9, abs=1e-9)
