"""Where the time of one whole ``agent-kit run`` goes, and the whole-command rollout rate.

Runs the real command (``.venv/bin/agent-kit run examples/wordle/agent.py …``, the Solver policy
at temperature 0.7) as a user does, then reads the phases back from the run's store, whose
events are timestamped by the driver:

- interpreter + imports + dataset + emulator up: command start → the job row is created;
- agent cold start: the first agent process is spawned → every agent answers ``/ping``
  (the design budget is < 2.5 s);
- first rollout: agents ready → the first rollout is done;
- steady state: first → last rollout done (the rate inside the run);
- final writes: last rollout done → ``summary.json`` written (summary + report);
- shutdown: ``summary.json`` written → the process has exited.

Two workloads: ``make run``'s (holdout 32 × 4, concurrency 16) and the 512-rollout training run
(train 64 × 8, concurrency 16), and, in the same run, the bare reference pipeline of
``bench/rollout_throughput.py`` (``BedrockAgentCoreApp`` + Strands + a fake runtime, no store)
on 512 rollouts at concurrency 16. It prints figures and ratios and records them in
``bench/results.md``; it never asserts (timings on a shared machine are not pass/fail).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import results as bench_results  # bench/results.py, beside this script
import rollout_throughput  # bench/rollout_throughput.py: the bare reference pipeline

ROOT = Path(__file__).resolve().parents[1]
WORDLE = ROOT / "examples" / "wordle"
AGENT_KIT = Path(sys.executable).with_name("agent-kit")
WORKLOADS = {
    "make-run": ("holdout.jsonl", 4, None),
    "train-512": ("train.jsonl", 8, 64),
}


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return list(conn.execute(sql))


def import_seconds() -> float:
    """Seconds for a fresh interpreter to import the CLI (best of 3)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import agent_kit.cli"], check=True)
        best = min(best, time.perf_counter() - started)
    return best


def whole_run(name: str, out: Path, extra: list[str]) -> dict[str, Any]:
    """Run one workload as a user would and return its phases (seconds) and rates."""
    dataset, group, batch = WORKLOADS[name]
    argv = [
        str(AGENT_KIT),
        "run",
        str(WORDLE / "agent.py"),
        "--dataset",
        str(WORDLE / dataset),
        "--policy",
        f"scripted:{WORDLE / 'policies.py'}:Solver",
        "--group-size",
        str(group),
        "--temperature",
        "0.7",
        "--concurrency",
        "16",
        "--out",
        str(out),
        "--name",
        name,
        "--json",
        *(["--batch-size", str(batch)] if batch else []),
        *extra,
    ]
    started = time.time()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    exited = time.time()
    run_dir = out / name
    db = run_dir / "run.sqlite"
    (job_created,) = _rows(db, "SELECT created_at FROM jobs")[0]
    events = _rows(db, "SELECT kind, created_at FROM events ORDER BY id")
    spawned = min(t for k, t in events if k == "agent_start")
    ready = min(t for k, t in events if k == "agents_ready")
    done = sorted(t for k, t in events if k == "rollout_done")
    summary_written = (run_dir / "summary.json").stat().st_mtime
    n = len(done)
    steady = (n - 1) / (done[-1] - done[0]) if n > 1 and done[-1] > done[0] else float("nan")
    return {
        "rollouts": n,
        "phases": {
            "interpreter + imports + emulator up": job_created - started,
            "agent cold start (spawn → /ping)": ready - spawned,
            "first rollout": done[0] - ready,
            "steady state": done[-1] - done[0],
            "final writes (summary, report)": summary_written - done[-1],
            "shutdown": exited - summary_written,
        },
        "whole_s": exited - started,
        "whole_rate": n / (exited - started),
        "steady_rate": steady,
    }


async def reference(rollouts: int, concurrency: int) -> float:
    """Rollouts/s of the bare reference pipeline (one OpenAI client per episode)."""
    with tempfile.TemporaryDirectory(prefix="agent-kit-bench-ref-") as tmp:
        work = Path(tmp)
        (work / "bench_agent.py").write_text(textwrap.dedent(rollout_throughput.BENCH_AGENT))
        result = await rollout_throughput.reference_pipeline(work, rollouts, concurrency, "tuned")
    return float(result["rate"])


#: Short names of the phases, in order, for the results row.
_PHASE_NAMES = ("start-up", "agent cold start", "first rollout", "steady", "writes", "exit")


def _phase_text(phases: dict[str, float]) -> str:
    """The phases of one run in one line: 'start-up 0.72 + agent cold start 2.29 + …'."""
    return " + ".join(
        f"{short} {seconds:.2f}"
        for short, seconds in zip(_PHASE_NAMES, phases.values(), strict=True)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=[*WORKLOADS, "all"], default="all")
    parser.add_argument("--repeat", type=int, default=1, help="runs per workload (best kept)")
    args, extra = parser.parse_known_args()
    names = list(WORKLOADS) if args.workload == "all" else [args.workload]
    print(f"cores: {os.cpu_count()}  load average: {os.getloadavg()[0]:.2f}")
    imports = import_seconds()
    print(f"import agent_kit.cli in a fresh interpreter: {imports:.2f} s")
    measured: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="agent-kit-bench-run-") as tmp:
        for name in names:
            runs = [whole_run(name, Path(tmp) / f"r{i}", extra) for i in range(args.repeat)]
            best = min(runs, key=lambda r: r["whole_s"])
            measured[name] = best
            print(f"\n{name}: {best['rollouts']} rollouts, {best['whole_s']:.2f} s whole command")
            for phase, seconds in best["phases"].items():
                print(f"  {phase:<40}{seconds:>8.2f} s")
            print(
                f"  whole-command rate {best['whole_rate']:.2f} rollouts/s; steady "
                f"{best['steady_rate']:.2f}/s; ratio {best['whole_rate'] / best['steady_rate']:.2f}"
            )
    ref = asyncio.run(reference(512, 16)) if "train-512" in measured else None
    if ref is not None:
        whole = measured["train-512"]["whole_rate"]
        print(f"\nbare reference pipeline, 512 rollouts at concurrency 16: {ref:.2f} rollouts/s")
        print(f"train-512 whole command / reference: {whole / ref:.2f}x (target >= 1.5x)")
    rows = []
    for name, best in measured.items():
        phases = best["phases"]
        vs_ref = name == "train-512" and ref is not None
        reference_text = f"steady state inside the run: {best['steady_rate']:.1f}/s"
        ratio = f"{best['whole_rate'] / best['steady_rate']:.2f}×"
        if vs_ref and ref is not None:
            reference_text += f"; bare reference pipeline: {ref:.1f}/s"
            ratio += f" ({best['whole_rate'] / ref:.2f}×)"
        rows.append(
            {
                "benchmark (script)": f"whole `agent-kit run`, Wordle {name} "
                f"({best['rollouts']} rollouts, concurrency 16; `bench/whole_run.py`)",
                "agent_kit": f"{best['whole_rate']:.1f} rollouts/s whole command "
                f"({best['whole_s']:.1f} s = {_phase_text(phases)})",
                "reference, same run": reference_text,
                "ratio": ratio,
                "budget": "≥ 0.8× steady (≥ 1.5× reference); cold start < 2.5 s"
                if vs_ref
                else "< 10 s warm; cold start < 2.5 s",
            }
        )
    bench_results.record("whole_run", rows)
    print(json.dumps({"import_s": round(imports, 3)}))


if __name__ == "__main__":
    main()
