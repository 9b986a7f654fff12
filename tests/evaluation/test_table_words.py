"""What the table says (issue 47, item 9), in the terminal and in eval.html: an interrupted cell
keeps its policy and does not repeat its state, a long error is a note on its own line, a
comparison across settings names both, success is a percentage and a difference keeps its sign
on the page, the y axis covers the bars; a checkpoint grid marks its best step."""

from __future__ import annotations

import io
import re

from rich.console import Console

from agent_kit.evaluation.figures import CellFigures
from agent_kit.evaluation.grid import GridSpec, grid_spec
from agent_kit.evaluation.page import grouped_bars, render_page
from agent_kit.evaluation.render import render_table
from agent_kit.evaluation.table import build_table

SOLVER = "scripted:examples/wordle/policies.py:Solver"
SLOPPY = "scripted:examples/wordle/policies.py:Sloppy"
ERROR = (
    "the agent could not start: ModuleNotFoundError: No module named 'strands_evals' "
    "(pip install 'agent_kit[judges]')"
)


def _text(table: object, width: int = 80) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(table, soft_wrap=False, crop=False)
    return out.getvalue()


def _cell(mean: float, per_prompt: dict[str, float], **rest: object) -> CellFigures:
    return CellFigures(
        rest.pop("state", "completed"),  # type: ignore[arg-type]
        mean=mean,
        se=0.1,
        success_rate=0.75,
        pass_at_k={1: 0.5, 4: 1.0},
        n=8,
        prompts=len(per_prompt),
        per_prompt=per_prompt,
        **rest,  # type: ignore[arg-type]
    )


def _two_by_two() -> GridSpec:
    return grid_spec("agent.py", "d.jsonl", [SOLVER, SLOPPY], ["temperature=0,0.7"], 4, {})


def test_an_interrupted_cell_keeps_its_policy_and_an_error_is_one_note() -> None:
    """On an 80-column terminal: every policy label and state is whole (the table runs past
    the edge rather than squeezing them), the state says ``interrupted`` once (never
    ``interrupted: interrupted``), and the error is a note under the table, not folded into a
    narrow column."""
    spec = _two_by_two()
    ids = [c.id for c in spec.cells()]
    figures = {
        ids[0]: _cell(1.2, {"0": 1.3, "1": 1.1}),
        ids[1]: CellFigures("interrupted", reason="interrupted"),
        ids[2]: CellFigures("error", reason=ERROR),
    }
    table = render_table(build_table(spec, figures, k=4, threshold=1.0))
    text = _text(table)
    assert "interrupted: interrupted" not in text
    rows = [line.split() for line in text.splitlines()]
    assert [r[0] for r in rows if r and r[0] in ("Solver", "Sloppy")][:4] == [
        "Solver", "Sloppy", "Solver", "Sloppy",
    ]  # fmt: skip
    assert [r[-1] for r in rows if r and r[0] in ("Solver", "Sloppy")][:4] == [
        "completed", "interrupted", "error", "pending",
    ]  # fmt: skip
    wide = _text(table, width=200).splitlines()
    assert any(line.strip() == f"{ids[2]}: error: {ERROR}" for line in wide)
    assert f"{ids[1]}: interrupted" in text


def test_a_one_policy_grid_compares_its_settings_and_compare_names_both() -> None:
    """One policy at two temperatures: the difference between the settings, paired; ``--compare
    CELL CELL`` across settings shows each side's setting."""
    spec = grid_spec("agent.py", "d.jsonl", [SOLVER], ["env.EFFORT=low,medium"], 4, {})
    low, medium = (c.id for c in spec.cells())
    figures = {
        low: _cell(0.5, {"0": 0.2, "1": 0.8}),
        medium: _cell(0.7, {"0": 0.45, "1": 0.95}),
    }
    table = build_table(spec, figures, k=4, threshold=1.0)
    (d,) = table.differences
    assert (d.a, d.b, d.setting) == (medium, low, "")
    assert d.paired
    assert d.difference is not None
    assert abs(d.difference - 0.2) < 1e-12
    text = _text(render_table(table))  # 80 columns: the row runs past them, whole
    row = next(line for line in text.splitlines() if "Solver (env.EFFORT=medium)" in line)
    assert "Solver (env.EFFORT=low)" in row
    assert "+0.200" in row
    assert "0.050" in row  # the paired SE: sd(0.25, 0.15) / √2
    assert "paired, 2 prompts" in row


def test_the_page_shows_percentages_signed_differences_and_an_axis_over_the_bars() -> None:
    """eval.html: success 75% (as the terminal), a negative difference keeps its minus, and
    the top tick of the bar chart is at least the highest bar plus its error."""
    spec = _two_by_two()
    ids = [c.id for c in spec.cells()]
    figures = {
        ids[0]: _cell(1.32, {"0": 1.3, "1": 1.34}),
        ids[1]: _cell(1.52, {"0": 1.5, "1": 1.54}),
    }
    page = render_page(build_table(spec, figures, compare=("Solver", "Sloppy"), k=4, threshold=1))
    assert "<td>75%</td>" in page
    assert "<td>-0.200</td>" in page
    svg = grouped_bars(["a"], ["x", "y"], [[(1.32, 0.05), (0.4, 0.1)]], title="t", y_label="r")
    labels = [float(v) for v in re.findall(r'text-anchor="end" font-size="10">([-\d.]+)<', svg)]
    assert max(labels) >= 1.37


def test_a_checkpoint_grid_marks_its_best_step() -> None:
    """Checkpoints of a training run: the best step (the highest mean) is marked in the table
    and named in table.json; each checkpoint is compared with the base."""
    base = "hf:tiny"
    policies = [base, f"{base}+runs/t/adapters/step-0000", f"{base}+runs/t/adapters/step-0001"]
    names = {policies[0]: "base", policies[1]: "step-0000", policies[2]: "step-0001"}
    spec = GridSpec("agent.py", "d.jsonl", tuple(policies), samples=2, names=names)
    ids = [c.id for c in spec.cells()]
    assert ids == ["base", "step-0000", "step-0001"]
    figures = {
        "base": _cell(0.1, {"0": 0.0, "1": 0.2}),
        "step-0000": _cell(0.6, {"0": 0.5, "1": 0.7}),
        "step-0001": _cell(0.4, {"0": 0.3, "1": 0.5}),
    }
    pairs = [("step-0000", "base"), ("step-0001", "base")]
    table = build_table(spec, figures, pairs=pairs, k=2, threshold=1.0)
    assert table.document()["best"] == {"base": "step-0000"}
    assert [(d.a, d.b) for d in table.differences] == pairs
    assert "step-0000 (best)" in _text(render_table(table), width=120)
    assert "Holdout reward per checkpoint" in render_page(table)
