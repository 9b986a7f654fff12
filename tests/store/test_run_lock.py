"""One owner per run directory: a live run refuses a second driver; a dead holder's lock is free."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.hooks import JobHooks, Progress
from agent_kit.driver.local import run_local
from agent_kit.errors import RunInUse
from agent_kit.store import RunStore
from agent_kit.store.layout import RunLayout
from agent_kit.store.runlock import RunLock, live_holder

AGENTS = Path(__file__).parents[1] / "agents"


def test_second_holder_is_refused_with_the_holders_name(tmp_path: Path) -> None:
    """While one lock is held, acquiring again raises RunInUse naming the pid; release frees it."""
    lock = RunLock.acquire(tmp_path)
    holder = json.loads(RunLayout(tmp_path).lock.read_text())
    assert holder["pid"] == os.getpid()
    with pytest.raises(RunInUse, match=rf"in use by pid {os.getpid()} .*kill -INT {os.getpid()}"):
        RunLock.acquire(tmp_path)
    assert RunInUse.exit_code == 12
    lock.release()
    RunLock.acquire(tmp_path).release()


@pytest.mark.e2e
def test_lock_of_a_killed_holder_is_taken_over(tmp_path: Path) -> None:
    """A holder killed with SIGKILL leaves a lock file that the next driver simply takes."""
    code = (
        "import sys, time; from pathlib import Path; from agent_kit.store.runlock import "
        "RunLock; RunLock.acquire(Path(sys.argv[1])); print('held', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(RunInUse, match=f"pid {proc.pid}"):
            RunLock.acquire(tmp_path)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()
    RunLock.acquire(tmp_path).release()


@pytest.mark.e2e
async def test_resume_of_a_live_run_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    """--resume while the run is going raises RunInUse, and the live run completes untouched."""
    data = tmp_path / "d.jsonl"
    tasks = [{"id": i, "turns": 2} for i in range(4)]
    data.write_text("".join(json.dumps({"prompt": json.dumps(t)}) + "\n" for t in tasks))
    config = JobConfig(name="live", group_size=2, concurrency=2)
    started = asyncio.Event()

    def hook(p: Progress) -> None:
        if p.done >= 1:
            started.set()

    live = asyncio.create_task(
        run_local(
            RunConfig(
                entrypoint=str(AGENTS / "good_agent.py"), dataset=data, job=config, out=tmp_path
            ),
            JobHooks(progress=hook),
        )
    )
    await asyncio.wait_for(started.wait(), 60)
    with pytest.raises(RunInUse, match="in use by pid"):
        await run_local(RunConfig(resume=tmp_path / "live"))
    with pytest.raises(RunInUse):  # a new run under the same name is refused the same way
        await run_local(
            RunConfig(
                entrypoint=str(AGENTS / "good_agent.py"), dataset=data, job=config, out=tmp_path
            )
        )
    result = await live
    assert result.status == "completed"
    assert (result.total, result.succeeded) == (8, 8)
    with RunStore.open(result.run_dir, readonly=True) as store:
        assert not store.list_events(kind="job_resumed")
        (job,) = store.list_jobs()
        assert job.status == "completed"
    assert RunLayout(tmp_path / "live").lock.read_text() == ""  # released before run_local returns


def test_live_holder_names_the_holder_without_taking_the_lock(tmp_path: Path) -> None:
    """live_holder names a live holder, says None once it let go, and never takes the lock."""
    assert live_holder(tmp_path) is None  # no lock file at all
    lock = RunLock.acquire(tmp_path)
    holder = live_holder(tmp_path)
    assert holder is not None
    assert holder["pid"] == os.getpid()
    with pytest.raises(RunInUse):  # asking did not release or share it
        RunLock.acquire(tmp_path)
    lock.release()
    assert live_holder(tmp_path) is None
    RunLock.acquire(tmp_path).release()


def test_snapshot_reads_one_state_while_another_connection_writes(tmp_path: Path) -> None:
    """Reads inside RunStore.snapshot see the store as at its first read, not a later commit."""
    with RunStore.open(tmp_path) as writer, RunStore.open(tmp_path, readonly=True) as reader:
        writer.add_event("tick", {"i": 0})
        with reader.snapshot():
            before = reader.list_events(kind="tick")
            writer.add_event("tick", {"i": 1})
            during = reader.list_events(kind="tick")
        after = reader.list_events(kind="tick")
    assert len(before) == len(during) == 1
    assert len(after) == 2
