"""The ``hf`` policy's sampling speed: turns in flight batched vs sampled one at a time.

Loads SmolLM2-135M-Instruct (the packaged GGUF, CPU, float32) once and plays, for 1, 8 and 32
concurrent rollouts, one echo-style turn per rollout ("Repeat after me: WORD", T 0.7, up to 24
tokens, seeded per rollout) through :meth:`HFPolicyBackend.complete`, the path the emulator
takes: once with batching (``max_batch`` 32, the default) and once one sequence at a time
(``max_batch`` 1, what the policy did before batching), back to back in this process. It prints
generated tokens per second for both and their ratio, and how many tokens the two runs sampled
alike (the same seeds draw the same tokens unless float rounding flips a near-tie). On a shared,
loaded machine pass ``--threads 1`` (see bench/train_vs_trl.py). Not a test:
``python bench/hf_sampling.py [--tokens N] [--rounds N] [--threads N] [--record]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from agent_kit.cli.process import tune_process  # noqa: E402
from agent_kit.emulator.policies.hf import HFPolicyBackend  # noqa: E402
from agent_kit.emulator.schemas import PolicyRequest  # noqa: E402
from agent_kit.model.loading import load_model, parse_model_spec  # noqa: E402
from agent_kit.model.turns import TurnTokens  # noqa: E402

WORDS = ("privy", "shyly", "abode", "cameo", "tacit", "ulcer", "vivid", "wreak")


def _request(index: int, tokens: int) -> PolicyRequest:
    word = WORDS[index % len(WORDS)]
    return PolicyRequest(
        messages=(
            {"role": "system", "content": "You answer briefly."},
            {"role": "user", "content": f"Repeat after me: {word}"},
        ),
        tools=(),
        temperature=0.7,
        top_p=1.0,
        max_tokens=tokens,
        rng=random.Random(index),
        trajectory_id=f"bench-s0-p{index}-g0-a0",
        job_arn="arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/bench",
        turn=0,
        raw={"model": "default"},
    )


async def _play(backend: HFPolicyBackend, concurrency: int, tokens: int) -> list[TurnTokens]:
    seen: list[TurnTokens] = []
    backend.recorder = seen.append
    await asyncio.gather(*(backend.complete(_request(i, tokens)) for i in range(concurrency)))
    backend.recorder = None
    return sorted(seen, key=lambda t: t.trajectory_id)


def _rate(backend: HFPolicyBackend, concurrency: int, tokens: int) -> tuple[float, list[Any]]:
    started = time.perf_counter()
    turns = asyncio.run(_play(backend, concurrency, tokens))
    wall = time.perf_counter() - started
    return sum(len(t.completion_ids) for t in turns) / wall, turns


def main() -> int:
    """Measure, print (and optionally record) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=2, help="repeats; the best rate is kept")
    parser.add_argument(
        "--threads", type=int, default=0, help="torch threads (0: torch's default, the cores)"
    )
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    tune_process(policies=["hf:smollm2-135m"])  # as `--policy hf:` commands do at their door
    threads = _threads(args.threads)
    loaded = load_model(parse_model_spec("smollm2-135m"), "cpu")
    batched = HFPolicyBackend(loaded, name="hf:smollm2-135m", max_tokens=args.tokens, max_batch=32)
    single = HFPolicyBackend(loaded, name="hf:smollm2-135m", max_tokens=args.tokens, max_batch=1)
    _rate(batched, 2, 4)  # warm-up: first-call allocations
    rows = []
    for concurrency in (1, 8, 32):
        best_b = best_s = 0.0
        alike = total = 0
        for _ in range(args.rounds):  # interleaved, so load changes hit both alike
            rate_b, turns_b = _rate(batched, concurrency, args.tokens)
            rate_s, turns_s = _rate(single, concurrency, args.tokens)
            best_b, best_s = max(best_b, rate_b), max(best_s, rate_s)
            for a, b in zip(turns_b, turns_s, strict=True):
                total += 1
                alike += a.completion_ids == b.completion_ids
        ratio = best_b / best_s
        print(
            f"{concurrency:3d} concurrent: batched {best_b:6.1f} tokens/s, "
            f"one at a time {best_s:6.1f} tokens/s, {ratio:4.2f}x; "
            f"{alike}/{total} turns sampled alike"
        )
        rows.append(
            {
                "benchmark (script)": (
                    f"`hf` policy sampling, {concurrency} concurrent rollout(s), SmolLM2-135M "
                    f"fp32 CPU, {threads} torch thread(s), T 0.7, ≤ {args.tokens} tokens "
                    "(`bench/hf_sampling.py`)"
                ),
                "agent_kit": f"batched: {best_b:.1f} tokens/s ({alike}/{total} turns as alone)",
                "reference, same run": f"one sequence at a time: {best_s:.1f} tokens/s",
                "ratio": f"{ratio:.2f}×",
                "budget": "> 1× from 8 rollouts in flight",
            }
        )
    print(f"torch threads {threads}; load average {os.getloadavg()[0]:.2f}")
    if args.record:
        from results import record

        record("hf_sampling", rows)
    return 0


def _threads(wanted: int) -> int:
    """Set torch's intra-op threads (on a shared, loaded machine 1 avoids threads spinning at
    barriers for a descheduled sibling); the number in use."""
    import torch

    if wanted > 0:
        torch.set_num_threads(wanted)
    return int(torch.get_num_threads())


if __name__ == "__main__":
    raise SystemExit(main())
