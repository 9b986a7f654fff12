"""The RL report and the comparison page on real runs of examples/wordle (agent subprocesses).

Three small runs, made once for the module: ``Solver`` for one step, ``Sloppy`` for two steps
(3 holdout prompts × group 4, temperature 0.7, concurrency 8), and ``Sloppy`` through a copy of
the Wordle agent that answers with its tool log, so the last tool result of every episode is
recorded. ``run_local`` writes summary.json and report.html as each run ends; the tests parse
those files.

One more test takes the headless Chromium that ``make test`` installs into .venv/browser
(``@sparticuz/chromium`` and ``puppeteer-core``, pinned by tests/browser/package-lock.json;
``AGENT_KIT_BROWSER_DIR`` names another folder holding them), opens the report from
``file://``, drives the filters and a sortable header, and checks the console stays clean;
another lays the report and the comparison page out at 900 and 1400 px and measures them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import holdout, play_wordle, wordle_agent_source, wordle_config
from test_report_rl import Node, num, parse

from agent_kit.reporting.compare import write_comparison
from agent_kit.reporting.tool_results import NOT_RECORDED
from agent_kit.store import RunStore

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]

LOGGED_AGENT = wordle_agent_source(
    "The Wordle agent; its answer carries its tool log (each call, its output).",
    """
import dataclasses

from agent_kit.app import RolloutApp
from agent_kit.episode_loop import play_episode


class LoggedApp(RolloutApp):
    async def play(self, payload):
        outcome = await play_episode(
            payload,
            environment=self.environment,
            reward=self.reward_fn,
            settings=self.settings,
            model_factory=self._model_factory or self._default_model,
        )
        outcome.extra["tool_log"] = [dataclasses.asdict(c) for c in outcome.episode.tool_calls]
        if payload.metadata is not None:
            await self._report(payload, outcome)
        return outcome.body()


app = LoggedApp(
    wordle.WordleEnv,
    reward=wordle.wordle_reward,
    system_prompt=wordle.SYSTEM_PROMPT,
    max_turns=wordle.MAX_TURNS,
    floor_reward=-1.5,
)

if __name__ == "__main__":
    app.run()
""",
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run directories of the three small Wordle runs (solver, sloppy, logged)."""
    base = tmp_path_factory.mktemp("wordle-report")
    dataset = holdout(base / "three.jsonl", 3)
    logged = base / "logged_agent.py"
    logged.write_text(LOGGED_AGENT, encoding="utf-8")
    out = base / "runs"
    return {
        "solver": play_wordle(dataset, out, wordle_config("solver")),
        "sloppy": play_wordle(dataset, out, wordle_config("sloppy", "Sloppy", steps=2)),
        "logged": play_wordle(dataset, out, wordle_config("logged", "Sloppy"), entrypoint=logged),
    }


def _page(run_dir: Path) -> Node:
    return parse((run_dir / "report.html").read_text(encoding="utf-8"))


def _summary(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    return data


def test_solver_run_report_numbers_and_distributions(runs: dict[str, Path]) -> None:
    """The one-step Solver report shows histograms, and its metrics, per-prompt successes and
    breakdown agree with summary.json."""
    page, summary = _page(runs["solver"]), _summary(runs["solver"])
    kinds = {s.get("aria-label"): s.get("data-kind") for s in page.one(id="plots").all("svg")}
    assert kinds["Reward distribution"] == "histogram"
    assert kinds["Turns per rollout"] == "histogram"
    assert kinds["Tokens per rollout"] == "histogram"
    assert "lines" not in kinds.values()
    for row in page.one(id="metrics-table").all("tr")[1:]:
        assert num(row.all("td")[1]) == summary["metrics"][row.get("data-metric") or ""]
    foot = page.one(id="prompt-table").one("tfoot").all("td")
    assert num(foot[3]) == summary["metrics"]["eval/reward/succeeded_rollouts"]
    assert num(foot[7]) == summary["metrics"]["eval/reward/pass_at_1"]
    components = {
        r.get("data-component"): r.all("td")
        for r in page.one(id="breakdown-table").all("tr")
        if r.get("data-component")
    }
    assert {"outcome", "strategy"} <= set(components)
    assert num(components["outcome"][2]) == 1.0  # declared weight
    assert num(components["outcome"][3]) == summary["counts"]["rewarded"]
    assert page.one(id="no-failures")


def test_sloppy_two_steps_draws_lines(runs: dict[str, Path]) -> None:
    """The two-step Sloppy report draws per-step lines, and names the unsolved episodes
    'unsolved' (never 'failed': every rollout was rewarded)."""
    page = _page(runs["sloppy"])
    kinds = {s.get("aria-label"): s.get("data-kind") for s in page.one(id="plots").all("svg")}
    assert kinds["Reward per step"] == "lines"
    assert kinds["Tokens per rollout, mean per step"] == "lines"
    outcomes = {t.get("data-outcome") for t in page.all("details", cls="tx")}
    assert "unsolved" in outcomes
    assert "failed" not in outcomes


def test_plain_agent_transcripts_show_the_last_tool_result(runs: dict[str, Path]) -> None:
    """With the stock agent (RolloutApp, no tool log of its own) the last tool result, in no
    request, comes from the answer's bounded ``tool_log``: every transcript that ended on a tool
    call shows it, none says "not recorded", and the lowest-scoring one keeps its breakdown."""
    page = _page(runs["sloppy"])
    transcripts = page.all("details", cls="tx")
    first = transcripts[0]
    rewards = [num(t.one("div", cls="reward").one("b")) for t in transcripts]
    assert num(first.one("div", cls="reward").one("b")) == min(r for r in rewards if r is not None)
    assert NOT_RECORDED not in page.text()
    shown = [t for t in transcripts if t.all("div", cls="last-result")]
    assert shown
    assert all("Guess " in t.one("div", cls="last-result").text() for t in shown)
    assert first.one("table", cls="breakdown")


def test_logged_agent_lowest_transcript_has_last_tool_result(runs: dict[str, Path]) -> None:
    """The lowest-scoring transcript comes first, with every turn, the last tool result (in no
    request, from the agent's tool log), its reward breakdown and its stop reason."""
    run_dir = runs["logged"]
    page = _page(run_dir)
    with RunStore.open(run_dir, readonly=True) as store:
        rewards = {
            t.id: r.total
            for t in store.list_trajectories()
            if (r := store.get_reward(t.id)) is not None
        }
        lowest = min(rewards, key=lambda k: (rewards[k], k))
        turns = store.list_turns(lowest)
        requests = "\n".join(json.dumps(t.request) for t in turns)
    first = page.all("details", cls="tx")[0]
    assert first.get("data-trajectory") == lowest
    last = first.one("div", cls="last-result").text()
    result = last.split("Guess ", 1)[1].split("\n", 1)[0]  # e.g. "6 of 6: TWEET"
    assert f"Guess {result}" not in requests  # really only in the agent's answer
    assert len(first.all("div", cls="turn")) == len(turns)
    assert {"outcome", "strategy"} <= {
        r.all("td")[0].text() for r in first.one("table", cls="breakdown").all("tr")[1:]
    }
    meta = {
        r.one("th").text(): r.one("td").text() for r in first.one("table", cls="meta").all("tr")
    }
    assert meta["stop reason"].startswith(("solved", "finished unsolved", "turn budget"))
    assert NOT_RECORDED not in page.text()


def test_comparison_of_solver_and_sloppy(runs: dict[str, Path], tmp_path: Path) -> None:
    """The comparison page holds both runs' metrics, B − A deltas and per-prompt success both
    ways."""
    out = write_comparison(runs["solver"], runs["sloppy"], tmp_path / "compare.html")
    page = parse(out.read_text(encoding="utf-8"))
    a, b = _summary(runs["solver"]), _summary(runs["sloppy"])
    rows = {r.get("data-metric"): r.all("td") for r in page.one(id="metrics-table").all("tr")[1:]}
    for name in ("rollout/reward/mean", "eval/reward/pass_at_1", "rollout/turns/mean"):
        assert num(rows[name][1]) == a["metrics"][name]
        assert num(rows[name][2]) == b["metrics"][name]
        assert num(rows[name][3]) == pytest.approx(b["metrics"][name] - a["metrics"][name])
    prompts = page.one(id="prompt-table").one("tbody").all("tr")
    assert len(prompts) == 3  # same dataset: every prompt matched
    assert page.one(id="better-in-a")
    assert page.one(id="better-in-b")
    assert page.one("tr", data_setting="steps").get("class") == "differs"


def _browser_dir() -> Path:
    """The folder whose node_modules hold the browser: ``AGENT_KIT_BROWSER_DIR`` or, by default,
    where ``make test`` installs it (.venv/browser)."""
    path = Path(os.environ.get("AGENT_KIT_BROWSER_DIR") or ROOT / ".venv" / "browser")
    needed = ("@sparticuz/chromium", "puppeteer-core")
    missing = [n for n in needed if not (path / "node_modules" / n).is_dir()]
    assert shutil.which("node") is not None, "the browser test needs Node.js (node on PATH)"
    assert not missing, (
        f"no headless Chromium in {path} (missing {', '.join(missing)}): `make test` installs it "
        "from tests/browser/package-lock.json, or set AGENT_KIT_BROWSER_DIR"
    )
    return path


def _in_browser(script: str, tmp_path: Path, *pages: Path) -> Any:
    """Run a Node script that drives the headless Chromium over ``pages`` (their absolute
    paths are its arguments); return the JSON it prints last."""
    file = tmp_path / "check.cjs"
    file.write_text(script, encoding="utf-8")
    proc = subprocess.run(
        ["node", str(file), *(str(p.resolve()) for p in pages)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "AGENT_KIT_BROWSER_DIR": str(_browser_dir())},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: The start of every browser check: puppeteer-core and the packaged Chromium, from
#: AGENT_KIT_BROWSER_DIR.
BROWSER_REQUIRE = r"""
const { createRequire } = require("module");
const req = createRequire(process.env.AGENT_KIT_BROWSER_DIR + "/package.json");
const chromiumModule = req("@sparticuz/chromium");
const chromium = chromiumModule.default || chromiumModule;
const puppeteer = req("puppeteer-core");"""
#: Then a headless browser and a page whose console lines and page errors go to ``messages``.
BROWSER_START = (
    BROWSER_REQUIRE
    + r"""
(async () => {
  const browser = await puppeteer.launch({
    executablePath: await chromium.executablePath(),
    args: [...chromium.args, "--no-sandbox", "--headless=new"],
    headless: true,
  });
  const page = await browser.newPage();
  const messages = [];
  page.on("console", (m) => messages.push(m.type() + ": " + m.text()));
  page.on("pageerror", (e) => messages.push("pageerror: " + e.message));"""
)


BROWSER_CHECK = (
    BROWSER_START
    + r"""
  page.on("requestfailed", (r) => messages.push("requestfailed: " + r.url()));
  await page.goto("file://" + process.argv[2], { waitUntil: "load" });
  const shown = () => page.$$eval("details.tx", (els) =>
    els.filter((e) => !e.hidden).map((e) => [e.dataset.prompt, e.dataset.outcome]));
  const out = { all: await shown() };
  await page.select("#f-outcome", "unsolved");
  out.unsolved = await shown();
  await page.select("#f-outcome", "");
  await page.select("#f-prompt", "1");
  out.prompt1 = await shown();
  out.count = await page.$eval("#f-count", (e) => e.textContent);
  const heads = await page.$$("#prompt-table thead button.sort");
  await heads[8].click();
  out.ascending = await page.$$eval("#prompt-table tbody tr", (rows) =>
    rows.map((r) => parseFloat(r.cells[8].dataset.v)));
  out.messages = messages;
  console.log(JSON.stringify(out));
  await browser.close();
})().catch((e) => { console.error(e); process.exit(1); });
"""
)


def test_report_in_headless_chromium(runs: dict[str, Path], tmp_path: Path) -> None:
    """In a real browser from file://, the filters hide what they should, a header sorts the
    per-prompt table, and the console has no message at all."""
    out = _in_browser(BROWSER_CHECK, tmp_path, runs["sloppy"] / "report.html")
    assert out["messages"] == []
    assert out["all"]
    assert out["unsolved"]
    assert {o for _, o in out["unsolved"]} == {"unsolved"}
    assert {p for p, _ in out["prompt1"]} == {"1"}
    assert out["count"] == f"{len(out['prompt1'])} of {len(out['all'])} transcripts shown"
    assert out["ascending"] == sorted(out["ascending"])


#: Opens the report at a transcript's anchor (argv 3), then clicks a link of the failures
#: section's below-threshold table; reports whether each target transcript is open.
ANCHOR_CHECK = (
    BROWSER_START
    + r"""
  const opened = (id) => page.evaluate((tid) => {
    const e = document.getElementById("tx-" + tid);
    return e.open && !e.hidden;
  }, id);
  const url = "file://" + process.argv[2];
  await page.goto(url + "#tx-" + process.argv[3], { waitUntil: "load" });
  const out = { direct: await opened(process.argv[3]) };
  const links = await page.$$eval("#below-threshold a", (as) =>
    as.map((a) => a.getAttribute("href").slice(4)));
  const last = links[links.length - 1];
  out.before = await opened(last);
  await page.click('#below-threshold a[href="#tx-' + last + '"]');
  await page.waitForFunction(
    (id) => document.getElementById("tx-" + id).open, { timeout: 10000 }, last);
  out.clicked = await opened(last);
  out.messages = messages;
  console.log(JSON.stringify(out));
  await browser.close();
})().catch((e) => { console.error(e); process.exit(1); });
"""
)


def test_transcript_link_opens_its_transcript(runs: dict[str, Path], tmp_path: Path) -> None:
    """In a real browser, report.html#tx-ID (the end summary's link to the lowest-scoring
    rollout) and a click on a failures-section link both open that rollout's transcript."""
    page = _page(runs["sloppy"])
    links = [a.get("href") or "" for a in page.one(id="below-threshold").all("a")]
    assert len(links) >= 2
    target = links[1].removeprefix("#tx-")
    script = tmp_path / "check.cjs"
    script.write_text(ANCHOR_CHECK, encoding="utf-8")
    proc = subprocess.run(
        ["node", str(script), str((runs["sloppy"] / "report.html").resolve()), target],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "AGENT_KIT_BROWSER_DIR": str(_browser_dir())},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["direct"] is True
    assert out["before"] is False
    assert out["clicked"] is True
    assert out["messages"] == []


#: Lays each page out at 900 and 1400 CSS px (every <details> opened) and reports, per page and
#: width: the page's scrollWidth, every token of a table cell, an id or code that spans more than
#: one line box (a number, an id or code is one token up to a space; in other text a word may also
#: end at a hyphen) and every table wider than its container that no horizontal scroller holds.
LAYOUT_CHECK = (
    BROWSER_REQUIRE
    + r"""

function measure() {
  for (const d of document.querySelectorAll("details")) { d.open = true; }
  const broken = [];
  const holders = document.querySelectorAll("td, th, code, .id");
  for (const holder of holders) {
    const walker = document.createTreeWalker(holder, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const whole = node.parentElement.closest("code, td.n, .id");
      const tokens = whole ? /\S+/g : /[^\s-]*-+|[^\s-]+/g;
      for (const m of node.data.matchAll(tokens)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = Array.from(range.getClientRects()).filter((r) => r.width > 0).length;
        if (lines > 1) { broken.push(m[0] + " (" + lines + " lines)"); }
      }
    }
  }
  const unheld = [];
  for (const t of document.querySelectorAll("table")) {
    const box = t.getBoundingClientRect();
    if (box.width === 0) { continue; }
    const room = t.parentElement.getBoundingClientRect();
    if (box.width <= room.width + 0.5) { continue; }
    let scroller = t.parentElement;
    while (scroller && !["auto", "scroll"].includes(getComputedStyle(scroller).overflowX)) {
      scroller = scroller.parentElement;
    }
    const name = t.id || t.className || "table";
    if (!scroller || scroller === document.documentElement || scroller === document.body) {
      unheld.push(name);
    } else if (scroller.getBoundingClientRect().right > document.documentElement.clientWidth) {
      unheld.push(name + " (its scroller is wider than the page)");
    }
  }
  return {
    scrollWidth: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
    broken: broken,
    unheld: unheld,
  };
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: await chromium.executablePath(),
    args: [...chromium.args, "--no-sandbox", "--headless=new"],
    headless: true,
  });
  const page = await browser.newPage();
  const out = [];
  for (const file of process.argv.slice(2)) {
    for (const width of [900, 1400]) {
      await page.setViewport({ width: width, height: 900 });
      await page.goto("file://" + file, { waitUntil: "load" });
      out.push({ page: file.split("/").pop(), width: width, ...(await page.evaluate(measure)) });
    }
  }
  console.log(JSON.stringify(out));
  await browser.close();
})().catch((e) => { console.error(e); process.exit(1); });
"""
)


def test_report_layout_at_900_and_1400_px(runs: dict[str, Path], tmp_path: Path) -> None:
    """At 900 and 1400 px the report and the comparison page never break a token of a table
    cell across lines, hold every table wider than its column in a horizontal scroller and never
    grow wider than the window."""
    compare = write_comparison(runs["solver"], runs["sloppy"], tmp_path / "compare.html")
    out = _in_browser(LAYOUT_CHECK, tmp_path, runs["sloppy"] / "report.html", compare)
    assert [(o["page"], o["width"]) for o in out] == [
        ("report.html", 900),
        ("report.html", 1400),
        ("compare.html", 900),
        ("compare.html", 1400),
    ]
    wrong = {
        f"{o['page']} at {o['width']} px": {k: o[k] for k in ("broken", "unheld", "scrollWidth")}
        for o in out
        if o["broken"] or o["unheld"] or o["scrollWidth"] > o["viewport"]
    }
    assert wrong == {}


def test_cli_report_two_runs_writes_the_comparison(runs: dict[str, Path], tmp_path: Path) -> None:
    """``agent-kit report A B --out PAGE`` writes the same page and prints its file:// link; a
    folder with no run store and ``--out`` without a second run are usage errors (exit 2)."""
    from typer.testing import CliRunner

    from agent_kit.cli import app

    page = tmp_path / "pages" / "solver-vs-sloppy.html"
    done = CliRunner().invoke(
        app, ["report", str(runs["solver"]), str(runs["sloppy"]), "--out", str(page)]
    )
    assert done.exit_code == 0, done.output
    assert page.resolve().as_uri() in done.output
    assert parse(page.read_text(encoding="utf-8")).one(id="metrics-table")
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = CliRunner().invoke(app, ["report", str(runs["solver"]), str(empty)])
    assert bad.exit_code == 2
    assert "run store" in bad.output
    lone = CliRunner().invoke(app, ["report", str(runs["solver"]), "--out", str(page)])
    assert lone.exit_code == 2
    assert "two run directories" in lone.output
