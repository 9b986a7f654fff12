"""Paired differences of two cells, checked against figures computed by hand."""

from __future__ import annotations

import math

import pytest

from agent_kit.reporting.paired import (
    Difference,
    detectable_difference,
    difference,
    paired_sd,
    prompts_needed,
)


def test_paired_difference_matches_hand_computed_figures() -> None:
    """Same prompts: d = (0.2, 0.1, 0.3) → mean 0.2, sd 0.1, SE 0.1/√3."""
    a = {"p1": 0.9, "p2": 0.5, "p3": 0.4}
    b = {"p1": 0.7, "p2": 0.4, "p3": 0.1}
    found = difference(a, b)
    assert found is not None
    assert found.paired
    assert found.prompts == 3
    assert found.mean == pytest.approx(0.2)
    assert found.se == pytest.approx(0.1 / math.sqrt(3))
    # unpaired beside it: SE_a = sd(0.9, 0.5, 0.4)/√3, SE_b = sd(0.7, 0.4, 0.1)/√3
    se_a = math.sqrt(((0.3) ** 2 + (0.1) ** 2 + (0.2) ** 2) / 2) / math.sqrt(3)
    se_b = math.sqrt(((0.3) ** 2 + 0 + (0.3) ** 2) / 2) / math.sqrt(3)
    assert found.unpaired_se == pytest.approx(math.hypot(se_a, se_b))


def test_pairing_turns_noise_into_a_finding() -> None:
    """Prompts of very different difficulty, B always 0.1 below A: unpaired the difference is
    within noise, paired it is far beyond two SE."""
    a = {"easy": 0.95, "mid": 0.55, "hard": 0.15, "harder": 0.05}
    b = {key: value - 0.1 for key, value in a.items()}
    b["mid"] -= 0.02  # not exactly constant, so the paired SE is not zero
    found = difference(a, b)
    assert found is not None
    assert found.paired
    assert found.unpaired_se is not None
    assert found.se is not None
    assert abs(found.mean) < 2 * found.unpaired_se  # unpaired: noise
    assert found.beyond() is True  # paired: a finding
    assert found.se < found.unpaired_se / 10


def test_different_prompts_are_compared_unpaired() -> None:
    """Cells over different prompts: mean(a) − mean(b) with √(SE_a² + SE_b²), not paired."""
    a = {"p1": 1.0, "p2": 0.0}
    b = {"p3": 0.5, "p4": 0.5, "p5": 0.5}
    found = difference(a, b)
    assert found is not None
    assert not found.paired
    assert found.mean == pytest.approx(0.0)
    assert found.se == pytest.approx(math.hypot(math.sqrt(0.5) / math.sqrt(2), 0.0))
    assert found.prompts == 2


def test_one_prompt_has_no_se_and_no_verdict() -> None:
    """One shared prompt: a difference, no SE, no verdict; an empty cell: no difference."""
    found = difference({"p": 1.0}, {"p": 0.0})
    assert found == Difference(1.0, None, None, True, 1)
    assert found.beyond() is None
    assert difference({}, {"p": 0.0}) is None


def test_zero_se_verdict_is_whether_the_difference_is_zero() -> None:
    """A constant non-zero per-prompt difference is beyond any multiple of a zero SE; no
    difference at all is not."""
    assert Difference(0.1, 0.0, 0.2, True, 3).beyond() is True
    assert Difference(0.0, 0.0, 0.0, True, 3).beyond() is False


def test_power_formulas_match_hand_computed_figures() -> None:
    """sd 0.3 over 36 prompts: 2·0.3/6 = 0.1 detectable; a target of 0.1 needs
    ceil((2.8·0.3/0.1)²) = ceil(70.56) = 71 prompts."""
    assert detectable_difference(0.3, 36) == pytest.approx(0.1)
    assert prompts_needed(0.1, 0.3) == 71
    assert prompts_needed(-0.1, 0.3) == 71
    assert prompts_needed(1.0, 0.0) == 2
    with pytest.raises(ValueError, match="target"):
        prompts_needed(0.0, 0.3)
    with pytest.raises(ValueError, match="prompts"):
        detectable_difference(0.3, 0)


def test_paired_sd_of_a_pilot() -> None:
    """The spread of the per-prompt differences over the shared prompts only."""
    a = {"p1": 0.9, "p2": 0.5, "p3": 0.4, "extra": 1.0}
    b = {"p1": 0.7, "p2": 0.4, "p3": 0.1}
    assert paired_sd(a, b) == pytest.approx(0.1)
    assert paired_sd({"p": 1.0}, {"p": 0.0}) is None
