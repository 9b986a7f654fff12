"""Replay speed: episodes/s replaying a recorded Wordle run, against the recording itself.

Usage: ``.venv/bin/python bench/replay_speed.py [--prompts 32] [--group-size 4] [--workers 2]``

1. **record** (the reference, measured in the same run): ``prompts × group-size`` Wordle episodes
   with the scripted ``Solver`` at temperature 0.7 through the full pipeline (driver → agent
   subprocess → Strands → emulator → reward → store) → rollouts/s.
2. **replay, subprocess path** (``agent-kit replay RUN_DIR``): the same episodes through the
   real entrypoint in ``--workers`` agent processes, recorded responses served by the emulator,
   every request compared → episodes/s over the whole command (agent start-up included) and
   steady-state (first trajectory opened → last one finished).
3. **replay, in-process path** (``agent-kit replay RUN_DIR --in-process``): the entrypoint's
   RolloutApp driven by a ScriptedModel serving the recording (no HTTP, no subprocess;
   messages and tools compared) → episodes/s in ``--workers`` processes forked after the
   entrypoint was imported (its caches, e.g. Wordle's opener table, are filled in each), then
   in this process: cold (first replay) and warm (same episodes again).

Budget (DESIGN.md): replay ≥ 100 episodes/s on 2 cores, rewards reproduced on 100% of
unchanged episodes. It prints figures; it never asserts (timings on a shared machine are not
pass/fail).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import results as bench_results  # bench/results.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_kit.replay.cassette import load_recording  # noqa: E402
from agent_kit.replay.engine import replay_run  # noqa: E402
from agent_kit.replay.helpers import record  # noqa: E402
from agent_kit.replay.inprocess import replay_in_process  # noqa: E402
from agent_kit.store import RunStore  # noqa: E402
from agent_kit.testing import load_app  # noqa: E402

WORDLE = ROOT / "examples" / "wordle"


def _in_process_chunk(run_dir: str, ids: list[str]) -> tuple[int, int]:
    report = replay_in_process(run_dir, trajectories=ids)
    return report.counts["identical"], len(report.episodes)


def _steady_rate(run_dir: str) -> float:
    with RunStore.open(run_dir, readonly=True) as store:
        rows = store.list_trajectories()
    span = max(r.updated_at for r in rows) - min(r.created_at for r in rows)
    return len(rows) / span if span > 0 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    rows = (WORDLE / "train.jsonl").read_text().splitlines()[: args.prompts]
    prompts = [json.loads(r)["prompt"] for r in rows]
    solver = f"scripted:{WORDLE / 'policies.py'}:Solver"
    print(f"cores: {os.cpu_count()}  load average: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="agent-kit-replay-bench-") as tmp:
        started = time.perf_counter()
        run_dir = record(
            WORDLE / "agent.py",
            prompts,
            policy=solver,
            out_dir=tmp,
            name="bench",
            group_size=args.group_size,
            temperature=0.7,
            concurrency=32,
        )
        record_s = time.perf_counter() - started
        recording = load_recording(run_dir)
        n = len(recording.episodes)
        turns = sum(len(e.turn_rows) for e in recording.episodes)
        print(f"episodes: {n} ({turns} turns)")
        record_rate = n / record_s
        print(f"record (full pipeline, 1 agent process):   {record_rate:7.1f} rollouts/s")

        report = asyncio.run(replay_run(run_dir, workers=args.workers, out_dir=Path(tmp) / "r"))
        assert report.run_dir is not None
        steady = _steady_rate(report.run_dir)
        print(
            f"replay, subprocess path, {args.workers} agent processes: "
            f"{report.episodes_per_s:7.1f} episodes/s whole command, {steady:7.1f} steady "
            f"({report.counts['identical']}/{n} identical)"
        )

        ids = [e.id for e in recording.episodes]
        chunks = [ids[i :: args.workers] for i in range(args.workers)]
        load_app(WORDLE / "agent.py")  # preload (imports only) before forking, as a test runner
        context = multiprocessing.get_context("fork")
        started = time.perf_counter()
        with ProcessPoolExecutor(args.workers, mp_context=context) as pool:
            results = list(pool.map(_in_process_chunk, [str(run_dir)] * len(chunks), chunks))
        pool_s = time.perf_counter() - started
        identical = sum(r[0] for r in results)
        print(
            f"replay, in-process path, {args.workers} processes (cold): "
            f"{n / pool_s:7.1f} episodes/s ({identical}/{n} identical)"
        )
        single: dict[str, float] = {}
        for label in ("cold", "warm"):
            report = replay_in_process(recording)
            single[label] = report.episodes_per_s
            print(
                f"replay, in-process path, 1 process ({label}):  {report.episodes_per_s:7.1f} "
                f"episodes/s ({report.counts['identical']}/{n} identical)"
            )
        print(
            f"ratios to recording: subprocess {steady / record_rate:.1f}×, "
            f"in-process ×{args.workers} {n / pool_s / record_rate:.1f}×"
        )
        bench_results.record(
            "replay_speed",
            [
                {
                    "benchmark (script)": "replay, in-process, 1 process, cold "
                    f"(`bench/replay_speed.py`, {n} Wordle episodes)",
                    "agent_kit": f"{single['cold']:.1f} episodes/s ({args.workers} processes: "
                    f"{n / pool_s:.1f}), {identical}/{n} identical",
                    "reference, same run": f"recording the same run: {record_rate:.1f} rollouts/s",
                    "ratio": f"{single['cold'] / record_rate:.1f}×",
                    "budget": "≥ 100 episodes/s, 100% identical",
                },
                {
                    "benchmark (script)": f"replay through the agent processes ({args.workers} "
                    "workers), steady",
                    "agent_kit": f"{steady:.1f} episodes/s",
                    "reference, same run": "same",
                    "ratio": f"{steady / record_rate:.1f}×",
                    "budget": "—",
                },
            ],
        )


if __name__ == "__main__":
    main()
