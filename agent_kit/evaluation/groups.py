"""A grid's group view: two cells' rollouts of one prompt side by side (eval.html).

Every cell's rollouts are read from its run directory (with their turns) and grouped by prompt:
a block per (cell, prompt) for :func:`agent_kit.reporting.group_view.group_view`, whose two
panes show two cells on the prompt the page's select names (the first two cells at first: base
against trained in a checkpoint grid). A cell without a run directory (a job's, or one not
played) has no blocks.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from agent_kit.evaluation.table import GridTable
from agent_kit.reporting.breakdown import prompt_label
from agent_kit.reporting.group_view import GroupBlock, group_block, group_view
from agent_kit.reporting.metrics import build_groups
from agent_kit.reporting.page import section
from agent_kit.store import Rollout, RunStore, load_rollouts, resolve_path

__all__ = ["grid_groups"]


def grid_groups(table: GridTable) -> str:
    """The page's "Groups side by side" section of ``table`` (empty without a played cell)."""
    blocks: list[GroupBlock] = []
    prompts: dict[int, str] = {}
    cells: list[tuple[str, str]] = []
    for row in table.rows:
        location = row.figures.location
        if row.figures.source != "local" or not location:
            continue
        run_dir = Path(location)
        if not resolve_path(run_dir).exists():
            continue
        with RunStore.open(run_dir, readonly=True) as store:
            jobs = store.list_jobs()
            records = load_rollouts(store, jobs[-1].arn, with_turns=True) if jobs else []
        if not records:
            continue
        cells.append((row.cell.id, f"{row.cell.label} ({row.cell.setting_label})"))
        by_prompt: dict[int, list[Rollout]] = defaultdict(list)
        for group in build_groups(records):
            by_prompt[group.prompt_index].extend(group.rollouts)
        for prompt, rollouts in sorted(by_prompt.items()):
            prompts.setdefault(prompt, prompt_label(rollouts[0].prompt) if rollouts else "")
            title = f"{row.cell.label} ({row.cell.setting_label}), prompt {prompt}"
            blocks.append(group_block(f"{row.cell.id}|{prompt}", title, rollouts))
    if not cells:
        return ""
    options = [(str(p), f"{p}: {text}") for p, text in sorted(prompts.items())]
    intro = (
        "<p>Pick a prompt and two cells: each cell's rollouts of that prompt side by side, "
        "with their rewards, reward terms, turns, and what each did at the first turn where "
        "they part.</p>"
    )
    return section("groups", "Groups side by side", intro + group_view(blocks, options, cells))
