"""The one session every runner uses (agent_kit.driver.session): what it serves, makes, starts
and closes, whatever the block does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.invokers import InvokeResult
from agent_kit.driver.job_setup import default_workers
from agent_kit.driver.session import Session, open_session
from agent_kit.errors import AgentKitError, InvokerError
from agent_kit.store import RunStore


class _Agents:
    """An invoker that records what the session did with it."""

    name = "fake"

    def __init__(self, fail_start: bool = False) -> None:
        self.fail_start = fail_start
        self.calls: list[str] = []

    async def spawn(self) -> None:
        self.calls.append("spawn")

    async def start(self) -> None:
        self.calls.append("start")
        if self.fail_start:
            raise InvokerError("the agent did not start")

    async def invoke(self, payload: dict[str, Any], session_id: str, timeout: float) -> Any:
        return InvokeResult(status="ok", body={})

    async def aclose(self) -> None:
        self.calls.append("aclose")


def _refused(url: str) -> bool:
    """Whether nothing answers at ``url`` any more (the service let its port go)."""
    try:
        httpx.get(f"{url}/ping", timeout=5.0)
    except httpx.TransportError:
        return True
    return False


def _session(tmp_path: Path, agents: _Agents) -> tuple[Session, RunStore]:
    store = RunStore.open(tmp_path / "run")
    return Session(store, tmp_path / "run", "agent.py", JobConfig(), invoker=agents), store


@pytest.mark.e2e  # the emulator is served on a real loopback port
def test_open_session_closes_agents_and_service_when_the_block_raises(tmp_path: Path) -> None:
    """A block that raises still closes the agents, then stops the served emulator; the job it
    created is in the store, and the block's own error is what surfaces."""
    agents = _Agents()
    session, store = _session(tmp_path, agents)
    seen: dict[str, str] = {}

    async def main() -> None:
        async with open_session(session, "random", "demo", {"job": {}}) as opened:
            seen["url"], seen["arn"] = opened.svc.url, opened.job_arn
            assert agents.calls == ["spawn", "start"]
            async with httpx.AsyncClient() as client:  # served while the block runs
                assert (
                    await client.get(f"{opened.svc.url}/health", timeout=10.0)
                ).status_code == 200
            raise ValueError("the body failed")

    try:
        with pytest.raises(ValueError, match="the body failed"):
            asyncio.run(main())
        assert agents.calls == ["spawn", "start", "aclose"]
        assert _refused(seen["url"])
        assert [job.arn for job in store.list_jobs()] == [seen["arn"]]
        with pytest.raises(AgentKitError, match="not served"):
            _ = session.svc
    finally:
        store.close()


@pytest.mark.e2e
def test_open_session_closes_agents_that_fail_to_start(tmp_path: Path) -> None:
    """Agents that cannot start are closed all the same, the service stops, and the invoker's
    error reaches the caller (the block never runs)."""
    agents = _Agents(fail_start=True)
    session, store = _session(tmp_path, agents)
    ran: list[str] = []

    async def main() -> None:
        async with open_session(session, "random", "demo", {}) as opened:
            ran.append(opened.svc.url)

    try:
        with pytest.raises(InvokerError, match="did not start"):
            asyncio.run(main())
        assert ran == []
        assert agents.calls == ["spawn", "start", "aclose"]
    finally:
        store.close()


def test_session_settings_come_from_the_one_record(tmp_path: Path) -> None:
    """Workers default as ``agent-kit run``'s (one per usable core, at most the job's
    concurrency) unless the record names them; signatures are verified only for the agent
    processes the session starts itself, and never with ``lenient_auth``."""
    store = RunStore.open(tmp_path / "run")
    try:
        job = JobConfig(concurrency=3)
        plain = Session(store, tmp_path, "agent.py", job)
        assert plain.workers == default_workers(3)
        assert Session(store, tmp_path, "agent.py", job, RunConfig(workers=5)).workers == 5
        assert plain.verifies()
        assert not plain.verifies(advertised=True)
        assert not Session(
            store, tmp_path, "agent.py", job, RunConfig(lenient_auth=True)
        ).verifies()
        assert not Session(store, tmp_path, "http://127.0.0.1:1", job).verifies()
        assert not Session(store, tmp_path, "agent.py", job, invoker=_Agents()).verifies()
    finally:
        store.close()
