"""The one-line hint for agents that open a new policy client per call, on real runs.

A foreign agent written as AWS's samples write it (tests/agents/foreign_sdk_agent.py: the
official ``sagemaker_rft_handler`` and ``OpenAIModel(client_args=…)``) runs under the real
driver as a subprocess; the emulator sees every policy call of an episode on a new TCP
connection and the hint fires. The same agent with one client per episode, and agent_kit's
own Wordle agent, do not trigger it.
"""

from __future__ import annotations

import asyncio
import html
import json
from pathlib import Path

import pytest
from helpers import AGENTS, WORDLE_AGENT, holdout, wordle_policy

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.local import run_local
from agent_kit.reporting.hints import connection_hint, connection_stats
from agent_kit.reporting.summary import resolve_job
from agent_kit.store import RunStore, load_rollouts

pytestmark = pytest.mark.e2e

AGENT = AGENTS / "foreign_sdk_agent.py"
POLICY = """
from agent_kit.emulator.schemas import PolicyReply, ToolCall


def policy(request):
    done = sum(1 for m in request.messages if m.get("role") == "tool")
    if done < 6:
        return PolicyReply(tool_calls=(ToolCall("guess", {"word": "crane"}),))
    return PolicyReply(content="I give up.")
"""


def _run(tmp: Path, agent: Path, dataset: Path, policy: str, name: str) -> Path:
    config = JobConfig(name=name, policy=policy, group_size=2, concurrency=4, temperature=0.7)
    result = asyncio.run(
        run_local(
            RunConfig(entrypoint=str(agent), dataset=dataset, job=config, out=tmp / name, workers=1)
        )
    )
    assert result.succeeded == result.total
    assert result.run_dir is not None
    return Path(result.run_dir)


def _hint(run_dir: Path) -> tuple[str | None, tuple[int, int]]:
    """The hint and its figures, checked to be what summary.json and report.html say."""
    with RunStore.open(run_dir, readonly=True) as store:
        records = load_rollouts(store, resolve_job(store, None).arn)
        hint = connection_hint(store, records)
        stats = connection_stats(store, records)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["hints"] == ([hint] if hint else [])
    page = (run_dir / "report.html").read_text()
    assert (html.escape(hint) in page) if hint else ('class="warn hint"' not in page)
    return hint, stats


@pytest.mark.parametrize(
    ("mode", "stream", "hint_fires"),
    [("naive", "1", True), ("tuned", "0", False), ("tuned", "1", True)],
    ids=["client-per-call", "one-client", "one-client-streams-left-open"],
)
def test_hint_fires_for_a_client_per_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, stream: str, hint_fires: bool
) -> None:
    """client_args (a client per call): every call on a new connection, the hint names the
    fix; one client per episode: one connection per episode, no hint; one client but Strands
    streaming (it stops reading at the finish chunk and never closes the stream): every call
    on a new connection again."""
    monkeypatch.setenv("FOREIGN_MODE", mode)
    monkeypatch.setenv("FOREIGN_STREAM", stream)
    (tmp_path / "policy.py").write_text(POLICY)
    data = tmp_path / "data.jsonl"
    rows = [json.dumps({"prompt": "Guess.", "answer": "zzzzz", "id": i}) for i in range(3)]
    data.write_text("".join(json.dumps({"prompt": r}) + "\n" for r in rows))
    name = f"{mode}-{stream}"
    run_dir = _run(tmp_path, AGENT, data, f"scripted:{tmp_path / 'policy.py'}:policy", name)
    hint, (opened, calls) = _hint(run_dir)
    assert calls == 6 * 7  # 3 prompts × 2 rollouts × 7 policy calls
    if hint_fires:
        assert opened == calls
        assert hint is not None
        assert f"{calls} of {calls} policy calls opened a new connection" in hint
        assert "reuse one client per episode" in hint
    else:
        assert opened == 6
        assert hint is None


def test_agent_kit_agent_gets_no_hint(tmp_path: Path) -> None:
    """The Wordle RolloutApp keeps one client per episode: no hint."""
    data = holdout(tmp_path / "data.jsonl", 3)
    run_dir = _run(tmp_path, WORDLE_AGENT, data, wordle_policy("Sloppy"), "kit")
    hint, (opened, calls) = _hint(run_dir)
    assert calls > 6
    assert opened <= 6
    assert hint is None
