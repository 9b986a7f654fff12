"""An agent not written with agent_kit, under ``agent-kit run`` and under a bare loop.

The agent (bench/agents/foreign_wordle.py) is written the way AWS's samples write one: the
official ``@sagemaker_rft_handler`` decorator, ``wrap_model(OpenAIModel(client_args=…))``
(Strands then builds a new OpenAI client and TLS context for every model call), streaming on.
Each episode is seven policy calls (six ``guess`` tool calls and an answer), played by a
scripted policy in the emulator.

For both agent styles (``naive``: ``client_args`` as in the samples; ``tuned``: one client per
episode) it measures:

1. ``agent-kit run`` as a user runs it (a subprocess, default ``--workers``): rollouts/s over the
   whole command and over the rollouts (first trajectory opened → last one finished);
2. the same agent file driven by a bare loop: one agent process serving ``app.run()``, the
   emulator on loopback, a plain asyncio loop posting ``/invocations`` with the same
   concurrency → rollouts/s over the rollouts.

Usage: ``.venv/bin/python bench/foreign_agent.py [--prompts 16] [--group-size 8]
[--concurrency 16]``. Prints rates and ratios, records them in bench/results.md; never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import results as bench_results  # bench/results.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_kit.driver.job_setup import default_workers  # noqa: E402
from agent_kit.store import RunStore  # noqa: E402
from agent_kit.testing import run_emulator  # noqa: E402

AGENT = Path(__file__).resolve().parent / "agents" / "foreign_wordle.py"
POLICY = """
from agent_kit.emulator.schemas import PolicyReply, ToolCall


def policy(request):
    done = sum(1 for m in request.messages if m.get("role") == "tool")
    if done < 6:
        return PolicyReply(tool_calls=(ToolCall("guess", {"word": "crane"}),))
    return PolicyReply(content="I give up.")
"""
DUMMY_AWS = {
    "AWS_ACCESS_KEY_ID": "AKIDBENCHFOREIGN",
    "AWS_SECRET_ACCESS_KEY": "bench-secret",
    "AWS_REGION": "us-west-2",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def _prompts(n: int) -> list[str]:
    return [json.dumps({"prompt": "Guess.", "answer": "zzzzz", "id": i}) for i in range(n)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _steady(run_dir: Path) -> float:
    with RunStore.open(run_dir, readonly=True) as store:
        rows = store.list_trajectories()
    span = max(r.updated_at for r in rows) - min(r.created_at for r in rows)
    return len(rows) / span if span > 0 else 0.0


def under_agent_kit(work: Path, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    data = work / "data.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in _prompts(args.prompts)))
    out = work / f"runs-{mode}"
    command = [
        str(Path(sys.executable).parent / "agent-kit"),
        *("run", str(AGENT), "--dataset", str(data)),
        *("--policy", f"scripted:{work / 'policy.py'}:policy"),
        *("--group-size", str(args.group_size), "--concurrency", str(args.concurrency)),
        *("--out", str(out), "--json"),
    ]
    env = {**os.environ, **DUMMY_AWS, "FOREIGN_MODE": mode}
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    whole = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"agent-kit run failed ({done.returncode}): {done.stderr[-2000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    rollouts = summary["run"]["rollouts"] if "rollouts" in summary.get("run", {}) else None
    run_dir = next(out.iterdir())
    total = args.prompts * args.group_size
    return {
        "whole": total / whole,
        "steady": _steady(run_dir),
        "seconds": whole,
        "rollouts": rollouts if rollouts is not None else total,
    }


async def bare_loop(work: Path, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    port = _free_port()
    env = {**os.environ, **DUMMY_AWS, "FOREIGN_MODE": mode, "PORT": str(port)}
    log = (work / f"bare-{mode}.log").open("wb")
    proc = subprocess.Popen(  # noqa: ASYNC220 - started once, before the timed loop
        [sys.executable, str(AGENT)], env=env, stdout=log, stderr=log
    )
    agent = f"http://127.0.0.1:{port}"
    try:
        with run_emulator(
            f"scripted:{work / 'policy.py'}:policy", run_dir=work / f"bare-{mode}"
        ) as em:
            async with httpx.AsyncClient(timeout=600) as http:
                deadline = time.monotonic() + 60
                while True:
                    try:
                        if (await http.get(agent + "/ping")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise SystemExit(f"bare agent did not start: see {log.name}")
                    await asyncio.sleep(0.05)  # polling with a deadline
                payloads = [
                    em.mint(p) for p in _prompts(args.prompts) for _ in range(args.group_size)
                ]
                sem = asyncio.Semaphore(args.concurrency)
                ok = 0

                async def one(i: int, payload: dict[str, Any]) -> None:
                    nonlocal ok
                    async with sem:
                        r = await http.post(
                            agent + "/invocations",
                            json=payload,
                            headers={"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": f"{i:040d}"},
                        )
                        ok += r.status_code == 200

                started = time.perf_counter()
                await asyncio.gather(*(one(i, p) for i, p in enumerate(payloads)))
                seconds = time.perf_counter() - started
    finally:
        proc.terminate()
        proc.wait()
        log.close()
    return {"steady": len(payloads) / seconds, "ok": ok, "rollouts": len(payloads)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    workers = default_workers(args.concurrency)
    print(
        f"cores: {os.cpu_count()}  load average: {os.getloadavg()[0]:.2f}  "
        f"agent-kit run workers (default): {workers}"
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="agent-kit-foreign-bench-") as tmp:
        work = Path(tmp)
        (work / "policy.py").write_text(POLICY)
        for mode in ("naive", "tuned"):
            kit = under_agent_kit(work, mode, args)
            bare = asyncio.run(bare_loop(work, mode, args))
            ratio = kit["whole"] / bare["steady"]
            print(
                f"{mode:>5}: agent-kit run {kit['whole']:6.2f}/s whole command "
                f"({kit['seconds']:.1f} s), {kit['steady']:6.2f}/s over the rollouts; "
                f"bare loop, 1 agent process {bare['steady']:6.2f}/s ({bare['ok']}/"
                f"{bare['rollouts']} ok); whole / bare = {ratio:.2f}x"
            )
            style = (
                "`client_args` per call, as in the AWS samples"
                if mode == "naive"
                else "one OpenAI client per episode"
            )
            rows.append(
                {
                    "benchmark (script)": f"foreign agent (`sagemaker_rft_handler`, {style}), "
                    f"{args.prompts}×{args.group_size} rollouts, concurrency {args.concurrency}, "
                    f"{workers} agent processes (foreign_agent)",
                    "agent_kit": f"{kit['whole']:.1f} rollouts/s whole `agent-kit run` "
                    f"({kit['steady']:.1f}/s over the rollouts)",
                    "reference, same run": f"same agent, bare loop, 1 process: "
                    f"{bare['steady']:.1f}/s",
                    "ratio": f"{ratio:.2f}×",
                    "budget": "whole command ≥ bare loop",
                }
            )
    bench_results.record("foreign_agent", rows)


if __name__ == "__main__":
    main()
