"""Outcomes that no retry can change end a rollout at once: the turn cap and an answer over the
size cap (each a ``limit``), and an agent that refuses its row with HTTP 4xx. Real emulator,
real agent subprocesses, real store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.invokers.base import MAX_ANSWER_ENV
from agent_kit.driver.job import JobResult
from agent_kit.driver.local import run_local
from agent_kit.emulator.core import Emulator
from agent_kit.reporting.terminal import render_terminal
from agent_kit.settings import Settings
from agent_kit.store import INVOCATION_EVENT, RunStore
from agent_kit.store.events import (
    MEMORY_LIMIT_EVENT,
    NO_SAMPLE_REASON,
    REFUSED_REASON,
    TURN_LIMIT_EVENT,
)

pytestmark = pytest.mark.e2e

AGENTS = Path(__file__).parents[1] / "agents"
#: The emulator's turn cap in these tests (256 by default; smaller keeps the test quick).
CAP = 12
#: A run that waited out a grace or retried a final outcome would not end within this.
DEADLINE_S = 90.0


def _dataset(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps({"prompt": json.dumps(t)}) + "\n" for t in tasks))
    return path


def _end_summary(result: JobResult) -> str:
    """The end summary as ``agent-kit run`` prints it (plain text, wide)."""
    assert result.summary is not None
    assert result.run_dir is not None
    console = Console(record=True, width=400, color_system=None)
    console.print(render_terminal(result.summary, result.run_dir), crop=False)
    return console.export_text()


async def test_a_rollout_on_the_turn_cap_is_final_and_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollout that ends on the emulator's turn cap is final at once with a ``limit`` reason
    (summary.json and the end summary), never retried, and the job completes."""
    assert Emulator.__init__.__kwdefaults__ is not None
    monkeypatch.setitem(Emulator.__init__.__kwdefaults__, "max_turns_per_trajectory", CAP)
    data = _dataset(tmp_path / "d.jsonl", [{"bad": True}, {"turns": 1}])
    config = JobConfig(name="cap", group_size=2, concurrency=4, max_retries=3, report_grace=60)
    result = await asyncio.wait_for(
        run_local(
            RunConfig(
                entrypoint=str(AGENTS / "turn_cap_agent.py"), dataset=data, job=config, out=tmp_path
            )
        ),
        DEADLINE_S,
    )
    assert result.status == "completed"
    assert (result.succeeded, result.failed) == (2, 2)
    reason = f"limit: the rollout reached the limit of {CAP} policy calls per trajectory"
    with RunStore.open(result.run_dir, readonly=True) as store:
        capped = [r for r in store.list_trajectories(job_arn=result.job_arn) if r.prompt_index == 0]
        assert sorted(r.attempt for r in capped) == [0, 0]  # one attempt per slot: no retry
        assert all((r.state, r.reason) == ("TIMED_OUT", reason) for r in capped)
        assert not store.list_events(kind="rollout_retry")
        assert len(store.list_events(kind=TURN_LIMIT_EVENT)) == 2
        assert all(len(store.list_turns(r.id)) == CAP for r in capped)
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["failures"] == [{"reason": reason, "count": 2}]
    assert summary["counts"]["retries"] == 0
    assert summary["run"]["job_failures"] == []
    text = _end_summary(result)
    assert f"rollouts without a reward: {reason} ×2" in text
    assert f"agent-kit invoke {AGENTS / 'turn_cap_agent.py'} --dataset {data} --row 0" in text


@pytest.mark.parametrize(
    ("turns", "reason"),
    [
        (0, f"{NO_SAMPLE_REASON} (the agent answered HTTP 400)"),
        (2, f"{REFUSED_REASON} after 2 policy calls (the agent answered HTTP 400)"),
    ],
)
async def test_an_agent_that_refuses_its_row_fails_at_once(
    tmp_path: Path, turns: int, reason: str
) -> None:
    """An HTTP 400 from the agent ends the rollout at once (no report grace, no retry), its
    message shows once in the end summary, and "next" suggests playing that row, not a reward
    audit."""
    data = _dataset(tmp_path / "d.jsonl", [{"bad": True, "turns": turns}])
    config = JobConfig(
        name="refuse", group_size=2, concurrency=1, rollout_timeout=3600, report_grace=3600
    )
    result = await asyncio.wait_for(
        run_local(
            RunConfig(
                entrypoint=str(AGENTS / "refuse_agent.py"), dataset=data, job=config, out=tmp_path
            )
        ),
        DEADLINE_S,
    )
    assert result.status == "failed"
    assert result.failure == reason
    with RunStore.open(result.run_dir, readonly=True) as store:
        rows = store.list_trajectories(job_arn=result.job_arn)
        assert [r.attempt for r in rows] == [0]  # fail-fast: the first refusal ends the job
        assert rows[0].reason == reason
        assert not store.list_events(kind="rollout_retry")
    text = _end_summary(result)
    assert text.count("unplayable row: no secret word") == 1
    assert "doctor reward" not in text
    assert f"--dataset {data} --row 0" in text


async def test_an_answer_over_the_size_cap_is_cut_off_and_final(tmp_path: Path) -> None:
    """Answers of 3 MB under a 1 MB cap (JSON or streamed) are not read past the cap nor
    stored: a rollout the agent left open ends at once as a ``limit`` (not retried), one it
    rewarded keeps its reward, and summary.json names the limit."""
    tasks = [
        {"big": 3, "report": False},
        {"big": 3, "report": False, "stream": True},
        {"big": 3},
    ]
    data = _dataset(tmp_path / "d.jsonl", tasks)
    config = JobConfig(name="big", group_size=2, concurrency=6, max_retries=3, report_grace=60)
    result = await asyncio.wait_for(
        run_local(
            RunConfig(
                entrypoint=str(AGENTS / "big_answer_agent.py"),
                dataset=data,
                job=config,
                out=tmp_path,
                settings=Settings(max_answer_bytes=2**20),
            )
        ),
        DEADLINE_S,
    )
    assert result.status == "completed"
    assert (result.succeeded, result.failed) == (2, 4)
    limit = f"the agent's answer exceeded the limit of {2**20} bytes ({MAX_ANSWER_ENV})"
    reason = f"limit: {limit}"
    with RunStore.open(result.run_dir, readonly=True) as store:
        rows = store.list_trajectories(job_arn=result.job_arn)
        assert len(rows) == 6  # one attempt per slot: no retry
        assert all((r.state, r.reason) == ("TIMED_OUT", reason) for r in rows if r.prompt_index < 2)
        assert all(r.state == "REWARDED" for r in rows if r.prompt_index == 2)
        answers = [e.detail for e in store.list_events(kind=INVOCATION_EVENT)]
        assert len(answers) == 6
        assert all(a["body"] is None and a["error"] == reason for a in answers)
        assert not store.list_events(kind="rollout_retry")
    assert (result.run_dir / "run.sqlite").stat().st_size < 2**20  # 18 MB of answers, unstored
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["failures"] == [{"reason": reason, "count": 4}]
    assert summary["agent_failures"][0]["reason"] == f"agent: {reason}"
    assert f"rollouts without a reward: {reason} ×4" in _end_summary(result)


async def test_an_agent_over_its_memory_cap_is_killed_and_its_rollouts_are_limits(
    tmp_path: Path,
) -> None:
    """An agent process that grows past ``--agent-memory`` (250 MiB; it leaks up to 2 GB) is
    killed and restarted: the rollouts it was serving end at once as a ``limit`` naming the
    worker (not retried), the next ones are rewarded, and the kill is an event."""
    data = _dataset(tmp_path / "d.jsonl", [{"hog": 2048}, {"turns": 1}])
    config = JobConfig(name="hog", group_size=2, concurrency=2, max_retries=3, report_grace=60)
    result = await asyncio.wait_for(
        run_local(
            RunConfig(
                entrypoint=str(AGENTS / "hog_agent.py"),
                dataset=data,
                job=config,
                out=tmp_path,
                workers=1,
                agent_memory=250 * 2**20,
            )
        ),
        DEADLINE_S,
    )
    assert (result.succeeded, result.failed) == (2, 2)
    reason = "limit: agent worker 0 was killed for going over --agent-memory (250 MiB)"
    with RunStore.open(result.run_dir, readonly=True) as store:
        rows = store.list_trajectories(job_arn=result.job_arn)
        assert len(rows) == 4  # one attempt per slot: no retry
        assert all(
            (r.state, r.reason) == ("TIMED_OUT", reason) for r in rows if r.prompt_index == 0
        )
        kills = store.list_events(kind=MEMORY_LIMIT_EVENT)
        assert kills
        assert all(k.detail["rss"] > k.detail["limit"] == 250 * 2**20 for k in kills)
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["failures"] == [{"reason": reason, "count": 2}]
    assert f"rollouts without a reward: {reason} ×2" in _end_summary(result)
