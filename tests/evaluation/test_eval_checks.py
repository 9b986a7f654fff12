"""`agent-kit eval` refuses, before its first cell and before ``--plan``, what would make cells
fail as a whole or the grid unreadable: shared settings out of their ranges, a scripted policy
that does not load, a holdout too large for a cell, an ``env.`` axis over a variable the driver
sets, a grid too large to tabulate. Each is one line, exit 2, and nothing is written (no
``grid.json`` that would block the corrected command). A re-run may add a policy.

Nothing here starts an agent: every refusal comes before the first cell.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_kit.cli import main
from agent_kit.evaluation.grid import GRID_SCHEMA, grid_spec
from agent_kit.evaluation.local_cells import EvalLayout, base_settings

ROOT = Path(__file__).resolve().parents[2]
WORDLE = ROOT / "examples" / "wordle"
SOLVER = f"scripted:{WORDLE / 'policies.py'}:Solver"
SLOPPY = f"scripted:{WORDLE / 'policies.py'}:Sloppy"


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """Two holdout prompts."""
    path = tmp_path / "two.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": "b"}\n', encoding="utf-8")
    return path


def _argv(dataset: Path, out: Path, *extra: str) -> list[str]:
    return [
        "eval", str(WORDLE / "agent.py"), "--dataset", str(dataset), "--policy", SOLVER,
        "--samples", "2", "--workers", "1", "--out", str(out), *extra,
    ]  # fmt: skip


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


BAD = [
    (["--temperature", "nan"], "--temperature must be 0..2, got nan"),
    (["--temperature", "-1"], "--temperature must be 0..2, got -1"),
    (["--top-p", "2"], "--top-p must be in (0, 1], got 2"),
    (["--max-tokens", "-5"], "--max-tokens must be ≥ 1, got -5"),
    (["--rollout-timeout", "nan"], "--rollout-timeout must be > 0"),
    (["--concurrency", "0"], "--concurrency must be"),
    (["--success-threshold", "nan"], "--success-threshold must be a finite number"),
    (["--policy", f"scripted:{WORDLE / 'policies.py'}:Nope"], "policies.py defines no 'Nope'"),
    (["--grid", "env.AWS_REGION=us-east-1,eu-west-1"], "env.AWS_REGION"),
    (["--grid", "env.AWS_ENDPOINT_URL_S3=http://x"], "the driver sets"),
    (["--grid", "env.RFT_RUNTIME_ENDPOINT=http://x"], "the driver sets"),
    (["--grid", "env.AGENT_KIT_PORT=1,2"], "the driver sets"),
]


@pytest.mark.parametrize(("extra", "message"), BAD)
@pytest.mark.parametrize("plan", [False, True], ids=["run", "plan"])
def test_bad_shared_settings_are_refused_before_the_first_cell(
    tmp_path: Path,
    dataset: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
    plan: bool,
) -> None:
    """Each bad setting or policy is one line, exit 2, with and without --plan; the --out
    directory is not created (no grid.json)."""
    out = tmp_path / "ev"
    err = _refused(_argv(dataset, out, *extra, *(["--plan"] if plan else [])), capsys)
    assert message in err
    assert not out.exists()


@pytest.mark.parametrize("plan", [False, True], ids=["run", "plan"])
def test_a_holdout_too_large_for_a_cell_is_refused_by_plan_and_run_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], plan: bool
) -> None:
    """A 1,100-prompt holdout: the same line from --plan and from the run, before any cell."""
    data = tmp_path / "big.jsonl"
    data.write_text("".join(f'{{"prompt": "p{i}"}}\n' for i in range(1100)), encoding="utf-8")
    out = tmp_path / "ev"
    err = _refused(_argv(data, out, *(["--plan"] if plan else [])), capsys)
    assert "the holdout has 1100 prompts; a grid cell plays at most 1024" in err
    assert not out.exists()


def test_a_grid_too_large_to_tabulate_is_refused_at_once(
    tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """200,000 cells (1,000 × 200 values of two env axes) are one line naming the size and the
    limit, for --plan too, before the cells are listed."""
    axes = [
        "--grid", "env.A=" + ",".join(str(i) for i in range(1000)),
        "--grid", "env.B=" + ",".join(str(i) for i in range(200)),
    ]  # fmt: skip
    out = tmp_path / "ev"
    for extra in ([], ["--plan"]):
        err = _refused(_argv(dataset, out, *axes, *extra), capsys)
        assert "the grid has 200,000 cells" in err
        assert "at most 1,000" in err
    assert not out.exists()


def test_a_grid_at_the_size_limit_plans(
    tmp_path: Path, dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1,000 cells (2 policies × 500 temperatures) are planned: cells and rollouts counted."""
    temps = ",".join(f"{i / 250:g}" for i in range(500))
    argv = _argv(dataset, tmp_path / "ev", "--policy", SLOPPY, "--grid", f"temperature={temps}")
    assert main([*argv, "--plan", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (plan["cells"], plan["rollouts"]) == (1000, 1000 * 2 * 2)


def test_a_rerun_may_add_a_policy(tmp_path: Path, dataset: Path) -> None:
    """The grid.json of a one-policy grid (its shared settings as the command gives them)
    accepts the same grid with a second policy: the policy list is no shared setting."""
    options = {"policy": [SOLVER], "concurrency": 4, "seed": 0, "success_threshold": 1.0}
    first = grid_spec("agent.py", str(dataset), [SOLVER], [], 2, base_settings(options))
    layout = EvalLayout(tmp_path / "ev")
    layout.check(first)
    layout.grid.write_text(json.dumps(first.document()), encoding="utf-8")
    options["policy"] = [SOLVER, SLOPPY]
    second = grid_spec("agent.py", str(dataset), [SOLVER, SLOPPY], [], 2, base_settings(options))
    layout.check(second)  # no "holds another grid"
    assert "policy" not in second.document()["base"]


def test_an_older_grid_file_with_the_policies_in_its_base_accepts_a_new_policy(
    tmp_path: Path, dataset: Path
) -> None:
    """A grid.json of an earlier build (the policy list among the shared settings) still
    lets a re-run add a policy."""
    layout = EvalLayout(tmp_path / "ev")
    tmp_path.joinpath("ev").mkdir()
    old = {
        "schema": GRID_SCHEMA, "entrypoint": "agent.py", "dataset": str(dataset),
        "samples": 2, "base": {"policy": [SOLVER], "seed": 0},
    }  # fmt: skip
    layout.grid.write_text(json.dumps(old), encoding="utf-8")
    layout.check(grid_spec("agent.py", str(dataset), [SOLVER, SLOPPY], [], 2, {"seed": 0}))
