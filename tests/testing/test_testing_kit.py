"""The public test kit: run_emulator() and reset_shared_state(), as a user's suite uses them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agent_kit import runtime_client
from agent_kit.testing import load_app, reset_shared_state, run_emulator

pytestmark = pytest.mark.e2e

COUNTER = Path(__file__).parents[1] / "example_counter.py"


def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "us-west-2")


def test_run_emulator_serves_a_rollout_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent given a minted payload plays against the loopback emulator and is rewarded."""
    _aws_env(monkeypatch)
    policy_file = tmp_path / "pol.py"
    policy_file.write_text(
        "def policy(request):\n"
        "    return {'tool_calls': [{'name': 'add', 'arguments': {'n': 3}}]}\n"
    )
    app = load_app(COUNTER)
    with run_emulator(f"scripted:{policy_file}:policy", run_dir=tmp_path / "run") as emu:
        assert emu.url.startswith("http://127.0.0.1:")
        payload = emu.mint(json.dumps({"target": 3}))
        with TestClient(app) as client:
            body = client.post("/invocations", json=payload).json()
        tid = payload["metadata"]["rolloutId"]
        row = emu.store.get_trajectory(tid)
        assert row is not None
        assert row.state == "REWARDED"
        reward = emu.store.get_reward(tid)
        assert reward is not None
        assert reward.total == body["reward"]
        assert len(emu.store.list_turns(tid)) == 1
    assert (tmp_path / "run" / "run.sqlite").is_file()


def test_run_emulator_without_run_dir_cleans_up() -> None:
    """Without run_dir the store lives in a temporary folder that is gone afterwards."""
    with run_emulator() as emu:
        folder = Path(emu.store.path).parent
        assert folder.is_dir()
    assert not folder.exists()


async def test_run_emulator_inside_a_running_event_loop(tmp_path: Path) -> None:
    """Used from async code (an async test, an asyncio bench loop), run_emulator serves and
    closes its scripted backend without 'asyncio.run() cannot be called from a running loop'."""
    policy_file = tmp_path / "pol.py"
    policy_file.write_text("def policy(request):\n    return {'content': 'done'}\n")
    with run_emulator(f"scripted:{policy_file}:policy", run_dir=tmp_path / "run") as emu:
        payload = emu.mint()
        assert payload["metadata"]["endpoint"] == emu.url
    assert (tmp_path / "run" / "run.sqlite").is_file()


def test_reset_shared_state_forgets_the_session_and_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After reset_shared_state() the next call builds a new botocore session and client."""
    _aws_env(monkeypatch)
    session = runtime_client.shared_session()
    client = runtime_client.job_runtime_client("us-west-2", "http://127.0.0.1:9")
    assert runtime_client.shared_session() is session
    reset_shared_state()
    assert runtime_client.shared_session() is not session
    assert runtime_client.job_runtime_client("us-west-2", "http://127.0.0.1:9") is not client
