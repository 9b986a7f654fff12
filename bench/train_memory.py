"""Peak memory of a whole Wordle training run, with agent_kit's heap bounds and without.

``agent-kit train`` makes the threads that load, sample and train the model share glibc's one
malloc arena and hands the heap's free pages back between phases (its door,
agent_kit/cli/process.py: ``bound_malloc``, ``release_free_memory``). This bench records the
Solver on ``--rows`` train words × 2 (greedy), then runs the same ``agent-kit train
--warm-start`` (``--epochs``, a preflight, holdouts of 2 words × 2, ``--steps`` GRPO steps of
1 × 4: the Wordle bench's step) twice: as shipped, and with ``AGENT_KIT_MALLOC=glibc`` (the C
library's defaults: an arena a thread, nothing handed back). It prints each run's peak RSS
(train.json's ``peak_rss_mb``, the trainer process) and wall clock. ``--record`` writes the
``train_memory`` row into bench/results.md (bench/results.py). Aim: under 4 GB. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

WORDLE = ROOT / "examples" / "wordle"


def _agent_kit(*args: str, env: dict[str, str] | None = None) -> None:
    cmd = [sys.executable, "-m", "agent_kit.cli", *args]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=False, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL)


def _head(src: Path, rows: int, dest: Path) -> Path:
    lines = src.read_text(encoding="utf-8").splitlines()[:rows]
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


def main() -> int:
    """Record the Solver, train twice (one arena, an arena a thread), print and record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8, help="train words the Solver plays")
    parser.add_argument("--steps", type=int, default=2, help="GRPO steps")
    parser.add_argument("--epochs", type=int, default=2, help="warm-start epochs")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    figures: dict[str, tuple[float, float]] = {}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="train-memory-") as scratch:
        out = Path(scratch)
        expert = _head(WORDLE / "train.jsonl", args.rows, out / "expert.jsonl")
        holdout = _head(WORDLE / "holdout.jsonl", 2, out / "holdout.jsonl")
        agent = str(WORDLE / "agent.py")
        solver = f"scripted:{WORDLE / 'policies.py'}:Solver"
        _agent_kit("run", agent, "--dataset", str(expert), "--group-size", "2",
                   "--policy", solver, "--temperature", "0", "--out", str(out),
                   "--name", "solver", "--json")  # fmt: skip
        for label, env in (("bounded", {}), ("glibc", {"AGENT_KIT_MALLOC": "glibc"})):
            name = label
            started = time.monotonic()
            _agent_kit("train", agent, "--dataset", str(WORDLE / "train.jsonl"),
                       "--warm-start", str(out / "solver"), "--warm-start-epochs", str(args.epochs),
                       "--eval", str(holdout), "--eval-samples", "2", "--steps", str(args.steps),
                       "--group-size", "4", "--batch-size", "1", "--max-tokens", "48",
                       "--device", "cpu", "--workers", "1", "--out", str(out), "--name", name,
                       "--force", env=env)  # fmt: skip
            wall = time.monotonic() - started
            doc = json.loads((out / name / "train.json").read_text(encoding="utf-8"))
            figures[label] = (float(doc["peak_rss_mb"]), wall)
            print(f"{label}: peak RSS {figures[label][0]:.0f} MiB, {wall:.0f} s", flush=True)
    load = f"load {load_before:.1f} → {os.getloadavg()[0]:.1f}"
    one, many = figures["bounded"], figures["glibc"]
    print(f"bounded / glibc's defaults: {one[0] / many[0]:.2f} of the memory; {load}")
    if args.record:
        from results import record

        record(
            "train_memory",
            [
                {
                    "benchmark (script)": (
                        f"peak RSS of a whole `agent-kit train --warm-start` on examples/wordle "
                        f"(Solver on {args.rows} words × 2 at T 0, warm start {args.epochs} "
                        f"epochs, preflight, 3 holdouts of 2×2, {args.steps} GRPO steps of 1×4), "
                        f"SmolLM2-135M, {load} (`bench/train_memory.py`)"
                    ),
                    "agent_kit": (
                        f"one malloc arena, free pages handed back: {one[0]:.0f} MiB, "
                        f"{one[1]:.0f} s"
                    ),
                    "reference, same run": (
                        f"glibc's defaults (AGENT_KIT_MALLOC=glibc): {many[0]:.0f} MiB, "
                        f"{many[1]:.0f} s"
                    ),
                    "ratio": f"{one[0] / many[0]:.2f}× the memory",
                    "budget": "< 4 GB",
                }
            ],
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
