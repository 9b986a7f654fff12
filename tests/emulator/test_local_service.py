"""local_service: the one way the emulator is brought up on loopback (driver, invoke, replay,
test kit)."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest
from conftest import CannedPolicy
from test_emulator_server import SIGV4

from agent_kit.emulator.local_service import local_service
from agent_kit.store import RunStore

pytestmark = pytest.mark.e2e


class _FailingClose(CannedPolicy):
    """A canned policy whose close fails."""

    async def aclose(self) -> None:
        """Fail to close."""
        raise RuntimeError("close failed")


async def test_serves_until_the_block_ends_then_closes_the_policy(tmp_path: Path) -> None:
    """Inside the block the URL answers; after it the port is released and the policy closed."""
    policy = CannedPolicy()
    with RunStore.open(tmp_path / "run") as store:
        async with local_service(store, policy, seed=3, region="eu-west-1") as svc:
            assert svc.endpoint == svc.url
            assert svc.url.startswith("http://127.0.0.1:")
            assert svc.emulator.seed == 3
            assert svc.emulator.region == "eu-west-1"
            assert svc.gate is None
            async with httpx.AsyncClient() as client:
                assert (await client.get(f"{svc.url}/health")).status_code == 200
            assert not policy.closed
        assert policy.closed
        async with httpx.AsyncClient() as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(f"{svc.url}/health")


async def test_prefix_gate_and_a_start_left_to_the_caller(tmp_path: Path) -> None:
    """With start=False the port is bound but serves only after start(); the endpoint carries
    the path prefix, the gate turns requests away once closed, and own_policy=False leaves the
    policy open."""
    policy = CannedPolicy()
    with RunStore.open(tmp_path / "run") as store:
        service = local_service(
            store, policy, path_prefix="tok", gate=True, start=False, own_policy=False
        )
        async with service as svc:
            assert svc.endpoint == f"{svc.url}/tok"
            job = svc.emulator.create_job("j", {}).arn
            assert await svc.start() == svc.endpoint
            tid = svc.emulator.open_trajectory(job, "p").id
            body = {"TrajectoryId": tid, "Status": "ready", "JobArn": job}
            headers = {"authorization": SIGV4}
            async with httpx.AsyncClient() as client:
                unprefixed = await client.post(
                    f"{svc.url}/complete-rollout", json=body, headers=headers
                )
                prefixed = await client.post(
                    f"{svc.endpoint}/complete-rollout", json=body, headers=headers
                )
                assert svc.gate is not None
                await svc.gate.close()
                closed = await client.post(
                    f"{svc.endpoint}/complete-rollout", json=body, headers=headers
                )
            assert unprefixed.status_code == 404
            assert prefixed.status_code == 200, prefixed.text
            assert closed.status_code == 400
            assert "ended" in closed.text
        assert not policy.closed


async def test_a_failing_policy_close_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A policy that fails to close leaves a debug record; the block's exit does not raise."""
    with RunStore.open(tmp_path / "run") as store, caplog.at_level(logging.DEBUG):
        async with local_service(store, _FailingClose()):
            pass
    (record,) = [r for r in caplog.records if "closing the policy" in r.getMessage()]
    assert record.levelno == logging.DEBUG
    assert "close failed" in record.getMessage()
