"""pytest plugin (entry point ``pytest11``): fixtures from :mod:`agent_kit.testing`.

Fixtures are imported lazily so that merely having agent_kit installed costs a pytest run
nothing (no Strands import) unless a test asks for one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["agent_kit_episode", "agent_kit_replay"]


@pytest.fixture
def agent_kit_episode() -> Callable[..., dict[str, Any]]:
    """``agent_kit.testing.run_episode``: play one episode of an entrypoint in-process."""
    from agent_kit.testing import run_episode

    return run_episode


@pytest.fixture
def agent_kit_replay() -> Callable[..., Any]:
    """``agent_kit.testing.assert_replays``: fails unless a recording replays identically."""
    from agent_kit.replay.helpers import assert_replays

    return assert_replays
