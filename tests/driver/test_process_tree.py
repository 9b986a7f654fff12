"""Memory sizes for ``--agent-memory``, and the resident memory of a process session."""

from __future__ import annotations

import os

import pytest

from agent_kit.driver.invokers.process_tree import parse_memory, session_rss


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("512M", 512 * 2**20),
        ("2G", 2 * 2**30),
        ("1.5GiB", 3 * 2**29),
        ("64kb", 2**16),
        ("100", 100),
    ],
)
def test_memory_sizes_parse_in_powers_of_1024(text: str, size: int) -> None:
    """A number with an optional K/M/G/T suffix is that many bytes (powers of 1024)."""
    assert parse_memory(text) == size


@pytest.mark.parametrize("text", ["", "x", "0", "-1", "5Q", "1.5.2G"])
def test_bad_memory_sizes_are_refused(text: str) -> None:
    """Anything that is not a positive size is a ValueError."""
    with pytest.raises(ValueError, match="memory size"):
        parse_memory(text)


def test_session_rss_counts_this_process() -> None:
    """The resident memory of this process's session includes this process."""
    assert session_rss(os.getsid(0)) > 0
