"""The ``openai:URL[#MODEL]`` policy: proxy turns to an OpenAI-compatible chat server.

Works with vLLM, Ollama, llama.cpp's server, LiteLLM, Bedrock's OpenAI-compatible endpoint and
OpenAI itself. ``URL`` is the API base (``http://127.0.0.1:8000/v1``; ``/chat/completions`` is
appended unless already there); ``#MODEL`` replaces the request's ``model`` (agents under MTRL
send ``"default"``, which real servers reject, so give it). The bearer key comes from
``AGENT_KIT_UPSTREAM_API_KEY``, else ``OPENAI_API_KEY`` (none: no Authorization header); the
timeout (seconds, default 120) from ``AGENT_KIT_UPSTREAM_TIMEOUT`` (both read at the CLI's door
and handed to :func:`from_spec` as :class:`~agent_kit.settings.Settings`).

The agent's request body is forwarded as sent, except: ``model`` (above); assistant messages
without ``content`` get ``"content": ""`` (llama.cpp rejects the missing key); streaming requests
always ask the upstream for ``stream_options.include_usage`` so usage is kept; the usage chunk
and ``usage`` fields are removed from the chunks returned to a caller that did not ask for them.
When the caller streams, the upstream streams too and its chunks are returned as they came
(``PolicyResult.chunks``) with the assembled completion in ``response``.

Upstream failures become Job Runtime errors (the server sends them in the contract's shape):

======================================  =========================================
upstream                                agent sees
======================================  =========================================
400, 404, 413, 422, other 4xx           400 ValidationException (404 is nearly
                                        always an unknown model or a wrong URL:
                                        the agent's request, not a trajectory)
401, 403                                403 AccessDeniedException
402                                     402 ServiceQuotaExceededException
429                                     429 ThrottlingException
408, 5xx, timeout, connection error,    500 InternalServiceError
unparseable or error-carrying answer
======================================  =========================================
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from agent_kit.emulator.policies.base import PolicyResult, Usage, chunks_to_completion
from agent_kit.emulator.schemas import PolicyRequest
from agent_kit.emulator.tokens import estimate_completion_tokens, estimate_prompt_tokens
from agent_kit.errors import (
    AccessDeniedError,
    InternalServiceError,
    JobRuntimeError,
    PolicyError,
    QuotaExceededError,
    ThrottlingError,
    UsageError,
    ValidationError,
)
from agent_kit.settings import DEFAULTS, Settings
from agent_kit.transport import DONE, aiter_sse

__all__ = ["OpenAIProxyBackend", "from_spec", "upstream_error"]

DEFAULT_TIMEOUT_S = DEFAULTS.upstream_timeout
#: The longest :meth:`OpenAIProxyBackend.preflight` waits for the upstream's first answer.
_PROBE_TIMEOUT_S = 10.0


def _error_text(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip()[:300] or "(empty body)"
    if isinstance(data, dict):
        for key in ("error", "detail", "message", "Message"):
            value = data.get(key)
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return str(value["message"])[:300]
            if isinstance(value, str):
                return value[:300]
    return json.dumps(data)[:300]


def upstream_error(status: int, body: bytes, *, name: str) -> JobRuntimeError:
    """The JobRuntimeError for an upstream HTTP error status (table in the module docstring)."""
    text = f"upstream policy {name} answered HTTP {status}: {_error_text(body)}"
    if status in (401, 403):
        return AccessDeniedError(text + " (check AGENT_KIT_UPSTREAM_API_KEY / OPENAI_API_KEY)")
    if status == 402:
        return QuotaExceededError(text)
    if status == 429:
        return ThrottlingError(text)
    if status == 404:
        return ValidationError(text + " (unknown model or wrong URL? use openai:URL#MODEL)")
    if status == 408 or status >= 500:
        return InternalServiceError(text)
    return ValidationError(text)


def _usage(raw: Any) -> tuple[int, int] | None:
    if isinstance(raw, dict):
        prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int):
            return prompt, completion
    return None


class OpenAIProxyBackend:
    """Forwards each turn to an OpenAI-compatible ``/chat/completions`` (one shared client).

    ``transport`` (default: httpx's network transport) lets a test serve the upstream in
    process, e.g. ``httpx.ASGITransport(app)``.
    """

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
        tokenizer: str = DEFAULTS.tokenizer,
    ) -> None:
        base = url.strip()
        try:
            parsed = httpx.URL(base)
        except (httpx.InvalidURL, TypeError) as exc:
            raise UsageError(f"bad openai policy URL {url!r}: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise UsageError(
                f"bad openai policy URL {url!r}: expected http(s)://host[:port]/v1 "
                "(spec openai:URL[#MODEL])"
            )
        if not base.rstrip("/").endswith("/chat/completions"):
            base = base.rstrip("/") + "/chat/completions"
        self.url = base
        self.model = model or None
        self.timeout = timeout
        self._api_key = api_key
        self._transport = transport
        #: The token counter of a turn the upstream reports no usage for.
        self.tokenizer = tokenizer
        shown = parsed.copy_with(username=None, password=None, query=None)
        self.name = f"openai:{shown}" + (f"#{model}" if model else "")
        self._client: httpx.AsyncClient | None = None

    @classmethod
    def from_spec(cls, rest: str, settings: Settings = DEFAULTS) -> OpenAIProxyBackend:
        """Build from the text after ``openai:`` (``URL[#MODEL]``) and the settings' upstream
        key, timeout and token counter."""
        url, _, model = rest.partition("#")
        if not url.strip():
            raise UsageError("openai policy needs a URL: openai:http://127.0.0.1:8000/v1#MODEL")
        return cls(
            url,
            model=model.strip() or None,
            api_key=settings.upstream_api_key,
            timeout=settings.upstream_timeout,
            tokenizer=settings.tokenizer,
        )

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout),
                headers=headers,
                limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
                transport=self._transport,
            )
        return self._client

    def _body(self, request: PolicyRequest) -> dict[str, Any]:
        body = dict(request.raw)
        if self.model:
            body["model"] = self.model
        messages = body.get("messages")
        if isinstance(messages, list) and any(
            isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None
            for m in messages
        ):
            body["messages"] = [
                {**m, "content": ""}
                if isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None
                else m
                for m in messages
            ]
        return body

    async def preflight(self) -> None:
        """Make sure the upstream answers at all, before the first rollout: one GET of the
        completions URL, where any HTTP answer (405, 401, 404 …) will do. A connection that
        fails or times out is a :class:`~agent_kit.errors.PolicyError`."""
        probe = min(self.timeout, _PROBE_TIMEOUT_S)
        try:
            response = await self._http().get(self.url, timeout=probe)
            await response.aclose()
        except httpx.HTTPError as exc:
            raise PolicyError(self._unusable(exc, probe)) from None

    async def complete(self, request: PolicyRequest) -> PolicyResult:
        """Forward one turn; raise a JobRuntimeError subclass for any upstream failure."""
        body = self._body(request)
        try:
            if body.get("stream"):
                return await self._stream(request, body)
            return await self._plain(request, body)
        except httpx.HTTPError as exc:
            raise InternalServiceError(self._unusable(exc, self.timeout)) from exc

    def _unusable(self, exc: httpx.HTTPError, timeout: float) -> str:
        """Why the upstream could not serve, in one wording for the preflight and the turns:
        it did not answer within ``timeout`` seconds, or its connection failed."""
        if isinstance(exc, httpx.TimeoutException):
            return (
                f"upstream policy {self.name} did not answer within {timeout:g} s "
                f"({type(exc).__name__})"
            )
        return f"upstream policy {self.name} is unreachable: {type(exc).__name__}: {exc}"

    async def _plain(self, request: PolicyRequest, body: dict[str, Any]) -> PolicyResult:
        response = await self._http().post(self.url, json=body)
        if response.status_code >= 400:
            raise upstream_error(response.status_code, response.content, name=self.name)
        try:
            completion = response.json()
        except ValueError:
            raise InternalServiceError(
                f"upstream policy {self.name} answered non-JSON: {response.text[:200]!r}"
            ) from None
        return self._result(request, completion, None)

    async def _stream(self, request: PolicyRequest, body: dict[str, Any]) -> PolicyResult:
        options = body.get("stream_options")
        options = dict(options) if isinstance(options, dict) else {}
        wants_usage = bool(options.get("include_usage"))
        body["stream_options"] = {**options, "include_usage": True}
        chunks: list[dict[str, Any]] = []
        async with self._http().stream("POST", self.url, json=body) as response:
            if response.status_code >= 400:
                raise upstream_error(response.status_code, await response.aread(), name=self.name)
            if "text/event-stream" not in response.headers.get("content-type", ""):
                # the upstream ignored "stream": take its plain completion
                try:
                    completion = json.loads(await response.aread())
                except ValueError:
                    raise InternalServiceError(
                        f"upstream policy {self.name} answered neither SSE nor JSON"
                    ) from None
                return self._result(request, completion, None)
            async for event in aiter_sse(response.aiter_bytes()):
                data = event.data.strip()
                if data == DONE:
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    raise InternalServiceError(
                        f"upstream policy {self.name} streamed a malformed event: {data[:200]!r}"
                    ) from None
                if not isinstance(chunk, dict) or "error" in chunk:
                    raise InternalServiceError(
                        f"upstream policy {self.name} streamed an error: "
                        f"{_error_text(data.encode())}"
                    )
                chunks.append(chunk)
        if not chunks:
            raise InternalServiceError(f"upstream policy {self.name} streamed no chunks")
        model = str(body.get("model") or "default")
        completion = chunks_to_completion(chunks, model=model)
        if not wants_usage:
            chunks = [c for c in chunks if c.get("choices")]
            for chunk in chunks:
                chunk.pop("usage", None)
        return self._result(request, completion, chunks)

    def _result(
        self, request: PolicyRequest, completion: Any, chunks: list[dict[str, Any]] | None
    ) -> PolicyResult:
        choices = completion.get("choices") if isinstance(completion, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise InternalServiceError(
                f"upstream policy {self.name} answered something that is not a chat "
                f"completion: {json.dumps(completion, default=str)[:200]}"
            )
        assert isinstance(completion, dict)
        reported = _usage(completion.get("usage"))
        if reported is not None:
            usage = Usage(reported[0], reported[1], estimated=False)
        else:
            message = choices[0].get("message")
            usage = Usage(
                estimate_prompt_tokens(request.messages, request.tools, self.tokenizer),
                estimate_completion_tokens(
                    message if isinstance(message, dict) else {}, self.tokenizer
                ),
                estimated=True,
            )
            completion["usage"] = usage.to_openai()
        return PolicyResult(response=completion, usage=usage, chunks=chunks)

    async def aclose(self) -> None:
        """Close the shared HTTP client (a later turn would open a new one)."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


def from_spec(
    rest: str, *, seed: int, base_dir: Path | None = None, settings: Settings = DEFAULTS
) -> OpenAIProxyBackend:
    """The ``openai:URL[#MODEL]`` scheme."""
    return OpenAIProxyBackend.from_spec(rest, settings)
