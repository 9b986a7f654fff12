"""What a probe of ``agent-kit doctor endpoint`` is and how it asks (the probes are in
:mod:`agent_kit.doctor.endpoint_probes`, the run and its report in
:mod:`agent_kit.doctor.endpoint`).

A :class:`Probe` is one check's verdict (``pass``, ``warn`` or ``fail``) with a one-line detail,
its evidence and a fix hint; a :class:`ProbeClient` sends a probe's small chat request (the run's
headers and timeout, the model probed); :func:`reply` reads the message of an answer, and
:func:`refused` is the ``fail`` of a probe whose request the server turned down.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import httpx

from agent_kit.doctor.findings import fields_document

__all__ = ["Probe", "ProbeClient", "ProbeStatus", "error_text", "refused", "reply", "short"]

#: The verdict of one probe.
ProbeStatus = Literal["pass", "warn", "fail"]

_SYSTEM: Final = {"role": "system", "content": "You are a helpful assistant. Use the tools."}


@dataclass(frozen=True)
class Probe:
    """One check: its verdict, a one-line detail, the evidence and a fix hint."""

    name: str
    status: ProbeStatus
    detail: str
    hint: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return fields_document(self)


class ProbeClient:
    """The probes' requests: ``http`` (with the run's headers and timeout), the chat
    completions URL and the model probed."""

    def __init__(self, http: httpx.AsyncClient, chat_url: str, model: str) -> None:
        self.http = http
        self.chat_url = chat_url
        self.model = model

    def body(self, user: str, **extra: Any) -> dict[str, Any]:
        """A chat body: the system message, ``user``'s message and ``extra`` fields."""
        return {
            "model": self.model,
            "messages": [_SYSTEM, {"role": "user", "content": user}],
            **extra,
        }

    async def post(self, body: dict[str, Any]) -> httpx.Response:
        """POST ``body`` to the chat completions URL."""
        return await self.http.post(self.chat_url, json=body)


def reply(response: httpx.Response) -> dict[str, Any]:
    """The message of a chat answer (``choices[0].message``); ValueError when it has none."""
    data = response.json()
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("the answer has no choices[0]")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ValueError("choices[0] has no message")
    return message


def error_text(response: httpx.Response) -> str:
    """A refused request on one line: its HTTP status and the start of its body."""
    text = response.text.strip().replace("\n", " ")
    return f"HTTP {response.status_code}: {text[:200]}"


def short(value: Any, limit: int = 160) -> str:
    """``value`` (text, else its JSON) cut to ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def refused(name: str, request: str, response: httpx.Response, hint: str = "") -> Probe:
    """The ``fail`` of the probe ``name`` whose ``request`` (``a request with tools``) the
    server refused, its HTTP status the evidence."""
    return Probe(
        name,
        "fail",
        f"{request} failed: {error_text(response)}",
        hint,
        {"status": response.status_code},
    )
