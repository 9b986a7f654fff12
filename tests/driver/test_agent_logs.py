"""Agent logs are bounded: a worker's log stops at the cap with a marker; nothing else is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.invokers.agent_log import MAX_LOG_ENV, CappedLog
from agent_kit.driver.local import run_local
from agent_kit.errors import UsageError
from agent_kit.settings import Settings
from agent_kit.store import RunStore

AGENTS = Path(__file__).parents[1] / "agents"
CAP = 1 << 20


def test_capped_log_cuts_once_with_a_marker_and_counts_the_rest(tmp_path: Path) -> None:
    """Writes past the cap are dropped after one marker line; the count is noted later."""
    log = CappedLog(tmp_path / "a.log", cap=100)
    log.write(b"a" * 60)
    log.write(b"b" * 60)
    log.write(b"c" * 10)
    log.note_dropped()
    text = (tmp_path / "a.log").read_text()
    assert text.startswith("a" * 60 + "b" * 40 + "\n--- agent-kit: log cut here at 100 bytes")
    assert text.count("log cut here") == 1
    assert text.rstrip().endswith("30 bytes dropped so far ---")
    assert "c" not in text.replace("cut", "").replace("dropped", "")


def test_cap_from_environment() -> None:
    """$AGENT_KIT_MAX_LOG_BYTES sets the cap, 0 means none, and garbage is a usage error."""
    assert Settings().max_log_bytes == 50 << 20
    assert Settings.from_environ({MAX_LOG_ENV: "2048"}).max_log_bytes == 2048
    assert Settings.from_environ({MAX_LOG_ENV: "0"}).max_log_bytes is None
    with pytest.raises(UsageError, match=MAX_LOG_ENV):
        Settings.from_environ({MAX_LOG_ENV: "lots"})


@pytest.mark.e2e
async def test_agent_printing_10_mb_per_rollout_keeps_a_bounded_log(tmp_path: Path) -> None:
    """Four rollouts of 10 MB output each leave a log under the cap, and every one is rewarded."""
    data = tmp_path / "d.jsonl"
    rows = [json.dumps({"prompt": json.dumps({"reward": 1.0, "i": i})}) for i in range(2)]
    data.write_text("".join(r + "\n" for r in rows))
    config = JobConfig(name="chatty", group_size=2, concurrency=2, rollout_timeout=60)
    result = await run_local(
        RunConfig(
            entrypoint=str(AGENTS / "chatty_agent.py"),
            dataset=data,
            job=config,
            out=tmp_path,
            settings=Settings(max_log_bytes=CAP),
        )
    )
    assert result.status == "completed", result.failure
    with RunStore.open(result.run_dir, readonly=True) as store:
        states = [t.state for t in store.list_trajectories()]
    assert states == ["REWARDED"] * 4
    log = result.run_dir / "logs" / "agent-0.log"
    size = log.stat().st_size
    assert CAP < size < CAP + 1024
    text = log.read_text(errors="replace")
    assert text.count("log cut here") == 1
    assert "bytes dropped so far" in text
