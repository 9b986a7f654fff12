"""The trainer side's pure parts: reading a result object, the result cap, result-key claims."""

from __future__ import annotations

import pytest

from agent_kit.driver.trainer_side import (
    DEFAULT_MAX_RESULT_BYTES,
    MAX_RESULT_ENV,
    LocalS3,
    TrainerSide,
    read_result,
)
from agent_kit.errors import UsageError
from agent_kit.settings import Settings


def test_a_null_object_says_it_held_null() -> None:
    """A result object holding JSON null has no rewards, and the reason says it held null."""
    verdict = read_result(None)
    assert verdict.rewards is None
    assert verdict.failure is not None
    assert "held null" in verdict.failure


def test_rewards_whose_sum_overflows_have_no_total() -> None:
    """rewards [1e308, 1e308] are read without raising: no rewards, a reason naming the total."""
    verdict = read_result({"rewards": [1e308, 1e308], "status_code": 200})
    assert verdict.rewards is None
    assert verdict.total is None
    assert verdict.failure is not None
    assert "finite total" in verdict.failure


def test_finite_rewards_have_their_total() -> None:
    """A list of finite rewards is kept with its exact total."""
    verdict = read_result({"rewards": [0.1, 0.2, 0.7]})
    assert verdict.rewards == [0.1, 0.2, 0.7]
    assert verdict.total == 1.0


def test_the_result_cap_comes_from_the_environment() -> None:
    """$AGENT_KIT_MAX_RESULT_BYTES sets the cap (0: none); a malformed value is a UsageError."""
    assert LocalS3().max_bytes == DEFAULT_MAX_RESULT_BYTES == 4 << 20
    assert Settings.from_environ({MAX_RESULT_ENV: "2048"}).max_result_bytes == 2048
    assert LocalS3(2048).max_bytes == 2048
    assert Settings.from_environ({MAX_RESULT_ENV: "0"}).max_result_bytes is None
    for bad in ("lots", "-1"):
        with pytest.raises(UsageError, match=MAX_RESULT_ENV):
            Settings.from_environ({MAX_RESULT_ENV: bad})


def test_a_key_claimed_by_two_rollouts_names_both() -> None:
    """The second rollout to answer a result key learns both owners; a repeat claim is one."""
    side = TrainerSide(LocalS3(), "key", "http://127.0.0.1:1")
    assert side.claim("exp/p0.json", "t1") == ["t1"]
    assert side.claim("exp/p0.json", "t1") == ["t1"]
    assert side.claim("exp/p0.json", "t2") == ["t1", "t2"]
    assert side.claimed_by("exp/p0.json") == ["t1", "t2"]
    assert side.claimed_by("exp/p1.json") == []
