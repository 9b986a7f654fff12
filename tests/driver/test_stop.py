"""A run's stop by signal (driver/stop.py) and the run configuration's own checks (config.py)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.stop import GracefulStop
from agent_kit.errors import Aborted, UsageError


@pytest.mark.usefixtures("handled_signals")
async def test_first_signal_sets_the_stop_and_is_reported() -> None:
    """The first SIGINT sets the stop event, calls the hook once, and the job still returns."""
    before = signal.getsignal(signal.SIGINT)
    heard: list[signal.Signals] = []
    stop = GracefulStop(heard.append)

    async def job(stopped: asyncio.Event) -> str:
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.wait_for(stopped.wait(), 10)
        return "finished"

    assert await stop.guard(job) == "finished"
    assert heard == [signal.SIGINT]
    assert stop.first is signal.SIGINT
    assert signal.getsignal(signal.SIGINT) == before  # the handler is given back


@pytest.mark.usefixtures("handled_signals")
async def test_second_signal_aborts_with_the_first() -> None:
    """A second signal cancels the job and guard raises Aborted naming the first signal."""
    stop = GracefulStop()

    async def job(stopped: asyncio.Event) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stopped.wait(), 10)
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(30)  # cancelled by the second signal

    with pytest.raises(Aborted) as caught:
        await stop.guard(job)
    assert caught.value.signum is signal.SIGTERM
    assert stop.received == [signal.SIGTERM, signal.SIGINT]


async def test_an_ignored_signal_stays_ignored() -> None:
    """A signal the parent left ignored (a shell's background job) is not taken over."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:

        async def job(stopped: asyncio.Event) -> object:
            return signal.getsignal(signal.SIGTERM)

        assert await GracefulStop().guard(job) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_run_config_refuses_a_negative_grace() -> None:
    """A RunConfig cannot hold a negative grace period."""
    with pytest.raises(UsageError, match="--grace must be ≥ 0, got -1"):
        RunConfig(grace=-1)


def test_run_config_check(tmp_path: Path) -> None:
    """check() names the missing target, a tunnel without a port and an --out that is a file."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "x"}\n')
    with pytest.raises(UsageError, match="give ENTRYPOINT and --dataset"):
        RunConfig(dataset=data, out=tmp_path / "runs").check()
    tunnel = RunConfig("a.py", data, JobConfig(), advertise_url="https://x.example")
    with pytest.raises(UsageError, match="--advertise-url needs --emulator-port"):
        tunnel.check()
    with pytest.raises(UsageError, match="is not a directory"):
        RunConfig("a.py", data, JobConfig(), out=data).check()
    RunConfig("a.py", data, JobConfig(), out=tmp_path / "new" / "runs").check()
    assert (tmp_path / "new" / "runs").is_dir()
    RunConfig(resume=tmp_path / "some-run", out=data).check()  # a resume ignores --out
