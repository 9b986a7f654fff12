"""The Wordle example's game logic: feedback, the tool, limits, text recovery and the datasets."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wordle_modules import WORDLE, agent, load, policies

CODE = {"G": "green", "Y": "yellow", "-": "gray"}

# (answer, guess, expected) — each worked out by hand: greens first, then yellows left to right
# only while the answer still holds an unmatched copy of the letter.
HAND_CHECKED = [
    ("abbey", "babes", "YYGG-"),
    ("crane", "eerie", "--Y-G"),
    ("crane", "crane", "GGGGG"),
    ("crane", "slate", "--G-G"),
    ("crane", "react", "YYGY-"),
    ("crane", "nacre", "YYYYG"),
    ("abbey", "kebab", "-YGYY"),
    ("abbey", "abbey", "GGGGG"),
    ("abbey", "bobby", "Y-G-G"),
    ("speed", "abide", "---YY"),
    ("speed", "erase", "Y--YY"),
    ("speed", "steep", "G-GGY"),
    ("those", "geese", "---GG"),
    ("eerie", "crane", "-Y--G"),
    ("eerie", "eerie", "GGGGG"),
    ("level", "eerie", "YG---"),
    ("mamma", "maxim", "GG--Y"),
    ("mamma", "mommy", "G-GG-"),
    ("apple", "paper", "YYGY-"),
    ("apple", "happy", "-YGY-"),
    ("hello", "llama", "YY---"),
    ("hello", "lolly", "-YGG-"),
    ("robot", "otter", "YY--Y"),
    ("robot", "boost", "YGY-G"),
    ("fluff", "fifty", "G-Y--"),
    ("skill", "kills", "YYYGY"),
    ("algae", "agave", "GYY-G"),
    ("aback", "aaaaa", "G-G--"),
    ("mummy", "mmmmm", "G-GG-"),
    ("stare", "tears", "YYGGY"),
    ("floor", "robot", "YY-G-"),
    ("chess", "swiss", "---GG"),
    ("sassy", "asses", "YYG-Y"),
    ("vivid", "ivory", "YY---"),
    ("hello", "world", "-Y-G-"),
    ("daddy", "added", "YYG-Y"),
]


def brute_force(guess: str, answer: str) -> str:
    """Independent rule: a non-green letter is yellow iff the answer's non-green copies of it
    outnumber the guess's non-green copies of it strictly to its left."""
    green = [g == a for g, a in zip(guess, answer, strict=True)]
    out = []
    for i, g in enumerate(guess):
        if green[i]:
            out.append("G")
            continue
        in_answer = sum(1 for j, a in enumerate(answer) if a == g and not green[j])
        before = sum(1 for j in range(i) if guess[j] == g and not green[j])
        out.append("Y" if in_answer > before else "-")
    return "".join(out)


@pytest.mark.parametrize(("answer", "guess", "expected"), HAND_CHECKED)
def test_feedback_hand_checked(answer: str, guess: str, expected: str) -> None:
    """score_feedback gives the hand-worked colours, repeated letters included."""
    assert agent.score_feedback(guess, answer) == tuple(CODE[c] for c in expected)


def test_hand_checked_table_is_large_and_has_repeats() -> None:
    """The table has ≥ 30 cases and most of them involve a repeated letter."""
    repeats = [c for c in HAND_CHECKED if max(Counter(c[0] + c[1]).values()) > 2]
    assert len(HAND_CHECKED) >= 30
    assert len(repeats) >= 15


five = st.text(alphabet="abcde", min_size=5, max_size=5)


@settings(max_examples=400, deadline=None)
@given(guess=five, answer=five)
def test_feedback_matches_brute_force_on_a_small_alphabet(guess: str, answer: str) -> None:
    """On a 5-letter alphabet (many repeats) the feedback equals the brute-force rule and the
    policy file's own implementation."""
    expected = brute_force(guess, answer)
    assert (
        "".join(m[0].upper() if m != "gray" else "-" for m in agent.score_feedback(guess, answer))
        == expected
    )
    assert policies.pattern(guess, answer) == expected


@settings(max_examples=300, deadline=None)
@given(
    guess=st.sampled_from(sorted(agent.ALLOWED)),
    answer=st.sampled_from(agent.ANSWERS),
)
def test_feedback_matches_brute_force_on_real_words(guess: str, answer: str) -> None:
    """On real words the feedback equals the brute-force rule, and the answer stays consistent."""
    marks = agent.score_feedback(guess, answer)
    assert "".join({"green": "G", "yellow": "Y", "gray": "-"}[m] for m in marks) == brute_force(
        guess, answer
    )
    assert agent.is_consistent(answer, [(guess, marks)])


@settings(max_examples=150, deadline=None)
@given(
    guesses=st.lists(st.sampled_from(sorted(agent.ALLOWED)), min_size=1, max_size=5),
    answer=st.sampled_from(agent.ANSWERS),
)
def test_knowledge_summary_is_true_of_the_answer(guesses: list[str], answer: str) -> None:
    """Every fact in the "what we know" summary holds for the real answer."""
    history = [(g, agent.score_feedback(g, answer)) for g in guesses]
    know = agent.Knowledge.from_history(history)
    for pos, letter in know.greens.items():
        assert answer[pos] == letter
    for letter, positions in know.yellows().items():
        assert letter in answer
        assert all(answer[p] != letter for p in positions)
    for letter in know.excluded:
        assert letter not in answer
    for letter, n in know.min_count.items():
        assert answer.count(letter) >= n
    for letter, n in know.max_count.items():
        assert answer.count(letter) <= n


def new_env(answer: str = "crane") -> object:
    env = agent.WordleEnv()
    assert env.reset({"answer": answer, "id": "t1", "prompt": "Play."}) == "Play."
    return env


def test_tool_reports_feedback_and_summary() -> None:
    """A valid guess gets colours per letter and a summary of what is known and guesses left."""
    env = new_env("crane")
    out = env.guess_word("eerie")
    assert "Guess 1 of 6: EERIE" in out
    assert "Feedback: E gray, E gray, R yellow, I gray, E green" in out
    assert "Greens (fixed positions): _ _ _ _ E" in out
    assert "R not at 3" in out
    assert "Not in the word: I" in out
    assert "Guesses left: 5" in out
    out = env.guess_word("react")
    assert "Greens (fixed positions): _ _ A _ E" in out
    assert "R not at 1, 3" in out
    assert "C not at 4" in out
    assert "Not in the word: I, T" in out


def test_invalid_words_do_not_use_a_guess() -> None:
    """Unknown words and malformed input are refused without consuming a guess, and recorded."""
    env = new_env()
    assert "not in the word list" in env.guess_word("xyzzy")
    assert "not a five-letter word" in env.guess_word("cat")
    assert "not a five-letter word" in env.guess_word("cr4ne")
    assert "not a five-letter word" in env.guess_word("craned")
    assert env.history == []
    assert [a.kind for a in env.attempts] == ["not_a_word", "malformed", "malformed", "malformed"]
    assert "Guess 1 of 6: SLATE" in env.guess_word("  Slate ")


def test_solve_finishes_the_game() -> None:
    """Guessing the answer ends the episode and reports the guess count."""
    env = new_env("crane")
    env.guess_word("slate")
    out = env.guess_word("crane")
    assert "Solved in 2 guesses" in out
    assert env.done
    assert env.solved
    assert env.result == {"solved": True, "guesses": 2}
    assert "game is over" in env.guess_word("react")
    assert len(env.history) == 2


def test_six_wrong_guesses_end_the_game_without_revealing_the_answer() -> None:
    """After six valid misses the game is over and no output ever contained the answer."""
    env = new_env("crane")
    outputs = [env.guess_word(w) for w in ["slate", "pious", "dying", "block", "fluff", "gawky"]]
    assert env.done
    assert not env.solved
    assert "Out of guesses" in outputs[-1]
    assert not any(re.search(r"\bcrane\b", o, re.IGNORECASE) for o in outputs)


def test_invalid_attempts_are_capped_so_an_episode_always_ends() -> None:
    """Six invalid attempts end the game; with six guesses an episode has at most 12 calls."""
    env = new_env()
    for _ in range(agent.MAX_INVALID):
        env.guess_word("qqqqq")
    assert env.done
    assert agent.WordleEnv.max_tool_calls == 12
    env = new_env()
    words = ["slate", "qqqqq", "pious", "qqqqq", "dying", "qqqqq", "block", "qqqqq", "fluff"]
    for w in [*words, "qqqqq", "gawky", "qqqqq"]:
        env.guess_word(w)
    assert env.done
    assert len(env.attempts) <= 12


@pytest.mark.parametrize(
    "task", [{"id": "x"}, {"answer": "cranes"}, {"answer": "cr4ne"}, {"answer": "qqqqq"}]
)
def test_reset_rejects_unplayable_tasks(task: dict[str, str]) -> None:
    """A task without a playable five-letter answer raises KeyError/ValueError (a 400 upstream)."""
    with pytest.raises((KeyError, ValueError)):
        agent.WordleEnv().reset(task)


def test_reset_never_returns_the_answer() -> None:
    """The user message is the task's prompt (or the default) and is the same for every answer."""
    a = agent.WordleEnv().reset({"answer": "crane"})
    b = agent.WordleEnv().reset({"answer": "sloth"})
    assert a == b == agent.USER_PROMPT


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ('guess_word("crane")', "crane"),
        ("I'll call guess_word(guess='Slate') now", "slate"),
        ("<guess>TRACE</guess>", "trace"),
        ('{"name": "guess_word", "arguments": {"guess": "pious"}}', "pious"),
        ('{"guess": "block"}', "block"),
        ("Guess: fluff", "fluff"),
        ("My guess: **gawky**", "gawky"),
        ("maybe guess: slate, no wait: <guess>crane</guess>", "crane"),
    ],
)
def test_text_guesses_are_recovered(text: str, word: str) -> None:
    """Guesses written as text in any of the seen formats are recovered as one guess_word call."""
    calls = agent.WordleEnv().parse_text_tool_calls(text)
    assert len(calls) == 1
    assert calls[0].name == "guess_word"
    assert calls[0].arguments == {"guess": word}


def test_plain_prose_recovers_nothing() -> None:
    """Text without a guess in a known format recovers no call."""
    assert agent.WordleEnv().parse_text_tool_calls("I am not sure what to guess next.") == ()


def test_tool_definition_the_policy_sees() -> None:
    """The environment offers exactly one tool, guess_word(guess: str)."""
    env = agent.WordleEnv()
    assert env.tool_names() == ["guess_word"]
    spec = env.guess_word.tool_spec["inputSchema"]["json"]
    assert spec["required"] == ["guess"]
    assert spec["properties"]["guess"]["type"] == "string"


def test_word_lists_are_shipped_and_consistent() -> None:
    """Both lists are shipped, lowercase five-letter words, every answer is an allowed guess."""
    assert len(agent.ANSWERS) == 2315
    assert len(set(agent.ANSWERS)) == 2315
    assert all(re.fullmatch(r"[a-z]{5}", w) for w in agent.ALLOWED)
    assert set(agent.ANSWERS) <= agent.ALLOWED
    assert (WORDLE / "words" / "LICENSE-NOTE.md").is_file()


# -- datasets --------------------------------------------------------------------------------

make_dataset = load("make_dataset")


def _rows(path: Path) -> list[dict[str, str]]:
    return [json.loads(json.loads(line)["prompt"]) for line in path.read_text().splitlines()]


def test_shipped_datasets_are_what_make_dataset_builds() -> None:
    """train.jsonl/holdout.jsonl equal make_dataset's default output (64/32, seed 42)."""
    built = make_dataset.build(64, 32, 42)
    for name in ("train", "holdout"):
        shipped = [json.loads(line) for line in (WORDLE / f"{name}.jsonl").read_text().splitlines()]
        assert shipped == built[name]


def test_datasets_are_deterministic_disjoint_and_in_mtrl_format() -> None:
    """Same seed → same splits, another seed differs; disjoint; rows hold prompt/answer/id."""
    a, b, c = (
        make_dataset.build(64, 32, 42),
        make_dataset.build(64, 32, 42),
        make_dataset.build(64, 32, 7),
    )
    assert a == b
    assert a != c
    train, holdout = _rows(WORDLE / "train.jsonl"), _rows(WORDLE / "holdout.jsonl")
    assert (len(train), len(holdout)) == (64, 32)
    assert not {r["answer"] for r in train} & {r["answer"] for r in holdout}
    ids = [r["id"] for r in train + holdout]
    assert len(set(ids)) == len(ids)
    for row in train + holdout:
        assert set(row) == {"prompt", "answer", "id"}
        assert row["answer"] in agent.ANSWERS
        assert not re.search(rf"\b{row['answer']}\b", row["prompt"], re.IGNORECASE)


def test_datasets_leave_out_answers_that_occur_in_the_fixed_text() -> None:
    """No dataset answer is a word of the system prompt, user prompt, tool spec or tool messages."""
    leaking = make_dataset.leaking_answers(agent)
    assert "guess" in leaking
    assert "green" in leaking
    built = make_dataset.build(1000, 1000, 3)
    answers = {json.loads(r["prompt"])["answer"] for rows in built.values() for r in rows}
    assert not answers & leaking


# -- seeded positions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "seeds", "next_guess"),
    [
        ("crane", ["slate", "pious"], "react"),
        ("abbey", ["babes", "kebab", "bobby", "eerie"], "abbey"),
        ("speed", [], "steep"),
    ],
)
def test_a_seeded_game_is_the_game_played_by_hand(
    answer: str, seeds: list[str], next_guess: str
) -> None:
    """Seeding prior guesses gives the same feedback, guesses left, next tool result and reward
    as playing those guesses through the tool by hand; the first message shows each seeded
    guess's own feedback lines and the summary the last one would have shown."""
    seeded = agent.WordleEnv()
    first = seeded.reset({"answer": answer, "id": "s", "guesses": seeds})
    by_hand = agent.WordleEnv()
    by_hand.reset({"answer": answer, "id": "h"})
    results = [by_hand.guess_word(word) for word in seeds]
    assert seeded.history == by_hand.history
    assert seeded.attempts == by_hand.attempts
    if seeds:
        assert first.startswith(agent.SEEDED_PROMPT)
        assert first.endswith(agent.SEEDED_ASK)
        for result in results:
            assert "\n".join(result.splitlines()[:2]) in first
        summary = results[-1].split("\n", 2)[2]
        assert summary in first
        assert f"Guesses left: {agent.MAX_GUESSES - len(seeds)}" in first
        assert policies.read_feedback([{"role": "user", "content": first}]) == [
            (w, "".join({"green": "G", "yellow": "Y", "gray": "-"}[m] for m in marks))
            for w, marks in seeded.history
        ]
    else:
        assert first == agent.USER_PROMPT
    assert seeded.guess_word(next_guess) == by_hand.guess_word(next_guess)
    assert seeded.done == by_hand.done
    assert agent.wordle_reward(seeded).breakdown() == agent.wordle_reward(by_hand).breakdown()
    assert agent.wordle_reward(seeded).total == agent.wordle_reward(by_hand).total


@pytest.mark.parametrize(
    "guesses",
    [["crane"], ["slate", "qqqqq"], ["slate", "pious", "dying", "block", "fluff"], "slate"],
)
def test_reset_rejects_unplayable_seeds(guesses: object) -> None:
    """The answer, a word not in the list, more than four guesses or not a list: ValueError."""
    with pytest.raises(ValueError, match="guess"):
        agent.WordleEnv().reset({"answer": "crane", "id": "x", "guesses": guesses})


def test_shipped_seeded_positions_are_what_make_dataset_builds() -> None:
    """train_seeded/holdout_seeded hold the train words and the first 16 holdout words, row i
    with up to i mod 5 of the greedy Solver's guesses (never the answer), ids marked _s<n>."""
    built = make_dataset.build(64, 32, 42)
    for name, rows in (("train", built["train"]), ("holdout", built["holdout"][:16])):
        shipped = [
            json.loads(line) for line in (WORDLE / f"{name}_seeded.jsonl").read_text().splitlines()
        ]
        assert shipped == make_dataset.seeded(rows)
        tasks = [json.loads(r["prompt"]) for r in shipped]
        plain = [json.loads(r["prompt"]) for r in rows]
        for i, (task, row) in enumerate(zip(tasks, plain, strict=True)):
            assert task["answer"] == row["answer"]
            assert len(task["guesses"]) <= i % 5
            assert task["answer"] not in task["guesses"]
            assert task["id"] == f"{row['id']}_s{len(task['guesses'])}"
            agent.WordleEnv().reset(task)  # every position is playable
    counts = Counter(
        len(json.loads(json.loads(line)["prompt"])["guesses"])
        for line in (WORDLE / "train_seeded.jsonl").read_text().splitlines()
    )
    assert set(counts) == {0, 1, 2, 3, 4}


def test_valid_guess_rate_counts_the_policys_own_attempts_only() -> None:
    """A seeded game's prior guesses are the dataset's: before the policy's first attempt the
    rate is absent (not 100 %), and after it the seeds do not dilute it."""
    env = agent.WordleEnv()
    env.reset({"answer": "crane", "id": "s", "guesses": ["slate", "pious"]})
    assert env.metrics() == {"solved": 0.0}
    env.guess_word("qqqqq")
    assert env.metrics()["valid_guess_rate"] == 0.0
    env.guess_word("react")
    assert env.metrics()["valid_guess_rate"] == 0.5
    fresh = agent.WordleEnv()
    fresh.reset({"answer": "crane", "id": "f"})
    fresh.guess_word("crane")
    assert fresh.metrics() == {"solved": 1.0, "valid_guess_rate": 1.0}
