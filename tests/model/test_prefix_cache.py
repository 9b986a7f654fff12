"""The ``hf`` sampler's prefix reuse: a rollout's later turns prefill only their new tokens and
sample what a fresh prefill samples; the kept prefixes stay in the budget and go when their
rollout ends or the weights change."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from hf_tiny import check_sampled_as_alone

from agent_kit.emulator.policies import load_policy
from agent_kit.emulator.policies.hf import HFPolicyBackend
from agent_kit.emulator.schemas import PolicyRequest
from agent_kit.model.batch import REUSE_FROM, BatchSampler, SampleJob
from agent_kit.model.prefix import Prefix, PrefixStore, shared_length
from agent_kit.model.sampling import pick as draw
from agent_kit.model.turns import TurnTokens
from agent_kit.settings import Settings
from agent_kit.train.samples import merge_turns

MAX_NEW = 12


@pytest.fixture
def sampler(hf_backend: HFPolicyBackend) -> Iterator[BatchSampler]:
    """A fresh batch sampler with prefix reuse, on the tiny model."""
    one = BatchSampler(
        hf_backend.loaded, pick=draw, stop_ids=hf_backend.sampler.stop_ids, max_rows=32
    )
    yield one
    one.close()


def _ids(hf_backend: HFPolicyBackend, text: str) -> tuple[int, ...]:
    return tuple(hf_backend.loaded.tokenizer(text, add_special_tokens=False)["input_ids"])


def _job(prompt: tuple[int, ...], seed: int, key: str | None) -> SampleJob:
    return SampleJob(prompt, 1.0, 0.9, MAX_NEW, seed, key)


def _first_turns(
    hf_backend: HFPolicyBackend, sampler: BatchSampler, n: int
) -> list[tuple[SampleJob, list[int]]]:
    """``n`` rollouts' first turns sampled together (keys ``r0``…), each with its ids."""
    jobs = [
        _job(
            _ids(hf_backend, f"system: play {i}. user: " + "count " * (40 + 3 * i)), 10 + i, f"r{i}"
        )
        for i in range(n)
    ]
    sampler.submit_together(jobs)
    return [(job, check_sampled_as_alone(hf_backend, job)[0]) for job in jobs]


def _next_prompt(hf_backend: HFPolicyBackend, job: SampleJob, ids: list[int], tail: str) -> Any:
    """A rollout's next prompt: its previous prompt and sampled ids, then the environment's."""
    return (*job.prompt, *ids, *_ids(hf_backend, tail))


def test_a_later_turn_prefills_only_its_new_tokens_and_samples_as_a_fresh_prefill(
    hf_backend: HFPolicyBackend, sampler: BatchSampler
) -> None:
    """A rollout's second turn reuses its first turn's keys and values (the prompt and sampled
    tokens but the last) and prefills only the rest, drawing the tokens and log-probabilities
    of a fresh prefill."""
    ((first, ids),) = _first_turns(hf_backend, sampler, 1)
    kept = len(first.prompt) + len(ids) - 1
    assert sampler.prefixes.keys() == ["r0"]
    assert sampler.prefixes.tokens == kept
    prefilled = sampler.prefilled_tokens
    second = _job(_next_prompt(hf_backend, first, ids, " tool: 7 is too low."), 99, "r0")
    sampler.submit(second)
    check_sampled_as_alone(hf_backend, second)
    assert sampler.reused_tokens == kept
    assert sampler.prefilled_tokens - prefilled == len(second.prompt) - kept


def test_continued_turns_batched_with_fresh_ones_sample_as_alone(
    hf_backend: HFPolicyBackend, sampler: BatchSampler
) -> None:
    """Four rollouts' second turns (each over its own kept prefix) and two fresh turns, all
    submitted together, each sample what it samples alone; every kept prefix was reused."""
    firsts = _first_turns(hf_backend, sampler, 4)
    kept = sum(len(job.prompt) + len(ids) - 1 for job, ids in firsts)
    seconds = [
        _job(_next_prompt(hf_backend, job, ids, f" tool: no {i}." * (i + 1)), 50 + i, job.key)
        for i, (job, ids) in enumerate(firsts)
    ]
    fresh = [_job(_ids(hf_backend, "another game " * (k + 1)), 80 + k, f"new{k}") for k in range(2)]
    sampler.submit_together([*seconds, *fresh])
    for job in [*seconds, *fresh]:
        check_sampled_as_alone(hf_backend, job)
    assert sampler.reused_tokens == kept
    assert sampler.peak_rows == 6


def test_a_rewritten_history_reuses_the_longest_shared_prefix(
    hf_backend: HFPolicyBackend, sampler: BatchSampler
) -> None:
    """A prompt that leaves its rollout's tokens part way reuses what it shares with them; a
    new rollout whose prompt starts like a kept one (the same system prompt) reuses that; one
    that shares fewer than REUSE_FROM tokens is prefilled whole."""
    ((first, _),) = _first_turns(hf_backend, sampler, 1)
    cut = len(first.prompt) - 2
    diverged = _job((*first.prompt[:cut], *_ids(hf_backend, " something else entirely")), 5, "r0")
    sampler.submit(diverged)
    check_sampled_as_alone(hf_backend, diverged)
    assert sampler.reused_tokens == cut
    other = _job((*diverged.prompt[:cut], *_ids(hf_backend, " a third one")), 6, "other")
    reused = sampler.reused_tokens
    sampler.submit(other)
    check_sampled_as_alone(hf_backend, other)
    assert sampler.reused_tokens - reused == cut
    short = _job((*first.prompt[: REUSE_FROM - 1], *_ids(hf_backend, " then apart")), 7, "short")
    reused = sampler.reused_tokens
    sampler.submit(short)  # too little shared to be worth a pass of its own: prefilled whole
    check_sampled_as_alone(hf_backend, short)
    assert sampler.reused_tokens == reused
    assert shared_length((1, 2, 3, 4), (1, 2, 9)) == 2
    assert shared_length((1, 2), (1, 2, 3)) == 2
    assert shared_length((5,), (1,)) == 0


def test_prefixes_are_evicted_least_recently_used_first() -> None:
    """The store keeps what fits its room, evicting the least recently used prefixes first;
    a match counts as a use; a prefix of other weights, or larger than the room, is not kept."""
    store = PrefixStore()
    store.renew("w1")

    def prefix(key: str, n: int, version: str = "w1") -> Prefix:
        return Prefix(key, tuple(range(100 * ord(key[0]), 100 * ord(key[0]) + n)), (), version)

    for key in ("a", "b", "c"):
        assert store.put(prefix(key, 10), room=30)
    assert store.keys() == ["a", "b", "c"]
    assert store.match("a", prefix("a", 12).ids)[1] == 10  # a is now the most recent
    assert store.put(prefix("d", 10), room=30)
    assert store.keys() == ["c", "a", "d"]
    assert store.tokens == 30
    assert store.evicted == 1
    assert not store.put(prefix("e", 31), room=30)
    assert not store.put(prefix("f", 5, version="w0"), room=30)
    assert store.keys() == ["c", "a", "d"]
    store.shrink(15)
    assert store.keys() == ["d"]
    store.renew("w2")
    assert len(store) == 0
    assert store.tokens == 0


def test_kept_prefixes_count_in_the_budget_with_the_running_batch(
    hf_backend: HFPolicyBackend, sampler: BatchSampler
) -> None:
    """The store holds what the budget leaves beside the running batch (a row counted at its
    prompt and token cap), evicting the least recently used; newcomers that fit the budget
    together join together, the kept prefixes evicted to make room."""
    ((first, _),) = _first_turns(hf_backend, sampler, 1)
    one = sampler.prefixes.tokens  # each turn below leaves a prefix this long
    width = len(first.prompt) + MAX_NEW
    small = BatchSampler(
        hf_backend.loaded, pick=draw, stop_ids=hf_backend.sampler.stop_ids, max_rows=32
    )
    small.cache_tokens = width + 2 * one  # a running row leaves room for two prefixes
    try:
        for i in range(4):
            same = _job(first.prompt, first.seed, f"k{i}")
            small.submit(same)
            check_sampled_as_alone(hf_backend, same)
            assert small.prefixes.tokens <= small.cache_tokens
        assert small.prefixes.keys() == ["k1", "k2", "k3"]
        assert small.prefixes.evicted == 1
        small.cache_tokens = 2 * width  # two rows: no room left for any prefix meanwhile
        pair = [_job(first.prompt, first.seed + k, f"pair{k}") for k in range(2)]
        small.submit_together(pair)
        for job in pair:
            check_sampled_as_alone(hf_backend, job)
        assert small.peak_rows == 2
        assert small.prefixes.keys() == ["pair0", "pair1"]
    finally:
        small.close()


def test_a_rollout_that_ends_drops_its_prefix_and_its_waiting_turn(
    hf_backend: HFPolicyBackend,
) -> None:
    """``forget`` drops a rollout's kept prefix, answers its turn still waiting for the batch
    with no tokens (its caller went away) and leaves the others to sample."""
    release = threading.Event()
    busy = threading.Event()

    def pick(logits: Any, temperature: float, top_p: float, generator: Any) -> tuple[int, float]:
        busy.set()
        release.wait(timeout=120)
        return draw(logits, temperature, top_p, generator)

    one = BatchSampler(
        hf_backend.loaded, pick=pick, stop_ids=hf_backend.sampler.stop_ids, max_rows=1
    )
    try:
        running = _job(_ids(hf_backend, "first in line"), 1, "stays")
        waiting = _job(_ids(hf_backend, "second in line"), 2, "gone")
        one.submit(running)
        assert busy.wait(timeout=120)  # the worker waits in its first draw
        one.prefixes.put(Prefix("gone", (1, 2, 3), (), one.prefixes.version), room=100)
        assert "gone" in one.prefixes
        one.submit(waiting)
        one.forget("gone")
        assert waiting.future.result(timeout=120) == ([], [])
        assert "gone" not in one.prefixes
        release.set()
        assert running.future.result(timeout=120)[0]
    finally:
        release.set()
        one.close()


def test_a_weight_change_drops_every_kept_prefix(
    hf_backend: HFPolicyBackend, sampler: BatchSampler
) -> None:
    """After the weights change in place (as an optimiser step does), the kept prefix is not
    reused: the next turn is prefilled whole and samples what the new weights sample alone."""
    ((first, ids),) = _first_turns(hf_backend, sampler, 1)
    weight = hf_backend.loaded.model.get_input_embeddings().weight
    saved = weight.detach().clone()
    try:
        with torch.no_grad():
            weight.mul_(1.5)
        second = _job(_next_prompt(hf_backend, first, ids, " tool: higher."), 4, "r0")
        sampler.submit(second)
        check_sampled_as_alone(hf_backend, second)
        assert sampler.reused_tokens == 0
    finally:
        with torch.no_grad():
            weight.copy_(saved)


def _request(messages: list[dict[str, Any]], turn: int, seed: int) -> PolicyRequest:
    return PolicyRequest(
        messages=tuple(messages),
        tools=(),
        temperature=1.0,
        top_p=1.0,
        max_tokens=MAX_NEW,
        rng=random.Random(seed),
        trajectory_id=f"job-s0-p{seed}-g0-a0",
        job_arn="arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/job",
        turn=turn,
        raw={"model": "default"},
    )


async def _rollouts(policy: HFPolicyBackend, turns: int) -> list[TurnTokens]:
    """Three rollouts of ``turns`` turns each, played concurrently through ``complete``."""
    seen: list[TurnTokens] = []
    policy.recorder = seen.append

    async def rollout(seed: int) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "Guess the number between one and a hundred. " * 4},
            {"role": "user", "content": f"Game {seed}."},
        ]
        for turn in range(turns):
            result = await policy.complete(_request(messages, turn, seed))
            message = result.response["choices"][0]["message"]
            reply = {k: v for k, v in message.items() if v is not None}
            messages += [reply, {"role": "user", "content": f"Not {turn}, try again."}]

    await asyncio.gather(*(rollout(seed) for seed in range(3)))
    await policy.aclose()
    return sorted(seen, key=lambda t: (t.trajectory_id, t.turn))


def test_grpo_samples_are_the_same_with_the_prefix_cache_on_and_off(tiny_model: Path) -> None:
    """Three four-turn rollouts played with prefix reuse and without
    (``AGENT_KIT_HF_PREFIX_CACHE=0``) record the same prompt and completion ids and, up to float
    rounding, log-probabilities, so GRPO's merged samples are the same; with reuse on, the later
    turns prefilled only their new tokens."""
    on = load_policy(f"hf:{tiny_model}")
    off = load_policy(
        f"hf:{tiny_model}", settings=Settings.from_environ({"AGENT_KIT_HF_PREFIX_CACHE": "0"})
    )
    assert isinstance(on, HFPolicyBackend)
    assert isinstance(off, HFPolicyBackend)
    assert on.sampler.batcher.prefix_cache
    assert not off.sampler.batcher.prefix_cache
    cached, fresh = asyncio.run(_rollouts(on, 4)), asyncio.run(_rollouts(off, 4))
    assert [(t.prompt_ids, t.completion_ids) for t in cached] == [
        (t.prompt_ids, t.completion_ids) for t in fresh
    ]
    for one, two in zip(cached, fresh, strict=True):
        assert one.logprobs == pytest.approx(two.logprobs, abs=1e-5)
    for seed in range(3):
        mine = [t for t in cached if t.trajectory_id.endswith(f"p{seed}-g0-a0")]
        theirs = [t for t in fresh if t.trajectory_id.endswith(f"p{seed}-g0-a0")]
        a, b = merge_turns(mine, 1.0), merge_turns(theirs, 1.0)
        assert (a.prompt_ids, a.completion_ids, a.env_mask) == (
            b.prompt_ids,
            b.completion_ids,
            b.env_mask,
        )
        assert a.dropped_turns == 0
    later = sum(len(t.prompt_ids) for t in cached if t.turn > 0)
    first = sum(len(t.prompt_ids) for t in cached if t.turn == 0)
    assert on.sampler.batcher.reused_tokens > 0
    assert on.sampler.batcher.prefilled_tokens < first + later
    assert off.sampler.batcher.reused_tokens == 0
    assert off.sampler.batcher.prefilled_tokens == first + later


def test_the_emulator_ends_a_rollouts_prefix_when_it_completes_or_expires(
    tiny_model: Path,
) -> None:
    """Through the emulator: a rollout's turn leaves its prefix in the ``hf`` policy's store;
    CompleteRollout (and, for another rollout, the driver expiring it) drops it."""
    from agent_kit.contract import CompleteRolloutBody
    from agent_kit.emulator.core import Emulator
    from agent_kit.store import RunStore

    async def play() -> None:
        policy = load_policy(f"hf:{tiny_model}")
        assert isinstance(policy, HFPolicyBackend)
        store = policy.sampler.batcher.prefixes
        emu = Emulator(RunStore.open(":memory:"), policy)
        arn = emu.create_job("prefix-job").arn
        body = {"messages": [{"role": "user", "content": "Hello."}], "max_tokens": MAX_NEW}
        done, lapsed = (emu.open_trajectory(arn, "p").id for _ in range(2))
        for tid in (done, lapsed):
            await emu.turn(arn, tid, body, route="/v1/chat/completions")
        assert sorted(store.keys()) == sorted([done, lapsed])
        emu.complete_rollout(arn, CompleteRolloutBody(trajectory_id=done))
        emu.expire(lapsed, "the rollout timed out")
        # the hook hands the forgetting to the policy's preparing thread: read after it
        kept = await asyncio.get_running_loop().run_in_executor(policy._executor, store.keys)
        assert kept == []
        await policy.aclose()

    asyncio.run(play())
