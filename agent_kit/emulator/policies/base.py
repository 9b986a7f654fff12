"""Emulator policy backends: who answers the agent's chat-completion calls.

A backend turns one :class:`~agent_kit.emulator.schemas.PolicyRequest` into a
:class:`PolicyResult` (an OpenAI ``chat.completion`` plus token usage). Backends are chosen by a
spec string shared by every CLI command (``--policy SPEC``) and :func:`load_policy`:

=================================  ===========================================================
``random[:SEED]``                  built-in default: schema-valid random tool calls from the
                                   request's ``tools``, then a text answer (a fuzzer too)
``scripted:path/file.py:NAME``     user code: NAME is a class (instantiated once) or a callable
                                   taking the PolicyRequest, sync or async
``openai:URL[#MODEL]``             proxy to an OpenAI-compatible server (vLLM, Ollama, llama.cpp,
                                   Bedrock's OpenAI endpoint); streams for real when asked
``local[:MODEL]``                   a small GGUF model run on the CPU by llama.cpp
                                   (``agent_kit[local-llm]``; default SmolLM2-135M-Instruct)
``replay:...`` and others          added with :func:`register_policy_scheme`
=================================  ===========================================================

Wire helpers for the server: :func:`reply_to_completion` builds the non-stream completion,
:func:`completion_to_chunks` the SSE chunks (OpenAI's order: role, content, tool-call deltas,
finish, then the usage chunk), :func:`chunks_to_completion` the reverse.

Errors: bad specs raise :class:`~agent_kit.errors.UsageError` at load time; a scripted policy
that raises or returns garbage raises :class:`~agent_kit.errors.ScriptedPolicyError` (a
:class:`~agent_kit.errors.PolicyError`, served as 500 InternalServiceError with its message);
a scripted policy may raise a :class:`~agent_kit.errors.JobRuntimeError` subclass on purpose
(e.g. ``ThrottlingError``) and it passes through unchanged; the proxy maps upstream failures to
``JobRuntimeError`` subclasses. A backend that depends on something outside the process may
offer ``async preflight()``, which :func:`check_policy` calls before a run's first rollout
(``openai:`` probes its URL, ``local:`` loads its model): it raises
:class:`~agent_kit.errors.PolicyError` when the backend cannot answer at all, and a missing or
unreadable ``local:`` model file is a ``PolicyError`` at load time. A backend that keeps
something per rollout may offer ``end_trajectory(trajectory_id)`` (synchronous, non-blocking):
the emulator calls it when a trajectory leaves OPEN (CompleteRollout, or the driver expiring it)
— the ``hf`` policy drops the rollout's key/value cache and any turn of it still queued.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agent_kit.emulator.schemas import PolicyReply, PolicyRequest
from agent_kit.emulator.sse import chunks_from_completion
from agent_kit.emulator.tokens import estimate_completion_tokens, estimate_prompt_tokens
from agent_kit.settings import DEFAULTS

__all__ = [
    "PolicyBackend",
    "PolicyFactory",
    "PolicyResult",
    "Usage",
    "check_policy",
    "chunks_to_completion",
    "completion_id_for",
    "completion_to_chunks",
    "reply_to_completion",
    "result_for_reply",
]


@dataclass(frozen=True)
class Usage:
    """Token usage of one turn; ``estimated`` is True when not reported by a real model."""

    prompt_tokens: int
    completion_tokens: int
    estimated: bool

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def to_openai(self) -> dict[str, int]:
        """The OpenAI ``usage`` object: prompt, completion and total tokens."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


@dataclass
class PolicyResult:
    """One turn's answer: a ``chat.completion`` dict (with ``usage``) and the usage it holds.

    ``chunks`` is set only when the backend streamed from a real upstream: the upstream's own
    ``chat.completion.chunk`` objects, in order, already filtered to what the caller asked for
    (no usage chunk unless the request set ``stream_options.include_usage``).
    """

    response: dict[str, Any]
    usage: Usage
    chunks: list[dict[str, Any]] | None = None


@runtime_checkable
class PolicyBackend(Protocol):
    """What the emulator calls for every turn. ``name`` is the spec it was loaded from."""

    name: str

    async def complete(self, request: PolicyRequest) -> PolicyResult:
        """Answer one turn, or raise a JobRuntimeError / PolicyError the server maps."""
        ...

    async def aclose(self) -> None:
        """Release connections or files; the backend is not used afterwards."""
        ...


async def check_policy(policy: object) -> None:
    """Run the backend's optional ``preflight()`` (see the module docstring); a backend
    without one is ready as loaded. Raises what the preflight raises (a PolicyError)."""
    preflight = getattr(policy, "preflight", None)
    if preflight is not None:
        await preflight()


PolicyFactory = Callable[[str, int], PolicyBackend]
"""A scheme's factory: ``(text after "scheme:", seed) -> backend``; raises UsageError."""


# --------------------------------------------------------------------------- wire helpers


def completion_id_for(request: PolicyRequest) -> str:
    """A deterministic completion id for a turn: same trajectory and turn → same id."""
    digest = hashlib.blake2b(
        f"{request.trajectory_id}\x00{request.turn}".encode(), digest_size=12
    ).hexdigest()
    return f"chatcmpl-{digest}"


def _assistant_message(reply: PolicyReply, completion_id: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        if reply.content == "":
            message["content"] = None
        stem = completion_id.rsplit("-", 1)[-1][:12]
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{stem}_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    elif reply.content is None:
        message["content"] = ""
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    return message


def _completion(
    message: dict[str, Any], finish_reason: str, model: str, usage: Usage, completion_id: str
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": usage.to_openai(),
    }


def reply_to_completion(
    reply: PolicyReply, *, model: str, usage: Usage, completion_id: str
) -> dict[str, Any]:
    """The OpenAI ``chat.completion`` for a reply.

    The assistant message has ``content`` (``None`` when the reply only calls tools, ``""`` when
    it has neither), ``tool_calls`` (ids kept, or ``call_<id stem>_<i>``; arguments as a JSON
    string) when any, ``reasoning_content`` when the reply has reasoning; ``finish_reason`` is
    ``tool_calls`` or ``stop``; ``usage`` is ``usage.to_openai()``.
    """
    return _completion(
        _assistant_message(reply, completion_id), reply.finish_reason, model, usage, completion_id
    )


def result_for_reply(
    request: PolicyRequest, reply: PolicyReply, *, tokenizer: str = DEFAULTS.tokenizer
) -> PolicyResult:
    """Wrap an in-process reply: deterministic id, the request's model, usage estimated with
    the ``tokenizer`` counter (:mod:`agent_kit.emulator.tokens`)."""
    completion_id = completion_id_for(request)
    message = _assistant_message(reply, completion_id)
    usage = Usage(
        estimate_prompt_tokens(request.messages, request.tools, tokenizer),
        estimate_completion_tokens(message, tokenizer),
        estimated=True,
    )
    model = request.raw.get("model")
    response = _completion(
        message,
        reply.finish_reason,
        model if isinstance(model, str) and model else "default",
        usage,
        completion_id,
    )
    return PolicyResult(response=response, usage=usage)


def completion_to_chunks(
    completion: dict[str, Any], *, include_usage: bool, split: bool = True
) -> list[dict[str, Any]]:
    """OpenAI ``chat.completion.chunk`` objects streaming ``completion`` (see
    :func:`agent_kit.emulator.sse.chunks_from_completion`; here ``split`` defaults to True)."""
    return chunks_from_completion(completion, include_usage=include_usage, split=split)


def chunks_to_completion(chunks: list[dict[str, Any]], *, model: str = "default") -> dict[str, Any]:
    """Assemble streamed ``chat.completion.chunk`` objects into one ``chat.completion``.

    Content and reasoning deltas are concatenated; tool calls are grouped by ``index`` (id, type
    and name from the first delta that has them, arguments concatenated); the finish reason is
    the last one seen; ``usage`` is the last non-null usage (absent if none was streamed).
    """
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage: Any = None
    first: dict[str, Any] = chunks[0] if chunks else {}
    for chunk in chunks:
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
            delta = choice.get("delta") or {}
            if delta.get("content"):
                content.append(delta["content"])
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str):
                    reasoning.append(delta[key])
            for call in delta.get("tool_calls") or ():
                slot = calls.setdefault(
                    int(call.get("index") or 0),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if call.get("id") and not slot["id"]:
                    slot["id"] = call["id"]
                fn = call.get("function") or {}
                if fn.get("name") and not slot["function"]["name"]:
                    slot["function"]["name"] = fn["name"]
                if fn.get("arguments"):
                    slot["function"]["arguments"] += fn["arguments"]
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    elif message["content"] is None:
        message["content"] = ""
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    completion: dict[str, Any] = {
        "id": first.get("id") or "chatcmpl-0",
        "object": "chat.completion",
        "created": first.get("created") or int(time.time()),
        "model": first.get("model") or model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish or ("tool_calls" if calls else "stop"),
            }
        ],
    }
    if usage is not None:
        completion["usage"] = usage
    return completion
