"""Wordle, learned on a CPU: a scripted expert, a warm start, GRPO, and the holdout before/after.

It runs **docs/train.md's two Wordle commands**, as a user pastes them (its default flags are
theirs; ``tests/test_bench_wordle.py`` checks that the page's lines are :func:`commands`'s):

1. ``agent-kit run`` records the greedy Solver (examples/wordle/policies.py) on the seeded
   positions of examples/wordle/train_seeded.jsonl (0–4 prior guesses a game), twice each (the
   warm start's episodes);
2. ``agent-kit train … --warm-start <that run> --eval <holdout> --outcome-gate`` fine-tunes
   SmolLM2-135M's LoRA adapter on the Solver's episodes (1 epoch), trains ``--steps`` GRPO steps
   of 1 prompt × 4 rollouts on the seeded train positions with the advantages on the game's
   outcome term (the shaping alone teaches nothing: docs/train.md), and plays the 16 seeded
   holdout positions twice with the base model, the warm start and the trained adapter.

It prints, per model: mean reward ± standard error over prompts, solve rate (reward ≥ 1, the
success threshold), valid-guess rate (``guess_word`` calls whose word is in the game's word
list), tool-call rate, rollouts the agent ended early; the paired difference trained − warm
over the same holdout prompts with its SE (agent_kit.reporting.paired); per GRPO step its
reward, signal shares (groups all equal, groups that differ only by shaping) and seconds
(sampling and update apart); the mean seconds a step, each command's wall time, the whole run's
minutes and the trainer's peak RSS. ``--record`` writes the ``train_wordle`` row into
bench/results.md (bench/results.py). Aim: trained above warm by more than two SE, some holdout
games solved, within 60 minutes on 2 cores, peak RSS under 4 GB. Not a test. A smaller
configuration (``--expert-rows 2 --holdout-rows 2 --steps 1 …``) checks the script quickly.
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
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from agent_kit.evaluation.rollouts import tool_call_rate  # noqa: E402
from agent_kit.reporting.metrics import build_groups  # noqa: E402
from agent_kit.reporting.paired import difference  # noqa: E402
from agent_kit.store import RunStore, load_rollouts  # noqa: E402

WORDLE = Path("examples") / "wordle"
LABELS = (("base", "base"), ("warm", "warm start"), ("adapter", "trained"))
#: The run directory the documented commands write to (``--out`` is the default ``runs``).
DOCS_OUT = Path("runs")


def parser() -> argparse.ArgumentParser:
    """The bench's flags; their defaults are the documented commands' settings."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--model", default=None, help="--model of train (default: its default)")
    p.add_argument("--train", type=Path, default=WORDLE / "train_seeded.jsonl")
    p.add_argument("--holdout", type=Path, default=WORDLE / "holdout_seeded.jsonl")
    p.add_argument("--expert-rows", type=int, default=None, help="cut the expert's rows")
    p.add_argument("--holdout-rows", type=int, default=None, help="cut the holdout's rows")
    p.add_argument("--expert-samples", type=int, default=2)  # run's least group
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--group-size", type=int, default=None, help="default: train's (4)")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--eval-samples", type=int, default=None, help="default: train's (2)")
    p.add_argument("--warm-start-epochs", type=int, default=None, help="default: train's (1)")
    p.add_argument("--outcome-gate", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--dynamic-sampling", type=int, default=0)
    p.add_argument("--force", action="store_true", help="train even when the preflight stops")
    p.add_argument("--out", type=Path, default=None, help="keep the runs here")
    p.add_argument(
        "--from-out",
        type=Path,
        default=None,
        help="read the figures of a finished bench's --out folder instead of playing again",
    )
    p.add_argument("--record", action="store_true")
    return p


def _given(flag: str, value: Any) -> list[str]:
    """``[flag, value]`` when the value is set (None: the command's own default)."""
    return [] if value is None else [flag, str(value)]


def commands(args: argparse.Namespace, out: Path | None = None) -> list[list[str]]:
    """The two ``agent-kit`` commands (without the program), as docs/train.md shows them when
    ``out`` is None (the run directories under ``runs/``), else writing under ``out``."""
    root = out or DOCS_OUT
    expert, holdout = args.train, args.holdout
    if out is not None and args.expert_rows is not None:
        expert = _head(args.train, args.expert_rows, out / "expert.jsonl")
    if out is not None and args.holdout_rows is not None:
        holdout = _head(args.holdout, args.holdout_rows, out / "holdout.jsonl")
    where = [] if out is None else ["--out", str(out)]
    agent = str(WORDLE / "agent.py")
    record = [
        "run", agent, "--dataset", str(expert),
        "--policy", f"scripted:{WORDLE / 'policies.py'}:Solver",
        "--group-size", str(args.expert_samples), "--temperature", "0", "--name", "solver",
        *where,
    ]  # fmt: skip
    train = [
        "train", agent, "--dataset", str(args.train), "--warm-start", str(root / "solver"),
        "--eval", str(holdout), *_given("--eval-samples", args.eval_samples),
        *_given("--warm-start-epochs", args.warm_start_epochs), *_given("--model", args.model),
        "--steps", str(args.steps), *_given("--group-size", args.group_size),
        "--batch-size", str(args.batch_size), "--max-tokens", str(args.max_tokens),
        "--temperature", f"{args.temperature:g}",
        *(["--outcome-gate"] if args.outcome_gate else []),
        *(["--dynamic-sampling", str(args.dynamic_sampling)] if args.dynamic_sampling else []),
        *(["--force"] if args.force else []), "--name", "wordle", *where,
    ]  # fmt: skip
    return [record, train]


def _head(src: Path, rows: int, dest: Path) -> Path:
    lines = (ROOT / src).read_text(encoding="utf-8").splitlines()[:rows]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


def _run(argv: list[str]) -> float:
    """Run ``agent-kit ARGV`` from the repository root; its wall seconds."""
    cmd = [sys.executable, "-m", "agent_kit.cli", *argv]
    print("$ agent-kit", " ".join(argv), flush=True)
    started = time.monotonic()
    subprocess.run(cmd, check=False, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return time.monotonic() - started


def _allowed_words() -> frozenset[str]:
    words = set()
    for name in ("allowed.txt", "answers.txt"):
        text = (ROOT / WORDLE / "words" / name).read_text(encoding="utf-8")
        words.update(w.strip().lower() for w in text.split() if w.strip())
    return frozenset(words)


def _calls(turn: Any) -> list[dict[str, Any]]:
    response = turn.response if isinstance(turn.response, dict) else {}
    choices = response.get("choices") or [{}]
    message = choices[0].get("message") or {} if isinstance(choices[0], dict) else {}
    calls = message.get("tool_calls") or []
    return [c for c in calls if isinstance(c, dict)]


def _guessed(call: dict[str, Any]) -> str | None:
    function = call.get("function") or {}
    if function.get("name") != "guess_word":
        return None
    try:  # the tool's parameter is ``guess``
        arguments = json.loads(function.get("arguments") or "{}")
        return str(arguments.get("guess", "")).strip().lower()
    except (ValueError, AttributeError):
        return ""


def game_figures(run_dir: Path, allowed: frozenset[str]) -> dict[str, Any]:
    """Solve rate, valid-guess rate, tool-call rate, rollouts cut, and the per-prompt mean
    rewards (keyed by prompt, for the paired difference) of one evaluation run."""
    with RunStore.open(run_dir, readonly=True) as store:
        job = store.list_jobs()[-1]
        records = load_rollouts(store, job.arn, with_turns=True)
    rewards = [r.reward for r in records if r.reward is not None]
    words = [w for r in records for t in r.turn_rows for c in _calls(t) if (w := _guessed(c))]
    per_prompt: dict[str, list[float]] = defaultdict(list)
    for group in build_groups(records):
        prompt = group.rollouts[0].prompt if group.rollouts else str(group.prompt_index)
        per_prompt[prompt] += [*group.rewards, *([0.0] * group.lost)]
    return {
        "solve_rate": sum(r >= 1.0 for r in rewards) / len(records) if records else None,
        "valid_guess_rate": sum(w in allowed for w in words) / len(words) if words else None,
        "tool_call_rate": tool_call_rate(records),
        "cut": float(sum(1 for r in records if r.rewarded and r.agent_failure)),
        "per_prompt": {p: sum(v) / len(v) for p, v in per_prompt.items() if v},
    }


def _fmt(value: float | None, spec: str = ".3f") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return format(value, spec)


def _rows(run_dir: Path, doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    allowed = _allowed_words()
    rows = {}
    for label, name in LABELS:
        figures = dict(doc.get("eval", {}).get(label) or {})
        if (run_dir / "eval" / label).is_dir():
            figures.update(game_figures(run_dir / "eval" / label, allowed))
        rows[label] = figures
        print(
            f"{name:>10}: reward {_fmt(figures.get('mean'))} ± {_fmt(figures.get('se'))}, "
            f"solved {_fmt(figures.get('solve_rate'), '.0%')}, "
            f"valid guesses {_fmt(figures.get('valid_guess_rate'), '.0%')}, "
            f"tool calls {_fmt(figures.get('tool_call_rate'), '.0%')}, "
            f"ended early by the agent {_fmt(figures.get('cut'), '.0f')}"
        )
    return rows


def _print_steps(doc: dict[str, Any]) -> None:
    for s in doc.get("steps", []):
        print(
            f"  step {s['step']}: reward {_fmt(s.get('rollout/reward/mean'))}, all equal "
            f"{_fmt(s.get('train/signal/all_equal'), '.0%')}, shaping only "
            f"{_fmt(s.get('train/signal/shaping_only'), '.0%')}, sampling "
            f"{_fmt(s.get('timing_s/sample'), '.0f')} s, update "
            f"{_fmt(s.get('timing_s/update'), '.0f')} s"
        )
    for warning in doc.get("warnings", []):
        print(f"  {warning}")


def _play(args: argparse.Namespace, out: Path) -> dict[str, float]:
    """Run the two commands under ``out``; each one's wall seconds."""
    expert, train = commands(args, out)
    return {"record": _run(expert), "train": _run(train)}


def _figures(
    args: argparse.Namespace, out: Path, started: float, walls: dict[str, float], before: float
) -> None:
    run_dir = out / "wordle"
    doc = json.loads((run_dir / "train.json").read_text(encoding="utf-8"))
    rows = _rows(run_dir, doc)
    _print_steps(doc)
    paired = difference(
        rows["adapter"].get("per_prompt") or {}, rows["warm"].get("per_prompt") or {}
    )
    wall = time.monotonic() - started
    load = f"load {before:.1f} → {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    verdict = paired.beyond() if paired is not None else None
    diff = (
        f"{paired.mean:+.3f} ± {_fmt(paired.se)} over {paired.prompts} prompts "
        f"({'paired' if paired.paired else 'unpaired'})"
        if paired is not None
        else "n/a"
    )
    print(f"trained − warm: {diff}; beyond two SE: {verdict}")
    per_step, rss = doc.get("seconds_per_step"), doc.get("peak_rss_mb")
    sample, update = doc.get("seconds_per_step_sampling"), doc.get("seconds_per_step_update")
    print(
        f"seconds per GRPO step: {_fmt(per_step, '.1f')} (sampling {_fmt(sample, '.1f')}, update "
        f"{_fmt(update, '.1f')}); record {walls.get('record', 0) / 60:.1f} min, train "
        f"{walls.get('train', 0) / 60:.1f} min, whole bench {wall / 60:.1f} min; {load}"
    )
    print(f"peak RSS (trainer process): {_fmt(rss, '.0f')} MiB")
    if args.record:
        _record(args, rows, diff, verdict, doc, wall, load)


def _record(
    args: argparse.Namespace,
    rows: dict[str, dict[str, Any]],
    diff: str,
    verdict: bool | None,
    doc: dict[str, Any],
    wall: float,
    load: str,
) -> None:
    from results import record

    def cell(label: str) -> str:
        f = rows[label]
        return (
            f"{label} {_fmt(f.get('mean'))} ± {_fmt(f.get('se'))} "
            f"(solved {_fmt(f.get('solve_rate'), '.0%')}, valid "
            f"{_fmt(f.get('valid_guess_rate'), '.0%')}, tools "
            f"{_fmt(f.get('tool_call_rate'), '.0%')}, cut {_fmt(f.get('cut'), '.0f')})"
        )

    steps = doc.get("steps", [])
    equal = [s["train/signal/all_equal"] for s in steps if "train/signal/all_equal" in s]
    shaping = [s["train/signal/shaping_only"] for s in steps if "train/signal/shaping_only" in s]
    shares = (
        f"all equal {sum(equal) / len(equal):.0%}, shaping only {sum(shaping) / len(shaping):.0%}"
        if equal and shaping
        else "no signal recorded"
    )
    settings = doc.get("settings", {})
    record(
        "train_wordle",
        [
            {
                "benchmark (script)": (
                    f"`agent-kit train --warm-start`, examples/wordle seeded positions: Solver "
                    f"on {args.train.name} × {args.expert_samples} at T 0, warm start "
                    f"{settings.get('warm_start_epochs')} epoch(s), {args.steps} GRPO steps of "
                    f"{args.batch_size}×{settings.get('group_size')}"
                    f"{', outcome gate' if args.outcome_gate else ''}, holdout "
                    f"{args.holdout.name} × {settings.get('eval_samples')} "
                    "(`bench/train_wordle.py`, docs/train.md's commands)"
                ),
                "agent_kit": f"{cell('warm')}; {cell('adapter')}",
                "reference, same run": cell("base"),
                "ratio": (
                    f"trained − warm {diff}, beyond 2 SE {verdict}; groups {shares}; "
                    f"{_fmt(doc.get('seconds_per_step'), '.0f')} s/step (sampling "
                    f"{_fmt(doc.get('seconds_per_step_sampling'), '.0f')}, update "
                    f"{_fmt(doc.get('seconds_per_step_update'), '.0f')}), {wall / 60:.0f} min, "
                    f"{_fmt(doc.get('peak_rss_mb'), '.0f')} MiB; {load}"
                ),
                "budget": "trained > warm by 2 SE, some solved, ≤ 60 min, < 4 GB",
            }
        ],
    )


def main() -> int:
    """Run the documented commands (or read a finished run), print and optionally record."""
    args = parser().parse_args()
    started, before = time.monotonic(), os.getloadavg()[0]
    print(f"load before: {before:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as scratch:
        out = (args.from_out or args.out or Path(scratch)).resolve()
        out.mkdir(parents=True, exist_ok=True)
        walls: dict[str, float] = {}
        if args.from_out is None:
            walls = _play(args, out)
        _figures(args, out, started, walls, before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
