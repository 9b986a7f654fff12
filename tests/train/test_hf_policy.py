"""The ``hf`` policy backend: sampling, tool-call parsing, usage and the recorded tokens."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hf_tiny import GUESS_TOOLS as TOOLS

from agent_kit.emulator.policies import load_policy
from agent_kit.emulator.policies.hf import HFPolicyBackend, parse_tool_calls
from agent_kit.emulator.schemas import PolicyRequest
from agent_kit.errors import PolicyError
from agent_kit.model.turns import TurnTokens


def _request(messages: list[dict[str, Any]], *, turn: int = 0, seed: int = 1) -> PolicyRequest:
    return PolicyRequest(
        messages=tuple(messages),
        tools=TOOLS,
        temperature=1.0,
        top_p=1.0,
        max_tokens=12,
        rng=random.Random(seed),
        trajectory_id="job-s0-p0-g0-a0",
        job_arn="arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/job",
        turn=turn,
        raw={"model": "default"},
    )


FIRST = [
    {"role": "system", "content": "Find the number."},
    {"role": "user", "content": "Between 1 and 10."},
]


@pytest.fixture(scope="module")
def backend(tiny_model: Path) -> HFPolicyBackend:
    """The hf backend on the tiny model, loaded through its spec."""
    policy = load_policy(f"hf:{tiny_model}")
    assert isinstance(policy, HFPolicyBackend)
    return policy


def test_parse_tool_calls_reads_blocks_and_keeps_bad_ones_as_text() -> None:
    """Well-formed tool-call blocks become calls; malformed ones stay in the content."""
    text = 'ok <tool_call>\n{"name": "guess", "arguments": {"number": 5}}\n</tool_call>'
    content, calls = parse_tool_calls(text)
    assert content == "ok"
    assert [(c.name, c.arguments) for c in calls] == [("guess", {"number": 5})]
    content, calls = parse_tool_calls("<tool_call>{not json}</tool_call>")
    assert calls == ()
    assert content == "<tool_call>{not json}</tool_call>"
    _, calls = parse_tool_calls('<tool_call>{"name": "guess", "arguments": "{\\"number\\": 2}"}')
    assert calls[0].arguments == {"number": 2}


def test_a_turn_reports_exact_usage_and_records_its_tokens(backend: HFPolicyBackend) -> None:
    """A turn answers a chat.completion whose usage counts the recorded prompt and completion."""
    seen: list[TurnTokens] = []
    backend.recorder = seen.append
    try:
        result = asyncio.run(backend.complete(_request(FIRST)))
    finally:
        backend.recorder = None
    (tokens,) = seen
    assert result.usage.estimated is False
    assert result.usage.prompt_tokens == len(tokens.prompt_ids)
    assert result.usage.completion_tokens == len(tokens.completion_ids) <= 12
    assert len(tokens.logprobs) == len(tokens.completion_ids)
    assert all(lp <= 0.0 for lp in tokens.logprobs)
    rendered = backend.sampler.render(FIRST, TOOLS, gen=True)
    assert backend.loaded.tokenizer.decode(list(tokens.prompt_ids)) == rendered
    assert result.response["object"] == "chat.completion"


def test_the_same_turn_seed_samples_the_same_tokens(backend: HFPolicyBackend) -> None:
    """Two turns with the same seeded RNG sample identical completions."""
    seen: list[TurnTokens] = []
    backend.recorder = seen.append
    try:
        for _ in range(2):
            asyncio.run(backend.complete(_request(FIRST, seed=7)))
    finally:
        backend.recorder = None
    assert seen[0].completion_ids == seen[1].completion_ids


def test_a_continued_history_chains_the_previous_tokens(backend: HFPolicyBackend) -> None:
    """The next turn's prompt starts with the previous prompt and its sampled completion."""
    seen: list[TurnTokens] = []
    backend.recorder = seen.append
    try:
        first = asyncio.run(backend.complete(_request(FIRST)))
        message = first.response["choices"][0]["message"]
        reply = {k: v for k, v in message.items() if v is not None}
        history = [*FIRST, reply, {"role": "user", "content": "Try again."}]
        asyncio.run(backend.complete(_request(history, turn=1)))
    finally:
        backend.recorder = None
    one, two = seen
    head = (*one.prompt_ids, *one.completion_ids)
    assert two.prompt_ids[: len(head)] == head
    tail = backend.loaded.tokenizer.decode(list(two.prompt_ids[len(head) :]))
    assert tail.endswith("Try again.<|im_end|>\n<|im_start|>assistant\n")


def test_bad_model_and_adapter_specs_are_policy_errors(tmp_path: Path, tiny_model: Path) -> None:
    """A missing model or a folder that is no adapter is refused with one clear error."""
    with pytest.raises(PolicyError, match="not found"):
        load_policy(f"hf:{tmp_path / 'nope'}")
    with pytest.raises(PolicyError, match="not a PEFT adapter"):
        load_policy(f"hf:{tiny_model}+{tmp_path}")


def test_tool_call_reply_is_openai_shaped(backend: HFPolicyBackend) -> None:
    """Parsed calls reach the completion as OpenAI tool_calls with JSON-string arguments."""
    request = _request(FIRST)
    tokenizer = backend.loaded.tokenizer
    text = '<tool_call>\n{"name": "guess", "arguments": {"number": 3}}\n</tool_call><|im_end|>'
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    result = backend._result(request, TurnTokens("t", 0, (1,), tuple(ids), (0.0,) * len(ids)))
    message = result.response["choices"][0]["message"]
    assert result.response["choices"][0]["finish_reason"] == "tool_calls"
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"number": 3}
