"""The table's figures against values computed by hand: SE over prompts, success rate, pass@k,
the difference of two cells and its standard error; the grid's cells and comparisons."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
from rich.console import Console

from agent_kit.driver.config import RunConfig
from agent_kit.errors import UsageError
from agent_kit.evaluation.figures import CellFigures, difference, reward_figures
from agent_kit.evaluation.grid import grid_spec, parse_axis, policy_label
from agent_kit.evaluation.local_cells import cell_config
from agent_kit.evaluation.page import render_page
from agent_kit.evaluation.render import render_table
from agent_kit.evaluation.table import build_table, comparisons
from agent_kit.reporting.metrics import mean_and_se

SOLVER = "scripted:examples/wordle/policies.py:Solver"
SLOPPY = "scripted:examples/wordle/policies.py:Sloppy"


def test_reward_figures_are_per_prompt() -> None:
    """Prompt means 0.5, 1, 0 (a lost rollout is 0): mean 0.5, SE = 0.5/√3; success 0.5;
    pass@2 = (5/6 + 1 + 0)/3 (1 − C(2,2)/C(4,2) for 2 of 4)."""
    figures = reward_figures(
        {0: [1.0, 1.0, 0.0, 0.0], 1: [1.0, 1.0, 1.0, 1.0], 2: [0.0, 0.0, 0.0, None]},
        threshold=1.0,
        ks=[1, 2, 4],
    )
    assert figures.mean == pytest.approx(0.5)
    assert figures.se == pytest.approx(0.5 / math.sqrt(3))
    assert figures.success_rate == pytest.approx(0.5)
    assert figures.pass_at_k[1] == pytest.approx(0.5)
    assert figures.pass_at_k[2] == pytest.approx(11 / 18)
    assert figures.pass_at_k[4] == pytest.approx(2 / 3)
    assert (figures.rollouts, figures.prompts) == (12, 3)


def test_partial_rewards_and_thresholds() -> None:
    """Rewards below the threshold fail; the mean is of rewards, not successes."""
    figures = reward_figures({0: [0.5, 0.9], 1: [0.2, 0.2]}, threshold=0.8, ks=[2])
    assert figures.mean == pytest.approx((0.7 + 0.2) / 2)
    assert figures.se == pytest.approx(0.25)  # sd of (0.7, 0.2) = 0.3536; / √2
    assert figures.success_rate == pytest.approx(0.25)
    assert figures.pass_at_k[2] == pytest.approx(0.5)


def test_se_is_undefined_with_one_prompt_and_nothing_without() -> None:
    assert mean_and_se([0.4]) == (0.4, None)
    assert mean_and_se([]) == (None, None)
    empty = reward_figures({}, threshold=1.0, ks=[1])
    assert (empty.mean, empty.se, empty.success_rate, empty.pass_at_k[1]) == (None,) * 4


def test_difference_and_its_standard_error() -> None:
    """0.5 ± 0.3 vs 0.1 ± 0.4: 0.4 ± 0.5, not significant; 0.9 ± 0.1 vs 0.3 ± 0.2: 0.6 ±
    √0.05 ≈ 0.2236, beyond two SEs."""
    near = difference(
        "a",
        "b",
        CellFigures("completed", mean=0.5, se=0.3),
        CellFigures("completed", mean=0.1, se=0.4),
    )
    assert near.difference == pytest.approx(0.4)
    assert near.se == pytest.approx(0.5)
    assert near.significant is False
    far = difference(
        "a",
        "b",
        CellFigures("completed", mean=0.9, se=0.1),
        CellFigures("completed", mean=0.3, se=0.2),
    )
    assert far.difference == pytest.approx(0.6)
    assert far.se == pytest.approx(math.sqrt(0.05))
    assert far.significant is True
    below = difference(
        "b",
        "a",
        CellFigures("completed", mean=0.3, se=0.2),
        CellFigures("completed", mean=0.9, se=0.1),
    )
    assert below.difference == pytest.approx(-0.6)
    assert below.significant is True
    missing = difference(
        "a", "b", CellFigures("error", reason="x"), CellFigures("completed", mean=0.1, se=0.1)
    )
    assert (missing.difference, missing.se, missing.significant) == (None, None, None)


def test_cells_ids_and_default_comparisons() -> None:
    """Two policies × two temperatures: four cells with stable ids, Solver − Sloppy at each."""
    spec = grid_spec("agent.py", "holdout.jsonl", [SOLVER, SLOPPY], ["temperature=0,0.7"], 4, {})
    ids = [c.id for c in spec.cells()]
    assert ids == [
        "solver-temperature-0",
        "sloppy-temperature-0",
        "solver-temperature-0-7",
        "sloppy-temperature-0-7",
    ]
    pairs = [(a.id, b.id) for a, b in comparisons(spec, None)]
    # the policies at every setting, then each policy's other setting against its first
    assert pairs == [(ids[0], ids[1]), (ids[2], ids[3]), (ids[2], ids[0]), (ids[3], ids[1])]
    assert next((a.id, b.id) for a, b in comparisons(spec, ["Sloppy", "Solver"])) == (
        ids[1],
        ids[0],
    )
    assert [(a.id, b.id) for a, b in comparisons(spec, [ids[0], ids[3]])] == [(ids[0], ids[3])]
    table = build_table(
        spec, {ids[0]: CellFigures("completed", mean=1.0, se=0.0)}, k=4, threshold=1.0
    )
    assert [r.figures.state for r in table.rows] == ["completed", "pending", "pending", "pending"]
    assert table.document()["differences"][0]["difference"] is None


def test_env_axis_and_policy_labels() -> None:
    axis = parse_axis("env.REASONING_EFFORT=low,medium")
    assert axis.is_env
    assert axis.values == ("low", "medium")
    spec = grid_spec("a.py", "d.jsonl", [SOLVER], ["env.REASONING_EFFORT=low,medium"], 2, {})
    assert [c.env for c in spec.cells()] == [
        {"REASONING_EFFORT": "low"},
        {"REASONING_EFFORT": "medium"},
    ]
    assert policy_label("openai:http://127.0.0.1:8000/v1#qwen3") == "qwen3"
    assert policy_label("hf:smollm2-135m+runs/x/adapters/step-0003") == "step-0003"
    assert policy_label("local") == "local"


@pytest.mark.parametrize(
    ("axes", "message"),
    [
        (["colour=red"], "unknown axis 'colour'"),
        (["temperature="], "empty value"),
        (["temperature=0,,1"], "empty value"),
        (["temperature=3"], "bad value '3'"),
        (["temperature=hot"], "bad value 'hot'"),
        (["max_tokens=0"], "bad value '0'"),
        (["top_p=0,0.5"], "bad value '0'"),
        (["temperature=0,0"], "given twice"),
        (["temperature=0", "temperature=1"], "given twice"),
        (["env.1BAD=x"], "not an environment variable name"),
        (["temperature"], "give NAME=V1,V2"),
    ],
)
def test_bad_axes_are_one_clear_error(axes: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        grid_spec("a.py", "d.jsonl", [SOLVER], axes, 4, {})


def test_bad_policies_and_samples() -> None:
    with pytest.raises(UsageError, match="the grid is empty"):
        grid_spec("a.py", "d.jsonl", [], [], 4, {})
    with pytest.raises(UsageError, match="unknown scheme"):
        grid_spec("a.py", "d.jsonl", ["gpt:4"], [], 4, {})
    with pytest.raises(UsageError, match="no file"):
        grid_spec("a.py", "d.jsonl", ["scripted:nowhere.py:X"], [], 4, {})
    with pytest.raises(UsageError, match=r"--samples must be 2\.\.32"):
        grid_spec("a.py", "d.jsonl", [SOLVER], [], 1, {})
    spec = grid_spec("a.py", "d.jsonl", [SOLVER, SLOPPY], [], 4, {})
    with pytest.raises(UsageError, match="name two cells or two policies"):
        comparisons(spec, ["Solver", "nobody"])


def test_a_cells_run_carries_its_policy_settings_and_environment(tmp_path: Path) -> None:
    """The cell's run: one step of every holdout prompt × samples, the cell's policy, its
    inference settings over the base ones, its env.* settings as the agents' extra env."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "a"}\n{"prompt": "b"}\n{"prompt": "c"}\n', encoding="utf-8")
    spec = grid_spec(
        "agent.py",
        str(data),
        [SOLVER],
        ["temperature=0.7", "env.REASONING_EFFORT=low"],
        4,
        {"temperature": 1.0, "top_p": 0.9, "concurrency": 3},
    )
    (cell,) = spec.cells()
    config = cell_config(spec, cell, tmp_path / "out", RunConfig(workers=1))
    job = config.job
    assert job is not None
    assert (job.name, job.policy, job.group_size, job.batch_size, job.steps) == (
        cell.id, SOLVER, 4, 3, 1,
    )  # fmt: skip
    assert (job.temperature, job.top_p, job.concurrency) == (0.7, 0.9, 3)
    assert config.extra_env == {"REASONING_EFFORT": "low"}
    assert (config.workers, config.out, config.resume) == (1, tmp_path / "out", None)


def test_a_cell_without_a_rewarded_rollout_has_no_mean_and_says_why() -> None:
    """Every rollout lost (a policy that never answers): no mean, no SE (0.000 ± 0.000 would
    rank it above a policy playing badly below 0), success and pass@k 0, and the reason says
    why there is no mean."""
    rewards = reward_figures({0: [None, None], 1: [None, None]}, threshold=1.0, ks=[1, 2])
    assert (rewards.mean, rewards.se) == (None, None)
    assert (rewards.success_rate, rewards.pass_at_k[2], rewards.rollouts) == (0.0, 0.0, 4)
    cell = CellFigures.from_rewards(rewards, state="rollouts_failed", reason="rollouts_failed")
    assert cell.mean is None
    assert cell.reason == "rollouts_failed; none of its 4 rollouts got a reward: no mean"
    some = reward_figures({0: [None, -1.0]}, threshold=1.0, ks=[1])
    assert some.mean == pytest.approx(-0.5)  # one reward: a lost rollout still counts 0


def test_no_verdict_without_rewards_or_for_a_partial_cell() -> None:
    """Two cells without rewards have no difference and no verdict; an interrupted (partial)
    cell's difference is shown without a verdict; the terminal table and the page say "–"."""
    spec = grid_spec("a.py", "d.jsonl", [SOLVER, SLOPPY], ["temperature=0,1"], 2, {})
    ids = [c.id for c in spec.cells()]
    none = reward_figures({0: [None, None]}, threshold=1.0, ks=[1, 2])
    figures = {
        ids[0]: CellFigures.from_rewards(none, state="rollouts_failed", reason="rollouts_failed"),
        ids[1]: CellFigures.from_rewards(none, state="rollouts_failed", reason="rollouts_failed"),
        ids[2]: CellFigures("interrupted", reason="interrupted", mean=0.9, se=0.01, n=2),
        ids[3]: CellFigures("completed", mean=0.1, se=0.01, n=4),
    }
    table = build_table(spec, figures, k=2, threshold=1.0)
    by_pair = {(d.a, d.b): d for d in table.differences}
    first, second = by_pair[(ids[0], ids[1])], by_pair[(ids[2], ids[3])]
    assert (first.difference, first.se, first.significant) == (None, None, None)
    assert second.difference == pytest.approx(0.8)
    assert second.significant is None  # |0.8| > 2 SE, but the cell is partial
    doc = table.document()
    # the settings compared too: every difference touches a cell without rewards or a partial one
    assert [d["significant"] for d in doc["differences"]] == [None] * len(table.differences)
    assert doc["cells"][0]["figures"]["mean"] is None
    console = Console(file=io.StringIO(), width=200)
    console.print(render_table(table))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "0.000 ± 0.000" not in text
    assert "yes (> 2 SE)" not in text
    assert "none of its 2 rollouts got a reward" in text
    page = render_page(table)
    assert ">yes<" not in page
    assert "none of its 2 rollouts got a reward" in page
