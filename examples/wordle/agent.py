"""Wordle for multi-turn RL: the whole agent (game, tool, reward, app) in one entrypoint file.

Deploy this file plus the ``words/`` folder next to it. Locally::

    agent-kit run examples/wordle/agent.py --dataset examples/wordle/holdout.jsonl \
        --policy scripted:examples/wordle/policies.py:Solver --group-size 4

Each rollout gets a fresh :class:`WordleEnv`; the secret word comes from the dataset row
(``{"prompt": ..., "answer": ..., "id": ...}``) and never reaches the policy. A row may seed the
game with prior guesses (``"guesses": ["stare", "cloud"]``, 0–4 words): the game plays them at
reset, the first message shows their feedback, and the guesses left shrink accordingly. The
policy plays with one tool, ``guess_word``, and the episode reward is computed by
:func:`wordle_reward` (a dominant outcome term plus small, bounded strategy shaping; see
README.md): a seeded game is scored as the same game played by hand, its seeded guesses
included.

Importing this module starts nothing: the server runs only under ``__main__``. (No
``from __future__ import annotations`` here: dataclasses in a module loaded by file path, as the
tools do, must not need ``sys.modules`` to resolve string annotations.)
"""

import functools
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent_kit import Environment, Episode, Reward, TextToolCall, tool
from agent_kit.app import RolloutApp

# -- words and rules -------------------------------------------------------------------------

WORDS_DIR = Path(__file__).resolve().parent / "words"


def _load_words(name: str) -> tuple[str, ...]:
    words = (WORDS_DIR / name).read_text(encoding="utf-8").split()
    return tuple(w.strip().lower() for w in words if w.strip())


#: Secret words the datasets draw from, and every word accepted as a guess (answers included).
ANSWERS: tuple[str, ...] = _load_words("answers.txt")
ALLOWED: frozenset[str] = frozenset(_load_words("allowed.txt")) | frozenset(ANSWERS)

WORD_LENGTH = 5
MAX_GUESSES = 6
MAX_SEEDED = 4  # prior guesses a dataset row may seed a game with (at least two are left)
MAX_INVALID = 6  # invalid attempts allowed; with MAX_GUESSES this caps an episode at 12 calls
MAX_TURNS = MAX_GUESSES + MAX_INVALID + 2  # policy calls: room for a couple of text-only replies

Mark = Literal["green", "yellow", "gray"]
GREEN: Mark = "green"
YELLOW: Mark = "yellow"
GRAY: Mark = "gray"

SYSTEM_PROMPT = (
    "You are playing Wordle. Find the secret five-letter English word in at most six guesses.\n"
    "Make every guess by calling the guess_word tool with one lowercase five-letter word.\n"
    "After each guess the tool returns feedback for each letter: green = right letter in the "
    "right position; yellow = the letter is in the word but in a different position; gray = "
    "the letter is not in the word (or not that many times). It also summarises what is known.\n"
    "Use all the feedback: keep green letters in place, move yellow letters to new positions, "
    "never reuse gray letters and never repeat a guess. Words that are not in the word list do "
    "not use up a guess but are penalised."
)
USER_PROMPT = "Let's play Wordle. Make your first guess."
SEEDED_PROMPT = "Let's play Wordle. These guesses were already made:"
SEEDED_ASK = "Make your next guess."


def score_feedback(guess: str, answer: str) -> tuple[Mark, ...]:
    """Per-letter feedback for ``guess`` against ``answer`` (both lowercase, same length).

    Greens first (same letter, same position). Then, left to right, a remaining guess letter is
    yellow only while the answer still holds an unmatched copy of it; otherwise gray. So
    ``score_feedback("babes", "abbey")`` is yellow, yellow, green, green, gray.
    """
    if len(guess) != len(answer):
        raise ValueError("guess and answer must have the same length")
    marks: list[Mark] = [GRAY] * len(guess)
    unmatched: list[str] = []  # answer letters not matched green (a small multiset)
    for i, (g, a) in enumerate(zip(guess, answer, strict=True)):
        if g == a:
            marks[i] = GREEN
        else:
            unmatched.append(a)
    if unmatched:
        for i, g in enumerate(guess):
            if marks[i] != GREEN and g in unmatched:
                marks[i] = YELLOW
                unmatched.remove(g)
    return tuple(marks)


def is_consistent(word: str, history: Iterable[tuple[str, Sequence[Mark]]]) -> bool:
    """True when ``word`` could still be the answer given every (guess, feedback) so far."""
    return all(score_feedback(guess, word) == tuple(marks) for guess, marks in history)


@dataclass
class Knowledge:
    """What the feedback so far proves about the answer (the tool's "what we know" summary)."""

    greens: dict[int, str] = field(default_factory=dict)  # position (0-based) -> letter
    not_at: dict[str, set[int]] = field(default_factory=dict)  # letter -> excluded positions
    min_count: Counter[str] = field(default_factory=Counter)  # letter -> copies at least
    max_count: dict[str, int] = field(default_factory=dict)  # letter -> copies at most

    @classmethod
    def from_history(cls, history: Iterable[tuple[str, Sequence[Mark]]]) -> "Knowledge":
        """Fold every (guess, feedback) pair into position and letter-count constraints."""
        k = cls()
        for guess, marks in history:
            present: Counter[str] = Counter()
            for i, (c, m) in enumerate(zip(guess, marks, strict=True)):
                if m == GREEN:
                    k.greens[i] = c
                    present[c] += 1
                elif m == YELLOW:
                    k.not_at.setdefault(c, set()).add(i)
                    present[c] += 1
            for i, (c, m) in enumerate(zip(guess, marks, strict=True)):
                if m == GRAY:  # a gray copy means: exactly the green+yellow copies, none here
                    k.max_count[c] = min(k.max_count.get(c, WORD_LENGTH), present[c])
                    if present[c]:
                        k.not_at.setdefault(c, set()).add(i)
            for c, n in present.items():
                k.min_count[c] = max(k.min_count[c], n)
        return k

    @property
    def excluded(self) -> list[str]:
        """Letters proven absent from the answer, sorted."""
        return sorted(c for c, n in self.max_count.items() if n == 0)

    def yellows(self) -> dict[str, list[int]]:
        """Letters known present whose position is not yet fixed by greens → excluded positions."""
        fixed = Counter(self.greens.values())
        return {
            c: sorted(self.not_at.get(c, ()))
            for c in sorted(self.min_count)
            if self.min_count[c] > fixed[c]
        }

    def summary(self, guesses_left: int) -> str:
        """Human-readable summary, positions 1-based."""
        greens = " ".join(self.greens.get(i, "_").upper() for i in range(WORD_LENGTH))
        yellows = "; ".join(
            f"{c.upper()} not at {', '.join(str(p + 1) for p in ps)}" if ps else c.upper()
            for c, ps in self.yellows().items()
        )
        excluded = ", ".join(c.upper() for c in self.excluded)
        return (
            "What we know:\n"
            f"- Greens (fixed positions): {greens}\n"
            f"- Yellows (in the word, not at these positions): {yellows or 'none'}\n"
            f"- Not in the word: {excluded or 'none'}\n"
            f"- Guesses left: {guesses_left}"
        )


def feedback_lines(word: str, marks: Sequence[Mark], n: int) -> list[str]:
    """The tool's two lines for the n-th valid guess: the guess and its per-letter feedback."""
    return [
        f"Guess {n} of {MAX_GUESSES}: {word.upper()}",
        "Feedback: " + ", ".join(f"{c.upper()} {m}" for c, m in zip(word, marks, strict=True)),
    ]


@dataclass(frozen=True)
class Attempt:
    """One ``guess_word`` call as the game judged it (feedback only for valid guesses)."""

    word: str
    kind: Literal["valid", "not_a_word", "malformed"]
    marks: tuple[Mark, ...] = ()


# -- the environment -------------------------------------------------------------------------


class WordleEnv(Environment):
    """One Wordle game: the secret word, the guesses so far, and the ``guess_word`` tool.

    Guarantees: at most 6 valid guesses and 6 invalid attempts (so at most 12 scored tool
    calls); the episode is finished on a solve, after the 6th guess or the 6th invalid attempt;
    no tool result ever contains the answer unless the policy just guessed it.
    """

    max_tool_calls = MAX_GUESSES + MAX_INVALID

    def __init__(self) -> None:
        super().__init__()
        self.answer = ""
        self.task_id = ""
        self.attempts: list[Attempt] = []
        self.seeded = 0  # how many of the attempts the dataset row played at reset

    def reset(self, task: dict[str, Any]) -> str:
        """Start a game for ``task["answer"]``; return the user message (never the answer)."""
        answer = str(task["answer"]).strip().lower()
        if len(answer) != WORD_LENGTH or not answer.isascii() or not answer.isalpha():
            raise ValueError(f"the answer must be a five-letter word (task id {task.get('id')!r})")
        if answer not in ALLOWED:
            raise ValueError(
                f"the answer is not in the allowed word list (task {task.get('id')!r})"
            )
        self.answer = answer
        self.task_id = str(task.get("id", ""))
        self.attempts = []
        seeded = self._seeded(task.get("guesses"))
        self.seeded = len(seeded)
        if not seeded:
            return str(task.get("prompt") or USER_PROMPT)
        lines = [SEEDED_PROMPT]
        for word in seeded:
            marks = score_feedback(word, self.answer)
            self.attempts.append(Attempt(word, "valid", marks))
            lines += feedback_lines(word, marks, len(self.history))
        lines += [Knowledge.from_history(self.history).summary(MAX_GUESSES - len(seeded))]
        return "\n".join([*lines, SEEDED_ASK])

    def _seeded(self, guesses: Any) -> list[str]:
        """The row's prior guesses, checked: 0–4 allowed words, none of them the answer."""
        if guesses is None:
            return []
        if not isinstance(guesses, list) or len(guesses) > MAX_SEEDED:
            raise ValueError(
                f"guesses must be a list of 0-{MAX_SEEDED} words (task {self.task_id!r})"
            )
        words = [str(g).strip().lower() for g in guesses]
        for word in words:
            if word not in ALLOWED or word == self.answer:
                raise ValueError(
                    f"seeded guess {word!r} is not an allowed word other than the answer "
                    f"(task {self.task_id!r})"
                )
        return words

    # -- derived state ---------------------------------------------------------------------
    @property
    def history(self) -> list[tuple[str, tuple[Mark, ...]]]:
        """Valid guesses with their feedback, in order."""
        return [(a.word, a.marks) for a in self.attempts if a.kind == "valid"]

    @property
    def solved(self) -> bool:
        """True once a valid guess matched the answer."""
        return any(w == self.answer for w, _ in self.history)

    @property
    def invalid_count(self) -> int:
        """Invalid attempts so far (they never use up a guess)."""
        return sum(a.kind != "valid" for a in self.attempts)

    def metrics(self) -> dict[str, float]:
        """The game's own figures, reported beside the reward by ``agent-kit eval`` and
        ``train --eval``: ``solved`` (1 or 0) and ``valid_guess_rate``, the share of the
        policy's own guess attempts that were words of the list (a seeded game's prior guesses
        are the dataset's, not the policy's; absent while the policy has made no attempt)."""
        out = {"solved": float(self.solved)}
        own = self.attempts[self.seeded :]
        if own:
            out["valid_guess_rate"] = sum(a.kind == "valid" for a in own) / len(own)
        return out

    # -- the tool --------------------------------------------------------------------------
    @tool
    def guess_word(self, guess: str) -> str:
        """Guess the secret five-letter word and get letter-by-letter feedback.

        Args:
            guess: one lowercase five-letter English word.
        """
        if self.done:
            return "The game is over; no more guesses are accepted."
        word = str(guess).strip().strip("\"'`").lower()
        if len(word) != WORD_LENGTH or not word.isascii() or not word.isalpha():
            return self._invalid(word, "malformed", "is not a five-letter word (letters a-z only)")
        if word not in ALLOWED:
            return self._invalid(word, "not_a_word", "is not in the word list")

        marks = score_feedback(word, self.answer)
        self.attempts.append(Attempt(word, "valid", marks))
        n = len(self.history)
        lines = feedback_lines(word, marks, n)
        if word == self.answer:
            self.finish({"solved": True, "guesses": n})
            lines.append(f"Solved in {n} guess{'es' if n > 1 else ''}! The game is over.")
        elif n >= MAX_GUESSES:
            self.finish({"solved": False, "guesses": n})
            lines.append("Out of guesses: the game is over.")
        else:
            lines.append(Knowledge.from_history(self.history).summary(MAX_GUESSES - n))
        return "\n".join(lines)

    def _invalid(self, word: str, kind: Literal["not_a_word", "malformed"], why: str) -> str:
        self.attempts.append(Attempt(word, kind))
        left = MAX_INVALID - self.invalid_count
        shown = json.dumps(word[:40])
        if left <= 0:
            self.finish({"solved": False, "guesses": len(self.history)})
            return f"{shown} {why}. Too many invalid guesses: the game is over."
        return (
            f"{shown} {why}. This did not use a guess, but it is penalised "
            f"(invalid attempts left: {left}). Guesses left: {MAX_GUESSES - len(self.history)}."
        )

    # -- guesses written as text instead of a tool call ------------------------------------
    _CALL = re.compile(r"guess_word\s*\(\s*(?:guess\s*=\s*)?[\"'`]?([A-Za-z]+)[\"'`]?\s*\)")
    _TAG = re.compile(r"<guess>\s*([A-Za-z]+)\s*</guess>", re.IGNORECASE)
    _JSON = re.compile(r"[\"']guess[\"']\s*:\s*[\"']([A-Za-z]+)[\"']", re.IGNORECASE)
    _LABEL = re.compile(r"\bguess\s*[:=]\s*[\"'`*]*([A-Za-z]{5})\b", re.IGNORECASE)

    def parse_text_tool_calls(self, text: str) -> Sequence[TextToolCall]:
        """Recover the *last* guess written as text.

        Formats: ``guess_word("crane")``, ``<guess>crane</guess>``,
        ``{"guess": "crane"}`` (also inside a tool-call-shaped JSON object) or ``guess: crane``.

        Only one guess is recovered per message, so thinking aloud cannot burn several guesses.
        """
        found: list[tuple[int, str, str]] = []
        for pattern in (self._CALL, self._TAG, self._JSON, self._LABEL):
            found += [(m.start(), m.group(1), m.group(0)) for m in pattern.finditer(text)]
        if not found:
            return ()
        _, word, source = max(found, key=lambda f: f[0])
        return (TextToolCall("guess_word", {"guess": word.lower()}, source=source),)


# -- the reward ------------------------------------------------------------------------------

#: Strategy shaping points (summed over the episode, then clip(points / 150, -1, 1)).
POINTS = {
    "valid": 15.0,  # each valid guess
    "step": -1.0,  # each valid guess (prefer fewer)
    "new_letter": 2.0,  # each letter not tried before (only in feedback-consistent guesses)
    "reduction": 15.0,  # × fraction of remaining candidates removed (consistent guesses only)
    "green_dropped": -30.0,  # a known green letter not kept in place
    "yellow_ignored": -20.0,  # a known yellow letter missing or put back where it cannot be
    "gray_reused": -20.0,  # a letter proven absent used again
    "inconsistent": -20.0,  # any other contradiction (letter counts) when none of the above
    "repeated": -40.0,  # the same word guessed again
    "not_a_word": -35.0,  # five letters, not in the word list (uses no guess)
    "malformed": -50.0,  # not five letters a-z (uses no guess)
    "text_call": -5.0,  # a guess written as text, recovered by parse_text_tool_calls
}
SHAPING_SCALE = 150.0
WEIGHT_SOLVED = 0.04  # shaping weight when solved: ±0.04 < the 0.1 between solve positions
WEIGHT_UNSOLVED = 0.15  # shaping weight otherwise: a loss stays in [-1.15, -0.35] < every solve


def outcome_score(solved_on: int | None, valid_guesses: int) -> float:
    """The dominant term: solve on guess n → 1.05 + 0.5·(6−n)/5; unsolved → −0.5 − 0.1 per
    unused guess (−0.5 after all six); never a valid guess → −1.5."""
    if solved_on is not None:
        return round(1.05 + 0.5 * (MAX_GUESSES - solved_on) / (MAX_GUESSES - 1), 9)
    if valid_guesses == 0:
        return -1.5
    return round(-0.5 - 0.1 * (MAX_GUESSES - valid_guesses), 9)


@functools.lru_cache(maxsize=4096)
def _first_split(word: str, marks: tuple[Mark, ...]) -> tuple[str, ...]:
    """Answers left after an opening guess (cached: policies reuse a few openers)."""
    return tuple(w for w in ANSWERS if score_feedback(word, w) == marks)


def shaping_points(attempts: Sequence[Attempt], recovered_calls: int = 0) -> dict[str, float]:
    """Raw strategy points per term for a game's attempts (see :data:`POINTS`)."""
    pts = dict.fromkeys(POINTS, 0.0)
    history: list[tuple[str, tuple[Mark, ...]]] = []
    candidates = list(ANSWERS)
    tried: set[str] = set()
    for a in attempts:
        if a.kind != "valid":
            pts[a.kind] += POINTS[a.kind]
            continue
        pts["valid"] += POINTS["valid"]
        pts["step"] += POINTS["step"]
        if a.word in (w for w, _ in history):
            pts["repeated"] += POINTS["repeated"]
        know = Knowledge.from_history(history)
        flags = {
            "green_dropped": any(a.word[i] != c for i, c in know.greens.items()),
            "yellow_ignored": any(
                a.word.count(c) < know.min_count[c] or any(a.word[p] == c for p in positions)
                for c, positions in know.yellows().items()
            ),
            "gray_reused": any(c in a.word for c in know.excluded),
        }
        for name, hit in flags.items():
            pts[name] += POINTS[name] if hit else 0.0
        consistent = is_consistent(a.word, history)
        if not consistent and not any(flags.values()):
            pts["inconsistent"] += POINTS["inconsistent"]
        remaining = (
            list(_first_split(a.word, a.marks))
            if not history
            else [w for w in candidates if score_feedback(a.word, w) == a.marks]
        )
        if consistent:  # information bonuses only for guesses that could be the answer
            pts["new_letter"] += POINTS["new_letter"] * len(set(a.word) - tried)
            if candidates:
                pts["reduction"] += POINTS["reduction"] * (1 - len(remaining) / len(candidates))
        candidates = remaining
        tried |= set(a.word)
        history.append((a.word, a.marks))
    pts["text_call"] += POINTS["text_call"] * recovered_calls
    return pts


def wordle_reward(env: WordleEnv, episode: Episode | None = None) -> Reward:
    """Episode reward = outcome + w · clip(Σ shaping points / 150, −1, 1).

    Every solve scores ≥ 1.01 (above the service's success threshold 1.0); every loss scores in
    [−1.15, −0.35]; never making a valid guess scores ≤ −1.5. The breakdown holds ``outcome``,
    ``strategy`` (the clipped shaping, weight w) and each raw ``points_*`` term (weight 0).
    """
    history = env.history
    solved_on = next((i + 1 for i, (w, _) in enumerate(history) if w == env.answer), None)
    recovered = len(episode.recovered_calls) if episode is not None else 0
    pts = shaping_points(env.attempts, recovered)
    shaping = max(-1.0, min(1.0, sum(pts.values()) / SHAPING_SCALE))
    weight = WEIGHT_SOLVED if solved_on is not None else WEIGHT_UNSOLVED
    terms: dict[str, tuple[float, float]] = {f"points_{k}": (v, 0.0) for k, v in pts.items() if v}
    return Reward.weighted(
        outcome=(outcome_score(solved_on, len(history)), 1.0),
        strategy=(shaping, weight),
        **terms,
    )


def _game(ep: Any) -> tuple[bool, int]:
    """(solved, valid guesses) of a recorded episode: the game's own result when the doctor
    re-played it, else the reward's record (``outcome`` ≥ 1.05 only for a solve; the weight-0
    ``points_valid`` term is 15 per valid guess)."""
    if isinstance(ep.result, dict):
        return bool(ep.result.get("solved")), int(ep.result.get("guesses", 0))
    solved = ep.components.get("outcome", 0.0) >= 1.0
    return solved, round(ep.components.get("points_valid", 0.0) / POINTS["valid"])


def wordle_rank(ep: Any) -> tuple[int, int]:
    """Lower is better: a win in n guesses ranks (0, n), a loss (1, 0), no valid guess (2, 0)."""
    solved, guesses = _game(ep)
    if solved:
        return (0, guesses)
    return (1, 0) if guesses else (2, 0)


#: Checked by ``agent-kit doctor reward`` on every pair of recorded episodes (docs/doctor.md).
REWARD_ORDERINGS = [("fast win > slow win > loss > no play", wordle_rank)]

# -- the AgentCore entrypoint ----------------------------------------------------------------

app = RolloutApp(
    WordleEnv,
    reward=wordle_reward,
    system_prompt=SYSTEM_PROMPT,
    max_turns=MAX_TURNS,
    floor_reward=-1.5,  # an agent-side failure never scores above "never made a valid guess"
)

if __name__ == "__main__":
    app.run()
