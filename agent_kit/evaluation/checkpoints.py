"""A training run's checkpoints as the grid's policies (``agent-kit eval --checkpoints``).

``agent-kit train`` saves the adapter after every step (``RUN_DIR/adapters/step-NNNN``, steps
from 0) and, after a warm start, ``adapters/warm``. ``--checkpoints RUN_DIR[:SELECTION]`` makes
them policies of the grid, each an ``hf:MODEL+ADAPTER`` spec on the run's model (its
``train_config.json``), beside the base model (``hf:MODEL``), all played at the grid's settings:

- ``RUN_DIR`` or ``RUN_DIR:all``: every saved step;
- ``RUN_DIR:every=N``: every Nth step (steps N−1, 2N−1, …: N, 2N … updates) and the last one;
- ``RUN_DIR:steps=0,4,9``: the named steps (a step that was not saved is refused, naming those
  that were).

Their labels are ``base``, ``warm`` and ``step-NNNN``. A checkpoint's step is read back from its
spec (:func:`checkpoint_step`), so the table and the page draw the holdout reward against the
step and mark the best one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent_kit.errors import UsageError
from agent_kit.store.layout import RunLayout

__all__ = ["BASE_LABEL", "WARM_LABEL", "Checkpoints", "checkpoint_step", "parse_checkpoints"]

#: The labels of the base model and of the warm-start adapter.
BASE_LABEL: Final = "base"
WARM_LABEL: Final = "warm"
_STEP: Final = re.compile(r"step-(\d+)\Z")
_SELECTION: Final = re.compile(r"(all|every=\d+|steps=[\d,\s]+)\Z")


def checkpoint_step(policy: str) -> int | None:
    """The training step of an ``hf:MODEL+…/step-NNNN`` policy spec (its adapter folder), None
    for any other spec."""
    scheme, _, rest = policy.strip().partition(":")
    if scheme != "hf" or "+" not in rest:
        return None
    found = _STEP.match(Path(rest.partition("+")[2].rstrip("/")).name)
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class Checkpoints:
    """The policies a ``--checkpoints`` value gives: specs in order (base, warm, steps), their
    labels, the run's entrypoint and holdout (when it recorded them)."""

    policies: tuple[str, ...]
    names: dict[str, str]
    entrypoint: str | None
    holdout: str | None

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """Every checkpoint (and the warm start) against the base: the table's differences."""
        return [(label, BASE_LABEL) for label in self.names.values() if label != BASE_LABEL]


def _saved(run_dir: Path) -> dict[int, Path]:
    """The run's complete step adapters by step."""
    out: dict[int, Path] = {}
    adapters = RunLayout(run_dir).adapters
    for folder in adapters.glob("step-*") if adapters.is_dir() else ():
        found = _STEP.match(folder.name)
        if found and (folder / "adapter_config.json").is_file():
            out[int(found.group(1))] = folder
    return dict(sorted(out.items()))


def _chosen(selection: str, saved: dict[int, Path], text: str) -> list[int]:
    steps = list(saved)
    if selection == "all":
        return steps
    if selection.startswith("every="):
        every = int(selection.partition("=")[2])
        if every < 1:
            raise UsageError(f"--checkpoints {text}: every=N needs N ≥ 1")
        return sorted({s for s in steps if (s + 1) % every == 0} | {steps[-1]})
    wanted = [int(p) for p in selection.partition("=")[2].replace(" ", "").split(",") if p]
    missing = [s for s in wanted if s not in saved]
    if missing or not wanted:
        raise UsageError(
            f"--checkpoints {text}: no saved adapter for step {', '.join(map(str, missing))} "
            f"(saved: {', '.join(map(str, steps))})"
        )
    return sorted(set(wanted))


def parse_checkpoints(text: str) -> Checkpoints:
    """The policies of ``RUN_DIR[:all|:every=N|:steps=A,B]`` (module docstring); UsageError
    for a folder that is not a training run, a run without saved adapters or a bad
    selection."""
    where, colon, selection = text.rpartition(":")
    if not colon or not _SELECTION.match(selection.strip()):
        where, selection = text, "all"
    run_dir = Path(where)
    layout = RunLayout(run_dir)
    try:
        recorded = json.loads(layout.train_config.read_text(encoding="utf-8"))
        model = str(recorded["model"])
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError(
            f"--checkpoints {text}: {run_dir} is not an agent-kit train run (no readable "
            f"{layout.train_config.name})"
        ) from None
    saved = _saved(run_dir)
    if not saved:
        raise UsageError(f"--checkpoints {text}: {run_dir} holds no saved adapter yet")
    base = f"hf:{model}"
    names = {base: BASE_LABEL}
    if (layout.warm_adapter / "adapter_config.json").is_file():
        names[f"{base}+{layout.warm_adapter}"] = WARM_LABEL
    for step in _chosen(selection.strip(), saved, text):
        names[f"{base}+{saved[step]}"] = saved[step].name
    entrypoint, holdout = recorded.get("entrypoint"), recorded.get("eval")
    return Checkpoints(
        tuple(names),
        names,
        str(entrypoint) if entrypoint else None,
        str(holdout) if holdout else None,
    )
