"""The Wordle baselines table: one command, real runs, reproducible.

    python examples/wordle/evaluate.py                 # driver mode when available, else sim
    python examples/wordle/evaluate.py --mode sim      # in-process simulation (no Strands/servers)
    python examples/wordle/evaluate.py --mode driver   # `agent-kit run ... --json` per row

Per row (policy @ temperature) over the holdout, ``--group-size`` rollouts per word:
solve rate, mean guesses when solved, reward mean ± std (population), and the fraction of
groups whose rewards are all equal (zero variance → zero GRPO advantage, no learning signal).

Modes:

- ``driver``: the real pipeline. Runs ``agent-kit run examples/wordle/agent.py --dataset ...
  --policy scripted:examples/wordle/policies.py:NAME --group-size G --temperature T --json
  --out DIR`` and reads every trajectory's reward from ``DIR``'s run store. A rollout is solved
  when its reward is ≥ 1.0 (the service's success threshold); its guess count follows from the
  reward (solve on guess n scores 1.05 + 0.1·(6−n) ± at most 0.04 of shaping).
- ``sim``: ``simulate.py`` — the same environment, reward and policies played in-process without
  Strands, HTTP or the emulator (clearly labelled as such in the output).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent


def _simulate() -> ModuleType:
    """``simulate.py`` next to this file, imported by path (no ``sys.path`` changes)."""
    name = "wordle_simulate"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "simulate.py")
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {HERE / 'simulate.py'}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


DEFAULT_ROWS = ("Solver@0", "Solver@0.7", "Sloppy@0.7", "Random@0.7")


@dataclass(frozen=True)
class Rollout:
    """What the table needs from one rollout."""

    group: int
    reward: float
    solved: bool
    guesses: int


def guesses_from_reward(reward: float) -> int:
    """Guess count of a solved rollout from its reward (shaping is within ±0.04 < 0.05)."""
    return 6 - round((reward - 1.05) / 0.1)


def table_row(name: str, rollouts: list[Rollout]) -> dict[str, Any]:
    """Aggregate one policy's rollouts into the table's figures."""
    rewards = [r.reward for r in rollouts]
    solved = [r for r in rollouts if r.solved]
    groups: dict[int, list[float]] = {}
    for r in rollouts:
        groups.setdefault(r.group, []).append(r.reward)
    flat = sum(1 for g in groups.values() if max(g) - min(g) <= 1e-9)
    return {
        "policy": name,
        "rollouts": len(rollouts),
        "solve_rate": len(solved) / len(rollouts) if rollouts else math.nan,
        "mean_guesses_solved": statistics.fmean(r.guesses for r in solved) if solved else None,
        "reward_mean": statistics.fmean(rewards) if rewards else math.nan,
        "reward_std": statistics.pstdev(rewards) if rewards else math.nan,
        "zero_variance_groups": flat / len(groups) if groups else math.nan,
    }


def run_sim(
    policy: str, temperature: float, dataset: Path, group_size: int, seed: int
) -> list[Rollout]:
    """Play the rows in-process with ``simulate.py`` (no Strands, no servers)."""
    simulate = _simulate()
    pol = getattr(simulate.policies_module(), policy)()
    tasks = simulate.read_dataset(dataset)
    groups = simulate.play_groups(
        pol, tasks, group_size=group_size, temperature=temperature, seed=seed
    )
    return [
        Rollout(i, r.reward.total, r.solved, r.guesses)
        for i, group in enumerate(groups)
        for r in group
    ]


def run_driver(
    policy: str, temperature: float, dataset: Path, group_size: int, seed: int, out: Path
) -> list[Rollout]:
    """Run the real pipeline with ``agent-kit run --json`` and read rewards from its run store."""
    cli = shutil.which("agent-kit") or str(Path(sys.executable).with_name("agent-kit"))
    cmd = [
        cli, "run", str(HERE / "agent.py"), "--dataset", str(dataset),
        "--policy", f"scripted:{HERE / 'policies.py'}:{policy}",
        "--group-size", str(group_size), "--temperature", str(temperature),
        "--seed", str(seed), "--json", "--out", str(out),
        # a fixed job name gives fixed trajectory ids, and the emulator seeds a scripted
        # policy's rng from (seed, trajectory id, turn): the same command, the same figures
        "--name", f"wordle-eval-{policy.lower()}-{str(temperature).replace('.', '-')}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(
            f"error: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}"
        )
    stores = sorted(out.rglob("run.sqlite"), key=lambda p: p.stat().st_mtime)
    if not stores:
        raise SystemExit(f"error: no run.sqlite under {out}")
    db = sqlite3.connect(f"file:{stores[-1]}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT t.step, t.prompt_index, r.total FROM trajectories t"
        " JOIN rewards r ON r.trajectory_id = t.id WHERE t.state = 'REWARDED'"
    ).fetchall()
    db.close()
    return [
        Rollout(
            int(step) * 1_000_000 + int(prompt),
            float(total),
            total >= 1.0,
            guesses_from_reward(total) if total >= 1.0 else 0,
        )
        for step, prompt, total in rows
    ]


def driver_available() -> bool:
    """True when ``agent-kit run`` exists in this installation."""
    try:
        import agent_kit.cli.run  # noqa: F401
    except ImportError:
        return False
    return True


def markdown(rows: list[dict[str, Any]], caption: str) -> str:
    """The results as a Markdown table."""
    lines = [
        caption,
        "",
        "| policy @ temperature | rollouts | solve rate | mean guesses (solved) "
        "| reward mean ± std "
        "| zero-variance groups |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        guesses = f"{r['mean_guesses_solved']:.2f}" if r["mean_guesses_solved"] is not None else "–"
        lines.append(
            f"| {r['policy']} | {r['rollouts']} | {r['solve_rate']:.1%} | {guesses} "
            f"| {r['reward_mean']:+.3f} ± {r['reward_std']:.3f} | {r['zero_variance_groups']:.1%} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Evaluate each row and print the Markdown table (and JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description="Wordle baselines table")
    parser.add_argument("rows", nargs="*", default=list(DEFAULT_ROWS), help="POLICY@TEMPERATURE")
    parser.add_argument("--mode", choices=("auto", "driver", "sim"), default="auto")
    parser.add_argument("--dataset", type=Path, default=HERE / "holdout.jsonl")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="driver mode: where runs go")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    mode = args.mode if args.mode != "auto" else ("driver" if driver_available() else "sim")
    results = []
    for spec in args.rows:
        policy, _, temp = spec.partition("@")
        temperature = float(temp or 0.0)
        if mode == "sim":
            rollouts = run_sim(policy, temperature, args.dataset, args.group_size, args.seed)
        else:
            out = args.out or Path(tempfile.mkdtemp(prefix="wordle-eval-"))
            rollouts = run_driver(
                policy, temperature, args.dataset, args.group_size, args.seed, out / spec
            )
        results.append(table_row(spec, rollouts))
    how = (
        "agent-kit run (driver → emulator → agent subprocess → Strands)"
        if mode == "driver"
        else "in-process simulation (simulate.py: env + policy + reward, no Strands/servers)"
    )
    caption = f"{args.dataset.name}, group size {args.group_size}, seed {args.seed}; mode: {how}"
    print(markdown(results, caption))
    if args.json:
        print(json.dumps({"mode": mode, "caption": caption, "rows": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
