"""The package's one SSE decoder (agent_kit.transport) and the two tooling readers built on it: the
invokers' response body parser and the emulator's upstream policy (served in process)."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent_kit.driver.invokers import parse_response_body
from agent_kit.emulator.policies.upstream import OpenAIProxyBackend
from agent_kit.emulator.schemas import PolicyRequest
from agent_kit.transport import ServerSentEvent, SSEDecoder, aiter_sse, decode_sse

STREAM = (
    b"\xef\xbb\xbf: a comment\r\n"
    b"retry: 1500\r\n"
    b'data: {"a":\r\n'
    b"data:  1}\r\n"
    b"\r\n"
    b"event: update\n"
    b"id: 7\n"
    b"data\n"
    b"data: second line\n"
    b"\n"
    b"id: 8\r"
    b"unknown: field\r"
    b": only a comment and an id: no event\r"
    b"\r"
    b"data: after id\r\r"
    b"event: tail\n"
    b"data: no blank line at the end"
)
EXPECTED = [
    ServerSentEvent('{"a":\n 1}', "message", None, 1500),
    ServerSentEvent("\nsecond line", "update", "7", None),
    ServerSentEvent("after id", "message", "8", None),
    ServerSentEvent("no blank line at the end", "tail", "8", None),
]


def _decode_split(data: bytes, cuts: list[int]) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    last = 0
    for cut in [*cuts, len(data)]:
        events += decoder.feed_events(data[last:cut])
        last = cut
    return events + decoder.close_events()


def test_fields_multiline_data_comments_and_line_ends() -> None:
    """Multi-line data joins with "\\n" (one space after the colon stripped, the rest kept);
    event/id/retry are read, the id persists; comments, unknown fields, a BOM and an event
    without data are skipped; CRLF, CR and LF all end lines; a last unterminated event counts."""
    assert decode_sse(STREAM) == EXPECTED
    decoder = SSEDecoder()
    assert [e.data for e in EXPECTED] == decoder.feed(STREAM) + decoder.close()


def test_same_events_however_the_bytes_are_split() -> None:
    """Every single split point (including inside the BOM and between CR and LF) and random
    multi-splits decode to the same events as the whole body."""
    for cut in range(len(STREAM) + 1):
        assert _decode_split(STREAM, [cut]) == EXPECTED, cut
    rng = random.Random(7)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(STREAM)), rng.randint(2, 12)))
        assert _decode_split(STREAM, cuts) == EXPECTED, cuts
    byte_by_byte = SSEDecoder()
    events = [e for b in STREAM for e in byte_by_byte.feed_events(bytes([b]))]
    assert events + byte_by_byte.close_events() == EXPECTED


def test_crlf_split_between_cr_and_lf_is_one_line_end() -> None:
    """A CR ending one chunk and the LF starting the next are one line end, not two (which
    would dispatch the event early and split it in two)."""
    decoder = SSEDecoder()
    assert decoder.feed_events(b"data: a\r") == []
    assert decoder.feed_events(b"\ndata: b\r") == []
    assert decoder.feed_events(b"\n\r\n") == [ServerSentEvent("a\nb")]


async def test_aiter_sse_over_an_async_byte_stream() -> None:
    """aiter_sse yields the same events from an async iterator of arbitrary chunks."""

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(STREAM), 5):
            yield STREAM[i : i + 5]

    assert [event async for event in aiter_sse(chunks())] == EXPECTED


def test_invoker_body_parser_joins_multiline_events() -> None:
    """An agent's SSE answer with a JSON value spread over two data lines is one value."""
    body = b'data: {"reward":\ndata: 0.5}\n\n: keep-alive\n\ndata: "x"\r\n\r\ndata: [DONE]\n\n'
    assert parse_response_body("text/event-stream", body) == [{"reward": 0.5}, "x"]


def _request(raw: dict[str, Any]) -> PolicyRequest:
    return PolicyRequest(
        messages=tuple(raw["messages"]),
        tools=(),
        temperature=1.0,
        top_p=1.0,
        max_tokens=None,
        rng=random.Random(0),
        trajectory_id="t",
        job_arn="arn",
        turn=0,
        raw=raw,
    )


async def test_upstream_policy_reads_multiline_events() -> None:
    """The upstream policy assembles a stream whose chunks span several data lines, with
    comments, event/id fields and CRLF line ends (served in process, no socket)."""
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
        {"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}},
    ]

    async def chat(request: Request) -> Response:
        lines = [": upstream warming up"]
        for i, chunk in enumerate(chunks):
            text = json.dumps(chunk, indent=1)  # several lines: one data: line each
            lines += [f"id: {i}", "event: chunk", *(f"data: {line}" for line in text.split("\n"))]
            lines.append("")
        lines += ["data: [DONE]", "", ""]
        return Response("\r\n".join(lines).encode(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    backend = OpenAIProxyBackend(
        "http://upstream.test/v1", model="m", transport=httpx.ASGITransport(app=app)
    )
    raw = {"model": "default", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    try:
        result = await backend.complete(_request(raw))
    finally:
        await backend.aclose()
    assert result.response["choices"][0]["message"]["content"] == "Hello"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (4, 2)
    assert result.usage.estimated is False
    assert result.chunks is not None
    assert len(result.chunks) == 2  # the caller did not ask for the usage chunk
