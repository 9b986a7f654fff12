"""``agent-kit doctor endpoint``: probe an OpenAI-compatible server as MTRL's policy calls it.

:func:`probe_endpoint` sends a handful of small ``POST /v1/chat/completions`` requests (httpx) and
returns one :class:`Probe` per check, each ``pass``, ``warn`` or ``fail`` with its evidence:

==================  ==============================================================================
``models``          ``GET /v1/models`` answers; the model to probe (``--model``, else the first
                    listed, else ``default``) and the context length it reports, if any
``tool_calls``      a request offering one tool gets a structured ``tool_calls`` entry with JSON
                    arguments (fail: the call came back as text in ``content``)
``parallel_calls``  asked for two independent calls, the server returns two in one message
``stream_usage``    ``stream: true`` + ``stream_options.include_usage`` ends with a usage chunk and
                    ``data: [DONE]`` (fail: no usage chunk — the service bills from it)
``reasoning``       ``reasoning_effort`` is accepted (fail: rejected with a 4xx)
``max_tokens``      ``max_tokens: 8`` caps the completion (fail: more tokens came back)
``temperature``     two identical requests at temperature 0 give the same answer (warn otherwise)
``latency``         a burst of N concurrent requests all succeed; p50 / p95 latency (fail: any
                    5xx or transport error; warn: 429)
==================  ==============================================================================

A check that cannot run (the server failed an earlier request) is a ``fail`` with the reason.
Three modules, one layer each: :mod:`agent_kit.doctor.probing` is what a probe is and how it
asks (:class:`~agent_kit.doctor.probing.Probe`, the client, reading an answer),
:mod:`agent_kit.doctor.endpoint_probes` the probes, and this module runs them against one URL
and reports (:class:`EndpointReport`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from agent_kit.doctor.endpoint_probes import CHECKS, probe_latency, probe_models
from agent_kit.doctor.probing import Probe, ProbeClient
from agent_kit.errors import UsageError

__all__ = ["EndpointReport", "probe_endpoint"]


@dataclass(frozen=True)
class EndpointReport:
    """Every probe of one endpoint."""

    url: str
    model: str
    probes: tuple[Probe, ...]

    @property
    def ok(self) -> bool:
        """True when no probe failed."""
        return not any(p.status == "fail" for p in self.probes)

    def probe(self, name: str) -> Probe:
        """The probe called ``name`` (KeyError when there is none)."""
        for p in self.probes:
            if p.name == name:
                return p
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``--json``)."""
        return {
            "schema": "agent_kit.doctor.endpoint/1",
            "url": self.url,
            "model": self.model,
            "ok": self.ok,
            "probes": [p.to_dict() for p in self.probes],
        }


def _urls(url: str) -> tuple[str, str]:
    """(chat completions URL, models URL) from a base URL, a ``…/v1`` URL or the full route."""
    base = url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise UsageError(f"endpoint URL must start with http:// or https://, got {url!r}")
    if base.endswith("/chat/completions"):
        base = base[: -len("/chat/completions")]
    elif not base.endswith("/v1"):
        base += "/v1"
    return base + "/chat/completions", base + "/models"


async def _run(
    url: str,
    model: str | None,
    api_key: str | None,
    headers: Mapping[str, str],
    burst: int,
    timeout: float,
) -> EndpointReport:
    chat_url, models_url = _urls(url)
    sent = {k.lower(): v for k, v in headers.items()}
    if api_key is not None:
        sent["authorization"] = f"Bearer {api_key}"
    async with httpx.AsyncClient(headers=sent, timeout=timeout) as http:
        client = ProbeClient(http, chat_url, model or "default")
        probe, client.model = await probe_models(client, models_url, model)
        probes = [probe]
        for name, check in CHECKS:
            probes.append(await _guarded(name, check(client)))
        probes.append(await _guarded("latency", probe_latency(client, burst)))
    return EndpointReport(url=chat_url, model=client.model, probes=tuple(probes))


async def _guarded(name: str, check: Any) -> Probe:
    """Run one probe; a transport error or an unreadable answer is its ``fail``."""
    try:
        probe: Probe = await check
    except httpx.HTTPError as exc:
        return Probe(name, "fail", f"request failed: {type(exc).__name__}: {exc}", "", {})
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return Probe(name, "fail", f"unreadable answer: {type(exc).__name__}: {exc}", "", {})
    return probe


def probe_endpoint(
    url: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    burst: int = 8,
    timeout: float = 60.0,
) -> EndpointReport:
    """Probe the OpenAI-compatible server at ``url`` (see the module docstring).

    ``url`` is the server's base (``http://host:port``), its ``…/v1`` or the full
    ``…/v1/chat/completions``; ``api_key`` is sent as a Bearer token and ``headers`` with every
    request. Not usable from inside a running event loop.
    """
    if burst < 1:
        raise UsageError(f"--burst must be ≥ 1, got {burst}")
    return asyncio.run(_run(url, model, api_key, headers or {}, burst, timeout))
