"""One evaluator: a grid cell's figures are the figures ``train --eval`` reported before it
became a grid, on the same recorded run.

The reference (:func:`_train_eval_figures`) is ``agent_kit/train/evaluate.py``'s
``eval_figures`` as it was before ``train --eval`` went through the grid, kept here verbatim
(its pass@k through ``eval_metrics``, which ``summary.json`` still uses; its failure and cut
phrases moved unchanged to :mod:`agent_kit.evaluation.rollouts`): a real Wordle run of a
scripted policy (agent processes, the emulator on loopback) is read both ways.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from agent_kit.driver.config import RunConfig
from agent_kit.driver.local import play_local
from agent_kit.evaluation.grid import grid_spec
from agent_kit.evaluation.local_cells import cell_config, read_cell
from agent_kit.evaluation.rollouts import holdout_cuts, holdout_failure
from agent_kit.reporting.metrics import build_groups, eval_metrics, mean_and_se
from agent_kit.store import Rollout, RunStore, load_rollouts

pytestmark = pytest.mark.e2e

WORDLE = Path(__file__).resolve().parents[2] / "examples" / "wordle"
SLOPPY = f"scripted:{WORDLE / 'policies.py'}:Sloppy"


def _tool_call_rate(records: list[Rollout]) -> float | None:
    """``train/evaluate.py``'s ``tool_call_rate`` before the grid (the reference)."""
    turns = [row for r in records for row in r.turn_rows]
    if not turns:
        return None
    calls = 0
    for row in turns:
        choices = row.response.get("choices") if isinstance(row.response, dict) else None
        message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        calls += bool(isinstance(message, dict) and message.get("tool_calls"))
    return calls / len(turns)


def _train_eval_figures(run_dir: Path, k: int, max_tokens: int | None) -> dict[str, Any]:
    """``train/evaluate.py``'s ``eval_figures`` before the grid (the reference)."""
    store = RunStore.open(run_dir, readonly=True)
    try:
        job = store.list_jobs()[-1]
        records = load_rollouts(store, job.arn, with_turns=True)
    finally:
        store.close()
    groups = build_groups(records)
    per_prompt: dict[int, list[float]] = defaultdict(list)
    for group in groups:
        per_prompt[group.prompt_index].extend(group.rewards)
        per_prompt[group.prompt_index].extend([0.0] * group.lost)
    mean, se = mean_and_se([math.fsum(v) / len(v) for v in per_prompt.values() if v])
    figures: dict[str, Any] = {
        "mean": mean,
        "se": se,
        "prompts": len(per_prompt),
        "rollouts": sum(len(v) for v in per_prompt.values()),
        "tool_call_rate": _tool_call_rate(records),
        "status": job.status,
        "failure": holdout_failure(records, max_tokens),
        "cut": holdout_cuts(records),
    }
    figures.update(eval_metrics(groups, ks=sorted({1, k})))
    return figures


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three Wordle holdout words played four times each by the sloppy scripted player."""
    folder = tmp_path_factory.mktemp("one")
    data = folder / "three.jsonl"
    rows = (WORDLE / "holdout.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    data.write_text("".join(rows[:3]), encoding="utf-8")
    spec = grid_spec(str(WORDLE / "agent.py"), str(data), [SLOPPY], [], 4, {"temperature": 0.7})
    (cell,) = spec.cells()
    config = cell_config(spec, cell, folder / "eval", RunConfig(workers=1))
    played = play_local(config)
    assert played.result.status == "completed"
    return folder / "eval" / cell.id


def test_the_grid_reads_a_recorded_holdout_as_train_eval_did(recorded: Path) -> None:
    """Mean, SE, prompts, rollouts, pass@1, pass@4, tool-call rate, the failure and cut
    phrases: the grid's cell figures equal the old holdout figures of the same store."""
    old = _train_eval_figures(recorded, 4, 128)
    new = read_cell(recorded, 4, 1.0)
    assert new is not None
    assert new.state == old["status"] == "completed"
    assert new.mean == pytest.approx(old["mean"])
    assert new.se == pytest.approx(old["se"])
    assert (new.prompts, new.n) == (old["prompts"], old["rollouts"]) == (3, 12)
    assert new.pass_at_k[1] == pytest.approx(old["eval/reward/pass_at_1"])
    assert new.pass_at_k[4] == pytest.approx(old["eval/reward/pass_at_4"])
    assert new.tool_call_rate == pytest.approx(old["tool_call_rate"])
    assert (new.failure, new.cut) == (old["failure"], old["cut"])
    assert set(new.per_prompt) == {"0", "1", "2"}


def test_the_game_declares_its_own_figures(recorded: Path) -> None:
    """Wordle's environment records ``solved`` and ``valid_guess_rate`` with every rollout;
    the cell's ``solved`` is the share of its rollouts with a solving reward (≥ 1)."""
    with RunStore.open(recorded, readonly=True) as store:
        records = load_rollouts(store, store.list_jobs()[-1].arn)
    assert all(set(r.task_metrics) == {"solved", "valid_guess_rate"} for r in records)
    cell = read_cell(recorded, 4, 1.0)
    assert cell is not None
    solved = [sum(r.reward >= 1.0 for r in records if r.prompt_index == p) / 4 for p in range(3)]
    assert cell.task["solved"] == pytest.approx(sum(solved) / 3)
    assert 0.0 < cell.task["valid_guess_rate"] <= 1.0
