"""Seconds per step: ``agent-kit train`` against a bare TRL ``GRPOTrainer`` on the same job.

Both runs train SmolLM2-135M-Instruct (the packaged GGUF, CPU, float32, seed 0) on examples/echo
with the same settings: group 8 × batch 4 (32 completions a step), micro-batch 4, LoRA r 16
(alpha 32, q/k/v/o), learning rate 2e-4, T 0.7, 24 tokens, no activation checkpointing. The
reference is TRL generating its 32 completions itself as one padded batch, with echo's reward
computed on the completion text (no agents, no emulator, no store); ``agent-kit train`` plays
every completion as a rollout of the real entrypoint through the emulator, its ``hf`` policy
batching the turns in flight (``--concurrency`` 32: every rollout of a step in flight). They run
back to back in this process (the reference first); each figure is the mean of the steps after
the first (warm-up: the agent process's start, first allocations). It prints both, their ratio,
the load average, ``agent-kit train``'s split of a step (sampling: the rollouts through the
agents and the batched sampler; update: TRL's loss, backward and optimiser step, and the
bookkeeping around it) and each run's CPU seconds a step (this process's, all its threads; the
agent process's few are not counted), which a loaded machine disturbs far less than the wall
time. On a shared, loaded machine pass ``--threads 1``: two torch threads on two
busy cores spin at every barrier for a descheduled sibling, which swings either run 10× from
one minute to the next. Not a test:
``python bench/train_vs_trl.py [--steps N] [--concurrency N] [--threads N] [--record]``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from agent_kit.cli.process import tune_process  # noqa: E402
from agent_kit.driver.config import RunConfig  # noqa: E402
from agent_kit.model.loading import load_model, parse_model_spec  # noqa: E402
from agent_kit.train import TrainConfig, play_train  # noqa: E402
from agent_kit.train.config import TRAIN_JOB  # noqa: E402

ECHO = ROOT / "examples" / "echo"
GROUP, BATCH, MICRO, LORA_R, LR, TEMPERATURE, TOKENS = 8, 4, 4, 16, 2e-4, 0.7, 24
_WORDS = re.compile(r"[A-Za-z']+")


def _echo_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    """examples/echo's reward on the completion text: 0.6 for the word, 0.4 for one word."""
    del prompts
    rewards = []
    for word, completion in zip(kwargs["word"], completions, strict=True):
        text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
        words = [w.lower() for w in _WORDS.findall(text)]
        rewards.append(0.6 * (word in words) + 0.4 * (len(words) == 1))
    return rewards


def bare_trl(steps: int) -> tuple[list[float], list[float]]:
    """Train with TRL generating its own completions; the seconds of each step and the
    process's CPU seconds at each step's end."""
    import datasets
    import peft
    import transformers
    import trl

    loaded = load_model(parse_model_spec("smollm2-135m"), "cpu")
    rows = [json.loads(json.loads(line)["prompt"]) for line in (ECHO / "train.jsonl").open()]
    data = datasets.Dataset.from_dict(
        {
            "prompt": [
                [
                    {"role": "system", "content": "You answer briefly."},
                    {"role": "user", "content": f"Repeat after me: {row['word']}"},
                ]
                for row in rows
            ],
            "word": [row["word"] for row in rows],
        }
    )
    accumulate = GROUP * BATCH // MICRO
    with tempfile.TemporaryDirectory() as out:
        args = trl.GRPOConfig(
            output_dir=out,
            use_cpu=True,
            per_device_train_batch_size=MICRO,
            gradient_accumulation_steps=accumulate,
            steps_per_generation=accumulate,
            num_generations=GROUP,
            max_completion_length=TOKENS,
            max_steps=steps,
            learning_rate=LR,
            lr_scheduler_type="constant",
            beta=0.0,
            scale_rewards="none",
            temperature=TEMPERATURE,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            seed=0,
            disable_tqdm=True,
            bf16=False,
            activation_checkpointing=False,  # as agent-kit train's default (TRL's is on)
            dataloader_num_workers=0,
        )
        ends: list[float] = []
        cpu: list[float] = []

        class _Clock(transformers.TrainerCallback):  # type: ignore[misc]
            def on_step_end(self, *_: Any, **__: Any) -> None:
                ends.append(time.monotonic())
                cpu.append(time.process_time())

        lora = peft.LoraConfig(
            r=LORA_R,
            lora_alpha=2 * LORA_R,
            lora_dropout=0.0,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
            task_type="CAUSAL_LM",
        )
        trainer = trl.GRPOTrainer(
            model=loaded.model,
            args=args,
            train_dataset=data,
            processing_class=loaded.tokenizer,
            peft_config=lora,
            reward_funcs=[_echo_reward],
            callbacks=[_Clock()],
        )
        trainer.remove_callback(transformers.PrinterCallback)
        started = time.monotonic()
        trainer.train()
        del trainer
    gc.collect()
    return [b - a for a, b in zip([started, *ends], ends, strict=False)], cpu


def agent_kit_train(steps: int, concurrency: int) -> tuple[list[dict[str, Any]], list[float]]:
    """``agent-kit train`` on the same job; each step's record (train.json's) and the process's
    CPU seconds when each step's line was printed."""
    with tempfile.TemporaryDirectory() as out:
        job = replace(
            TRAIN_JOB,
            name="echo-vs-trl",
            steps=steps,
            group_size=GROUP,
            batch_size=BATCH,
            temperature=TEMPERATURE,
            max_tokens=TOKENS,
            seed=0,
            concurrency=concurrency,
        )
        run = RunConfig(
            entrypoint=str(ECHO / "agent.py"),
            dataset=ECHO / "train.jsonl",
            job=job,
            out=Path(out),
            workers=1,
        )
        config = TrainConfig(
            run=run,
            model="smollm2-135m",
            learning_rate=LR,
            lora_r=LORA_R,
            micro_batch=MICRO,
            device="cpu",
        )
        # agent-kit train's door: one malloc arena, TRL's small LM head tiles, quiet libraries
        tuning = tune_process(train_model="smollm2-135m", device="cpu")
        cpu: list[float] = []

        def echo(line: str) -> None:
            if line.startswith("step "):
                cpu.append(time.process_time())
            print(line, flush=True)

        result = play_train(config, echo=echo, between_phases=tuning.between_phases)
    return list(result.document["steps"]), cpu


def _steady(seconds: list[float]) -> float:
    tail = seconds[1:] or seconds
    return sum(tail) / len(tail)


def _cpu_per_step(marks: list[float]) -> float:
    """CPU seconds a step from the CPU clock at each step's end, steps after the first."""
    spans = [b - a for a, b in itertools.pairwise(marks)]
    return sum(spans) / len(spans) if spans else float("nan")


def main() -> int:
    """Run both back to back, print (and optionally record) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=GROUP * BATCH)
    parser.add_argument(
        "--threads", type=int, default=0, help="torch threads (0: torch's default, the cores)"
    )
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    tune_process(policies=["hf:smollm2-135m"])  # the model on disk: the hub offline, as before
    threads = _threads(args.threads)
    load_before = os.getloadavg()[0]
    trl_steps, trl_cpu = bare_trl(args.steps)
    print("bare TRL seconds per step:", " ".join(f"{s:.1f}" for s in trl_steps), flush=True)
    records, kit_cpu = agent_kit_train(args.steps, args.concurrency)
    kit_steps = [float(s["timing_s/train_step"]) for s in records]
    print("agent-kit train seconds per step:", " ".join(f"{s:.1f}" for s in kit_steps))
    trl_s, kit_s = _steady(trl_steps), _steady(kit_steps)
    ratio = kit_s / trl_s
    load = (load_before + os.getloadavg()[0]) / 2
    print(f"bare TRL {trl_s:.1f} s/step; agent-kit train {kit_s:.1f} s/step; {ratio:.2f}x")
    sampling = _steady([float(s["timing_s/sample"]) for s in records])
    updating = _steady([float(s["timing_s/update"]) for s in records])
    print(f"agent-kit train: sampling {sampling:.1f} s/step, update {updating:.1f} s/step")
    trl_c, kit_c = _cpu_per_step(trl_cpu), _cpu_per_step(kit_cpu)
    print(f"CPU s/step: bare TRL {trl_c:.1f}; agent-kit train {kit_c:.1f}; {kit_c / trl_c:.2f}x")
    print(f"torch threads {threads}; load average {load_before:.2f} before, ", end="")
    print(f"{os.getloadavg()[0]:.2f} after")
    if args.record:
        from results import record

        record(
            "train_vs_trl",
            [
                {
                    "benchmark (script)": (
                        f"`agent-kit train` vs bare TRL `GRPOTrainer`, examples/echo, "
                        f"{BATCH}×{GROUP} rollouts a step, micro-batch {MICRO}, LoRA r {LORA_R}, "
                        f"T {TEMPERATURE}, {TOKENS} tokens, concurrency {args.concurrency}, "
                        f"steps 2–{args.steps}, {threads} torch thread(s) "
                        f"(`bench/train_vs_trl.py`, load ≈ {load:.1f})"
                    ),
                    "agent_kit": f"{kit_s:.1f} s/step",
                    "reference, same run": f"bare TRL generating its own batch: {trl_s:.1f} s/step",
                    "ratio": f"{ratio:.2f}× the time",
                    "budget": "≤ 1.0× (no slower per step than bare TRL)",
                }
            ],
        )
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
