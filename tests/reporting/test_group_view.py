"""The group view: a group's rollouts side by side in report.html, two cells on one prompt in
eval.html, checked on a 512-rollout Wordle run (agent subprocesses, the emulator on loopback)
and in the headless Chromium that ``make test`` installs (tests/reporting/test_report_runs.py
says how; ``AGENT_KIT_BROWSER_DIR`` names the folder holding it).

The runs: the sloppy scripted player, 32 holdout words × 4 samples × 4 steps (512 rollouts),
and the solver, one step of the same words (128 rollouts), the two cells of a grid.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import holdout, play_wordle, wordle_config, wordle_policy
from test_report_runs import BROWSER_START, _in_browser

from agent_kit.evaluation.grid import GridSpec
from agent_kit.evaluation.groups import grid_groups
from agent_kit.evaluation.local_cells import read_cell
from agent_kit.evaluation.page import render_page
from agent_kit.evaluation.table import build_table
from agent_kit.reporting.group_view import parting_turn
from agent_kit.reporting.metrics import build_groups
from agent_kit.store import RunStore, load_rollouts

pytestmark = pytest.mark.e2e


def _message(response: dict[str, object]) -> str:
    """A turn's answer: its first choice's message (text and tool calls; not its id)."""
    choices = response["choices"]
    assert isinstance(choices, list)
    return json.dumps(choices[0]["message"], sort_keys=True)


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The 512-rollout sloppy run, the solver's, and an eval.html whose cells they are."""
    base = tmp_path_factory.mktemp("groups")
    dataset = holdout(base / "holdout.jsonl", 32)
    many = wordle_config("many", "Sloppy", steps=4, batch_size=32, concurrency=32)
    sloppy = play_wordle(dataset, base / "runs", many, workers=2)
    solver = play_wordle(dataset, base / "runs", wordle_config("solver", concurrency=32))
    spec = GridSpec("agent.py", str(dataset), (wordle_policy("Solver"), wordle_policy("Sloppy")))
    cells = [c.id for c in spec.cells()]
    figures = {
        cells[0]: read_cell(solver, 4, 1.0),
        cells[1]: read_cell(sloppy, 4, 1.0),
    }
    table = build_table(spec, {k: v for k, v in figures.items() if v is not None}, k=4, threshold=1)
    page = base / "eval.html"
    page.write_text(render_page(table, grid_groups(table)), encoding="utf-8")
    return {"sloppy": sloppy, "solver": solver, "eval": page}


def test_the_parting_turn_is_the_first_turn_whose_answers_differ(played: dict[str, Path]) -> None:
    """For every group of the 512-rollout run: before the parting turn every rollout gave the
    same answer (message), at it they did not; a group that never parts answered alike
    throughout."""
    with RunStore.open(played["sloppy"], readonly=True) as store:
        records = load_rollouts(store, store.list_jobs()[-1].arn, with_turns=True)
    assert len(records) == 512
    seen = set()
    for group in build_groups(records):
        rollouts = group.rollouts
        parting = parting_turn(rollouts)
        seen.add(parting)
        answers = [[_message(t.response) for t in r.turn_rows] for r in rollouts]
        last = parting if parting is not None else max(len(a) for a in answers)
        for turn in range(last):
            assert len({a[turn] if turn < len(a) else None for a in answers}) == 1
        if parting is not None:
            assert len({a[parting] if parting < len(a) else None for a in answers}) > 1
    assert seen - {None}  # groups of the sloppy player part (its first guesses are drawn)


GROUPS_CHECK = (
    BROWSER_START
    + r"""
  page.on("requestfailed", (r) => messages.push("requestfailed: " + r.url()));
  const shown = () => page.$$eval("#groups .gv-shown", (panes) => panes.map((p) => {
    const block = p.querySelector(".gv-block");
    return block ? [block.dataset.key, block.querySelectorAll("thead th").length - 1,
                    [...block.querySelectorAll("tbody th")].map((t) => t.textContent)] : null;
  }));
  await page.goto("file://" + process.argv[2], { waitUntil: "load" });
  const out = { report: { options: await page.$$eval("#groups select.gv-prompt option",
                                                      (os) => os.length) } };
  out.report.first = await shown();
  await page.select("#groups select.gv-prompt", "s3-p17");
  out.report.picked = await shown();
  out.report.messages = messages.splice(0);
  await page.goto("file://" + process.argv[3], { waitUntil: "load" });
  out.eval = { first: await shown() };
  await page.select("#groups select.gv-prompt", "5");
  const cells = await page.$$eval("#groups select.gv-cell", (ss) => ss.map((s) => s.value));
  out.eval.cells = cells;
  out.eval.picked = await shown();
  await page.evaluate(() => {
    const s = document.querySelectorAll("#groups select.gv-cell")[1];
    s.value = s.options[0].value;
    s.dispatchEvent(new Event("change"));
  });
  out.eval.same = await shown();
  out.eval.messages = messages;
  console.log(JSON.stringify(out));
  await browser.close();
})().catch((e) => { console.error(e); process.exit(1); });
"""
)


def test_the_group_view_in_headless_chromium(played: dict[str, Path], tmp_path: Path) -> None:
    """From file://, without a console message: report.html of 512 rollouts offers its 128
    groups and shows the picked one's four rollouts side by side with reward, advantage, terms
    and turns; eval.html shows the two cells' rollouts of the picked prompt, each pane its
    own cell."""
    out = _in_browser(GROUPS_CHECK, tmp_path, played["sloppy"] / "report.html", played["eval"])
    report = out["report"]
    assert report["messages"] == []
    assert report["options"] == 128
    assert report["first"][0][0] == "s0-p0"
    key, samples, rows = report["picked"][0]
    assert (key, samples) == ("s3-p17", 4)
    assert rows[:3] == ["rollout", "reward", "advantage"]
    assert "turns" in rows
    assert any(r.startswith("term: outcome") for r in rows)
    assert any(r.startswith("task: solved") for r in rows)
    evaluated = out["eval"]
    assert evaluated["messages"] == []
    solver, sloppy = evaluated["cells"]
    assert [p[0] for p in evaluated["picked"]] == [f"{solver}|5", f"{sloppy}|5"]
    assert [p[1] for p in evaluated["picked"]] == [4, 16]  # the sloppy run played 4 steps
    assert [p[0] for p in evaluated["same"]] == [f"{solver}|5", f"{solver}|5"]
