"""Samples from recorded turns, with plain Python data: no torch, no model (that importing
the module loads no torch: tests/model/test_face.py)."""

from __future__ import annotations

from agent_kit.model.turns import TurnTokens
from agent_kit.train.samples import Sample, StepBatch, merge_turns, no_gradient_note


def _turn(turn: int, prompt: list[int], completion: list[int]) -> TurnTokens:
    logprobs = tuple(-0.1 * (i + 1) for i in range(len(completion)))
    return TurnTokens("t-1", turn, tuple(prompt), tuple(completion), logprobs)


def test_chained_turns_merge_into_one_sequence_with_the_environment_masked() -> None:
    """Turn 2's prompt continues turn 1's prompt and completion: the tokens in between are the
    environment's (mask 0, log-probability 0), the sampled ones are trained (mask 1)."""
    first = _turn(0, [1, 2, 3], [10, 11])
    second = _turn(1, [1, 2, 3, 10, 11, 20, 21], [30])
    sample = merge_turns([first, second], 0.5)
    assert sample.prompt_ids == [1, 2, 3]
    assert sample.completion_ids == [10, 11, 20, 21, 30]
    assert sample.env_mask == [1, 1, 0, 0, 1]
    assert sample.logprobs == [-0.1, -0.2, 0.0, 0.0, -0.1]
    assert sample.advantage == 0.5
    assert sample.dropped_turns == 0
    assert sample.trained_tokens == 3


def test_a_rewritten_history_ends_the_sample_and_counts_the_dropped_turns() -> None:
    """A turn whose prompt does not continue the previous one ends the sample: it and the
    later turns are dropped, not trained."""
    turns = [
        _turn(0, [1, 2], [5]),
        _turn(1, [1, 9, 5], [6]),  # history rewritten
        _turn(2, [1, 9, 5, 6, 7], [8]),
    ]
    sample = merge_turns(turns, -1.0)
    assert sample.completion_ids == [5]
    assert sample.env_mask == [1]
    assert sample.dropped_turns == 2


def test_a_step_batch_hands_trl_its_columns_and_counts_what_trains() -> None:
    """rollout_output is TRL's rollout_func answer; trained tokens count only samples with a
    non-zero advantage; dropped turns add up."""
    kept = Sample([1, 2], [3, 4], [1, 1], [-0.5, -0.5], 1.0, dropped_turns=1)
    flat = Sample([1], [3], [1], [-0.2], 0.0, dropped_turns=2)
    batch = StepBatch(4, [kept, flat], rewards=[1.0, 0.0])
    out = batch.rollout_output()
    assert out == {
        "prompt_ids": [[1, 2], [1]],
        "completion_ids": [[3, 4], [3]],
        "logprobs": [[-0.5, -0.5], [-0.2]],
        "env_mask": [[1, 1], [1]],
        "agent_kit_advantage": [1.0, 0.0],
    }
    assert batch.trained_tokens == 4
    assert batch.dropped_turns == 3
    assert no_gradient_note(batch) == ""
    assert "all advantages 0" in no_gradient_note(StepBatch(4, [flat]))


def test_turn_tokens_round_trip_through_their_stored_form() -> None:
    """A turn's record survives the event detail it is stored as."""
    turn = _turn(2, [1, 2], [3])
    assert TurnTokens.from_dict("t-1", turn.to_dict()) == turn
