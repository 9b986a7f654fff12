"""Wordle, learned on a CPU: a scripted expert, a warm start, GRPO, and the holdout before/after.

One run, through the CLI exactly as a user would type it:

1. ``agent-kit run`` records the Solver (examples/wordle/policies.py) on the first
   ``--expert-rows`` train words, ``--expert-samples`` episodes each at
   ``--expert-temperature`` (the warm start's episodes; defaults: 32 words × 2, greedy, so that
   every game opens with the same word; the two samples of a word are the same game, so each
   game is seen twice in the default epoch);
2. ``agent-kit train … --warm-start <that run> --eval <holdout>`` fine-tunes SmolLM2-135M's LoRA
   adapter on the Solver's rewarded episodes, trains ``--steps`` GRPO steps on the train split,
   and plays the first ``--holdout-rows`` holdout words ``--eval-samples`` times with the base
   model, the warm start and the trained adapter.

It prints, per model: mean reward ± standard error over prompts, solve rate (reward ≥ 1, the
success threshold), valid-guess rate (``guess_word`` calls whose word is in the game's word
list), tool-call rate (turns that called a tool), rollouts the agent ended early (a limit such
as its wall-clock budget: scored as they stood); then seconds per GRPO step, the whole run's
minutes and the trainer's peak RSS. ``--record`` writes the ``train_wordle`` row into
bench/results.md (bench/results.py). Aim: warm > base and trained > warm, each by more than two
standard errors, within 60 minutes on 2 cores, peak RSS under 4 GB. Not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from agent_kit.evaluation.rollouts import tool_call_rate  # noqa: E402
from agent_kit.store import RunStore, load_rollouts  # noqa: E402

WORDLE = ROOT / "examples" / "wordle"
LABELS = (("base", "base"), ("warm", "warm start"), ("adapter", "trained"))


def _agent_kit() -> list[str]:
    """The agent-kit command of this interpreter."""
    return [sys.executable, "-m", "agent_kit.cli"]


def _head(src: Path, rows: int, dest: Path) -> Path:
    lines = src.read_text(encoding="utf-8").splitlines()[:rows]
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


def _run(cmd: list[str]) -> None:
    print("$", " ".join(cmd), flush=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    subprocess.run(cmd, check=False, env=env)


def _allowed_words() -> frozenset[str]:
    words = set()
    for name in ("allowed.txt", "answers.txt"):
        text = (WORDLE / "words" / name).read_text(encoding="utf-8")
        words.update(w.strip().lower() for w in text.split() if w.strip())
    return frozenset(words)


def _calls(turn: Any) -> list[dict[str, Any]]:
    response = turn.response if isinstance(turn.response, dict) else {}
    choices = response.get("choices") or [{}]
    message = choices[0].get("message") or {} if isinstance(choices[0], dict) else {}
    calls = message.get("tool_calls") or []
    return [c for c in calls if isinstance(c, dict)]


def game_figures(run_dir: Path, allowed: frozenset[str]) -> dict[str, float | None]:
    """Solve rate, valid-guess rate and tool-call rate of one evaluation run."""
    with RunStore.open(run_dir, readonly=True) as store:
        job = store.list_jobs()[-1]
        records = load_rollouts(store, job.arn, with_turns=True)
    rewards = [r.reward for r in records if r.reward is not None]
    cut = sum(1 for r in records if r.rewarded and r.agent_failure)
    guesses = valid = 0
    for record in records:
        for turn in record.turn_rows:
            for call in _calls(turn):
                function = call.get("function") or {}
                if function.get("name") != "guess_word":
                    continue
                guesses += 1
                try:  # the tool's parameter is ``guess`` (``word`` was read before: 0 %)
                    arguments = json.loads(function.get("arguments") or "{}")
                    word = str(arguments.get("guess", arguments.get("word", "")))
                except (ValueError, AttributeError):
                    word = ""
                valid += word.strip().lower() in allowed
    return {
        "solve_rate": sum(r >= 1.0 for r in rewards) / len(records) if records else None,
        "valid_guess_rate": valid / guesses if guesses else None,
        "tool_call_rate": tool_call_rate(records),
        "cut": float(cut),
    }


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return (
        "n/a"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, spec)
    )


def _differs(a: dict[str, Any], b: dict[str, Any]) -> bool | None:
    """Whether b's mean is above a's by more than two standard errors of the difference."""
    if a.get("mean") is None or b.get("mean") is None:
        return None
    se = math.sqrt((a.get("se") or 0.0) ** 2 + (b.get("se") or 0.0) ** 2)
    return bool(b["mean"] - a["mean"] > 2 * se)


def _play(args: argparse.Namespace, out: Path) -> None:
    """Record the Solver, then train with a warm start from it and the holdout evaluations."""
    expert_data = _head(WORDLE / "train.jsonl", args.expert_rows, out / "expert.jsonl")
    holdout = _head(WORDLE / "holdout.jsonl", args.holdout_rows, out / "holdout.jsonl")
    agent = str(WORDLE / "agent.py")
    solver = f"scripted:{WORDLE / 'policies.py'}:Solver"
    _run([*_agent_kit(), "run", agent, "--dataset", str(expert_data), "--policy", solver,
          "--group-size", str(args.expert_samples),
          "--temperature", str(args.expert_temperature),
          "--out", str(out), "--name", "solver", "--json"])  # fmt: skip
    _run([*_agent_kit(), "train", agent, "--dataset", str(WORDLE / "train.jsonl"),
          "--model", args.model, "--warm-start", str(out / "solver"),
          "--warm-start-epochs", str(args.warm_start_epochs),
          "--eval", str(holdout), "--eval-samples", str(args.eval_samples),
          "--steps", str(args.steps), "--group-size", str(args.group_size),
          "--batch-size", str(args.batch_size), "--max-tokens", str(args.max_tokens),
          "--temperature", str(args.temperature), "--learning-rate", str(args.learning_rate),
          "--concurrency", str(args.concurrency),
          "--lora-r", "16", "--device", "cpu", "--workers", "1", "--out", str(out),
          "--name", "wordle", "--force"])  # fmt: skip


def main() -> int:
    """Record the expert, train, evaluate, print (and optionally record) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--expert-rows", type=int, default=32)
    parser.add_argument("--expert-samples", type=int, default=2)  # run's least group
    parser.add_argument(
        "--expert-temperature",
        type=float,
        default=0.0,
        help="the Solver's temperature: 0 opens every game with the same word (at 1, 122 of 128 "
        "episodes opened with a different word: nothing for a small model to learn at turn 1)",
    )
    parser.add_argument("--holdout-rows", type=int, default=16)
    parser.add_argument("--eval-samples", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=8,
        help="rollouts in flight (at 32, a holdout's rollouts shared 2 cores so thinly that 24 of "
        "32 hit the agent's 420 s wall-clock budget and were scored cut short)",
    )
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--warm-start-epochs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here")
    parser.add_argument(
        "--from-out",
        type=Path,
        default=None,
        help="read the figures of a finished bench's --out folder instead of playing again "
        "(the whole run's minutes from its files' times)",
    )
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        out = args.from_out or args.out or Path(scratch)
        out.mkdir(parents=True, exist_ok=True)
        if args.from_out is not None:
            first = (out / "expert.jsonl").stat().st_mtime
            started -= (out / "wordle" / "train.json").stat().st_mtime - first
        else:
            _play(args, out)
        run_dir = out / "wordle"
        doc = json.loads((run_dir / "train.json").read_text(encoding="utf-8"))
        allowed = _allowed_words()
        rows = {}
        for label, name in LABELS:
            figures = dict(doc.get("eval", {}).get(label) or {})
            eval_dir = run_dir / "eval" / label
            if eval_dir.is_dir():
                figures.update(game_figures(eval_dir, allowed))
            rows[label] = figures
            print(
                f"{name:>10}: reward {_fmt(figures.get('mean'))} ± {_fmt(figures.get('se'))}, "
                f"solved {_fmt(figures.get('solve_rate'), '.0%')}, "
                f"valid guesses {_fmt(figures.get('valid_guess_rate'), '.0%')}, "
                f"tool calls {_fmt(figures.get('tool_call_rate'), '.0%')}, "
                f"ended early by the agent {_fmt(figures.get('cut'), '.0f')}"
            )
    wall = time.monotonic() - started
    load = f"load {load_before:.1f} → {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    print(load)
    warm_beats = _differs(rows["base"], rows["warm"])
    trained_beats = _differs(rows["warm"], rows["adapter"])
    per_step = doc.get("seconds_per_step")
    rss = doc.get("peak_rss_mb")
    print(f"warm > base by 2 SE: {warm_beats}; trained > warm by 2 SE: {trained_beats}")
    print(f"seconds per GRPO step: {_fmt(per_step, '.1f')}; whole bench {wall / 60:.1f} min")
    print(f"peak RSS (trainer process): {_fmt(rss, '.0f')} MiB")
    if args.record:
        from results import record

        def cell(label: str) -> str:
            f = rows[label]
            return (
                f"{label} {_fmt(f.get('mean'))} ± {_fmt(f.get('se'))} "
                f"(solved {_fmt(f.get('solve_rate'), '.0%')}, valid "
                f"{_fmt(f.get('valid_guess_rate'), '.0%')}, tools "
                f"{_fmt(f.get('tool_call_rate'), '.0%')}, cut {_fmt(f.get('cut'), '.0f')})"
            )

        record(
            "train_wordle",
            [
                {
                    "benchmark (script)": (
                        f"`agent-kit train --warm-start`, examples/wordle: Solver on "
                        f"{args.expert_rows} words × {args.expert_samples} at T "
                        f"{args.expert_temperature:g}, warm start "
                        f"{args.warm_start_epochs} epochs, {args.steps} GRPO steps of "
                        f"{args.batch_size}×{args.group_size}, holdout {args.holdout_rows}×"
                        f"{args.eval_samples}, concurrency {args.concurrency} "
                        "(`bench/train_wordle.py`)"
                    ),
                    "agent_kit": f"{cell('warm')}; {cell('adapter')}",
                    "reference, same run": cell("base"),
                    "ratio": (
                        f"warm>base {warm_beats}, trained>warm {trained_beats}; "
                        f"{_fmt(per_step, '.0f')} s/step, {wall / 60:.0f} min, "
                        f"{_fmt(rss, '.0f')} MiB; {load}"
                    ),
                    "budget": "each > previous by 2 SE, ≤ 60 min, < 4 GB",
                }
            ],
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
