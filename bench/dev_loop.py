"""Save to verdict: how long ``agent-kit dev`` takes from a save of the reward to its verdict.

Usage: ``.venv/bin/python bench/dev_loop.py [--saves 5] [--think 5] [--prompts 4] [--samples 2]
[--dry-run]``

1. examples/wordle is copied into a temporary folder, with a dataset of its first ``--prompts``
   holdout words, and a baseline is recorded there (the ``Solver`` at temperature 0.7, each
   word ``--samples`` times);
2. the dev loop runs in this process as ``agent-kit dev agent.py --dataset d.jsonl --baseline
   RUN_DIR`` does (:func:`agent_kit.dev.loop.dev_loop`, watchfiles on the copy): its first
   verdict is the cold start (agent processes started, every cache empty);
3. ``--saves`` times, ``--think`` seconds after the last verdict (a user reading it and
   editing: the loop starts the next restart's agent processes meanwhile), the reward is
   changed (``WEIGHT_SOLVED`` toggled) and the file written; the time from the write to the
   verdict is one *save to verdict*, warm (the loop's own process, its policy and the replay's
   caches are up; the agent processes are restarted on the new code, as every save of the
   entrypoint does).

The figures apart come from each verdict's own timings: **reload** (the agent processes
restarted on the new code, the dataset read), **play** (the grid through the driver) and
**replay** (the baseline's episodes of the grid's words, through the replay engine, beside the
play), **audit** (the doctor's fast checks and the comparisons). Budget (issue 49): save to
verdict ≤ 5 s warm on 2 cores. It prints figures and records them in ``bench/results.md``
(``--dry-run``: prints only); it never asserts (timings on a shared machine are not
pass/fail).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import results as bench_results  # bench/results.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_kit.dev.loop import dev_loop  # noqa: E402
from agent_kit.dev.options import DevOptions  # noqa: E402
from agent_kit.dev.verdict import Verdict  # noqa: E402
from agent_kit.replay.helpers import record  # noqa: E402

WORDLE = ROOT / "examples" / "wordle"
_WEIGHTS = ("WEIGHT_SOLVED = 0.04", "WEIGHT_SOLVED = 0.02")
_PARTS = ("reload", "play", "replay", "audit")
_VERDICT_S = 300.0


def _project(tmp: Path, prompts: int) -> tuple[Path, Path]:
    folder = tmp / "wordle"
    folder.mkdir()
    for name in ("agent.py", "policies.py"):
        shutil.copy(WORDLE / name, folder / name)
    shutil.copytree(WORDLE / "words", folder / "words")
    rows = (WORDLE / "holdout.jsonl").read_text(encoding="utf-8").splitlines()[:prompts]
    data = folder / "d.jsonl"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder / "agent.py", data


async def _measure(
    options: DevOptions, agent: Path, saves: int, think: float
) -> tuple[float, list[tuple[Verdict, float]]]:
    """The cold start's seconds, and each save's verdict with its seconds from the write."""
    verdicts: asyncio.Queue[Verdict] = asyncio.Queue()
    stop = asyncio.Event()
    started = time.monotonic()
    loop = asyncio.create_task(dev_loop(options, verdicts.put_nowait, stop))
    try:
        first = await asyncio.wait_for(verdicts.get(), _VERDICT_S)
        cold = time.monotonic() - started
        print(f"cold start: {cold:.2f} s to the first verdict ({_parts(first)})")
        warm: list[tuple[Verdict, float]] = []
        for i in range(saves):
            await asyncio.sleep(think)  # a user reading the verdict and editing
            saved = _save(agent, i)
            verdict = await asyncio.wait_for(verdicts.get(), _VERDICT_S)
            wall = time.monotonic() - saved
            warm.append((verdict, wall))
            print(f"save {i + 1}: {wall:.2f} s to the verdict ({_parts(verdict)})")
        return cold, warm
    finally:
        stop.set()
        await loop


def _save(agent: Path, i: int) -> float:
    """Toggle the reward's weight and write the file; the moment it was written."""
    source = agent.read_text(encoding="utf-8")
    old, new = _WEIGHTS if i % 2 == 0 else _WEIGHTS[::-1]
    agent.write_text(source.replace(old, new), encoding="utf-8")
    return time.monotonic()


def _parts(verdict: Verdict) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in verdict.timings.items() if k in _PARTS)


def _median(warm: list[tuple[Verdict, float]], key: str) -> float:
    return statistics.median(v.timings.get(key, 0.0) for v, _ in warm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=5)
    parser.add_argument("--think", type=float, default=5.0, help="seconds between saves")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--dry-run", action="store_true", help="print; record nothing")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"cores: {os.cpu_count()}  load average: {load:.2f}")
    with tempfile.TemporaryDirectory(prefix="agent-kit-dev-bench-") as tmp:
        agent, data = _project(Path(tmp), args.prompts)
        baseline = record(
            agent,
            data,
            policy=f"scripted:{agent.parent / 'policies.py'}:Solver",
            out_dir=Path(tmp) / "runs",
            name="baseline",
            group_size=args.samples,
            temperature=0.7,
        )
        options = DevOptions(
            agent,
            data,
            baseline=baseline,
            prompts=args.prompts,
            samples=args.samples,
            out=Path(tmp) / "dev",
        )
        options.check()
        cold, warm = asyncio.run(_measure(options, agent, args.saves, args.think))
    wall = [seconds for _, seconds in warm]
    parts = {k: _median(warm, k) for k in _PARTS}
    median, worst = statistics.median(wall), max(wall)
    print(
        f"save to verdict, warm: median {median:.2f} s, max {worst:.2f} s "
        f"(medians: {', '.join(f'{k} {v:.2f}' for k, v in parts.items())})"
    )
    if args.dry_run:
        return
    bench_results.record(
        "dev_loop",
        [
            {
                "benchmark (script)": "`agent-kit dev` save to verdict, warm: examples/wordle, "
                f"reward edited, Solver, {args.prompts} words × {args.samples} + the baseline "
                f"replayed, {len(warm)} saves {args.think:g} s apart (`bench/dev_loop.py`, "
                f"load {load:.1f})",
                "agent_kit": f"{median:.2f} s median, {worst:.2f} s max (reload "
                f"{parts['reload']:.2f} + play {parts['play']:.2f} ∥ replay "
                f"{parts['replay']:.2f} + audit {parts['audit']:.2f})",
                "reference, same run": f"cold start to the first verdict: {cold:.2f} s",
                "ratio": f"{median / cold:.2f}× the cold start",
                "budget": "≤ 5 s warm on 2 cores",
            }
        ],
    )


if __name__ == "__main__":
    main()
