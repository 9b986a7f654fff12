"""The Wordle baselines in-process (simulate.py: env + scripted policy + reward, no Strands).

These play the real ``WordleEnv`` and ``wordle_reward`` against the real policies, feeding each
policy the OpenAI-style history agent_kit's episode loop would send; the servers and Strands are
covered by ``test_wordle_e2e.py``.
"""

from __future__ import annotations

import json
import math
import random
import re
import statistics
from collections import Counter
from typing import Any

import pytest
from wordle_modules import WORDLE, agent, policies, sim

from agent_kit.emulator.schemas import PolicyRequest

HOLDOUT = sim.read_dataset(WORDLE / "holdout.jsonl")


@pytest.fixture(scope="module")
def runs() -> dict[str, list[Any]]:
    """Every policy over the whole holdout: Solver greedy, the rest at temperature 0.7."""
    return {
        "Solver@0": [
            r for g in sim.play_groups(policies.Solver(), HOLDOUT, group_size=1) for r in g
        ],
        "Solver@0.7": [
            r
            for g in sim.play_groups(policies.Solver(), HOLDOUT, group_size=2, temperature=0.7)
            for r in g
        ],
        "Sloppy": [
            r
            for g in sim.play_groups(policies.Sloppy(), HOLDOUT, group_size=2, temperature=0.7)
            for r in g
        ],
        "Random": [
            r
            for g in sim.play_groups(policies.Random(), HOLDOUT, group_size=2, temperature=0.7)
            for r in g
        ],
    }


def _solve_rate(results: list[Any]) -> float:
    return sum(r.solved for r in results) / len(results)


def _mean(results: list[Any]) -> float:
    return statistics.fmean(r.reward.total for r in results)


def test_baseline_rank_order(runs: dict[str, list[Any]]) -> None:
    """Solver (T=0) solves ≥ 95% of the holdout, Random ≤ 10%, Sloppy in between; rewards agree."""
    solver, sloppy, rnd = (
        _solve_rate(runs["Solver@0"]),
        _solve_rate(runs["Sloppy"]),
        _solve_rate(runs["Random"]),
    )
    assert solver >= 0.95
    assert rnd <= 0.10
    assert rnd < sloppy < solver
    assert _mean(runs["Solver@0"]) > _mean(runs["Sloppy"]) > _mean(runs["Random"])
    assert min(r.reward.total for r in runs["Solver@0"] if r.solved) >= 1.0


def test_solver_only_plays_feedback_consistent_guesses(runs: dict[str, list[Any]]) -> None:
    """Every Solver guess could still have been the answer given all earlier feedback."""
    for result in runs["Solver@0"] + runs["Solver@0.7"]:
        history = [(w, agent.score_feedback(w, result.task["answer"])) for w in _guesses(result)]
        for i, (word, _) in enumerate(history):
            assert agent.is_consistent(word, history[:i]), (result.task["id"], word)


def _guesses(result: Any) -> list[str]:
    return [c.input["guess"] for c in result.episode.tool_calls]


def test_answer_never_reaches_the_policy(runs: dict[str, list[Any]]) -> None:
    """Over every turn of every run, nothing the policy sees (messages, tools) holds the answer."""
    checked = 0
    for results in runs.values():
        for result in results:
            word = re.compile(rf"\b{result.task['answer']}\b", re.IGNORECASE)
            for request in result.requests:
                seen = json.dumps([request.messages, request.tools])
                assert not word.search(seen), (result.task["id"], request.turn)
                checked += 1
    assert checked > 500


def test_temperature_gives_groups_reward_variance(runs: dict[str, list[Any]]) -> None:
    """At T=0 a Solver group is identical; at T=0.7 most groups differ in reward (GRPO signal)."""
    greedy = sim.play_groups(policies.Solver(), HOLDOUT[:6], group_size=3)
    assert all(len({r.reward.total for r in g}) == 1 for g in greedy)
    warm = runs["Solver@0.7"]
    pairs = [warm[i : i + 2] for i in range(0, len(warm), 2)]
    varied = sum(1 for a, b in pairs if a.reward.total != b.reward.total)
    assert varied >= len(pairs) // 3


def test_runs_are_reproducible() -> None:
    """The same seed and trajectory id replay the same game; another seed may differ."""
    task = HOLDOUT[0]
    a = sim.play(policies.Sloppy(), task, temperature=0.7, seed=1, trajectory_id="t")
    b = sim.play(policies.Sloppy(), task, temperature=0.7, seed=1, trajectory_id="t")
    assert _guesses(a) == _guesses(b)
    assert a.reward.total == b.reward.total


def test_sloppy_text_guesses_are_executed_and_penalised(runs: dict[str, list[Any]]) -> None:
    """A Sloppy guess written as text is recovered, executed, flagged, and costs format points."""
    with_text = [r for r in runs["Sloppy"] if r.episode.recovered_calls]
    assert with_text, "Sloppy never wrote a guess as text"
    for result in with_text:
        recovered = result.episode.recovered_calls
        played = [c.input["guess"] for c in result.episode.tool_calls]
        assert all(c.input["guess"] in played for c in recovered)
        assert all(c.output.startswith(("Guess ", '"')) for c in recovered)
        parts = result.reward.breakdown()
        assert parts["points_text_call"]["value"] == -5.0 * len(recovered)
    # the penalty is real: rescoring without the recovered flags gives a higher reward
    result = with_text[0]
    for call in result.episode.tool_calls:
        call.recovered = False
    env = agent.WordleEnv()
    env.reset(result.task)
    for call in result.episode.tool_calls:
        env.guess_word(call.input["guess"])
    assert agent.wordle_reward(env, result.episode).total > result.reward.total


def _request(
    messages: list[dict[str, Any]], temperature: float = 0.0, seed: int = 0
) -> PolicyRequest:
    return PolicyRequest(
        messages=tuple(messages), tools=(), temperature=temperature, top_p=1.0, max_tokens=None,
        rng=random.Random(seed), trajectory_id="t", job_arn="arn", turn=len(messages), raw={},
    )  # fmt: skip


def test_policies_read_feedback_from_tool_and_recovered_messages() -> None:
    """Feedback is parsed from tool results and from the user message carrying recovered results."""
    env = agent.WordleEnv()
    env.reset({"answer": "crane"})
    first = env.guess_word("slate")
    second = env.guess_word("pious")
    messages = [
        {"role": "system", "content": agent.SYSTEM_PROMPT},
        {"role": "tool", "content": first},
        {"role": "assistant", "content": "Guess 9 of 6: ZZZZZ\nFeedback: Z green"},
        {
            "role": "user",
            "content": f"Result of the tool call written in your message:\n[guess_word] {second}",
        },
    ]
    assert policies.read_feedback(messages) == [("slate", "--G-G"), ("pious", "-----")]
    reply = policies.Solver()(_request(messages))
    (call,) = reply.tool_calls
    word = call.arguments["guess"]
    assert agent.is_consistent(word, env.history)


def test_policies_stop_when_the_game_is_over() -> None:
    """After a 'game is over' result every policy answers with text and no tool call."""
    env = agent.WordleEnv()
    env.reset({"answer": "crane"})
    done = env.guess_word("crane")
    for policy in (policies.Solver(), policies.Random(), policies.Sloppy()):
        reply = policy(
            _request([{"role": "user", "content": "go"}, {"role": "tool", "content": done}])
        )
        assert reply.tool_calls == ()
        assert reply.content


def test_policies_are_pure_functions_of_the_request() -> None:
    """The same request (same rng seed) gives the same reply; the policies keep no state."""
    messages = [{"role": "user", "content": "go"}]
    for cls in (policies.Solver, policies.Random, policies.Sloppy):
        policy = cls()
        first = policy(_request(messages, 0.7, seed=3))
        policy(_request(messages, 0.7, seed=4))
        assert policy(_request(messages, 0.7, seed=3)) == first


def _literal_consistent(feedback: list[tuple[str, str]]) -> tuple[str, ...]:
    words = policies.ANSWERS
    for guess, seen in feedback:
        words = tuple(w for w in words if policies.pattern(guess, w) == seen)
    return words


def test_pattern_keys_agree_with_the_literal_rule() -> None:
    """The Solver filters and scores by one integer AND per (guess, answer); that must give
    exactly what the literal G/Y/- rule gives: the same candidates after any feedback (odd
    marks, impossible patterns and doubled letters included) and bit-identical entropies."""
    rng = random.Random(7)
    doubled = [w for w in policies.ALLOWED if len(set(w)) < 5]
    for _ in range(300):
        guess = rng.choice(doubled if rng.random() < 0.5 else policies.ALLOWED)
        a, b = rng.choice(policies.ANSWERS), rng.choice(policies.ANSWERS)
        same_key = policies._key(guess) & policies._key(a) == policies._key(guess) & policies._key(
            b
        )
        assert same_key == (policies.pattern(guess, a) == policies.pattern(guess, b)), (guess, a, b)
    for _ in range(120):
        answer = rng.choice(policies.ANSWERS)
        feedback: list[tuple[str, str]] = []
        for _turn in range(rng.randint(1, 3)):
            guess = rng.choice(doubled if rng.random() < 0.4 else policies.ALLOWED)
            seen = policies.pattern(guess, answer)
            if rng.random() < 0.15:  # a pattern the rule never produces, or an unknown mark
                seen = rng.choice(["-Y" + seen[2:], seen[:4] + "?", seen[::-1], "GG"])
            feedback.append((guess, seen))
        assert policies._consistent(tuple(feedback)) == _literal_consistent(feedback), feedback
    # "speed" against "crane" is "--Y--": the yellow goes to the first e. "---Y-" has the
    # same key but no answer gives it.
    assert policies.pattern("speed", "crane") == "--Y--"
    assert policies._consistent((("speed", "--Y--"),)) == _literal_consistent([("speed", "--Y--")])
    assert (
        policies._consistent((("speed", "---Y-"),))
        == ()
        == _literal_consistent([("speed", "---Y-")])
    )
    for size in (1, 2, 17, 150):
        words = tuple(rng.sample(policies.ANSWERS, size))
        literal = []
        for g in words:
            split = Counter(policies.pattern(g, w) for w in words)
            literal.append(-sum(n / size * math.log2(n / size) for n in split.values()))
        assert policies._scores(words) == tuple(literal)
