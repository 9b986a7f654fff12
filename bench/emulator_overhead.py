"""Emulator turn overhead versus a minimal Starlette SSE endpoint, measured in one run.

Usage: ``.venv/bin/python bench/emulator_overhead.py [--requests 3000] [--concurrency 8]``

Two servers, each in its own process, each served by uvicorn on 127.0.0.1 (same settings):

- **reference**: a minimal Starlette app whose ``POST /v1/chat/completions`` reads the body and
  streams a canned completion as OpenAI SSE (``StreamingResponse``), nothing else;
- **emulator**: ``create_app(Emulator(...))`` with the ``random`` policy, a WAL run store in a
  temp dir, bearer auth checked, every turn recorded.

The load generator (this process, httpx + asyncio) sends the same Strands-shaped request body
(system + list-of-parts user message + one tool) with a bounded number of requests:

1. throughput: ``--requests`` requests at ``--concurrency`` in flight → turns/s, for the reference,
   the emulator streaming (``stream: true`` + include_usage) and non-streaming;
2. latency: ``--latency-requests`` sequential requests each → p50/p95 per call; "added" is the
   emulator's percentile minus the reference's.

Budget (DESIGN.md): emulator ≥ 0.8× the reference's turns/s, ≤ 1 ms p50 added per call.
It prints figures; it never asserts (timings on a shared machine are not pass/fail).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import results  # bench/results.py, beside this script: the one results file

TOKEN = (
    "sagemaker-api-key-"
    + base64.b64encode(
        b"sagemaker.amazonaws.com/?Action=CallWithBearerToken&X-Amz-Algorithm=AWS4-HMAC-SHA256"
        b"&X-Amz-Credential=AKIDBENCH%2F20261202%2Fus-west-2%2Fsagemaker%2Faws4_request"
        b"&X-Amz-Signature=0&Version=1"
    ).decode()
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "guess",
            "description": "Guess a five-letter word.",
            "parameters": {
                "type": "object",
                "properties": {"word": {"type": "string", "minLength": 5, "maxLength": 5}},
                "required": ["word"],
            },
        },
    }
]


def body(stream: bool) -> dict[str, Any]:
    """A request shaped like Strands' OpenAIModel's first turn."""
    out: dict[str, Any] = {
        "model": "default",
        "messages": [
            {"role": "system", "content": "You play Wordle. Use the guess tool."},
            {"role": "user", "content": [{"type": "text", "text": "Find the secret word."}]},
        ],
        "tools": TOOLS,
        "temperature": 1.0,
        "max_tokens": 256,
    }
    if stream:
        out |= {"stream": True, "stream_options": {"include_usage": True}}
    return out


# ------------------------------------------------------------------------------ servers


def reference_app() -> Any:
    """Minimal Starlette endpoint serving a canned SSE completion."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    base = {"id": "chatcmpl-ref", "object": "chat.completion.chunk", "created": 0, "model": "ref"}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "guess", "arguments": '{"word": "crane"}'},
                            }
                        ]
                    },
                }
            ],
        },
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 60, "completion_tokens": 9}},
    ]
    events = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]

    async def completions(request: Request) -> StreamingResponse:
        await request.body()

        async def gen() -> Any:
            for event in events:
                yield event

        return StreamingResponse(gen(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def emulator_app(run_dir: str) -> Any:
    """The emulator with the random policy and a WAL store in ``run_dir``."""
    from agent_kit.emulator.core import Emulator
    from agent_kit.emulator.policies import load_policy
    from agent_kit.emulator.server import create_app
    from agent_kit.store import RunStore

    emu = Emulator(
        RunStore.open(run_dir), load_policy("random:1"), max_turns_per_trajectory=1_000_000
    )
    emu.create_job("bench")
    return create_app(emu)


def serve(kind: str, fd: int, run_dir: str) -> None:
    """Child process: serve ``kind`` on the inherited listening socket ``fd``."""
    import uvicorn

    app = reference_app() if kind == "reference" else emulator_app(run_dir)
    sock = socket.socket(fileno=fd)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    )
    asyncio.run(server.serve(sockets=[sock]))


class Server:
    """A server child process on an ephemeral loopback port."""

    def __init__(self, kind: str, run_dir: str) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        fd = self.sock.fileno()
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", kind, "--fd", str(fd), "--run-dir", run_dir],
            pass_fds=[fd],
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.post(self.url + "/_ready", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.sock.close()


# ------------------------------------------------------------------------------ load


async def mint(client: httpx.AsyncClient, n: int) -> list[dict[str, str]]:
    """``n`` trajectories' headers (emulator only; not timed)."""
    out = []
    for _ in range(n):
        meta = (await client.post("/_emulator/rollouts", json={"prompt": "{}"})).json()["metadata"]
        out.append(
            {
                "authorization": f"Bearer {TOKEN}",
                "x-amzn-sagemaker-job-arn": meta["jobArn"],
                "x-amzn-sagemaker-trajectory-id": meta["rolloutId"],
            }
        )
    return out


async def one(
    client: httpx.AsyncClient, payload: bytes, headers: dict[str, str], stream: bool
) -> float:
    start = time.perf_counter()
    if stream:
        async with client.stream(
            "POST", "/v1/chat/completions", content=payload, headers=headers
        ) as response:
            async for _ in response.aiter_raw():
                pass
            status = response.status_code
    else:
        response = await client.post("/v1/chat/completions", content=payload, headers=headers)
        status = response.status_code
    if status != 200:
        raise RuntimeError(f"HTTP {status}")
    return time.perf_counter() - start


async def load(
    url: str, *, emulator: bool, stream: bool, requests: int, concurrency: int, turns_per: int = 7
) -> tuple[float, list[float]]:
    """Run ``requests`` calls with ``concurrency`` in flight; return (turns/s, latencies)."""
    payload = json.dumps(body(stream)).encode()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        if emulator:
            headers = await mint(client, requests // turns_per + concurrency + 1)
        else:
            headers = [{"authorization": f"Bearer {TOKEN}"}]
        for i in range(min(50, requests)):  # warm-up
            await one(client, payload, headers[-1 - (i // turns_per) % len(headers)], stream)
        counter = iter(range(requests))
        latencies: list[float] = []

        async def worker() -> None:
            for i in counter:
                h = headers[(i // turns_per) % len(headers)]
                latencies.append(await one(client, payload, h, stream))

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return requests / elapsed, latencies


def pct(values: list[float], q: float) -> float:
    """The q-quantile in milliseconds."""
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency-requests", type=int, default=800)
    parser.add_argument("--serve", choices=["reference", "emulator"])
    parser.add_argument("--fd", type=int)
    parser.add_argument("--run-dir", default="")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.fd, args.run_dir)
        return

    with tempfile.TemporaryDirectory() as tmp:
        ref = Server("reference", tmp)
        emu = Server("emulator", str(Path(tmp) / "run"))
        try:
            ref.wait_ready()
            emu.wait_ready()
            cases = [
                ("reference (canned SSE)", ref.url, False, True),
                ("emulator stream", emu.url, True, True),
                ("emulator non-stream", emu.url, True, False),
            ]
            rates: dict[str, float] = {}
            lat: dict[str, list[float]] = {}
            for name, url, is_emu, stream in cases:
                rates[name], _ = asyncio.run(
                    load(
                        url,
                        emulator=is_emu,
                        stream=stream,
                        requests=args.requests,
                        concurrency=args.concurrency,
                    )
                )
            for name, url, is_emu, stream in cases:
                _, lat[name] = asyncio.run(
                    load(
                        url,
                        emulator=is_emu,
                        stream=stream,
                        requests=args.latency_requests,
                        concurrency=1,
                    )
                )
        finally:
            ref.stop()
            emu.stop()

    ref_name = cases[0][0]
    print(
        f"emulator overhead: {args.requests} requests at concurrency {args.concurrency}; "
        f"latency from {args.latency_requests} sequential requests; cpus={os.cpu_count()}"
    )
    print(
        f"{'server':<24}{'turns/s':>10}{'ratio':>8}{'p50 ms':>9}{'p95 ms':>9}"
        f"{'+p50 ms':>9}{'+p95 ms':>9}"
    )
    r50, r95 = pct(lat[ref_name], 0.50), pct(lat[ref_name], 0.95)
    for name, *_ in cases:
        p50, p95 = pct(lat[name], 0.50), pct(lat[name], 0.95)
        print(
            f"{name:<24}{rates[name]:>10.0f}{rates[name] / rates[ref_name]:>8.2f}"
            f"{p50:>9.2f}{p95:>9.2f}{p50 - r50:>+9.2f}{p95 - r95:>+9.2f}"
        )
    print("budget: ratio >= 0.80 and +p50 <= 1.00 ms")
    rows = []
    for name, label in (("emulator stream", "streaming"), ("emulator non-stream", "non-streaming")):
        added = pct(lat[name], 0.50) - r50
        rows.append(
            {
                "benchmark (script)": f"emulator turn overhead, {label} "
                "(`bench/emulator_overhead.py`)",
                "agent_kit": f"{rates[name]:.0f} turns/s, {added:+.2f} ms p50",
                "reference, same run": f"minimal Starlette canned-SSE endpoint: "
                f"{rates[ref_name]:.0f} turns/s",
                "ratio": f"{rates[name] / rates[ref_name]:.2f}×",
                "budget": "≥ 0.8×, ≤ 1 ms p50 added",
            }
        )
    results.record("emulator_overhead", rows)


if __name__ == "__main__":
    main()
