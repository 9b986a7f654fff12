"""How far the documented token estimate is from a real tokenizer, on real Wordle policy calls.

Usage: ``.venv/bin/python bench/tokenizer_error.py [--prompts 16] [--group-size 4]``

Records ``prompts × group-size`` Wordle episodes (the scripted ``Sloppy`` policy at temperature
0.7, so transcripts vary) through the full pipeline, then counts every stored policy turn two
ways with ``agent_kit.emulator.tokens``: the estimate (the ``estimate`` tokenizer setting) and the
``o200k_base`` encoding from the ``bpe-openai`` package (the default counter when it is
installed; GPT-4o's encoding and the base of GPT-OSS's ``o200k_harmony``). Prints, for prompt
and completion tokens, the total ratio estimate / o200k and the mean and worst per-turn relative
error, and records them in bench/results.md. It never asserts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import results as bench_results  # bench/results.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_kit.emulator import tokens  # noqa: E402
from agent_kit.replay.helpers import record  # noqa: E402
from agent_kit.store import RunStore  # noqa: E402

WORDLE = ROOT / "examples" / "wordle"


def _counts(turns: list[tuple[dict, dict]], setting: str) -> list[tuple[int, int]]:
    name = tokens.tokenizer_name(setting)
    if setting != "estimate" and name != setting:
        raise SystemExit(f"{setting} is not available (got {name}): pip install bpe-openai")
    out = []
    for request, message in turns:
        prompt = tokens.estimate_prompt_tokens(
            request.get("messages", []), request.get("tools") or [], setting
        )
        out.append((prompt, tokens.estimate_completion_tokens(message, setting)))
    return out


def _errors(est: list[int], real: list[int]) -> tuple[float, float, float]:
    """(total ratio, mean |relative error|, worst |relative error|) over turns with real > 0."""
    pairs = [(e, r) for e, r in zip(est, real, strict=True) if r > 0]
    rel = [abs(e - r) / r for e, r in pairs]
    return sum(e for e, _ in pairs) / sum(r for _, r in pairs), statistics.fmean(rel), max(rel)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=4)
    args = parser.parse_args()
    rows = (WORDLE / "train.jsonl").read_text().splitlines()[: args.prompts]
    prompts = [json.loads(r)["prompt"] for r in rows]
    with tempfile.TemporaryDirectory(prefix="agent-kit-tokens-bench-") as tmp:
        run_dir = record(
            WORDLE / "agent.py",
            prompts,
            policy=f"scripted:{WORDLE / 'policies.py'}:Sloppy",
            out_dir=tmp,
            name="tokens",
            group_size=args.group_size,
            temperature=0.7,
        )
        with RunStore.open(run_dir, readonly=True) as store:
            turns = []
            for trajectory in store.list_trajectories():
                for turn in store.list_turns(trajectory.id):
                    choice = (turn.response.get("choices") or [{}])[0]
                    turns.append((turn.request, choice.get("message") or {}))
    estimate = _counts(turns, "estimate")
    real = _counts(turns, "o200k_base")
    prompt = _errors([e[0] for e in estimate], [r[0] for r in real])
    completion = _errors([e[1] for e in estimate], [r[1] for r in real])
    print(f"policy turns counted: {len(turns)}")
    for label, (ratio, mean, worst) in (("prompt", prompt), ("completion", completion)):
        print(
            f"{label:>10}: estimate / o200k_base = {ratio:.3f} over all turns; per turn "
            f"mean |error| {mean:.1%}, worst {worst:.1%}"
        )
    bench_results.record(
        "tokenizer_error",
        [
            {
                "benchmark (script)": f"token estimate vs o200k_base, {label} tokens, "
                f"{len(turns)} Wordle turns (tokenizer_error)",
                "agent_kit": f"mean per-turn error {mean:.1%} (worst {worst:.1%})",
                "reference, same run": "o200k_base (bpe-openai)",
                "ratio": f"{ratio:.2f}× total",
                "budget": "— (estimate used only without the tokenizer extra)",
            }
            for label, (ratio, mean, worst) in (("prompt", prompt), ("completion", completion))
        ],
    )


if __name__ == "__main__":
    main()
