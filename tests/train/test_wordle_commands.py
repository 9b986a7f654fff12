"""The documented Wordle commands are the measured ones: docs/train.md's two Wordle lines are
exactly the commands bench/train_wordle.py runs with its defaults (so the bench's figures can be
reproduced from the page), every dataset they name is shipped, and each line states its time."""

from __future__ import annotations

import re
import runpy
import shlex
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "train.md"


def _bench() -> dict[str, Any]:
    """bench/train_wordle.py's names (run as a module, not as the script)."""
    return runpy.run_path(str(ROOT / "bench" / "train_wordle.py"), run_name="bench_train_wordle")


def _documented() -> list[list[str]]:
    """The ``agent-kit`` commands of the page's Wordle block (the one that trains on the seeded
    positions), continuation lines joined and comments dropped."""
    text = DOCS.read_text(encoding="utf-8")
    blocks = re.findall(r"```\n(.*?)```", text, re.DOTALL)
    (block,) = [b for b in blocks if "agent-kit train examples/wordle/agent.py" in b]
    joined = re.sub(r"\\\n\s*", " ", block)
    return [shlex.split(line, comments=True) for line in joined.splitlines() if line.strip()]


def test_the_pages_wordle_lines_are_the_benchs_commands() -> None:
    """With its defaults the bench runs exactly the page's two lines (same flags, same order),
    writing under ``runs/`` as the pasted lines do."""
    bench = _bench()
    expected = [["agent-kit", *cmd] for cmd in bench["commands"](bench["parser"]().parse_args([]))]
    assert _documented() == expected


def test_the_documented_lines_name_shipped_files_and_state_their_time() -> None:
    """Every path the lines name is in the repository (the warm start's run aside), and the
    page says how long each takes on 2 cores next to them."""
    for command in _documented():
        for word in command:
            if word.startswith("examples/"):
                path = word.split(":")[1] if word.startswith("scripted:") else word
                assert (ROOT / path).is_file(), word
    text = DOCS.read_text(encoding="utf-8")
    start = text.index(
        "agent-kit run examples/wordle/agent.py --dataset examples/wordle/train_seeded"
    )
    nearby = text[start - 1500 : start + 2500]
    assert "2 cores" in nearby
    assert re.search(r"record(s|ing)? .*(min|minutes)", nearby, re.IGNORECASE | re.DOTALL)
