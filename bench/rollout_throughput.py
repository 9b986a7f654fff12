"""Rollout throughput of the full agent_kit pipeline against a bare reference, in one run.

Full pipeline: ``run_local`` (driver) → agent subprocess(es) (``RolloutApp`` + Strands) → the
emulator (server + embedded scripted policy) → reward → CompleteRollout/UpdateReward → store.
Reference: a bare ``BedrockAgentCoreApp`` + Strands ``Agent(OpenAIModel(client_args=...))`` as
the AWS samples write it, against a minimal fake runtime (canned SSE completions, no state, no
checks, no store), driven by a plain asyncio loop with the same concurrency.

Both play the same 7-call Wordle-like episode: six ``guess`` tool calls, then a text answer.
Also measured: peak RSS (driver + agent processes) of the full pipeline at concurrency 96.

Also the scale: the full pipeline's rollouts/s at concurrency 1, 16 and 96 (``--scale``).
``--workers`` defaults to what ``agent-kit run`` uses (one agent process per usable core, at
most the concurrency).

Usage: ``python bench/rollout_throughput.py [--rollouts 256] [--concurrency 32] [--workers N]``.
Prints rates and the ratio (budget ≥ 1.0×, stretch 1.5×); never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import results  # bench/results.py, beside this script: the one results file
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.hooks import JobHooks, Progress
from agent_kit.driver.job_setup import default_workers
from agent_kit.driver.local import run_local

GUESSES = 6

BENCH_AGENT = '''
"""Bench agent: a Wordle-like game whose answer is never guessed (6 tool calls + 1 answer)."""
from agent_kit.app import RolloutApp
from agent_kit.environment import Environment, tool
from agent_kit.reward import Reward


class Guessing(Environment):
    def reset(self, task):
        self.answer, self.guesses = task["answer"], 0
        return "Guess the five-letter word."

    @tool
    def guess(self, word: str) -> str:
        """Guess a word.

        Args:
            word: five letters
        """
        self.guesses += 1
        return "correct" if word == self.answer else f"wrong ({self.guesses}/6)"


def reward(env, episode):
    return Reward.weighted(outcome=(float(env.guesses), 0.1))


app = RolloutApp(Guessing, reward=reward, system_prompt="Play.", max_turns=12)
if __name__ == "__main__":
    app.run()
'''

BENCH_POLICY = f'''
"""Scripted bench policy: guess {GUESSES} times, then answer in text."""
from agent_kit.emulator.schemas import PolicyReply, ToolCall


def policy(request):
    done = sum(1 for m in request.messages if m.get("role") == "tool")
    if done < {GUESSES}:
        return PolicyReply(tool_calls=(ToolCall("guess", {{"word": "crane"}}),))
    return PolicyReply(content="I give up.")
'''

REFERENCE_AGENT = '''
"""Reference agent: bare BedrockAgentCoreApp + Strands, written the way the AWS samples are."""
import json
import os

import httpx
import openai
from bedrock_agentcore.runtime import BedrockAgentCoreApp
from strands import Agent, tool
from strands.models.openai import OpenAIModel

app = BedrockAgentCoreApp()
TUNED = os.environ.get("REFERENCE_MODE") == "tuned"
SSL = httpx.create_ssl_context()


@app.entrypoint
async def invoke(payload):
    meta = payload["metadata"]
    task = json.loads(payload["prompt"])
    state = {"guesses": 0}

    @tool
    def guess(word: str) -> str:
        """Guess a word.

        Args:
            word: five letters
        """
        state["guesses"] += 1
        return "correct" if word == task["answer"] else f"wrong ({state['guesses']}/6)"

    headers = {"X-Amzn-SageMaker-Job-Arn": meta["jobArn"],
               "X-Amzn-SageMaker-Trajectory-Id": meta["rolloutId"]}
    if TUNED:  # one client per episode sharing one SSL context (what agent_kit does)
        client = openai.AsyncOpenAI(
            base_url=meta["endpoint"] + "/v1", api_key="x", default_headers=headers,
            http_client=httpx.AsyncClient(verify=SSL),
        )
        model = OpenAIModel(client=client, model_id="default")
    else:  # client_args, as the AWS samples write it: a new client per model call
        model = OpenAIModel(
            client_args={"base_url": meta["endpoint"] + "/v1", "api_key": "x",
                         "default_headers": headers},
            model_id="default",
        )
    agent = Agent(model=model, tools=[guess], system_prompt="Play.", callback_handler=None)
    await agent.invoke_async("Guess the five-letter word.")
    reward = 0.1 * state["guesses"]
    body = {"JobArn": meta["jobArn"], "TrajectoryId": meta["rolloutId"]}
    async with httpx.AsyncClient(timeout=60) as http:
        await http.post(meta["endpoint"] + "/complete-rollout", json={**body, "Status": "ready"})
        await http.post(meta["endpoint"] + "/update-reward", json={**body, "Rewards": [reward]})
    return {"reward": reward}


if __name__ == "__main__":
    app.run(port=int(os.environ["PORT"]))
'''


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "default",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def fake_runtime() -> Starlette:
    """The minimal fake runtime: canned SSE completions, accepts reports, stores nothing."""
    call = _chunk(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "guess", "arguments": '{"word": "crane"}'},
                }
            ],
        }
    )
    tool_reply = call + _chunk({}, "tool_calls") + b"data: [DONE]\n\n"
    text_reply = (
        _chunk({"role": "assistant", "content": "I give up."})
        + _chunk({}, "stop")
        + b"data: [DONE]\n\n"
    )

    async def chat(request: Request) -> Response:
        body = await request.json()
        done = sum(1 for m in body["messages"] if m.get("role") == "tool")
        payload = tool_reply if done < GUESSES else text_reply
        return StreamingResponse(iter([payload]), media_type="text/event-stream")

    async def ok(request: Request) -> Response:
        await request.body()
        return JSONResponse({})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/complete-rollout", ok, methods=["POST"]),
            Route("/update-reward", ok, methods=["POST"]),
        ]
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


async def _sample_rss(stop: asyncio.Event, peak: list[int]) -> None:
    me = os.getpid()
    while not stop.is_set():
        total = _rss_kib(me) + sum(_rss_kib(p) for p in _descendants(me))
        peak[0] = max(peak[0], total)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.1)


def _dataset(path: Path, prompts: int) -> Path:
    rows = [
        {"prompt": json.dumps({"prompt": "Guess.", "answer": "zzzzz", "id": i})}
        for i in range(prompts)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


async def full_pipeline(
    work: Path, rollouts: int, concurrency: int, workers: int, name: str, rss: bool = False
) -> dict[str, Any]:
    """Run agent_kit's driver; rate over the rollout phase (agent start-up excluded)."""
    group = 8
    prompts = max(1, rollouts // group)
    data = _dataset(work / f"{name}.jsonl", prompts)
    marks: dict[str, float] = {}

    def hook(p: Progress) -> None:
        if p.in_flight and "first" not in marks:
            marks["first"] = time.perf_counter()
        if p.done == p.total:
            marks["last"] = time.perf_counter()

    config = JobConfig(
        name=name,
        policy=f"scripted:{work / 'bench_policy.py'}:policy",
        group_size=group,
        concurrency=concurrency,
        rollout_timeout=300,
        max_retries=0,
    )
    stop, peak = asyncio.Event(), [0]
    sampler = asyncio.create_task(_sample_rss(stop, peak)) if rss else None
    result = await run_local(
        RunConfig(
            entrypoint=str(work / "bench_agent.py"),
            dataset=data,
            job=config,
            out=work / "runs",
            workers=workers,
        ),
        JobHooks(progress=hook),
    )
    stop.set()
    if sampler is not None:
        await sampler
    seconds = marks["last"] - marks["first"]
    turns = result.figures.turns or 0
    return {
        "rollouts": result.total,
        "ok": result.succeeded,
        "seconds": seconds,
        "rate": result.total / seconds,
        "turns_per_rollout": turns / max(1, result.total),
        "peak_rss_mib": peak[0] / 1024,
    }


async def reference_pipeline(
    work: Path, rollouts: int, concurrency: int, mode: str
) -> dict[str, Any]:
    """Bare agent + fake runtime + a plain asyncio driver; no store, no checks."""
    (work / "reference_agent.py").write_text(textwrap.dedent(REFERENCE_AGENT))
    runtime_port, agent_port = _free_port(), _free_port()
    server = uvicorn.Server(
        uvicorn.Config(fake_runtime(), host="127.0.0.1", port=runtime_port, log_level="warning")
    )
    serve = asyncio.create_task(server.serve())
    env = {**os.environ, "PORT": str(agent_port), "REFERENCE_MODE": mode}
    log = (work / "reference_agent.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(work / "reference_agent.py"), env=env, stdout=log, stderr=log
    )
    endpoint = f"http://127.0.0.1:{runtime_port}"
    agent = f"http://127.0.0.1:{agent_port}"
    try:
        async with httpx.AsyncClient(timeout=300) as http:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if (await http.get(agent + "/ping")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("reference agent did not start")
                await asyncio.sleep(0.05)
            sem = asyncio.Semaphore(concurrency)
            ok = 0

            async def one(i: int) -> None:
                nonlocal ok
                payload = {
                    "prompt": json.dumps({"prompt": "Guess.", "answer": "zzzzz", "id": i}),
                    "metadata": {
                        "jobArn": "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/ref",
                        "rolloutId": f"ref-{i}",
                        "endpoint": endpoint,
                        "region": "us-west-2",
                    },
                }
                async with sem:
                    r = await http.post(
                        agent + "/invocations",
                        json=payload,
                        headers={"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": f"{i:040d}"},
                    )
                    ok += r.status_code == 200

            start = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(rollouts)))
            seconds = time.perf_counter() - start
    finally:
        proc.terminate()
        await proc.wait()
        log.close()
        server.should_exit = True
        await serve
    return {"rollouts": rollouts, "ok": ok, "seconds": seconds, "rate": rollouts / seconds}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--scale", default="1,16,96", help="concurrencies of the scale rows")
    parser.add_argument("--rss-rollouts", type=int, default=192)
    args = parser.parse_args()
    if args.workers is None:
        args.workers = default_workers(args.concurrency)
    scale_at = [int(c) for c in args.scale.split(",") if c.strip()]
    with tempfile.TemporaryDirectory(prefix="agent-kit-bench-") as tmp:
        work = Path(tmp)
        (work / "bench_agent.py").write_text(textwrap.dedent(BENCH_AGENT))
        (work / "bench_policy.py").write_text(textwrap.dedent(BENCH_POLICY))
        naive = await reference_pipeline(work, args.rollouts, args.concurrency, "naive")
        ref = await reference_pipeline(work, args.rollouts, args.concurrency, "tuned")
        full = await full_pipeline(
            work, args.rollouts, args.concurrency, args.workers, "bench-full"
        )
        peak = await full_pipeline(
            work, args.rss_rollouts, 96, default_workers(96), "bench-rss", rss=True
        )
        scale = {}
        for c in scale_at:
            n = 32 if c == 1 else max(128, 2 * c)
            scale[c] = await full_pipeline(work, n, c, default_workers(c), f"bench-scale-{c}")
    ratio = full["rate"] / ref["rate"]
    print(f"episodes: {GUESSES} tool calls + 1 answer = {GUESSES + 1} model calls")
    print(f"agent worker processes: {args.workers}; concurrency {args.concurrency}")
    print(f"{'pipeline':<34}{'rollouts':>9}{'ok':>6}{'seconds':>9}{'rollouts/s':>12}")
    for label, r in (
        ("reference, client_args (naive)", naive),
        ("reference, 1 client/episode", ref),
    ):
        print(f"{label:<34}{r['rollouts']:>9}{r['ok']:>6}{r['seconds']:>9.2f}{r['rate']:>12.2f}")
    print(
        f"{'agent_kit full pipeline':<34}{full['rollouts']:>9}{full['ok']:>6}"
        f"{full['seconds']:>9.2f}{full['rate']:>12.2f}"
    )
    print(f"turns per rollout (full): {full['turns_per_rollout']:.2f}")
    print(f"ratio full / tuned reference: {ratio:.2f}x (budget >= 1.0x, stretch 1.5x)")
    print(f"ratio full / naive reference: {full['rate'] / naive['rate']:.2f}x")
    for c, r in scale.items():
        print(
            f"scale: concurrency {c:>3}, {default_workers(c)} agent process(es): {r['rate']:.2f}/s"
        )
    print(
        f"peak RSS at concurrency 96 ({peak['rollouts']} rollouts, driver + emulator + "
        f"{default_workers(96)} agent process(es)): {peak['peak_rss_mib']:.0f} MiB "
        "(budget < 1024 MiB); "
        f"{peak['rate']:.2f} rollouts/s"
    )
    results.record(
        "rollout_throughput",
        [
            {
                "benchmark (script)": "rollout throughput, Wordle-like pipeline, "
                f"{GUESSES + 1} calls/episode, {args.workers} agent process(es) "
                "(`bench/rollout_throughput.py`)",
                "agent_kit": f"{full['rate']:.1f} rollouts/s",
                "reference, same run": "bare `BedrockAgentCoreApp` + Strands + fake runtime, "
                f"one client per episode: {ref['rate']:.1f}/s (with `client_args` as in the "
                f"AWS samples: {naive['rate']:.1f}/s)",
                "ratio": f"{ratio:.2f}× ({full['rate'] / naive['rate']:.1f}×)",
                "budget": "≥ 1.0×, stretch 1.5×",
            },
            {
                "benchmark (script)": "memory at 96 rollouts in flight (driver + emulator + "
                f"{default_workers(96)} agent processes)",
                "agent_kit": f"{peak['peak_rss_mib']:.0f} MiB peak RSS",
                "reference, same run": "—",
                "ratio": "—",
                "budget": "< 1 GiB",
            },
            *(
                {
                    "benchmark (script)": f"full pipeline at concurrency {c} "
                    f"({r['rollouts']} rollouts, {default_workers(c)} agent process(es))",
                    "agent_kit": f"{r['rate']:.1f} rollouts/s",
                    "reference, same run": "—",
                    "ratio": f"{r['rate'] / scale[scale_at[0]]['rate']:.1f}× concurrency "
                    f"{scale_at[0]}",
                    "budget": "—",
                }
                for c, r in scale.items()
            ),
        ],
    )


if __name__ == "__main__":
    asyncio.run(main())
