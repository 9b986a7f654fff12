"""How many prompts are enough (``agent-kit eval --plan --pilot …|--spread SD [--target D]``).

Two cells compared on the same P prompts are compared by their per-prompt differences ``d_i``
(:mod:`agent_kit.reporting.paired`); with their standard deviation σ_d, the difference's SE is
``σ_d/√P``, so the smallest difference the grid shows beyond two SE is ``2σ_d/√P``
(:func:`~agent_kit.reporting.paired.detectable_difference`) and a target difference D is found
with 80 % power at the 5 % level by ``P ≈ (2.8σ_d/D)²`` prompts
(:func:`~agent_kit.reporting.paired.prompts_needed`).

σ_d depends on the samples per prompt k: each prompt's mean over k rollouts carries sampling
noise of variance ``s²/k`` (s² the variance of one prompt's rollout rewards), and the two
policies may differ by more on some prompts than on others (variance τ²):
``σ_d² = τ² + (s_A² + s_B²)/k``. It comes from

- ``--spread SD``: stated (σ_d at the grid's k);
- ``--pilot EVAL_DIR`` (a finished grid with two played cells): the first two cells' paired
  standard deviation at the pilot's k_p, ``σ_p``, gives ``τ² = max(0, σ_p² − (s_A² + s_B²)/k_p)``
  and σ_d at the grid's k;
- ``--pilot RUN_DIR`` (one finished cell or run): its rollouts' mean within-prompt variance s²
  with τ² = 0 (both policies alike, differing by the same amount on every prompt): ``σ_d =
  √(2s²/k)``, a lower bound — a pilot of two cells is better.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_kit.errors import UsageError
from agent_kit.evaluation.grid import GRID_SCHEMA
from agent_kit.reporting.metrics import build_groups
from agent_kit.reporting.paired import detectable_difference, paired_sd, prompts_needed
from agent_kit.store import RunStore, load_rollouts, resolve_path

__all__ = ["Spread", "pilot_spread", "power_plan"]


@dataclass(frozen=True)
class Spread:
    """σ_d at the grid's samples per prompt, and where it comes from (one phrase)."""

    sd: float
    source: str


def _rewards(run_dir: Path) -> dict[str, list[float]]:
    """A run's rewards by prompt (its slots' rollouts; a lost slot counts 0)."""
    with RunStore.open(run_dir, readonly=True) as store:
        jobs = store.list_jobs()
        records = load_rollouts(store, jobs[-1].arn) if jobs else []
    out: dict[str, list[float]] = defaultdict(list)
    for group in build_groups(records):
        out[str(group.prompt_index)] += group.rewards + [0.0] * group.lost
    return {p: rs for p, rs in out.items() if rs}


def _within(rewards: dict[str, list[float]]) -> float | None:
    """The mean over prompts of the sample variance of one prompt's rewards (None: no prompt
    with two rollouts)."""
    variances = []
    for rs in rewards.values():
        if len(rs) >= 2:
            mean = math.fsum(rs) / len(rs)
            variances.append(math.fsum((r - mean) ** 2 for r in rs) / (len(rs) - 1))
    return math.fsum(variances) / len(variances) if variances else None


def _means(rewards: dict[str, list[float]]) -> dict[str, float]:
    return {p: math.fsum(rs) / len(rs) for p, rs in rewards.items()}


def _cells(pilot: Path) -> list[Path]:
    """The played cells of an eval directory, in the grid's order."""
    try:
        grid = json.loads((pilot / "grid.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UsageError(f"--pilot {pilot}: its grid.json cannot be read") from None
    if not isinstance(grid, dict) or grid.get("schema") != GRID_SCHEMA:
        raise UsageError(f"--pilot {pilot}: not an agent-kit eval directory")
    ids = [str(c.get("id")) for c in grid.get("cells") or [] if isinstance(c, dict)]
    return [pilot / i for i in ids if resolve_path(pilot / i).exists()]


def pilot_spread(pilot: Path, samples: int) -> Spread:
    """σ_d at ``samples`` per prompt from a pilot (module docstring): an eval directory with
    two played cells, or one run directory; UsageError for one without rewards."""
    if (pilot / "grid.json").is_file():
        played = [(cell, r) for cell in _cells(pilot) if (r := _rewards(cell))]
        if len(played) < 2:
            raise UsageError(f"--pilot {pilot}: needs two played cells (it has {len(played)})")
        (cell_a, a), (cell_b, b) = played[:2]
        sd = paired_sd(_means(a), _means(b))
        if sd is None:
            raise UsageError(f"--pilot {pilot}: its cells share fewer than two prompts")
        k_pilot = max(len(rs) for rs in a.values())
        noise = (_within(a) or 0.0) + (_within(b) or 0.0)
        tau = max(0.0, sd * sd - noise / k_pilot)
        return Spread(
            math.sqrt(tau + noise / samples),
            f"{cell_a.name} − {cell_b.name} of {pilot}: sd of the per-prompt differences "
            f"{sd:.3f} over {len(a)} prompts × {k_pilot} samples",
        )
    if not resolve_path(pilot).exists():
        raise UsageError(f"--pilot {pilot}: no run store or eval directory there")
    within = _within(_rewards(pilot))
    if within is None:
        raise UsageError(f"--pilot {pilot}: no prompt with two rewarded rollouts")
    return Spread(
        math.sqrt(2 * within / samples),
        f"{pilot}: within-prompt sd {math.sqrt(within):.3f}, the policies assumed to differ "
        "by the same amount on every prompt (a lower bound: a pilot of two cells is better)",
    )


def power_plan(spread: Spread, prompts: int, target: float | None) -> dict[str, Any]:
    """The plan's ``power`` part: σ_d and its source, the difference the grid detects at two
    SE over ``prompts``, and with ``target`` the prompts that find it (80 % power, 5 %)."""
    out: dict[str, Any] = {
        "spread": spread.sd,
        "source": spread.source,
        "prompts": prompts,
        "detectable_difference": detectable_difference(spread.sd, prompts),
        "target": target,
        "prompts_needed": None,
    }
    if target is not None:
        out["prompts_needed"] = prompts_needed(target, spread.sd)
    return out
