"""The ``hf`` backend on the tiny model, shared by the sampler's tests (batching, prefix reuse)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_kit.emulator.policies import load_policy
from agent_kit.emulator.policies.hf import HFPolicyBackend


@pytest.fixture(scope="module")
def backend(tiny_model: Path) -> Iterator[HFPolicyBackend]:
    """The hf backend on the tiny model (batching on: up to 32 turns together); its
    ``sampler`` is the one-sequence reference the batched turns are checked against."""
    policy = load_policy(f"hf:{tiny_model}")
    assert isinstance(policy, HFPolicyBackend)
    yield policy
    asyncio.run(policy.aclose())
