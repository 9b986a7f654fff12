"""The warm start's cost, one example a turn against one example an episode, on the Solver's
Wordle episodes.

Records the Solver (examples/wordle/policies.py) on the first ``--rows`` train words ×
``--samples`` with ``agent-kit run`` (or reads ``--run RUN_DIR``), builds the warm start's
examples both ways (agent_kit/train/warm_data.py, SmolLM2-135M's tokenizer) and prints the
tokens one epoch processes; with ``--epochs N`` (default 1; 0 skips it) it also fine-tunes
SmolLM2-135M on each (agent_kit.train.warm.fine_tune, the same settings) and prints the seconds
and the loss. ``--record`` writes the ``warm_tokens`` row into bench/results.md
(bench/results.py) with the load average. Aim: per-episode ≤ half the per-turn tokens. Not a
test.
"""

from __future__ import annotations

import argparse
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

WORDLE = ROOT / "examples" / "wordle"


def _record_solver(rows: int, samples: int, out: Path) -> Path:
    lines = (WORDLE / "train.jsonl").read_text(encoding="utf-8").splitlines()[:rows]
    data = out / "train.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cmd = [
        sys.executable, "-m", "agent_kit.cli", "run", str(WORDLE / "agent.py"),
        "--dataset", str(data), "--group-size", str(samples), "--out", str(out),
        "--name", "solver", "--policy", f"scripted:{WORDLE / 'policies.py'}:Solver", "--json",
    ]  # fmt: skip
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return out / "solver"


def _tune(examples: Any, loaded: Any, epochs: int, out: Path) -> dict[str, Any]:
    from agent_kit.driver.config import RunConfig
    from agent_kit.train.config import TrainConfig
    from agent_kit.train.warm import fine_tune

    config = TrainConfig(run=RunConfig(), device="cpu", warm_start_epochs=epochs)
    return fine_tune(config, loaded, examples, out / "adapters" / "warm", echo=print)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a recorded Solver run (else one is recorded)")
    parser.add_argument("--rows", type=int, default=6, help="train words the Solver plays")
    parser.add_argument("--samples", type=int, default=2, help="episodes a word")
    parser.add_argument("--epochs", type=int, default=1, help="fine-tune epochs (0: tokens only)")
    parser.add_argument("--record", action="store_true", help="write the row to results.md")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from agent_kit.model.loading import load_model, parse_model_spec
    from agent_kit.train.warm_data import warm_examples

    with tempfile.TemporaryDirectory(prefix="warm-tokens-") as tmp:
        run = args.run or _record_solver(args.rows, args.samples, Path(tmp))
        loaded = load_model(parse_model_spec("smollm2-135m"), "cpu")
        figures: dict[str, dict[str, Any]] = {}
        for label, per_episode in (("per turn", False), ("per episode", True)):
            examples = warm_examples([run], loaded.tokenizer, per_episode=per_episode)
            figures[label] = {"examples": len(examples), "tokens": examples.tokens}
            if args.epochs:
                started = time.monotonic()
                tuned = _tune(examples, loaded, args.epochs, Path(tmp) / label.replace(" ", "-"))
                figures[label].update(seconds=time.monotonic() - started, **tuned)
            print(f"{label}: {figures[label]}", flush=True)
    turn, episode = figures["per turn"], figures["per episode"]
    ratio = episode["tokens"] / turn["tokens"]
    load = os.getloadavg()[0]
    print(
        f"tokens an epoch: per episode {episode['tokens']}, per turn {turn['tokens']}: {ratio:.2f}"
    )
    if args.record:
        from results import record

        def cell(f: dict[str, Any]) -> str:
            text = f"{f['examples']} examples, {f['tokens']:,} tokens an epoch"
            if "seconds" in f:
                text += (
                    f", {f['seconds']:.0f} s for {args.epochs} epoch(s), loss {f['loss_last']:.2f}"
                )
            return text

        speed = f", {turn['seconds'] / episode['seconds']:.1f}× faster" if "seconds" in turn else ""
        record(
            "warm_tokens",
            [
                {
                    "benchmark (script)": (
                        f"warm start on the Solver's Wordle episodes ({args.rows} words × "
                        f"{args.samples}), SmolLM2-135M, load {load:.1f} (`bench/warm_tokens.py`)"
                    ),
                    "agent_kit": f"per episode: {cell(episode)}",
                    "reference, same run": f"per turn: {cell(turn)}",
                    "ratio": f"{ratio:.2f} of the tokens{speed}",
                    "budget": "≤ 0.5 of the tokens",
                }
            ],
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
