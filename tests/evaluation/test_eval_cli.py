"""`agent-kit eval` end to end on two Wordle holdout prompts: real agent processes, the emulator
on loopback, scripted policies of different strength (Solver, Sloppy) at two temperatures.

One grid is played once (module fixture); the tests read its table, JSON, page, re-run it (the
finished cells are kept, a cell without its summary is resumed), plan it, export it to MLflow,
and run a grid with a cell that fails as a whole. Bad input is refused before anything runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from helpers import mlflow_client

from agent_kit.cli import main
from agent_kit.evaluation.figures import reward_figures
from agent_kit.store import RunStore, load_rollouts

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
WORDLE = ROOT / "examples" / "wordle"
SOLVER = f"scripted:{WORDLE / 'policies.py'}:Solver"
SLOPPY = f"scripted:{WORDLE / 'policies.py'}:Sloppy"


def _argv(dataset: Path, out: Path, *extra: str) -> list[str]:
    return [
        "eval",
        str(WORDLE / "agent.py"),
        "--dataset",
        str(dataset),
        "--policy",
        SOLVER,
        "--policy",
        SLOPPY,
        "--grid",
        "temperature=0,0.7",
        "--samples",
        "2",
        "--workers",
        "1",
        "--rollout-timeout",
        "120",
        "--out",
        str(out),
        *extra,
    ]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two holdout prompts of the Wordle example."""
    path = tmp_path_factory.mktemp("data") / "two.jsonl"
    lines = (WORDLE / "holdout.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:2]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> tuple[Path, dict[str, Any]]:
    """The 2 × 2 grid played once with --json: (eval directory, the printed document)."""
    out = tmp_path_factory.mktemp("eval") / "grid"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(_argv(dataset, out, "--json"))
    assert code == 0
    return out, json.loads(stdout.getvalue().strip().splitlines()[-1])


def test_the_table_has_every_cell_and_the_differences(grid: tuple[Path, dict[str, Any]]) -> None:
    out, doc = grid
    ids = [c["id"] for c in doc["cells"]]
    assert ids == [
        "solver-temperature-0",
        "sloppy-temperature-0",
        "solver-temperature-0-7",
        "sloppy-temperature-0-7",
    ]
    assert all(c["figures"]["state"] == "completed" for c in doc["cells"])
    assert all(c["figures"]["n"] == 4 for c in doc["cells"])
    assert [(d["a"], d["b"]) for d in doc["differences"]] == [
        (ids[0], ids[1]),
        (ids[2], ids[3]),
        (ids[2], ids[0]),
        (ids[3], ids[1]),
    ]
    assert json.loads((out / "table.json").read_text(encoding="utf-8")) == doc


def test_figures_are_those_of_the_cells_runs(grid: tuple[Path, dict[str, Any]]) -> None:
    """Each cell's mean, SE and pass@2 recomputed from its own run store; every difference is
    paired by prompt (the cells played the same two prompts): the mean of the per-prompt
    differences, with the SE of those differences, the unpaired √(se_a² + se_b²) beside it."""
    out, doc = grid
    figures = {c["id"]: c["figures"] for c in doc["cells"]}
    for ident, fig in figures.items():
        with RunStore.open(out / ident, readonly=True) as store:
            records = load_rollouts(store, store.list_jobs()[-1].arn)
        per_prompt: dict[int, list[float | None]] = {}
        for r in records:
            per_prompt.setdefault(r.prompt_index, []).append(r.reward)
        expected = reward_figures(per_prompt, 1.0, [1, 2])
        assert fig["mean"] == pytest.approx(expected.mean)
        assert fig["se"] == pytest.approx(expected.se)
        assert fig["pass_at_k"]["2"] == pytest.approx(expected.pass_at_k[2])
        assert fig["location"] == str(out / ident)
    for d in doc["differences"]:
        a, b = figures[d["a"]], figures[d["b"]]
        diffs = [a["per_prompt"][p] - b["per_prompt"][p] for p in ("0", "1")]
        assert d["paired"] is True
        assert d["prompts"] == 2
        assert d["difference"] == pytest.approx(a["mean"] - b["mean"])
        assert d["se"] == pytest.approx(abs(diffs[0] - diffs[1]) / 2)  # sd/√2 of two values
        assert d["unpaired_se"] == pytest.approx((a["se"] ** 2 + b["se"] ** 2) ** 0.5)
        if d["se"] > 0:
            assert d["significant"] == (abs(d["difference"]) > 2 * d["se"])


def test_the_page_has_grouped_bars_with_error_bars(grid: tuple[Path, dict[str, Any]]) -> None:
    out, _ = grid
    page = (out / "eval.html").read_text(encoding="utf-8")
    assert 'data-kind="grouped-bars"' in page
    assert page.count('class="bar"') == 4
    assert "temperature=0.7" in page
    assert "http" not in page.split("<body>", 1)[1].replace("http-equiv", "")


def test_a_rerun_keeps_finished_cells_and_resumes_an_interrupted_one(
    grid: tuple[Path, dict[str, Any]], dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, doc = grid
    kept = out / "solver-temperature-0" / "run.sqlite"
    before = kept.stat().st_mtime_ns
    (out / "sloppy-temperature-0-7" / "summary.json").unlink()  # as a killed run leaves it
    assert main(_argv(dataset, out)) == 0
    err = capsys.readouterr().err
    assert "solver-temperature-0: completed (kept)" in err
    assert "sloppy-temperature-0-7: resuming" in err
    assert kept.stat().st_mtime_ns == before
    again = json.loads((out / "table.json").read_text(encoding="utf-8"))
    assert [c["figures"]["mean"] for c in again["cells"]] == [
        c["figures"]["mean"] for c in doc["cells"]
    ]


def test_plan_from_a_finished_cell(
    grid: tuple[Path, dict[str, Any]], dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = grid
    assert main([*_argv(dataset, out), "--plan", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (plan["cells"], plan["rollouts"], plan["rollouts_per_cell"]) == (4, 16, 4)
    assert plan["source"] == str(out / "solver-temperature-0")
    assert plan["tokens"]["sample"]["p50"] > 0
    assert plan["cost"]["p90"] >= plan["cost"]["p10"] > 0


def _rewards(run_dir: Path) -> dict[int, list[float]]:
    with RunStore.open(run_dir, readonly=True) as store:
        records = load_rollouts(store, store.list_jobs()[-1].arn)
    out: dict[int, list[float]] = {}
    for r in records:
        out.setdefault(r.prompt_index, []).append(r.reward if r.reward is not None else 0.0)
    return out


def _var(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def test_plan_takes_the_spread_from_a_pilot(
    grid: tuple[Path, dict[str, Any]], dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--pilot EVAL_DIR: the first two cells' per-prompt differences (sd σ_p at the pilot's 2
    samples), within-prompt variances s_A², s_B²: σ_d² = max(0, σ_p² − (s_A²+s_B²)/2) +
    (s_A²+s_B²)/4 at 4 samples; --pilot RUN_DIR: √(2·s²/4). Computed here from the stores."""
    out, _ = grid
    a, b = _rewards(out / "solver-temperature-0"), _rewards(out / "sloppy-temperature-0")
    d = [sum(a[p]) / 2 - sum(b[p]) / 2 for p in (0, 1)]
    noise = sum(_var(a[p]) for p in (0, 1)) / 2 + sum(_var(b[p]) for p in (0, 1)) / 2
    sd = (max(0.0, _var(d) - noise / 2) + noise / 4) ** 0.5
    # the plan's --samples 4 comes last: it wins over the pilot grid's 2; its --out is another
    # directory (the plan refuses an --out whose runs are not its cells, as the run would)
    plan_out = out.parent / "planned"
    argv = [*_argv(dataset, plan_out), "--samples", "4", "--plan", "--json", "--pilot", str(out)]
    assert main([*argv, "--target", "0.5"]) == 0
    power = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["power"]
    assert power["spread"] == pytest.approx(sd)
    assert power["detectable_difference"] == pytest.approx(2 * sd / 2**0.5)
    assert power["prompts_needed"] == max(2, math.ceil((2.8 * sd / 0.5) ** 2))
    one = [*argv[: argv.index("--pilot")], "--pilot", str(out / "solver-temperature-0")]
    assert main(one) == 0
    power = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["power"]
    within = sum(_var(a[p]) for p in (0, 1)) / 2
    assert power["spread"] == pytest.approx((2 * within / 4) ** 0.5)
    assert "lower bound" in power["source"]


def test_mlflow_export_is_a_parent_with_a_child_per_cell(
    grid: tuple[Path, dict[str, Any]], dataset: Path
) -> None:
    out, _ = grid
    assert main([*_argv(dataset, out), "--mlflow", "--json"]) == 0
    with mlflow_client(f"sqlite:///{out.resolve() / 'mlflow.db'}") as client:
        experiment = client.get_experiment_by_name("agent-kit")
        assert experiment is not None
        runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert sorted(r.data.params["cell"] for r in children) == sorted(
        ["solver-temperature-0", "sloppy-temperature-0", "solver-temperature-0-7",
         "sloppy-temperature-0-7"]
    )  # fmt: skip
    assert all("reward_se" in r.data.metrics for r in children)
    assert any(k.startswith("difference/") for k in parents[0].data.metrics)


def test_a_cell_that_fails_as_a_whole_is_marked_and_the_others_finish(
    tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unreachable endpoint cannot answer: its cell is an error, the Solver's completes,
    the command exits 9 after the table."""
    argv = [
        "eval", str(WORDLE / "agent.py"), "--dataset", str(dataset),
        "--policy", SOLVER, "--policy", "openai:http://127.0.0.1:9/v1#nobody",
        "--samples", "2", "--workers", "1", "--out", str(tmp_path / "ev"), "--json",
    ]  # fmt: skip
    assert main(argv) == 9
    captured = capsys.readouterr()
    doc = json.loads(captured.out.strip().splitlines()[-1])
    states = {c["label"]: c["figures"] for c in doc["cells"]}
    assert states["Solver"]["state"] == "completed"
    assert states["nobody"]["state"] == "error"
    assert states["nobody"]["reason"]
    assert "1 of 2 cells did not complete: nobody (error)" in captured.err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--grid", "colour=red"], "unknown axis 'colour'"),
        (["--grid", "temperature="], "empty value"),
        (["--grid", "temperature=9"], "bad value '9'"),
        (["--temperature", "0.5", "--grid", "temperature=0,1"], "both given"),
        (["--compare", "Solver", "Nobody"], "name two cells or two policies"),
    ],
)
def test_bad_input_is_one_line_and_nothing_is_written(
    tmp_path: Path,
    dataset: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    argv = ["eval", str(WORDLE / "agent.py"), "--dataset", str(dataset), "--policy", SOLVER]
    assert main([*argv, "--out", str(tmp_path / "ev"), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "ev").exists()


def test_an_empty_grid_is_refused(
    tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", str(WORDLE / "agent.py"), "--dataset", str(dataset), "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "the grid is empty" in capsys.readouterr().err
