"""The one LoRA configuration the warm start and GRPO share."""

from __future__ import annotations

import pytest

import agent_kit.model

pytest.importorskip("peft")  # imported at collection: it is the train extra's


def test_one_lora_configuration_for_the_warm_start_and_grpo() -> None:
    """The adapter wraps the attention projections at the given rank, alpha twice the rank
    unless given."""
    config = agent_kit.model.lora_config(8)
    assert set(config.target_modules) == set(agent_kit.model.LORA_TARGETS)
    assert (config.r, config.lora_alpha, config.lora_dropout) == (8, 16, 0.0)
    assert agent_kit.model.lora_config(4, 32).lora_alpha == 32
