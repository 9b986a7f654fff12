"""Fixtures of the training tests: one tiny random model per test session (see hf_tiny)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hf_tiny import build_tiny_model


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama with SmolLM2's tokenizer, as a Hugging Face model directory."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
