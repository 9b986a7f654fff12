"""Manual check: build a synthetic run, render report.html, screenshot it in headless Chromium.

Usage::

    .venv/bin/python bench/report_render_check.py [--out DIR] [--steps 5] [--batch 8] [--group 8]

Writes ``DIR/run.sqlite``, ``DIR/summary.json``, ``DIR/report.html`` and, when a Chromium binary
is on PATH (``chromium``, ``chromium-browser``, ``google-chrome``), ``DIR/report.png`` — open the
PNG and check that every plot shows bars/dots/lines and the transcripts are text. Prints the
summarize and render rates (rollouts per second) and the page size. Not part of CI: the test
suite checks the page structurally (tests/reporting/test_report.py); this checks that a
browser draws it.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from agent_kit.reporting.report import write_reports
from agent_kit.reporting.summary import summarize
from agent_kit.store import RunStore, TrajectoryRow, TurnRow

ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/render-check"


def build(store: RunStore, steps: int, batch: int, group: int, seed: int = 7) -> int:
    """Fill ``store`` with a Wordle-like synthetic job; return the number of trajectories."""
    rng = random.Random(seed)
    store.create_job(
        ARN, "render-check", {"group_size": group, "batch_size": batch, "steps": steps}
    )
    count = 0
    for step in range(steps):
        skill = 0.2 + 0.6 * step / max(1, steps - 1)
        for prompt in range(batch):
            for sample in range(group):
                tid = f"rc-{step}-{prompt}-{sample}"
                store.create_trajectory(
                    TrajectoryRow(
                        id=tid,
                        job_arn=ARN,
                        state="OPEN",
                        prompt=json.dumps({"prompt": "Play Wordle", "answer": "riser"}),
                        step=step,
                        prompt_index=prompt,
                        sample_index=sample,
                    )
                )
                count += 1
                turns = rng.randint(1, 7)
                messages: list[dict[str, str]] = [{"role": "user", "content": "Guess the word."}]
                for idx in range(turns):
                    guess = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5))
                    reply = {"role": "assistant", "content": f"I guess <{guess}> & see."}
                    store.add_turn(
                        TurnRow(
                            trajectory_id=tid,
                            idx=idx,
                            route="/v1/chat/completions",
                            request={"messages": list(messages)},
                            response={"choices": [{"message": reply}]},
                            prompt_tokens=300 + 60 * idx,
                            completion_tokens=rng.randint(40, 200),
                            usage_estimated=True,
                            latency_ms=rng.uniform(5, 80),
                        )
                    )
                    messages += [reply, {"role": "tool", "content": f"{guess}: GY..."}]
                if rng.random() < 0.03:
                    store.set_state(tid, "FAILED", "The agent signaled that the trajectory failed")
                    continue
                solved = rng.random() < skill
                reward = 1.05 + 0.5 * (6 - min(turns, 6)) / 5 if solved else -0.5
                if prompt % 5 == 0:
                    reward = -0.5  # some zero-variance groups
                store.set_reward(tid, [round(reward, 3)], None, None, state="REWARDED")
    return count


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def main() -> None:
    """Build, summarize, render, and screenshot when Chromium is available."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="agent-kit-report-"))
    with RunStore.open(out) as store:
        n = build(store, args.steps, args.batch, args.group)
        t0 = time.perf_counter()
        summary = summarize(store)
        t1 = time.perf_counter()
        _, page = write_reports(out, summary, store)
        t2 = time.perf_counter()
    print(f"trajectories: {n}")
    print(
        f"summarize: {n / (t1 - t0):,.0f} rollouts/s; render+write: {n / (t2 - t1):,.0f} rollouts/s"
    )
    print(f"report: {page} ({page.stat().st_size / 1024:.0f} KiB)")
    browser = _chromium()
    if browser is None:
        print("no chromium on PATH: open the report in a browser to check it by eye")
        return
    png = out / "report.png"
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--screenshot={png}",
        "--window-size=1200,2400",
        page.resolve().as_uri(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 or not png.exists():
        print(f"chromium failed ({done.returncode}): {done.stderr[-500:]}")
        return
    print(f"screenshot: {png} ({png.stat().st_size / 1024:.0f} KiB) — check the plots by eye")


if __name__ == "__main__":
    main()
