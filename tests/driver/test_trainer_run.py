"""``agent-kit run --contract rl-toolkit``: the trainer's side of agentcore-rl-toolkit's contract.

The Wordle entrypoint runs as a real agent subprocess; the driver's S3 is moto's server on
127.0.0.1 (moto stands in for Amazon S3, reached by real botocore clients through
``AWS_ENDPOINT_URL_S3``), and the emulator serves the policy on a per-trajectory base_url.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers import AGENTS, WORDLE_AGENT, holdout, wordle_config
from typer.testing import CliRunner

from agent_kit.cli import app as cli_app
from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.local import run_local
from agent_kit.driver.trainer_side import MODEL_ID, LocalS3
from agent_kit.errors import UsageError
from agent_kit.settings import DEFAULTS, Settings
from agent_kit.store import INVOCATION_EVENT, RunStore

pytestmark = pytest.mark.e2e


def _config(name: str, policy: str | None = None, **extra: Any) -> JobConfig:
    """A small rl-toolkit job (group 2, temperature 0) of the scripted Wordle solver, or of
    ``policy`` where given."""
    settings = {"group_size": 2, "concurrency": 4, "temperature": 0.0, "contract": "rl-toolkit"}
    config = wordle_config(name, **{**settings, **extra})
    return config if policy is None else replace(config, policy=policy)


def test_wordle_plays_the_rl_toolkit_contract_end_to_end(tmp_path: Path) -> None:
    """Every rollout answers processing, its S3 object's rewards land in the store with turns."""
    config = _config("wordle-rl")
    result = asyncio.run(
        run_local(
            RunConfig(
                entrypoint=str(WORDLE_AGENT),
                dataset=holdout(tmp_path / "rows.jsonl", 2),
                job=config,
                out=tmp_path / "runs",
            )
        )
    )
    assert result.status == "completed", result.failure
    assert result.succeeded == result.total == 4
    with RunStore.open(result.run_dir, readonly=True) as store:
        rows = store.list_trajectories(job_arn=result.job_arn)
        assert len(rows) == 4
        for row in rows:
            assert row.state == "REWARDED"
            block = row.payload["_rollout"]
            assert block["api_key"] == "<redacted>"
            assert block["exp_id"] == "wordle-rl"
            assert block["input_id"] == f"p{row.prompt_index}"
            assert block["base_url"].endswith(f"/trainer/{row.id}/v1")
            assert row.payload["answer"]  # the row's fields at the top level
            turns = store.list_turns(row.id)
            assert turns
            assert all(t.request["model"] == MODEL_ID for t in turns)
            assert all(row.payload["answer"] not in json.dumps(t.request) for t in turns)
            answers = [
                e.detail
                for e in store.list_events(trajectory_id=row.id)
                if e.kind == INVOCATION_EVENT
            ]
            assert answers[0]["body"]["status"] == "processing"
            assert answers[0]["body"]["result_key"].startswith(f"wordle-rl/p{row.prompt_index}/")
            final = answers[-1]["body"]
            reward = store.get_reward(row.id)
            assert reward is not None
            assert final["rewards"] == pytest.approx(reward.total)
            assert final["status_code"] == 200
        text = (result.run_dir / "run.sqlite").read_bytes()
    assert result.written_summary().metrics
    keys = re.findall(rb'"api_key": ?"([^"]*)"', text)
    assert keys
    assert set(keys) == {b"<redacted>"}  # the run's key itself is never stored
    assert (result.run_dir / "report.html").is_file()


def test_an_agent_that_does_not_answer_processing_fails_the_job(tmp_path: Path) -> None:
    """An MTRL-only answer (no processing + result_key) is a job failure naming the contract."""
    result = asyncio.run(
        run_local(
            RunConfig(
                entrypoint=str(AGENTS / "echo_agent.py"),
                dataset=holdout(tmp_path / "rows.jsonl", 1),
                job=_config("echo-rl", max_retries=0),
                out=tmp_path / "runs",
            )
        )
    )
    assert result.status == "failed"
    assert result.failure is not None
    assert "processing" in result.failure
    assert "agentcore-rl-toolkit" in result.failure


def test_missing_moto_is_one_line_saying_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without moto, the rl-toolkit mode refuses to start with a one-line install hint."""
    monkeypatch.setitem(sys.modules, "moto.server", None)
    with pytest.raises(UsageError, match=r"pip install 'moto\[s3,server\]'"):
        LocalS3().start()
    runner = CliRunner()
    outcome = runner.invoke(
        cli_app,
        [
            "run",
            str(WORDLE_AGENT),
            "--dataset",
            str(holdout(tmp_path / "rows.jsonl", 1)),
            "--contract",
            "rl-toolkit",
            "--group-size",
            "2",
            "--out",
            str(tmp_path / "runs"),
        ],
    )
    assert outcome.exit_code == 2, outcome.output
    assert outcome.stderr.startswith("error: --contract rl-toolkit needs moto")
    assert outcome.stderr.count("\n") == 1
    assert not list((tmp_path / "runs").glob("*"))


def test_an_unknown_contract_is_refused() -> None:
    """--contract takes mtrl or rl-toolkit only."""
    with pytest.raises(UsageError, match="--contract must be one of mtrl, rl-toolkit"):
        JobConfig(contract="verl").validated(3)


def test_a_hand_written_rl_toolkit_agent_runs_unchanged(tmp_path: Path) -> None:
    """An entrypoint written for agentcore-rl-toolkit without agent_kit plays the same mode."""
    result = asyncio.run(
        run_local(
            RunConfig(
                entrypoint=str(AGENTS / "rltoolkit_agent.py"),
                dataset=holdout(tmp_path / "rows.jsonl", 1),
                job=_config("hand-rl", policy="random"),
                out=tmp_path / "runs",
            )
        )
    )
    assert result.status == "completed", result.failure
    assert result.succeeded == 2
    with RunStore.open(result.run_dir, readonly=True) as store:
        for row in store.list_trajectories(job_arn=result.job_arn):
            assert store.count_turns(row.id) == 1
            reward = store.get_reward(row.id)
            assert reward is not None
            assert reward.total == 1.0


def _edge_run(
    tmp_path: Path, write: str, retries: int = 0, settings: Settings = DEFAULTS, **row: object
) -> Any:
    """One prompt × 2 rollouts of the result agent writing ``write`` (under ``settings``)."""
    dataset = tmp_path / "rows.jsonl"
    task = json.dumps({"prompt": "play", "write": write, **row})
    dataset.write_text(json.dumps({"prompt": task}) + "\n")
    return asyncio.run(
        run_local(
            RunConfig(
                entrypoint=str(AGENTS / "rltoolkit_result_agent.py"),
                dataset=dataset,
                job=_config("edge-rl", "random", max_retries=retries, rollout_timeout=60),
                out=tmp_path / "runs",
                settings=settings,
            )
        )
    )


def _reasons(result: Any) -> list[str]:
    with RunStore.open(result.run_dir, readonly=True) as store:
        return [row.reason or "" for row in store.list_trajectories(job_arn=result.job_arn)]


def test_a_result_object_holding_null_fails_the_job_at_once(tmp_path: Path) -> None:
    """An object that holds JSON null is read (not taken for a missing key and waited on):
    the job fails saying the object held null and no rewards."""
    result = _edge_run(tmp_path, "null")
    assert result.status == "failed"
    assert result.failure is not None
    assert "held null" in result.failure
    assert all("rollout_timeout" not in reason for reason in _reasons(result))


def test_rewards_overflowing_to_inf_fail_the_rollout_and_store_nothing(tmp_path: Path) -> None:
    """rewards [1e308, 1e308] do not crash the driver: the job fails saying the rewards have no
    finite total, and no reward is stored."""
    result = _edge_run(tmp_path, "overflow")
    assert result.status == "failed"
    assert result.failure is not None
    assert "finite" in result.failure
    with RunStore.open(result.run_dir, readonly=True) as store:
        for row in store.list_trajectories(job_arn=result.job_arn):
            assert store.get_reward(row.id) is None


def test_a_result_key_shared_by_two_rollouts_fails_the_job(tmp_path: Path) -> None:
    """Two rollouts answering the same result_key are not rewarded from one object: the job
    fails naming the shared key."""
    result = _edge_run(tmp_path, "shared")
    assert result.status == "failed"
    assert result.failure is not None
    assert "result_key" in result.failure
    assert "/p0.json" in result.failure
    with RunStore.open(result.run_dir, readonly=True) as store:
        rows = store.list_trajectories(job_arn=result.job_arn)
        assert len(rows) == 2
        assert any("result_key" in (row.reason or "") for row in rows)


def test_a_result_object_over_the_cap_is_a_final_limit(tmp_path: Path) -> None:
    """A result object larger than $AGENT_KIT_MAX_RESULT_BYTES is not read: each rollout ends
    with a limit: reason naming the cap (final, not retried), and nothing of it is stored."""
    capped = Settings.from_environ({"AGENT_KIT_MAX_RESULT_BYTES": "2048"})
    result = _edge_run(tmp_path, "large", retries=2, settings=capped, size=8192)
    reasons = _reasons(result)
    assert len(reasons) == 2  # no retry
    assert all(r.startswith("limit:") and "AGENT_KIT_MAX_RESULT_BYTES" in r for r in reasons)
    assert result.succeeded == 0
    text = (result.run_dir / "run.sqlite").read_bytes()
    assert b"x" * 4096 not in text
