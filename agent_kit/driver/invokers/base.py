"""What every invoker shares: the :class:`Invoker` protocol, :class:`InvokeResult`, the agent
environment, and the HTTP helpers for ``/invocations``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import httpx

from agent_kit.contract import ENDPOINT_ENV, HEADER_SESSION_ID
from agent_kit.settings import DEFAULTS, env_name
from agent_kit.store.events import LIMIT_REASON
from agent_kit.transport import DONE, decode_sse

__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "MAX_ANSWER_ENV",
    "EventHook",
    "InvokeResult",
    "Invoker",
    "agent_env",
    "answer_too_large",
    "error_text",
    "http_client",
    "parse_response_body",
    "post_invocation",
]

_ACCEPT: Final = "application/json, text/event-stream"
#: Default cap of one agent answer (the body of an invocation's response), read and stored.
DEFAULT_MAX_ANSWER_BYTES: Final = DEFAULTS.max_answer_bytes
#: The variable that sets the cap (bytes; 0 = no cap), named where an answer is cut.
MAX_ANSWER_ENV: Final = env_name("max_answer_bytes")

#: ``on_event(kind, detail)``: invokers report process starts/exits/restarts through it.
EventHook = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class InvokeResult:
    """What one invocation returned: ``status`` (see the module docstring), body or error text."""

    status: str
    body: Any = None
    error: str | None = None
    http_status: int | None = None
    #: The limit the answer ran into (too large to read), which no retry would change.
    limit: str | None = None

    @property
    def ok(self) -> bool:
        """True when the agent answered 2xx."""
        return self.status == "ok"


class Invoker(Protocol):
    """The interface the driver uses to run one rollout on the agent."""

    name: str

    async def start(self) -> None:
        """Get ready to invoke (start processes, check reachability); InvokerError if not."""

    async def invoke(
        self, payload: dict[str, Any], session_id: str, timeout: float
    ) -> InvokeResult:
        """Send one rollout payload; never raises for rollout-level failures."""

    async def aclose(self) -> None:
        """Release every resource (processes, sockets, clients); idempotent."""


def agent_env(
    endpoint: str,
    region: str,
    base: Mapping[str, str] | None = None,
    credentials: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment that points an agent process at an emulator at ``endpoint``.

    Sets ``RFT_RUNTIME_ENDPOINT`` and ``AWS_ENDPOINT_URL_SAGEMAKERJOBRUNTIME`` (so both the
    OpenAI-compatible route and boto3 reach the emulator), ``AWS_REGION``/``AWS_DEFAULT_REGION``,
    and disables the EC2 metadata lookup. ``credentials`` (the run's
    :meth:`~agent_kit.emulator.run_keys.RunKeys.agent_env`) replace any AWS keys of the
    environment, and its session token goes, so every SDK in the agent signs with the keys the
    emulator verifies; without them, dummy keys are supplied when the environment has none.
    """
    env = dict(os.environ if base is None else base)
    env[ENDPOINT_ENV] = endpoint
    env["AWS_ENDPOINT_URL_SAGEMAKERJOBRUNTIME"] = endpoint
    env["AWS_REGION"] = region
    env["AWS_DEFAULT_REGION"] = region
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    if credentials is not None:
        env.update(credentials)
        env.pop("AWS_SESSION_TOKEN", None)
        env.pop("AWS_SECURITY_TOKEN", None)
    elif not env.get("AWS_ACCESS_KEY_ID"):
        env["AWS_ACCESS_KEY_ID"] = "agent-kit-local"
        env["AWS_SECRET_ACCESS_KEY"] = "agent-kit-local"  # noqa: S105 - dummy, lenient only
        env.pop("AWS_SESSION_TOKEN", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def parse_response_body(content_type: str | None, data: bytes) -> Any:
    """Decode an agent's answer: JSON → value; SSE → the list of its events' values (each
    event's data, multi-line data joined by newlines, as JSON if it parses, else the text)."""
    if content_type and "text/event-stream" in content_type:
        events: list[Any] = []
        for event in decode_sse(data):
            text = event.data.strip()
            if not text or text == DONE:
                continue
            try:
                events.append(json.loads(text))
            except ValueError:
                events.append(text)
        return events
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")


def error_text(body: Any, fallback: str) -> str:
    """The agent's error message from an error body (``error``/``message`` keys), else fallback."""
    if isinstance(body, dict):
        for key in ("error", "message", "Message", "errorMessage"):
            if key in body:
                return str(body[key])[:500]
    if isinstance(body, str) and body:
        return body[:500]
    return fallback


def answer_too_large(cap: int, http_status: int | None) -> InvokeResult:
    """The result of an answer longer than ``cap`` bytes: nothing of it is kept, and its
    ``limit`` makes the rollout's outcome a ``limit`` unless the agent rewarded it."""
    limit = f"the agent's answer exceeded the limit of {cap} bytes ({MAX_ANSWER_ENV})"
    return InvokeResult(
        "error", http_status=http_status, error=f"{LIMIT_REASON}: {limit}", limit=limit
    )


async def _read_capped(response: httpx.Response, cap: int | None) -> bytes | None:
    """The body of ``response``, read chunk by chunk; None as soon as it passes ``cap`` bytes
    (announced by its Content-Length or counted), without reading the rest."""
    if cap is not None:
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > cap:
            return None
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if cap is not None and size > cap:
            return None
        parts.append(chunk)
    return b"".join(parts)


async def post_invocation(
    client: httpx.AsyncClient,
    url: str,
    payload: dict[str, Any],
    session_id: str,
    timeout: float,
    max_bytes: int | None = DEFAULT_MAX_ANSWER_BYTES,
) -> InvokeResult:
    """POST a payload to an agent's ``/invocations``; transport failures become results, and
    an answer longer than ``max_bytes`` (None: no cap) is cut off there
    (:func:`answer_too_large`)."""
    try:
        async with client.stream(
            "POST",
            url,
            json=payload,
            headers={
                HEADER_SESSION_ID: session_id,
                "Accept": _ACCEPT,
            },
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        ) as response:
            data = await _read_capped(response, max_bytes)
    except httpx.TimeoutException as exc:
        if isinstance(exc, httpx.ConnectTimeout):
            return InvokeResult("unreachable", error=f"cannot connect to the agent at {url}")
        return InvokeResult("timeout", error=f"no answer from the agent within {timeout:g} s")
    except httpx.TransportError as exc:
        return InvokeResult(
            "unreachable", error=f"the agent connection failed: {type(exc).__name__}: {exc}"
        )
    if data is None:  # only a cap cuts an answer off
        return answer_too_large(max_bytes or 0, response.status_code)
    body = parse_response_body(response.headers.get("content-type"), data)
    if response.is_success:
        return InvokeResult("ok", body=body, http_status=response.status_code)
    return InvokeResult(
        "error",
        body=body,
        http_status=response.status_code,
        error=f"agent answered HTTP {response.status_code}: "
        + error_text(body, response.reason_phrase),
    )


def http_client(concurrency: int) -> httpx.AsyncClient:
    """An httpx client sized for ``concurrency`` rollouts; each request sets its own timeout."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=max(concurrency, 10))
    # Every request passes its own timeout (the rollout's); the client default is never used.
    return httpx.AsyncClient(limits=limits, timeout=None, trust_env=False)  # noqa: S113
