"""The probes of ``agent-kit doctor endpoint`` (the table is in :mod:`agent_kit.doctor.endpoint`).

Each probe sends its small request through a :class:`~agent_kit.doctor.probing.ProbeClient` and
returns one :class:`~agent_kit.doctor.probing.Probe`. :data:`CHECKS` lists the uniform ones in
the order they run; :func:`probe_models` (which also picks the model) runs first and
:func:`probe_latency` (a burst) last.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import httpx

from agent_kit.doctor.probing import Probe, ProbeClient, error_text, refused, reply, short

__all__ = ["CHECKS", "probe_latency", "probe_models"]

_WEATHER: Final = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
_TIME: Final = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current local time of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
_MAX_TOKENS: Final = 8
_TEXT_CALL_MARKERS: Final = ("<tool_call>", '"arguments"', '"name"', "get_weather(", "[TOOL_CALLS]")


async def probe_models(
    client: ProbeClient, models_url: str, given: str | None
) -> tuple[Probe, str]:
    """The ``models`` probe and the model to probe: ``given``, else the first listed, else
    ``default``."""
    try:
        response = await client.http.get(models_url)
    except httpx.HTTPError as exc:
        response = None
        error = f"{type(exc).__name__}: {exc}"
    if response is None or response.status_code != 200:
        detail = error if response is None else error_text(response)
        model = given or "default"
        return (
            Probe(
                "models",
                "warn" if given is None else "pass",
                f"GET /v1/models did not answer ({detail}); probing model {model!r}",
                "pass --model with the name the server serves" if given is None else "",
                {"error": detail, "model": model},
            ),
            model,
        )
    try:
        listed = [m for m in response.json().get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError):
        listed = []
    ids = [str(m.get("id")) for m in listed if m.get("id") is not None]
    model = given or (ids[0] if ids else "default")
    chosen = next((m for m in listed if m.get("id") == model), {})
    context = next(
        (
            chosen[k]
            for k in ("max_model_len", "context_length", "context_window", "n_ctx")
            if isinstance(chosen.get(k), int)
        ),
        None,
    )
    evidence = {"models": ids[:10], "model": model, "context_length": context}
    if given is not None and ids and given not in ids:
        return (
            Probe(
                "models",
                "warn",
                f"model {given!r} is not listed (the server lists {', '.join(ids[:5])})",
                "use a listed model name",
                evidence,
            ),
            model,
        )
    ctx = f", context length {context}" if context else ", context length not reported"
    return Probe("models", "pass", f"probing model {model!r}{ctx}", "", evidence), model


def _looks_like_text_call(content: Any) -> bool:
    return isinstance(content, str) and any(m in content for m in _TEXT_CALL_MARKERS)


async def _tool_calls(client: ProbeClient) -> Probe:
    body = client.body(
        "What is the weather in Paris right now? Call the get_weather tool.",
        tools=[_WEATHER],
        temperature=0,
        max_tokens=256,
    )
    response = await client.post(body)
    if response.status_code != 200:
        return refused(
            "tool_calls",
            "a request with tools",
            response,
            "enable tool calling on the server (vLLM: --enable-auto-tool-choice "
            "--tool-call-parser …)",
        )
    message = reply(response)
    calls = message.get("tool_calls") or []
    content = message.get("content")
    if calls:
        bad = []
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            try:
                args = json.loads((function or {}).get("arguments") or "")
                if not isinstance(args, dict):
                    raise ValueError
            except (TypeError, ValueError):
                bad.append(call)
        evidence = {"tool_calls": calls, "content": content}
        if bad:
            return Probe(
                "tool_calls",
                "fail",
                f"tool_calls arguments are not a JSON object: {short(bad[0])}",
                "fix the server's tool-call parser so arguments are a JSON object string",
                evidence,
            )
        name = calls[0].get("function", {}).get("name")
        return Probe("tool_calls", "pass", f"structured tool_calls ({name})", "", evidence)
    evidence = {"tool_calls": None, "content": content}
    if _looks_like_text_call(content):
        return Probe(
            "tool_calls",
            "fail",
            f"the tool call came back as text in content: {short(content)}",
            "configure the server's tool-call parser for this model (vLLM --tool-call-parser, "
            "llama.cpp --jinja); text calls are only recovered if the environment parses them",
            evidence,
        )
    return Probe(
        "tool_calls",
        "warn",
        f"no tool call, text answer: {short(content)}",
        "check the model's chat template supports tools",
        evidence,
    )


async def _parallel(client: ProbeClient) -> Probe:
    body = client.body(
        "Call get_weather for Paris and get_time for Tokyo, both at once in one reply.",
        tools=[_WEATHER, _TIME],
        temperature=0,
        max_tokens=256,
    )
    response = await client.post(body)
    if response.status_code != 200:
        return refused("parallel_calls", "a request with two tools", response)
    calls = reply(response).get("tool_calls") or []
    evidence = {
        "tool_calls": len(calls),
        "names": [c.get("function", {}).get("name") for c in calls],
    }
    if len(calls) >= 2:
        return Probe(
            "parallel_calls", "pass", f"{len(calls)} tool calls in one message", "", evidence
        )
    return Probe(
        "parallel_calls",
        "warn",
        f"{len(calls)} tool call(s) where two were asked for in one message",
        "fine if your agent needs one call per turn; else check the template's parallel calls",
        evidence,
    )


async def _stream_usage(client: ProbeClient) -> Probe:
    body = client.body(
        "Say hello in three words.",
        stream=True,
        stream_options={"include_usage": True},
        temperature=0,
        max_tokens=32,
    )
    chunks: list[Any] = []
    done = False
    async with client.http.stream("POST", client.chat_url, json=body) as response:
        if response.status_code != 200:
            await response.aread()
            return refused("stream_usage", "a streamed request", response)
        kind = response.headers.get("content-type", "")
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            try:
                chunks.append(json.loads(data))
            except ValueError:
                chunks.append({"unparsed": data[:80]})
    usage = next(
        (c["usage"] for c in reversed(chunks) if isinstance(c, dict) and c.get("usage")), None
    )
    evidence = {"content_type": kind, "chunks": len(chunks), "done": done, "usage": usage}
    if not chunks:
        return Probe("stream_usage", "fail", "the stream carried no data chunk", "", evidence)
    if usage is None:
        return Probe(
            "stream_usage",
            "fail",
            f"{len(chunks)} chunks and no usage chunk despite stream_options.include_usage",
            "the service counts tokens from the final usage chunk: upgrade the server or enable "
            "usage reporting in streams (vLLM: --enable-force-include-usage)",
            evidence,
        )
    if not done:
        return Probe(
            "stream_usage",
            "warn",
            "usage chunk present, but the stream did not end [DONE]",
            "",
            evidence,
        )
    return Probe(
        "stream_usage",
        "pass",
        f"{len(chunks)} chunks, final usage {usage.get('prompt_tokens')} + "
        f"{usage.get('completion_tokens')} tokens, [DONE]",
        "",
        evidence,
    )


async def _reasoning(client: ProbeClient) -> Probe:
    body = client.body("Answer with one word: yes.", reasoning_effort="low", max_tokens=64)
    response = await client.post(body)
    evidence: dict[str, Any] = {"status": response.status_code}
    if response.status_code == 200:
        message = reply(response)
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        evidence["reasoning_returned"] = bool(reasoning)
        return Probe("reasoning", "pass", "reasoning_effort accepted", "", evidence)
    evidence["error"] = response.text[:300]
    return Probe(
        "reasoning",
        "fail" if 400 <= response.status_code < 500 else "warn",
        f"reasoning_effort rejected: {error_text(response)}",
        "MTRL sends reasoning_effort: make the server accept or ignore it (or drop it in a proxy)",
        evidence,
    )


async def _max_tokens(client: ProbeClient) -> Probe:
    body = client.body(
        "Write a long story about a lighthouse keeper, at least 300 words.",
        max_tokens=_MAX_TOKENS,
        temperature=0,
    )
    response = await client.post(body)
    if response.status_code != 200:
        return refused("max_tokens", "a request with max_tokens", response)
    data = response.json()
    usage = data.get("usage") if isinstance(data, dict) else None
    finish = (data.get("choices") or [{}])[0].get("finish_reason")
    content = reply(response).get("content") or ""
    completion = usage.get("completion_tokens") if isinstance(usage, dict) else None
    evidence = {
        "max_tokens": _MAX_TOKENS,
        "completion_tokens": completion,
        "finish_reason": finish,
        "content_chars": len(content),
    }
    if not isinstance(completion, int):
        return Probe(
            "max_tokens",
            "warn",
            f"no usage in the answer; {len(content)} characters came back",
            "the service needs usage on every completion",
            evidence,
        )
    if completion > _MAX_TOKENS:
        return Probe(
            "max_tokens",
            "fail",
            f"max_tokens {_MAX_TOKENS} ignored: {completion} completion tokens",
            "the job's max_tokens will not bound episodes (cost, context): fix the server",
            evidence,
        )
    capped = finish == "length" or completion == _MAX_TOKENS
    note = "" if capped else " — the answer ended before the cap, so the cap was not exercised"
    return Probe(
        "max_tokens",
        "pass",
        f"{completion} ≤ {_MAX_TOKENS} completion tokens (finish_reason {finish}){note}",
        "",
        evidence,
    )


async def _temperature(client: ProbeClient) -> Probe:
    body = client.body("Name one colour.", temperature=0, max_tokens=16, seed=7)
    answers: list[Any] = []
    for _ in range(2):
        response = await client.post(body)
        if response.status_code != 200:
            return refused("temperature", "a temperature-0 request", response)
        message = reply(response)
        answers.append([message.get("content"), message.get("tool_calls")])
    evidence = {"answers": answers}
    if answers[0] == answers[1]:
        return Probe("temperature", "pass", "temperature 0 is deterministic", "", evidence)
    return Probe(
        "temperature",
        "warn",
        f"temperature 0 gave two answers: {short(answers[0][0])} / {short(answers[1][0])}",
        "evaluation at temperature 0 will not be reproducible (batching or sampling noise)",
        evidence,
    )


async def probe_latency(client: ProbeClient, burst: int) -> Probe:
    """The ``latency`` probe: ``burst`` concurrent requests, their p50 / p95."""

    async def one() -> tuple[float, int | str]:
        started = time.perf_counter()
        try:
            response = await client.post(client.body("Say ok.", max_tokens=8))
            status: int | str = response.status_code
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        return time.perf_counter() - started, status

    results = await asyncio.gather(*(one() for _ in range(burst)))
    latencies = sorted(t for t, _ in results)
    statuses = [s for _, s in results]
    ok = [s for s in statuses if s == 200]
    cuts = statistics.quantiles(latencies, n=20, method="inclusive") if len(latencies) > 1 else None
    p50 = statistics.median(latencies)
    p95 = cuts[18] if cuts else latencies[0]
    evidence = {
        "burst": burst,
        "ok": len(ok),
        "statuses": {str(s): statuses.count(s) for s in dict.fromkeys(statuses)},
        "p50_s": round(p50, 4),
        "p95_s": round(p95, 4),
    }
    detail = f"{len(ok)}/{burst} ok, p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms"
    failed = [s for s in statuses if s != 200 and s != 429]
    if failed:
        return Probe(
            "latency",
            "fail",
            f"{detail}; failures: {failed[:3]}",
            "the server fails under concurrent load: lower the job's concurrency or scale it",
            evidence,
        )
    if len(ok) < burst:
        return Probe(
            "latency",
            "warn",
            f"{detail}; {burst - len(ok)} throttled (429)",
            "the server throttles this burst: the agent's policy retries must cover it",
            evidence,
        )
    return Probe("latency", "pass", detail, "", evidence)


#: The probes run after ``models`` and before ``latency``, in order: name → check.
CHECKS: Final[tuple[tuple[str, Callable[[ProbeClient], Awaitable[Probe]]], ...]] = (
    ("tool_calls", _tool_calls),
    ("parallel_calls", _parallel),
    ("stream_usage", _stream_usage),
    ("reasoning", _reasoning),
    ("max_tokens", _max_tokens),
    ("temperature", _temperature),
)
