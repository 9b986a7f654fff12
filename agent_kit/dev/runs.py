"""The dev loop's directories: one per iteration, numbered, the last few kept.

Under ``--out`` (default ``runs/dev``) iteration N is ``dev-NNNN/``: the run directory of its
grid (``run.sqlite``, ``summary.json``, ``report.html``, as ``agent-kit run`` leaves one, so
``agent-kit report`` and ``agent-kit replay`` read it) with the iteration's ``verdict.json``;
with a baseline, its replay is ``dev-NNNN-replay/`` beside it (``replay_report.json``). An
iteration whose code did not load holds only its ``verdict.json``. ``agents/`` holds the kept
agent processes' logs. Numbers go on from the highest one found, so a new loop in the same
folder never overwrites an older iteration; :func:`prune` removes all but the last ``keep``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Final

__all__ = [
    "AGENT_LOGS",
    "VERDICT_FILE",
    "iteration_dir",
    "next_number",
    "prune",
    "replay_dir",
]

#: The verdict of an iteration, in its directory.
VERDICT_FILE: Final = "verdict.json"
#: The kept agents' logs, under ``--out``.
AGENT_LOGS: Final = "agents"
_PREFIX: Final = "dev-"
_ITERATION: Final = re.compile(r"^dev-(\d{4,})(-replay)?$")


def iteration_dir(out: Path, number: int) -> Path:
    """Iteration ``number``'s directory (its name is also its grid's job name)."""
    return out / f"{_PREFIX}{number:04d}"


def replay_dir(out: Path, number: int) -> Path:
    """Where iteration ``number``'s baseline replay is written."""
    return out / f"{_PREFIX}{number:04d}-replay"


def _numbered(out: Path) -> dict[int, list[Path]]:
    found: dict[int, list[Path]] = {}
    if not out.is_dir():
        return found
    for child in out.iterdir():
        match = _ITERATION.match(child.name)
        if match and child.is_dir():
            found.setdefault(int(match.group(1)), []).append(child)
    return found


def next_number(out: Path) -> int:
    """The number the next iteration takes in ``out``: one past the highest there."""
    return max(_numbered(out), default=0) + 1


def prune(out: Path, keep: int, protect: Path | None = None) -> list[Path]:
    """Remove the directories of all but the last ``keep`` iterations in ``out`` (never
    ``protect``, the baseline); returns what was removed."""
    numbered = _numbered(out)
    removed: list[Path] = []
    keep_from = sorted(numbered)[-keep:][0] if keep > 0 and numbered else None
    guarded = protect.resolve() if protect is not None else None
    for number, folders in sorted(numbered.items()):
        if keep_from is not None and number >= keep_from:
            continue
        for folder in folders:
            if guarded is not None and folder.resolve() == guarded:
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed
