"""``agent-kit train`` on the learnable task: does the adapter beat the base model?

Trains SmolLM2-135M-Instruct (the packaged GGUF, CPU, seed 0) on examples/echo for N steps and
prints, from one run: the holdout mean reward ± standard error of the base model and of the
adapter, whether the adapter beats the base by more than two standard errors, seconds per step
and the trainer process's peak RSS. Goal: beat the base by > 2 SE within 30 minutes on a 2-core
machine. Not a test: ``python bench/train_local.py [--steps N] [--model SPEC] [--record]``
(``--record`` writes the row into bench/results.md through bench/results.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from agent_kit.cli.process import tune_process  # noqa: E402
from agent_kit.driver.config import RunConfig  # noqa: E402
from agent_kit.train import TrainConfig, play_train  # noqa: E402
from agent_kit.train.config import TRAIN_JOB  # noqa: E402


def main() -> int:
    """Train, evaluate, print (and optionally record) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=2e-4)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--eval-samples", type=int, default=4)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    example = ROOT / "examples" / "echo"
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as out:
        job = replace(
            TRAIN_JOB,
            name="echo-bench",
            steps=args.steps,
            group_size=args.group_size,
            batch_size=args.batch_size,
            temperature=args.temperature,
            max_tokens=args.max_tokens,
            seed=0,
            concurrency=4,
        )
        run = RunConfig(
            entrypoint=str(example / "agent.py"),
            dataset=example / "train.jsonl",
            job=job,
            out=Path(out),
            workers=1,
        )
        config = TrainConfig(
            run=run,
            eval=example / "holdout.jsonl",
            model=args.model,
            learning_rate=args.learning_rate,
            eval_samples=args.eval_samples,
            lora_r=16,
            device="cpu",
        )
        tuning = tune_process(train_model=args.model, device="cpu")  # as `agent-kit train` does
        result = play_train(
            config,
            echo=lambda line: print(line, flush=True),
            between_phases=tuning.between_phases,
        )
    doc = result.document
    base, adapter = doc["eval"].get("base", {}), doc["eval"].get("adapter", {})
    comparison = doc.get("comparison") or {}
    wall = time.monotonic() - started
    print(f"base    holdout reward {base.get('mean')} ± {base.get('se')}")
    print(f"adapter holdout reward {adapter.get('mean')} ± {adapter.get('se')}")
    print(f"beats base by > 2 SE: {comparison.get('beats_base_by_2se')}")
    print(f"seconds per step: {doc['seconds_per_step']:.1f}; whole run {wall / 60:.1f} min")
    print(f"peak RSS (trainer process): {doc['peak_rss_mb']:.0f} MiB")
    if args.record:
        from results import record

        after = f"adapter {adapter.get('mean', 0):.3f} ± {adapter.get('se', 0):.3f}"
        before = f"base {base.get('mean', 0):.3f} ± {base.get('se', 0):.3f}"
        cost = f"{doc['seconds_per_step']:.0f} s/step, {doc['peak_rss_mb']:.0f} MiB"
        record(
            "train_local",
            [
                {
                    "benchmark (script)": (
                        f"`agent-kit train`, examples/echo, {args.steps} steps, "
                        f"{args.batch_size}×{args.group_size} rollouts a step "
                        "(`bench/train_local.py`)"
                    ),
                    "agent_kit": after,
                    "reference, same run": before,
                    "ratio": cost,
                    "budget": "adapter > base + 2 SE within 30 min",
                }
            ],
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
