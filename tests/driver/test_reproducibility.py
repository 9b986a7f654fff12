"""Runs are reproducible: the same dataset, policy and seed play the same episodes.

The emulator seeds scripted/random policies from the run seed and each rollout's slot (step,
prompt, sample, attempt), not from the job name, so two runs under different names agree turn
for turn, and a different seed plays differently.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.local import run_local
from agent_kit.store import RunStore

EXAMPLE = Path(__file__).parents[1] / "example_counter.py"


def _without_ids(message: dict[str, object]) -> str:
    """The assistant message as JSON, minus tool-call ids (they name the trajectory)."""
    calls = [
        {k: v for k, v in call.items() if k != "id"}
        for call in message.get("tool_calls") or []  # type: ignore[attr-defined]
    ]
    return json.dumps({**message, "tool_calls": calls}, sort_keys=True)


def _play(tmp_path: Path, name: str, seed: int) -> dict[tuple[int, int], list[str]]:
    """Run the Counter example with the random policy; return each slot's response bodies."""
    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(json.dumps({"prompt": json.dumps({"target": t})}) + "\n" for t in (3, 7, 11))
    )
    config = JobConfig(
        name=name, policy="random", group_size=3, concurrency=9, seed=seed, temperature=1.0
    )
    result = asyncio.run(
        run_local(
            RunConfig(entrypoint=str(EXAMPLE), dataset=data, job=config, out=tmp_path / "runs")
        )
    )
    assert result.status == "completed"
    out: dict[tuple[int, int], list[str]] = {}
    with RunStore.open(result.run_dir, readonly=True) as store:
        for row in store.list_trajectories(job_arn=result.job_arn):
            turns = store.list_turns(row.id)
            out[(row.prompt_index, row.sample_index)] = [
                _without_ids(t.response["choices"][0]["message"]) for t in turns
            ]
    return out


def test_same_seed_different_job_names_play_identical_episodes(tmp_path: Path) -> None:
    """Two runs with one seed and different names record the same responses in every slot."""
    first = _play(tmp_path, "alpha", seed=5)
    second = _play(tmp_path, "beta", seed=5)
    assert first == second
    assert len(first) == 9
    # inside a group the rollouts still differ (temperature > 0 gives the group variance)
    assert len({tuple(first[(0, k)]) for k in range(3)}) > 1


def test_another_seed_plays_differently(tmp_path: Path) -> None:
    """A different seed changes what the policy does."""
    assert _play(tmp_path, "gamma", seed=5) != _play(tmp_path, "delta", seed=6)
