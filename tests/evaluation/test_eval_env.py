"""The ``env.NAME`` axis of `agent-kit eval` reaches the agent processes, and stays with the run.

``tests/agents/effort_agent.py`` rewards by its own setting, ``REASONING_EFFORT`` in its
environment (1.0 high, 0.25 low; unset, its reward raises: the floor). A grid over
``env.REASONING_EFFORT=low,high`` (real agent processes, the emulator on loopback, a scripted
policy) gives the two cells the means the setting dictates; re-running it keeps both cells; the
cells record the setting, so ``agent-kit replay`` of a cell and ``--resume`` of an interrupted
run give it again without it being set by hand (this process never sets it).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import AGENTS, SAY_POLICY

from agent_kit.cli import main
from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.hooks import JobHooks, Progress
from agent_kit.driver.local import run_local
from agent_kit.store import RunStore

pytestmark = pytest.mark.e2e

EFFORT_AGENT = AGENTS / "effort_agent.py"
LOW, HIGH = "policy-reasoning-effort-low", "policy-reasoning-effort-high"


@pytest.fixture(scope="module", autouse=True)
def _no_effort_here() -> Iterator[None]:
    """This process has no REASONING_EFFORT: the agents get it from the grid or the run."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("REASONING_EFFORT", raising=False)
        yield


def _dataset(path: Path, prompts: int) -> Path:
    path.write_text(
        "".join(json.dumps({"prompt": json.dumps({"n": i})}) + "\n" for i in range(prompts)),
        encoding="utf-8",
    )
    return path


def _argv(dataset: Path, out: Path) -> list[str]:
    return [
        "eval", str(EFFORT_AGENT), "--dataset", str(dataset), "--policy", SAY_POLICY,
        "--grid", "env.REASONING_EFFORT=low,high", "--samples", "2", "--workers", "1",
        "--out", str(out), "--json",
    ]  # fmt: skip


def _eval(argv: list[str]) -> dict[str, Any]:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(argv) == 0
    doc: dict[str, Any] = json.loads(stdout.getvalue().strip().splitlines()[-1])
    return doc


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """The low/high grid on two prompts × 2 samples: (dataset, eval directory, its table)."""
    tmp = tmp_path_factory.mktemp("eval-env")
    dataset = _dataset(tmp / "d.jsonl", 2)
    out = tmp / "grid"
    return dataset, out, _eval(_argv(dataset, out))


def test_each_cell_gets_its_env_value(grid: tuple[Path, Path, dict[str, Any]]) -> None:
    _, out, doc = grid
    figures = {c["id"]: c["figures"] for c in doc["cells"]}
    assert list(figures) == [LOW, HIGH]
    assert figures[LOW]["mean"] == pytest.approx(0.25)
    assert figures[HIGH]["mean"] == pytest.approx(1.0)
    assert figures[LOW]["n"] == figures[HIGH]["n"] == 4
    for ident, value in ((LOW, "low"), (HIGH, "high")):
        with RunStore.open(out / ident, readonly=True) as store:
            (job,) = store.list_jobs()
        assert job.config["agent_env"] == {"REASONING_EFFORT": value}


def test_a_rerun_keeps_both_cells(
    grid: tuple[Path, Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    dataset, out, doc = grid
    stores = [out / ident / "run.sqlite" for ident in (LOW, HIGH)]
    before = [s.stat().st_mtime_ns for s in stores]
    again = _eval(_argv(dataset, out))
    err = capsys.readouterr().err
    assert f"{LOW}: completed (kept)" in err
    assert f"{HIGH}: completed (kept)" in err
    assert [s.stat().st_mtime_ns for s in stores] == before
    assert [c["figures"]["mean"] for c in again["cells"]] == [
        c["figures"]["mean"] for c in doc["cells"]
    ]


@pytest.mark.parametrize("ident", [LOW, HIGH])
def test_a_replay_of_an_env_cell_is_identical(
    grid: tuple[Path, Path, dict[str, Any]], ident: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The replay's agents get the cell's recorded setting: every reward as recorded (without
    it the reward would raise and every episode read "reward changed")."""
    _, out, _ = grid
    code = main(["replay", str(out / ident), "--workers", "1", "--json"])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {e["status"] for e in report["episodes"]} == {"identical"}, report
    assert len(report["episodes"]) == 4
    assert code == 0
    with RunStore.open(Path(report["run_dir"]), readonly=True) as store:
        (job,) = store.list_jobs()
    assert job.config["agent_env"] == {"REASONING_EFFORT": ident.rsplit("-", 1)[1]}


async def test_a_resume_gives_the_recorded_env_again(tmp_path: Path) -> None:
    """A run started with extra_env and stopped after two rollouts, resumed without it: the
    resumed rollouts are rewarded under the recorded setting, none at the floor."""
    data = _dataset(tmp_path / "d.jsonl", 4)
    config = JobConfig(name="effort", group_size=2, concurrency=1, policy=SAY_POLICY)
    stop = asyncio.Event()

    def hook(progress: Progress) -> None:
        if progress.done >= 2:
            stop.set()

    effort = {"REASONING_EFFORT": "high"}
    run = RunConfig(str(EFFORT_AGENT), data, config, tmp_path, workers=1, extra_env=effort)
    first = await run_local(run, JobHooks(progress=hook, stop=stop))
    assert first.status == "interrupted"
    assert first.succeeded < 8
    resumed = await run_local(RunConfig(resume=first.run_dir, workers=1))
    assert resumed.status == "completed"
    with RunStore.open(first.run_dir, readonly=True) as store:
        rewarded = store.list_trajectories(job_arn=resumed.job_arn, states=["REWARDED"])
        rewards = [getattr(store.get_reward(t.id), "total", None) for t in rewarded]
    assert len(rewards) == 8
    assert rewards == [1.0] * 8
