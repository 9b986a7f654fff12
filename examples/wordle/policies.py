"""Scripted Wordle policies for the local emulator: ``Solver``, ``Random`` and ``Sloppy``.

Load one with ``--policy scripted:examples/wordle/policies.py:Solver``. Each is a callable class
taking a :class:`~agent_kit.emulator.schemas.PolicyRequest` and returning a ``PolicyReply``.
They are stateless: everything they know is re-read from ``request.messages`` (the feedback
lines the ``guess_word`` tool wrote), and all randomness comes from ``request.rng``. They never
see the answer — only what a model would see.

This file is deliberately independent of ``agent.py`` (its own feedback function and word-list
loading), so a policy cannot reach into the environment, and the two implementations of the
feedback rule check each other in the tests.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall

__all__ = ["DEFAULT_POLICY", "Random", "Sloppy", "Solver", "read_feedback"]

#: The policy ``agent-kit dev`` plays by default (docs/dev.md): the scripted expert.
DEFAULT_POLICY = "Solver"

WORDS_DIR = Path(__file__).resolve().parent / "words"
ANSWERS: tuple[str, ...] = tuple((WORDS_DIR / "answers.txt").read_text(encoding="utf-8").split())
ALLOWED: tuple[str, ...] = tuple(
    sorted(set((WORDS_DIR / "allowed.txt").read_text(encoding="utf-8").split()) | set(ANSWERS))
)
TOOL = "guess_word"

_GUESS_LINE = re.compile(r"Guess (\d+) of (\d+): ([A-Z]{5})\s*\nFeedback: ([^\n]+)")
_MARK = {"green": "G", "yellow": "Y", "gray": "-"}
_OVER = ("the game is over", "no more guesses")


def read_feedback(messages: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """Every ``(guess, pattern)`` the tool reported so far, oldest first; pattern uses G/Y/-.

    Reads tool results (and user messages, where an app may put results of guesses it
    recovered from text); assistant messages are ignored.
    """
    seen: list[tuple[str, str]] = []
    for m in messages:
        if m.get("role") not in ("tool", "user"):
            continue
        for match in _GUESS_LINE.finditer(str(m.get("content", ""))):
            marks = [part.strip().split()[-1] for part in match.group(4).split(",")]
            pattern = "".join(_MARK.get(mark, "?") for mark in marks)
            seen.append((match.group(3).lower(), pattern))
    return seen


def game_over(messages: Sequence[dict[str, Any]]) -> bool:
    """True when the latest tool or user message says the game has ended."""
    for m in reversed(messages):
        if m.get("role") in ("tool", "user"):
            return any(flag in str(m.get("content", "")).lower() for flag in _OVER)
    return False


@functools.lru_cache(maxsize=1 << 18)
def pattern(guess: str, answer: str) -> str:
    """G/Y/- feedback (greens first, then yellows while unmatched copies remain).

    Cached: a run asks for the same (guess, answer) pairs over and over (every candidate
    filter re-checks the whole answer list), and the scripted policy is on the emulator's path.
    """
    out = ["-"] * len(guess)
    left: dict[str, int] = {}
    for i, (g, a) in enumerate(zip(guess, answer, strict=True)):
        if g == a:
            out[i] = "G"
        else:
            left[a] = left.get(a, 0) + 1
    for i, g in enumerate(guess):
        if out[i] == "-" and left.get(g, 0) > 0:
            out[i] = "Y"
            left[g] -= 1
    return "".join(out)


# Feedback as one integer AND. The pattern of ``guess`` against ``answer`` is fixed by (a) the
# positions where they agree and (b) for each letter, min(copies in guess, copies in answer):
# that many of its tiles are coloured, greens first, then yellows from the left. So with
#   _letters(w) = one bit per (position, letter)                 (130 bits)
#   _copies(w)  = bits letter*5 + 0 … letter*5 + copies - 1      (130 bits, unary counts)
# and a word's key = _letters | _copies << 130, ``key(guess) & key(answer)`` has bits (a) and
# (b) and nothing else: equal ANDs ⇔ equal patterns, at ~60 ns a pair instead of ~1.5 µs.
_SPAN = 130


def _marked_key(word: str, marks: str) -> int:
    """The bits of ``word`` that ``marks`` colours: "G" positions, and one copy bit per "G"/"Y"."""
    letters = copies = 0
    coloured: dict[str, int] = {}
    for i, (ch, mark) in enumerate(zip(word, marks, strict=True)):
        c = ord(ch) - 97
        if mark == "G":
            letters |= 1 << (i * 26 + c)
        if mark != "-":
            copies |= 1 << (c * 5 + coloured.get(ch, 0))
            coloured[ch] = coloured.get(ch, 0) + 1
    return letters | copies << _SPAN


def _word_key(word: str) -> int:
    return _marked_key(word, "G" * len(word))  # a word agrees with itself everywhere


_KEYS: dict[str, int] = {w: _word_key(w) for w in ALLOWED}


def _key(word: str) -> int:
    key = _KEYS.get(word)
    return key if key is not None else _word_key(word)


def _pattern_key(guess: str, seen: str) -> int | None:
    """The AND that every answer giving ``seen`` for ``guess`` shares (None: no answer can)."""
    if len(seen) != len(guess) or not set(seen) <= {"G", "Y", "-"}:
        return None
    return _marked_key(guess, seen)


def _answer_word(word: str) -> bool:
    return len(word) == 5 and word.isascii() and word.isalpha() and word.islower()


@functools.lru_cache(maxsize=4096)
def _consistent(feedback: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    if not feedback:
        return ANSWERS
    *earlier, (guess, seen) = feedback
    words = _consistent(tuple(earlier))
    target = _pattern_key(guess, seen) if _answer_word(guess) else None
    if target is None:  # an odd guess or mark: filter the slow, literal way
        return tuple(w for w in words if pattern(guess, w) == seen)
    mine = _key(guess)
    fits = tuple(w for w in words if mine & _KEYS[w] == target)
    # The key ignores where yellows sit; a pattern the rule never produces (e.g. "-Y" for a
    # doubled letter) shares its key with the one it does, so check one survivor literally.
    return fits if not fits or pattern(guess, fits[0]) == seen else ()


def candidates(feedback: Sequence[tuple[str, str]]) -> list[str]:
    """Answer-list words consistent with all feedback (all answers when nothing fits)."""
    fits = _consistent(tuple(feedback))
    return list(fits or ANSWERS)


def scores(words: Sequence[str]) -> list[float]:
    """How informative each candidate is as a guess, in bits (higher is better).

    Exact expected information (entropy of the feedback split) for small sets; for large sets a
    cheap positional letter-frequency score, scaled to a comparable range.
    """
    return list(_scores(tuple(words)))


@functools.lru_cache(maxsize=1024)
def _scores(words: tuple[str, ...]) -> tuple[float, ...]:
    if len(words) <= 150:
        out = []
        keys = [_key(w) for w in words]
        for g in words:
            # Counting pattern keys instead of pattern strings: the same split, met in the
            # same order, so the same float sum.
            split = Counter(map(_key(g).__and__, keys))
            out.append(-sum(n / len(words) * math.log2(n / len(words)) for n in split.values()))
        return tuple(out)
    pos = [Counter(w[i] for w in words) for i in range(5)]
    anywhere = Counter(c for w in words for c in set(w))
    raw = [
        sum(pos[i][c] for i, c in enumerate(w)) + sum(anywhere[c] for c in set(w)) for w in words
    ]
    top = max(raw)
    return tuple(6.0 * r / top for r in raw)  # ~ bits: a good opener splits ≈ 6 bits


def choose(words: Sequence[str], temperature: float, rng: Any) -> str:
    """Greedy best (ties → alphabetical) at temperature 0; otherwise softmax(score / T) sampling."""
    ranked = sorted(zip(scores(words), words, strict=True), key=lambda sw: (-sw[0], sw[1]))
    if temperature <= 0 or len(ranked) == 1:
        return ranked[0][1]
    best = ranked[0][0]
    weights = [math.exp((s - best) / temperature) for s, _ in ranked]
    return str(rng.choices([w for _, w in ranked], weights=weights)[0])


def _call(word: str, turn: int) -> PolicyReply:
    return PolicyReply(tool_calls=(ToolCall(TOOL, {"guess": word}, id=f"call_{turn}"),))


class Solver:
    """Always a word consistent with all feedback; temperature sets how greedily it picks."""

    def __call__(self, request: PolicyRequest) -> PolicyReply:
        """Guess the best (T=0) or a softmax-sampled (T>0) remaining candidate."""
        if game_over(request.messages):
            return PolicyReply(content="Game over.")
        feedback = read_feedback(request.messages)
        tried = {g for g, _ in feedback}
        pool = [w for w in candidates(feedback) if w not in tried] or list(ANSWERS)
        return _call(choose(pool, request.temperature, request.rng), request.turn)


class Random:
    """A uniformly random allowed word every turn, ignoring all feedback."""

    def __call__(self, request: PolicyRequest) -> PolicyReply:
        """Guess a random word from the allowed list."""
        if game_over(request.messages):
            return PolicyReply(content="Game over.")
        return _call(request.rng.choice(ALLOWED), request.turn)


class Sloppy:
    """A careless player: often right, but repeats guesses, ignores feedback and writes guesses
    as plain text instead of tool calls (in the three formats seen after RL drift).

    Per turn: 20% repeat an earlier guess, 25% a random answer-list word, else the Solver's
    choice; independently 30% of guesses are written as text.
    """

    TEXT_FORMATS = (
        'guess_word("{w}")',
        "My guess: {w}",
        "<guess>{w}</guess>",
        '{{"name": "guess_word", "arguments": {{"guess": "{w}"}}}}',
    )

    def __call__(self, request: PolicyRequest) -> PolicyReply:
        """One sloppy move (see the class docstring for the mix)."""
        if game_over(request.messages):
            return PolicyReply(content="Done, I think.")
        rng = request.rng
        feedback = read_feedback(request.messages)
        roll = rng.random()
        if feedback and roll < 0.2:
            word = rng.choice(feedback)[0]
        elif roll < 0.45:
            word = rng.choice(ANSWERS)
        else:
            tried = {g for g, _ in feedback}
            pool = [w for w in candidates(feedback) if w not in tried] or list(ANSWERS)
            word = choose(pool, max(request.temperature, 0.3), rng)
        if rng.random() < 0.3:
            text = rng.choice(self.TEXT_FORMATS).format(w=word)
            return PolicyReply(content=f"I'll try this one.\n{text}")
        return _call(word, request.turn)
