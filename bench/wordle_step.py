"""A Wordle GRPO step and the holdout's speed: the ``hf`` sampler's prefix reuse off and on.

Every turn of a Wordle rollout prompts with the whole conversation so far (≈ 600–1,500 tokens),
and turn k+1's prompt starts with turn k's prompt and answer, token for token. With prefix reuse
(``AGENT_KIT_HF_PREFIX_CACHE``, on by default) the sampler keeps a rollout's key/value cache
between its turns and prefills only the new tokens; off, it prefills every prompt whole.

One run, through the CLI as a user types it: ``agent-kit run`` records the Solver on the first
``--expert-rows`` train words × 2 (greedy), then the same ``agent-kit train --warm-start`` (1 × 4
rollouts a step, ``--steps`` steps, the first ``--holdout-rows`` holdout words × 2, concurrency
8, as bench/train_wordle.py) runs twice back to back: with ``AGENT_KIT_HF_PREFIX_CACHE=0``, then
on. The second run reuses the first's warm adapter (``adapters/warm``: no second warm start),
so both start from the same weights; ``--warm-from RUN_DIR`` takes a finished run's instead
(e.g. bench/train_wordle.py's ``--out``/wordle) and skips the Solver and the first warm start.

It prints, for each: seconds per GRPO step (the mean, and of the steps after the first; the
update's share, TRL's ``step_time``, apart), the warm holdout's rollouts/s (its summary's) and
mean reward, and the ratios. The turns are seeded, so both runs sample the same tokens (up to a
float near-tie) and their rewards should agree. ``--record`` writes the ``wordle_step`` row into
bench/results.md (bench/results.py). Aim: a step ≤ 45 s on a quiet 2-core machine (it was
136 s). Not a test: ``python bench/wordle_step.py [--steps N] [--warm-from RUN_DIR] [--record]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

WORDLE = ROOT / "examples" / "wordle"
RUNS = (("off", "0"), ("on", "1"))


def _agent_kit(*args: str, env: dict[str, str] | None = None, quiet: bool = False) -> None:
    cmd = [sys.executable, "-m", "agent_kit.cli", *args]
    print("$", " ".join(cmd), flush=True)
    environ = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    subprocess.run(cmd, check=False, env=environ, stdout=subprocess.DEVNULL if quiet else None)


def _head(src: Path, rows: int, dest: Path) -> Path:
    lines = src.read_text(encoding="utf-8").splitlines()[:rows]
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def figures(run_dir: Path) -> dict[str, Any]:
    """A finished run's step times (all, and after the first), the update's share and the warm
    holdout's rollouts/s and mean reward."""
    doc = json.loads((run_dir / "train.json").read_text(encoding="utf-8"))
    steps = [s for s in doc.get("steps", []) if "timing_s/train_step" in s]
    seconds = [float(s["timing_s/train_step"]) for s in steps]
    updates = [float(s["timing_s/update"]) for s in steps if "timing_s/update" in s]
    warm = run_dir / "eval" / "warm" / "summary.json"
    timing: dict[str, Any] = {}
    if warm.is_file():
        timing = json.loads(warm.read_text(encoding="utf-8")).get("timing") or {}
    return {
        "step_s": _mean(seconds),
        "steady_s": _mean(seconds[1:] or seconds),
        "update_s": _mean(updates),
        "steps": len(seconds),
        "holdout_rps": timing.get("rollouts_per_s"),
        "holdout_mean": (doc.get("eval", {}).get("warm") or {}).get("mean"),
    }


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "n/a" if value is None else format(value, spec)


def _ratio(one: float | None, two: float | None) -> str:
    return "n/a" if not one or not two else f"{one / two:.2f}×"


def _train(args: argparse.Namespace, out: Path, name: str, flag: str, warm: Path) -> None:
    holdout = _head(WORDLE / "holdout.jsonl", args.holdout_rows, out / "holdout.jsonl")
    _agent_kit("train", str(WORDLE / "agent.py"), "--dataset", str(WORDLE / "train.jsonl"),
               "--warm-start", str(warm), "--warm-start-epochs", str(args.warm_start_epochs),
               "--eval", str(holdout), "--eval-samples", "2", "--steps", str(args.steps),
               "--group-size", "4", "--batch-size", "1", "--max-tokens", "48",
               "--temperature", "0.7", "--learning-rate", "5e-5", "--concurrency", "8",
               "--lora-r", "16", "--device", "cpu", "--workers", "1", "--out", str(out),
               "--name", name, "--force",
               env={"AGENT_KIT_HF_PREFIX_CACHE": flag})  # fmt: skip


def play(args: argparse.Namespace, out: Path) -> dict[str, dict[str, Any]]:
    """Record the Solver (unless ``--warm-from``), train with the cache off, then on (the warm
    adapter of the first run, or of ``--warm-from``, reused); each run's figures."""
    solver = out / "solver"
    adapter = args.warm_from / "adapters" / "warm" if args.warm_from else None
    if adapter is None:
        expert = _head(WORDLE / "train.jsonl", args.expert_rows, out / "expert.jsonl")
        _agent_kit("run", str(WORDLE / "agent.py"), "--dataset", str(expert),
                   "--policy", f"scripted:{WORDLE / 'policies.py'}:Solver",
                   "--group-size", "2", "--temperature", "0", "--out", str(out),
                   "--name", "solver", quiet=True)  # fmt: skip
    else:
        solver = args.warm_from.parent / "solver"  # named for the flag; the adapter is reused
    results = {}
    for label, flag in RUNS:
        name = f"cache-{label}"
        if adapter is not None and adapter.is_dir():
            shutil.copytree(adapter, out / name / "adapters" / "warm")
        _train(args, out, name, flag, solver)
        results[label] = figures(out / name)
        adapter = out / name / "adapters" / "warm"
    return results


def main() -> int:
    """Run both, print (and optionally record) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expert-rows", type=int, default=32)
    parser.add_argument("--warm-start-epochs", type=int, default=1)
    parser.add_argument("--holdout-rows", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warm-from", type=Path, default=None, help="a train run's folder")
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    started, load_before = time.monotonic(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="wordle-step-") as scratch:
        out = args.out or Path(scratch)
        out.mkdir(parents=True, exist_ok=True)
        runs = play(args, out)
    load = f"load {load_before:.1f} → {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    for label, f in runs.items():
        print(
            f"cache {label:>3}: {_fmt(f['step_s'])} s/step ({_fmt(f['steady_s'])} after the "
            f"first, update {_fmt(f['update_s'])} s) over {f['steps']} steps; warm holdout "
            f"{_fmt(f['holdout_rps'], '.3f')} rollouts/s, mean {_fmt(f['holdout_mean'], '.3f')}"
        )
    off, on = runs["off"], runs["on"]
    step = _ratio(off["steady_s"], on["steady_s"])
    holdout = _ratio(on["holdout_rps"], off["holdout_rps"])
    print(f"step {step} faster, holdout {holdout} the rollouts/s; {load}; ", end="")
    print(f"{(time.monotonic() - started) / 60:.0f} min")
    if args.record:
        from results import record

        record(
            "wordle_step",
            [
                {
                    "benchmark (script)": (
                        f"a Wordle GRPO step of 1×4 after a warm start, and the warm holdout "
                        f"({args.holdout_rows}×2, concurrency 8), `hf` prefix reuse on vs off, "
                        f"steps 2–{args.steps}, {load} (`bench/wordle_step.py`)"
                    ),
                    "agent_kit": (
                        f"prefix reuse: {_fmt(on['steady_s'])} s/step (update "
                        f"{_fmt(on['update_s'])} s), holdout {_fmt(on['holdout_rps'], '.3f')} "
                        "rollouts/s"
                    ),
                    "reference, same run": (
                        f"every prompt prefilled whole: {_fmt(off['steady_s'])} s/step, "
                        f"holdout {_fmt(off['holdout_rps'], '.3f')} rollouts/s"
                    ),
                    "ratio": f"step {step} faster, holdout {holdout}",
                    "budget": "a step ≤ 45 s (was 136 s)",
                }
            ],
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
