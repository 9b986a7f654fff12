"""Shared fixtures for the project's tests: the project directory, dataset rows, the CLI."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

PROJECT_DIR = Path(__file__).resolve().parent.parent


def _load_tasks(split: str) -> list[dict[str, Any]]:
    path = PROJECT_DIR / "data" / f"{split}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [json.loads(row["prompt"]) for row in rows]


@pytest.fixture
def project_dir() -> Path:
    """The project's root directory (where agent.py lives)."""
    return PROJECT_DIR


@pytest.fixture
def train_tasks() -> list[dict[str, Any]]:
    """The task objects packed into data/train.jsonl's prompts."""
    return _load_tasks("train")


@pytest.fixture
def holdout_tasks() -> list[dict[str, Any]]:
    """The task objects packed into data/holdout.jsonl's prompts."""
    return _load_tasks("holdout")


@pytest.fixture
def agent_kit_cli() -> list[str]:
    """The ``agent-kit`` command of the environment running the tests."""
    exe = shutil.which("agent-kit", path=str(Path(sys.executable).parent)) or shutil.which(
        "agent-kit"
    )
    assert exe, "agent-kit is not installed in this environment (see README.md)"
    return [exe]
