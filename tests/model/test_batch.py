"""The ``hf`` policy's continuous batching: turns sampled together are sampled as if alone."""

from __future__ import annotations

import asyncio
import random
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from hf_tiny import check_sampled_as_alone

from agent_kit.emulator.policies import load_policy
from agent_kit.emulator.policies.hf import HFPolicyBackend
from agent_kit.emulator.schemas import PolicyRequest
from agent_kit.errors import UsageError
from agent_kit.model.batch import BatchSampler, SampleJob, cache_bytes_per_token
from agent_kit.model.sampling import draw_index
from agent_kit.model.sampling import pick as draw
from agent_kit.model.turns import TurnTokens
from agent_kit.settings import Settings

MAX_NEW = 16


def _prompts(hf_backend: HFPolicyBackend, n: int) -> list[tuple[int, ...]]:
    """``n`` prompts of different lengths (3 to 3 + 4n tokens)."""
    encode = hf_backend.loaded.tokenizer
    return [
        tuple(encode("count " * (1 + 4 * i) + "go", add_special_tokens=False)["input_ids"])
        for i in range(n)
    ]


def _jobs(prompts: list[tuple[int, ...]], *, top_p: float = 0.9) -> list[SampleJob]:
    return [SampleJob(p, 1.0, top_p, MAX_NEW, 1000 + i) for i, p in enumerate(prompts)]


def _check_as_alone(hf_backend: HFPolicyBackend, jobs: list[SampleJob]) -> None:
    for job in jobs:
        check_sampled_as_alone(hf_backend, job)


def _sample_as_alone(
    hf_backend: HFPolicyBackend, jobs: list[SampleJob], cache_tokens: int | None = None
) -> BatchSampler:
    """Sample ``jobs`` together in a fresh sampler (its cache budget ``cache_tokens`` when
    given), check each against the turn sampled alone, and return the closed sampler."""
    sampler = BatchSampler(
        hf_backend.loaded, pick=draw, stop_ids=hf_backend.sampler.stop_ids, max_rows=32
    )
    if cache_tokens is not None:
        sampler.cache_tokens = cache_tokens
    try:
        sampler.submit_together(jobs)
        _check_as_alone(hf_backend, jobs)
    finally:
        sampler.close()
    return sampler


def test_turns_started_together_sample_what_each_samples_alone(hf_backend: HFPolicyBackend) -> None:
    """Eight prompts of different lengths, left-padded into one batch, draw the same tokens and
    log-probabilities as each sampled alone, and those log-probabilities are teacher-forced."""
    jobs = _jobs(_prompts(hf_backend, 8))
    sampler = _sample_as_alone(hf_backend, jobs)
    assert sampler.peak_rows == 8
    assert len({len(job.future.result()[0]) for job in jobs}) > 1  # rows ended apart


def test_the_cache_budget_bounds_the_rows_sampled_together(hf_backend: HFPolicyBackend) -> None:
    """With a key/value cache budget of about three rows (each counted at the widest prompt
    plus its token cap), eight turns never hold more cache than that and never sample all
    together, still as if alone; the budget is counted from the model's own config (layers × 2
    × key/value heads × head size × dtype size)."""
    config = hf_backend.loaded.model.config
    per_token = cache_bytes_per_token(hf_backend.loaded.model)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    assert per_token == 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * 4
    prompts = _prompts(hf_backend, 8)[::-1]  # the widest first: every row counts at its width
    widest = len(prompts[0]) + MAX_NEW
    sampler = _sample_as_alone(hf_backend, _jobs(prompts), cache_tokens=3 * widest + widest // 2)
    assert 1 < sampler.peak_rows < 8
    assert 0 < sampler.peak_cache_tokens <= sampler.cache_tokens


def test_a_turn_wider_than_the_budget_samples_alone(hf_backend: HFPolicyBackend) -> None:
    """A budget smaller than one turn does not starve it: each turn samples, one at a time."""
    sampler = _sample_as_alone(hf_backend, _jobs(_prompts(hf_backend, 3)), cache_tokens=1)
    assert sampler.peak_rows == 1


def test_turns_joining_a_running_batch_sample_what_each_samples_alone(
    hf_backend: HFPolicyBackend,
) -> None:
    """Turns that arrive while a long turn is decoding join it at the next token (their caches
    re-aligned onto the running one) and still sample as if alone, before and after rows leave."""
    prompts = _prompts(hf_backend, 7)
    later = _jobs(prompts[:-1])
    joined = threading.Event()

    def pick(logits: Any, temperature: float, top_p: float, generator: Any) -> tuple[int, float]:
        if not joined.is_set():  # the first draw of the first turn: the others arrive now
            joined.set()
            sampler.submit_together(later)
        return draw(logits, temperature, top_p, generator)

    sampler = BatchSampler(hf_backend.loaded, pick=pick, stop_ids=(), max_rows=32)
    first = SampleJob(prompts[-1], 1.0, 0.9, MAX_NEW, 7)  # no stop ids: it runs to the cap
    try:
        sampler.submit(first)
        assert len(first.future.result(timeout=120)[0]) == MAX_NEW
        for job in later:
            job.future.result(timeout=120)
    finally:
        sampler.close()
    assert sampler.peak_rows == 1 + len(later)
    reference = HFPolicyBackend(hf_backend.loaded, name="reference", max_batch=1)
    reference.sampler.stop_ids = frozenset()
    _check_as_alone(reference, [first, *later])


def test_a_stopped_turn_leaves_the_batch_and_the_others_go_on(hf_backend: HFPolicyBackend) -> None:
    """A turn whose caller went away ends at its next token; the rest sample as if alone."""
    sampler = BatchSampler(
        hf_backend.loaded, pick=draw, stop_ids=hf_backend.sampler.stop_ids, max_rows=32
    )
    jobs = _jobs(_prompts(hf_backend, 4))
    jobs[1].stop.set()
    try:
        sampler.submit_together(jobs)
        assert len(jobs[1].future.result(timeout=120)[0]) == 1
        _check_as_alone(hf_backend, [jobs[0], *jobs[2:]])
    finally:
        sampler.close()


def test_a_failed_forward_fails_the_turns_in_flight_and_the_next_ones_sample(
    hf_backend: HFPolicyBackend,
) -> None:
    """An error while sampling reaches every turn in flight as that error; later turns sample."""
    calls = 0

    def pick(logits: Any, temperature: float, top_p: float, generator: Any) -> tuple[int, float]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("out of memory (simulated)")
        return draw(logits, temperature, top_p, generator)

    sampler = BatchSampler(
        hf_backend.loaded, pick=pick, stop_ids=hf_backend.sampler.stop_ids, max_rows=32
    )
    failed = _jobs(_prompts(hf_backend, 3))
    try:
        sampler.submit_together(failed)
        for job in failed:
            with pytest.raises(RuntimeError, match="simulated"):
                job.future.result(timeout=120)
        after = _jobs(_prompts(hf_backend, 2))
        sampler.submit_together(after)
        _check_as_alone(hf_backend, after)
    finally:
        sampler.close()


def test_top_p_draws_do_not_depend_on_float_noise_in_the_logits(
    hf_backend: HFPolicyBackend,
) -> None:
    """With top-p, logits that differ by float rounding (as a batch's do) draw the same token for
    the same seed, even among near-equal probabilities whose sorted order the noise changes."""
    noise = torch.Generator().manual_seed(3)
    flips = 0
    for seed in range(40):
        logits = 0.01 * torch.randn(4000, generator=noise)
        nudged = logits * (1 + 1e-6 * torch.randn(4000, generator=noise))
        one = draw(logits, 1.0, 0.9, torch.Generator().manual_seed(seed))
        two = draw(nudged, 1.0, 0.9, torch.Generator().manual_seed(seed))
        flips += one[0] != two[0]
    assert flips == 0


def _request(index: int) -> PolicyRequest:
    return PolicyRequest(
        messages=(
            {"role": "system", "content": "Answer."},
            {"role": "user", "content": "Say it " * (index + 1)},
        ),
        tools=(),
        temperature=1.0,
        top_p=1.0,
        max_tokens=MAX_NEW,
        rng=random.Random(index),
        trajectory_id=f"job-s0-p{index}-g0-a0",
        job_arn="arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/job",
        turn=0,
        raw={"model": "default"},
    )


def test_concurrent_turns_answer_and_record_as_turns_played_one_at_a_time(
    tiny_model: Path,
) -> None:
    """Six turns awaited together through complete() record the same tokens as the same turns
    played one after another with batching off (``AGENT_KIT_HF_BATCH=1``)."""

    async def play(policy: HFPolicyBackend, together: bool) -> list[TurnTokens]:
        seen: list[TurnTokens] = []
        policy.recorder = seen.append
        if together:
            await asyncio.gather(*(policy.complete(_request(i)) for i in range(6)))
        else:
            for i in range(6):
                await policy.complete(_request(i))
        await policy.aclose()
        return sorted(seen, key=lambda t: t.trajectory_id)

    batched = load_policy(f"hf:{tiny_model}")
    single = load_policy(
        f"hf:{tiny_model}", settings=Settings.from_environ({"AGENT_KIT_HF_BATCH": "1"})
    )
    assert isinstance(batched, HFPolicyBackend)
    assert isinstance(single, HFPolicyBackend)
    assert single.sampler.batcher.max_rows == 1
    together = asyncio.run(play(batched, True))
    alone = asyncio.run(play(single, False))
    assert [t.completion_ids for t in together] == [t.completion_ids for t in alone]
    assert [t.prompt_ids for t in together] == [t.prompt_ids for t in alone]
    for one, two in zip(together, alone, strict=True):
        assert one.logprobs == pytest.approx(two.logprobs, abs=1e-5)


@pytest.mark.parametrize("name", ["AGENT_KIT_HF_BATCH", "AGENT_KIT_HF_CACHE_MB"])
@pytest.mark.parametrize("value", ["0", "many"])
def test_a_bad_batch_setting_is_a_usage_error(value: str, name: str) -> None:
    """AGENT_KIT_HF_BATCH or AGENT_KIT_HF_CACHE_MB that is not a positive integer is refused
    with one clear message (where the settings are read, before any model loads)."""
    with pytest.raises(UsageError, match=name):
        Settings.from_environ({name: value})


def test_the_cache_setting_sets_the_budget(tiny_model: Path) -> None:
    """AGENT_KIT_HF_CACHE_MB sets the batch's cache budget in MiB (the default is 512)."""
    default = load_policy(f"hf:{tiny_model}")
    small = load_policy(
        f"hf:{tiny_model}", settings=Settings.from_environ({"AGENT_KIT_HF_CACHE_MB": "2"})
    )
    assert isinstance(default, HFPolicyBackend)
    assert isinstance(small, HFPolicyBackend)
    per_token = cache_bytes_per_token(small.loaded.model)
    assert small.sampler.batcher.cache_tokens == 2 * 2**20 // per_token
    assert default.sampler.batcher.cache_tokens == 512 * 2**20 // per_token
    asyncio.run(default.aclose())
    asyncio.run(small.aclose())


def test_a_draw_follows_the_weights_and_never_draws_a_zero_weight() -> None:
    """The draw places one uniform number on the running total: 20,000 seeded draws land on
    each index in proportion to its weight (within 2 points), never on a zero weight, and the
    same seed draws the same index."""
    weights = torch.tensor([0.0, 0.1, 0.0, 0.6, 0.3, 0.0])
    generator = torch.Generator().manual_seed(5)
    drawn = [draw_index(weights, generator) for _ in range(20_000)]
    shares = torch.bincount(torch.tensor(drawn), minlength=6).float() / len(drawn)
    assert shares[[0, 2, 5]].sum() == 0
    assert torch.allclose(shares, weights, atol=0.02)
    again = [draw_index(weights, torch.Generator().manual_seed(s)) for s in range(50)]
    assert again == [draw_index(weights, torch.Generator().manual_seed(s)) for s in range(50)]
