"""Wordle with a real model: SmolLM2-135M (``--policy local``) through the whole pipeline.

Runs the real command (``.venv/bin/agent-kit run examples/wordle/agent.py --policy local …``) on
the first ``--prompts`` holdout words × ``--group-size``, then reads every turn back from the
run's store and classifies what the model did with the environment's own parser
(``WordleEnv.parse_text_tool_calls``) and word list:

- solve rate (reward ≥ 1.0, the service's success threshold);
- per policy call: a native tool call, a guess written as text (recovered by the parser, charged
  the format penalty), or text with no guess at all;
- invalid guesses (not in the word list, or not five letters) among all guesses made;
- tokens per rollout (the model's own counts, prompt + completion) and rollouts/s of the whole
  command.

In the same run it measures the reference: the same command with the scripted ``Random``
baseline (no model), whose rollouts/s shows what the model costs. It prints the figures and
records them in ``bench/results.md``; it never asserts.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import results as bench_results  # bench/results.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
WORDLE = ROOT / "examples" / "wordle"
CLI = Path(sys.executable).parent / "agent-kit"


def _wordle() -> Any:
    """examples/wordle/agent.py, imported by path (its env parser and word list)."""
    spec = importlib.util.spec_from_file_location("bench_wordle_agent", WORDLE / "agent.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(dataset: Path, policy: str, group: int, out: Path, name: str) -> tuple[float, Path]:
    """Run ``agent-kit run`` once; return its wall time and the run directory."""
    cmd = [
        str(CLI), "run", str(WORDLE / "agent.py"), "--dataset", str(dataset),
        "--policy", policy, "--group-size", str(group), "--temperature", "0.7",
        "--seed", "1", "--json", "--out", str(out), "--name", name,
    ]  # fmt: skip
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"{name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, out / name


def _analyse(run_dir: Path, wordle: Any) -> dict[str, Any]:
    """What the model did, turn by turn, from the run's store."""
    from agent_kit.store import RunStore

    calls = text_guesses = no_guess = guesses = invalid = estimated = 0
    tokens = completion = solved = rollouts = turns = 0
    with RunStore.open(run_dir / "run.sqlite", readonly=True) as store:
        for trajectory in store.list_trajectories():
            rollouts += 1
            reward = store.get_reward(trajectory.id)
            solved += reward is not None and reward.total >= 1.0
            for turn in store.list_turns(trajectory.id):
                turns += 1
                estimated += turn.usage_estimated
                tokens += turn.prompt_tokens + turn.completion_tokens
                completion += turn.completion_tokens
                message = turn.response["choices"][0]["message"]
                words: list[str] = []
                if message.get("tool_calls"):
                    calls += 1
                    for call in message["tool_calls"]:
                        try:
                            args = json.loads(call["function"].get("arguments") or "{}")
                        except ValueError:
                            args = {}
                        words.append(str(args.get("guess", "")) if isinstance(args, dict) else "")
                else:
                    recovered = wordle.WordleEnv().parse_text_tool_calls(
                        message.get("content") or ""
                    )
                    if recovered:
                        text_guesses += 1
                        words += [str(c.arguments.get("guess", "")) for c in recovered]
                    else:
                        no_guess += 1
                for word in words:
                    guesses += 1
                    invalid += word.strip().lower() not in wordle.ALLOWED
    return {
        "rollouts": rollouts,
        "turns": turns,
        "solved": solved,
        "tool_calls": calls,
        "text_guesses": text_guesses,
        "no_guess": no_guess,
        "guesses": guesses,
        "invalid": invalid,
        "estimated_turns": estimated,
        "tokens": tokens,
        "completion_tokens": completion,
    }


def main() -> None:
    """Measure, print and record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8, help="holdout words (default 8)")
    parser.add_argument("--group-size", type=int, default=2)
    args = parser.parse_args()
    wordle = _wordle()
    with tempfile.TemporaryDirectory(prefix="bench-local-llm-") as tmp:
        out = Path(tmp)
        dataset = out / "holdout.jsonl"
        rows = (WORDLE / "holdout.jsonl").read_text().splitlines()[: args.prompts]
        dataset.write_text("\n".join(rows) + "\n")
        ref_wall, _ = _run(
            dataset, f"scripted:{WORDLE / 'policies.py'}:Random", args.group_size, out, "ref"
        )
        wall, run_dir = _run(dataset, "local", args.group_size, out, "local")
        got = _analyse(run_dir, wordle)
    n, turns = got["rollouts"], max(1, got["turns"])
    rate, ref_rate = n / wall, n / ref_wall
    cap = os.environ.get("AGENT_KIT_LOCAL_MAX_TOKENS", "256")
    print(json.dumps({**got, "wall_s": round(wall, 1), "reference_wall_s": round(ref_wall, 1)}))
    row = {
        "benchmark (script)": (
            f"Wordle with a real model: SmolLM2-135M Q4_1 (`--policy local`, llama.cpp on the "
            f"CPU, cap {cap} tokens), {args.prompts} holdout words × {args.group_size}, T 0.7 "
            "(`bench/local_llm.py`)"
        ),
        "agent_kit": (
            f"solved {got['solved']}/{n} ({100 * got['solved'] / max(1, n):.0f}%); per call: "
            f"{100 * got['tool_calls'] / turns:.0f}% tool calls, "
            f"{100 * got['text_guesses'] / turns:.0f}% text guesses (recovered), "
            f"{100 * got['no_guess'] / turns:.0f}% text without a guess; invalid guesses "
            f"{got['invalid']}/{got['guesses']}; {got['tokens'] / max(1, n):.0f} tokens/rollout "
            f"({got['completion_tokens'] / max(1, n):.0f} generated), "
            f"{got['estimated_turns']} estimated; {rate:.2f} rollouts/s ({wall:.0f} s)"
        ),
        "reference, same run": f"same command, scripted Random baseline: {ref_rate:.2f} rollouts/s",
        "ratio": f"{rate / ref_rate:.3f}×",
        "budget": "— (a baseline: a 135M model mostly loses)",
    }
    print(row["agent_kit"])
    bench_results.record("local_llm", [row])


if __name__ == "__main__":
    main()
