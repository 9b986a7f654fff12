"""The Wordle example's reward: outcome values, breakdown, ordering invariants over many games."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from wordle_modules import agent

from agent_kit import Episode, ToolCallRecord

ALLOWED = sorted(agent.ALLOWED)


def play(answer: str, moves: Sequence[str], text_calls: int = 0) -> tuple[Any, float]:
    """Play ``moves`` (stopping when the game ends); the first ``text_calls`` count as recovered."""
    env = agent.WordleEnv()
    episode = Episode(task={"answer": answer}, prompt="")
    env.reset({"answer": answer})
    for i, move in enumerate(moves):
        if env.done:
            break
        out = env.guess_word(move)
        episode.tool_calls.append(
            ToolCallRecord(i, "guess_word", {"guess": move}, out, recovered=i < text_calls)
        )
    return env, agent.wordle_reward(env, episode).total


def consistent_misses(answer: str, rng: random.Random, n: int) -> list[str] | None:
    """``n`` guesses, each consistent with all earlier feedback and none the answer (or None)."""
    pool = list(agent.ANSWERS)
    out: list[str] = []
    for _ in range(n):
        choices = [w for w in pool if w != answer]
        if not choices:
            return None
        word = rng.choice(choices)
        out.append(word)
        marks = agent.score_feedback(word, answer)
        pool = [w for w in pool if w != word and agent.score_feedback(word, w) == marks]
    return out


FAMILIES: dict[str, list[str]] = {}
for _w in ALLOWED:
    for _p in range(5):
        FAMILIES.setdefault(_w[:_p] + "_" + _w[_p + 1 :], []).append(_w)


def family_misses(answer: str, rng: random.Random) -> list[str] | None:
    """Six feedback-consistent misses from a word family (``_ight``, ``sha_e``…), or None."""
    for p in rng.sample(range(5), 5):
        family = [w for w in FAMILIES[answer[:p] + "_" + answer[p + 1 :]] if w != answer]
        rng.shuffle(family)
        out: list[str] = []
        for w in family:
            if agent.is_consistent(w, [(g, agent.score_feedback(g, answer)) for g in out]):
                out.append(w)
            if len(out) == 6:
                return out
    return None


def inconsistent_misses(answer: str, rng: random.Random, n: int) -> list[str]:
    """``n`` wrong guesses where every guess after the first contradicts earlier feedback."""
    out = [rng.choice([w for w in ALLOWED if w != answer])]
    while len(out) < n:
        history = [(w, agent.score_feedback(w, answer)) for w in out]
        word = rng.choice(ALLOWED)
        if word != answer and not agent.is_consistent(word, history):
            out.append(word)
    return out


def messy(answer: str, rng: random.Random, valid: int) -> list[str]:
    """``valid`` wrong valid guesses (some repeated) interleaved with invalid attempts."""
    words = [rng.choice([w for w in ALLOWED if w != answer]) for _ in range(valid)]
    if valid > 2:
        words[-1] = words[0]  # a repeated guess
    moves: list[str] = []
    invalid_left = agent.MAX_INVALID - 1  # leave room to still make the final move
    for w in words:
        k = rng.randint(0, min(2, invalid_left))
        invalid_left -= k
        moves += rng.sample(["qqqqq", "no", "x1yz5"], k)
        moves.append(w)
    return moves


ANSWERS = random.Random(5).sample(agent.ANSWERS, 24)


def test_outcome_values() -> None:
    """Solve on guess n → 1.05 + 0.1·(6−n); six misses → −0.5; −0.1/unused guess; none → −1.5."""
    assert [round(agent.outcome_score(n, n), 6) for n in range(1, 7)] == [
        1.55,
        1.45,
        1.35,
        1.25,
        1.15,
        1.05,
    ]
    assert agent.outcome_score(None, 6) == -0.5
    assert agent.outcome_score(None, 2) == pytest.approx(-0.9)
    assert agent.outcome_score(None, 0) == -1.5


def test_reward_breakdown_has_every_term() -> None:
    """The breakdown shows the outcome, the weighted strategy term and each term's raw points."""
    env, total = play("crane", ["qqqqq", "slate", "slate", "crane"], text_calls=1)
    reward = agent.wordle_reward(env, _episode_with_recovered(1))
    parts = reward.breakdown()
    assert parts["outcome"]["value"] == pytest.approx(1.35)
    assert parts["outcome"]["kind"] == "outcome"
    assert parts["strategy"]["weight"] == agent.WEIGHT_SOLVED
    for term in ("points_valid", "points_not_a_word", "points_repeated", "points_text_call"):
        assert parts[term]["weight"] == 0.0
    assert parts["points_text_call"]["value"] == -5.0
    assert parts["points_repeated"]["value"] == -40.0
    points = sum(v["value"] for k, v in parts.items() if k.startswith("points_"))
    assert reward.total == pytest.approx(1.35 + 0.04 * max(-1, min(1, points / 150)))
    assert total == pytest.approx(reward.total)


def _episode_with_recovered(k: int) -> Episode:
    ep = Episode(task={}, prompt="")
    ep.tool_calls = [ToolCallRecord(0, "guess_word", {}, "", recovered=True) for _ in range(k)]
    return ep


def test_text_calls_are_penalised() -> None:
    """The same moves score lower when some guesses were written as text instead of tool calls."""
    moves = ["slate", "pious", "crane"]
    _, clean = play("crane", moves)
    _, sloppy = play("crane", moves, text_calls=2)
    assert sloppy == pytest.approx(clean - agent.WEIGHT_SOLVED * 10 / 150)


def test_ordering_invariants_over_many_games() -> None:
    """Fast win > slow win > any loss > never played, whatever the shaping, over many games."""
    rng = random.Random(11)
    games: list[tuple[Any, float]] = []
    for answer in ANSWERS:
        for n in range(1, 7):
            clean = consistent_misses(answer, rng, n - 1)
            if clean is not None:
                games.append(play(answer, [*clean, answer]))
            dirty = messy(answer, rng, n - 1)
            games.append(play(answer, [*dirty, answer], text_calls=rng.randint(0, 3)))
        for valid in range(1, 7):
            games.append(play(answer, messy(answer, rng, valid), text_calls=rng.randint(0, 2)))
        clean = consistent_misses(answer, rng, 6)
        if clean is not None:
            games.append(play(answer, clean))
        games.append(play(answer, inconsistent_misses(answer, rng, 6)))
        games.append(play(answer, ["qqqqq"] * rng.randint(1, 6), text_calls=rng.randint(0, 6)))
        games.append(play(answer, []))
    # bin by what actually happened (a messy game can run out of invalid attempts before solving)
    wins: dict[int, list[float]] = {n: [] for n in range(1, 7)}
    losses: list[float] = []
    never: list[float] = []
    for env, total in games:
        if env.solved:
            wins[len(env.history)].append(total)
        elif env.history:
            losses.append(total)
        else:
            never.append(total)
    assert all(len(v) >= len(ANSWERS) for v in wins.values())
    assert len(losses) >= 6 * len(ANSWERS)
    assert len(never) >= 2 * len(ANSWERS)
    for n in range(1, 6):
        assert min(wins[n]) > max(wins[n + 1]), n
    assert min(wins[6]) >= 1.0 > max(losses)
    assert min(losses) > max(never)
    assert max(never) <= -1.5


def test_feedback_consistent_losses_beat_inconsistent_losses() -> None:
    """Among six-miss losses, playing consistently with the feedback always scores higher."""
    rng = random.Random(12)
    consistent, inconsistent = [], []
    for answer in rng.sample(agent.ANSWERS, 400):
        clean = family_misses(answer, rng)
        if clean is not None and len(consistent) < 40:
            env, total = play(answer, clean)
            assert all(
                agent.is_consistent(w, env.history[:i]) for i, (w, _) in enumerate(env.history)
            )
            consistent.append(total)
        if len(inconsistent) < 40:
            inconsistent.append(play(answer, inconsistent_misses(answer, rng, 6))[1])
    assert len(consistent) >= 20
    assert min(consistent) > max(inconsistent)


def test_shaping_extremes_never_cross_outcome_levels() -> None:
    """Even maximal shaping cannot lift a loss above a win or a slower win above a faster one."""
    best_strategy, worst_strategy = 1.0, -1.0
    for n in range(1, 6):
        slow_best = agent.outcome_score(n + 1, n + 1) + agent.WEIGHT_SOLVED * best_strategy
        fast_worst = agent.outcome_score(n, n) + agent.WEIGHT_SOLVED * worst_strategy
        assert fast_worst > slow_best
    worst_win = agent.outcome_score(6, 6) + agent.WEIGHT_SOLVED * worst_strategy
    best_loss = agent.outcome_score(None, 6) + agent.WEIGHT_UNSOLVED * best_strategy
    worst_loss = agent.outcome_score(None, 1) + agent.WEIGHT_UNSOLVED * worst_strategy
    best_never = (
        agent.outcome_score(None, 0) + agent.WEIGHT_UNSOLVED * 0.0
    )  # no valid guess: no bonus
    assert worst_win >= 1.0 > best_loss
    assert worst_loss > best_never


def test_penalised_moves_score_below_clean_play() -> None:
    """Repeats, gray reuse, dropped greens and invalid words each lower an otherwise equal loss."""
    answer = "night"
    _, clean = play(answer, ["light", "might", "sight"])  # stopped early, shaping unclipped
    _, invalid = play(answer, ["light", "qqqqq", "might", "sight"])
    _, malformed = play(answer, ["light", "might", "x", "sight"])
    _, repeated = play(answer, ["light", "might", "light"])
    _, gray_reuse = play(answer, ["light", "might", "lucky"])
    assert -0.8 - 0.15 < clean < -0.8 + 0.15
    assert clean > invalid > malformed
    assert clean > gray_reuse > repeated
    points = agent.shaping_points
    answer = "crane"
    hist = [agent.Attempt("slate", "valid", agent.score_feedback("slate", answer))]
    gray = points([*hist, agent.Attempt("stomp", "valid", agent.score_feedback("stomp", answer))])
    green = points([*hist, agent.Attempt("pious", "valid", agent.score_feedback("pious", answer))])
    assert gray["gray_reused"] == -20.0
    assert gray["new_letter"] == 10.0  # only the opener's: bonuses skip inconsistent guesses
    assert green["green_dropped"] == -30.0
