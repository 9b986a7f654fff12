"""Build the Wordle train/holdout datasets in the MTRL format (deterministic, disjoint).

    python examples/wordle/make_dataset.py                       # 64 train, 32 holdout, seed 42
    python examples/wordle/make_dataset.py --train-size 640 --holdout-size 128 --out-dir data/

Each line is ``{"prompt": "<JSON string>"}`` where the string holds
``{"prompt": <user message>, "answer": <secret word>, "id": "wordle_<split>_<nnnn>"}`` — the
service passes the string to the agent unparsed, and only the ``prompt`` field reaches the policy.

Words are drawn from ``words/answers.txt`` with ``random.Random(seed)``: one shuffle, the first
``train-size`` words are train and the next ``holdout-size`` are holdout, so the splits are
disjoint by construction and the same arguments always give the same files. Answers that occur
as a word anywhere in the fixed text the policy sees (system prompt, user prompt, tool
description, the tool's message templates — e.g. ``guess``, ``fixed``) are left out, so "the
answer never appears in a request" can be checked with a plain word search.

**Seeded positions** (``train_seeded.jsonl``, ``holdout_seeded.jsonl``: every train word, and
the first ``--seeded-holdout`` holdout words): the same words, row i seeded with ``i mod 5``
prior guesses (``"guesses"``: the greedy Solver's first guesses on that word, fewer when it
would have solved sooner; the answer is never one of them). The game plays them at reset, so a
weak policy meets positions closer to the goal (the curriculum the AWS Wordle sample proposes).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import re
import sys
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


#: The follow-up agent_kit sends after executing a guess recovered from text
#: (agent_kit/episode_loop.py).
RECOVERY_PREFIX = "Result of the tool call written in your message:"


def fixed_texts(mod: ModuleType) -> list[str]:
    """Every piece of policy-visible text that does not depend on the answer.

    Tool messages are collected by playing probe games through every branch (invalid word,
    malformed, solve, loss, too many invalid attempts); the probe's own guesses are removed.
    """
    texts = [mod.SYSTEM_PROMPT, mod.USER_PROMPT, mod.SEEDED_PROMPT, mod.SEEDED_ASK, RECOVERY_PREFIX]
    probe_words: set[str] = set()
    scripts = [
        ("crane", ["xyzzy", "ab", "slate", "crane"]),
        ("crane", ["slate", "pious", "dying", "block", "fluff", "gawky"]),
        ("crane", ["zzzzz"] * mod.MAX_INVALID + ["crane"]),
    ]
    for answer, guesses in scripts:
        env = mod.WordleEnv()
        env.reset({"answer": answer, "id": "probe"})
        for g in guesses:
            probe_words.add(g)
            texts.append(env.guess_word(g))
    texts.append(json.dumps(_simulate().openai_tools(mod.WordleEnv())))
    return [re.sub(r"\b(" + "|".join(probe_words) + r")\b", " ", t, flags=re.I) for t in texts]


def leaking_answers(mod: ModuleType) -> set[str]:
    """Answer-list words that occur as whole words in :func:`fixed_texts`."""
    vocabulary = {w.lower() for t in fixed_texts(mod) for w in re.findall(r"[A-Za-z]+", t)}
    return vocabulary & set(mod.ANSWERS)


def build(train_size: int, holdout_size: int, seed: int) -> dict[str, list[dict[str, Any]]]:
    """The two splits as lists of MTRL rows (``{"prompt": "<JSON string>"}``)."""
    mod = _simulate().agent_module()
    pool = sorted(set(mod.ANSWERS) - leaking_answers(mod))
    if train_size < 0 or holdout_size < 0 or train_size + holdout_size > len(pool):
        raise SystemExit(
            f"error: train + holdout must be between 0 and {len(pool)} words "
            f"(got {train_size} + {holdout_size})"
        )
    random.Random(seed).shuffle(pool)
    splits = {"train": pool[:train_size], "holdout": pool[train_size : train_size + holdout_size]}
    return {
        name: [
            {
                "prompt": json.dumps(
                    {"prompt": mod.USER_PROMPT, "answer": word, "id": f"wordle_{name}_{i:04d}"}
                )
            }
            for i, word in enumerate(words)
        ]
        for name, words in splits.items()
    }


def solver_openings(answer: str, count: int) -> list[str]:
    """The greedy Solver's first ``count`` guesses on ``answer``, stopping before the guess that
    would solve it."""
    policies = _simulate().policies_module()
    feedback: list[tuple[str, str]] = []
    while len(feedback) < count:
        tried = {g for g, _ in feedback}
        pool = [w for w in policies.candidates(feedback) if w not in tried]
        word = policies.choose(pool, 0.0, None)
        if word == answer:
            break
        feedback.append((word, policies.pattern(word, answer)))
    return [word for word, _ in feedback]


def seeded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as seeded positions: row i with ``i mod 5`` prior guesses (see the module
    docstring); its id gains ``_s<n>``."""
    out = []
    mod = _simulate().agent_module()
    for i, row in enumerate(rows):
        task = json.loads(row["prompt"])
        guesses = solver_openings(task["answer"], i % (mod.MAX_SEEDED + 1))
        task = {**task, "id": f"{task['id']}_s{len(guesses)}", "guesses": guesses}
        out.append({"prompt": json.dumps(task)})
    return out


def main(argv: list[str] | None = None) -> int:
    """Write ``train.jsonl``, ``holdout.jsonl`` and their seeded positions; print what was
    written."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-size", type=int, default=64)
    parser.add_argument("--holdout-size", type=int, default=32)
    parser.add_argument("--seeded-holdout", type=int, default=16)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out-dir", type=Path, default=HERE)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    splits = build(args.train_size, args.holdout_size, args.seed)
    splits["train_seeded"] = seeded(splits["train"])
    splits["holdout_seeded"] = seeded(splits["holdout"][: args.seeded_holdout])
    for name, rows in splits.items():
        path = args.out_dir / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        print(f"wrote {len(rows)} rows to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
