"""Wire encodings of a policy response: OpenAI SSE chunks and AWS event-stream frames.

Everything here is pure and allocation-light: the server calls it once per streamed turn.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable
from typing import Any, Final

__all__ = [
    "DONE",
    "chunks_from_completion",
    "dumps",
    "encode_event",
    "eventstream_body",
    "sse_body",
]

#: The SSE terminator OpenAI sends after the last chunk.
DONE: Final = b"data: [DONE]\n\n"

_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON bytes (no NaN: a non-finite float raises ValueError)."""
    return _encoder.encode(value).encode("utf-8")


def _parts(text: str, split: bool) -> tuple[str, ...]:
    if not split or len(text) < 2:
        return (text,)
    mid = len(text) // 2
    return (text[:mid], text[mid:])


def chunks_from_completion(
    completion: dict[str, Any], *, include_usage: bool, split: bool = False
) -> list[dict[str, Any]]:
    """Split a ``chat.completion`` into the ``chat.completion.chunk`` sequence OpenAI streams.

    A chunk with the role (and, unsplit, the reasoning and text), one chunk per tool call
    (``index``, ``id``, ``type``, name, arguments), then a chunk with an empty delta and the
    ``finish_reason``; with ``include_usage`` a final chunk with ``choices: []`` and the usage
    follows the finish chunk, as OpenAI orders it. ``split=True`` cuts reasoning, text and each
    tool call's arguments into two deltas, so a client must concatenate (used by tests).
    """
    base = {
        "id": completion.get("id", "chatcmpl-emulator"),
        "object": "chat.completion.chunk",
        "created": completion.get("created", 0),
        "model": completion.get("model", "default"),
    }
    choices = completion.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    deltas: list[dict[str, Any]] = []

    first: dict[str, Any] = {"role": "assistant"}
    reasoning = message.get("reasoning_content")
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    if split:
        first["content"] = ""
        deltas.append(first)
        if reasoning:
            deltas.extend({"reasoning_content": p} for p in _parts(reasoning, split))
        if text:
            deltas.extend({"content": p} for p in _parts(text, split))
    else:
        if reasoning:
            first["reasoning_content"] = reasoning
        first["content"] = text
        deltas.append(first)

    for i, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        head, *rest = _parts(function.get("arguments") or "", split)
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call.get("id"),
                        "type": "function",
                        "function": {"name": function.get("name"), "arguments": head},
                    }
                ]
            }
        )
        deltas.extend({"tool_calls": [{"index": i, "function": {"arguments": p}}]} for p in rest)

    out = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        for delta in deltas
    ]
    finish = choice.get("finish_reason") or "stop"
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if include_usage and completion.get("usage") is not None:
        out.append({**base, "choices": [], "usage": completion["usage"]})
    return out


def sse_body(chunks: Iterable[dict[str, Any]]) -> bytes:
    """``data: {chunk}\\n\\n`` per chunk, then ``data: [DONE]\\n\\n``, as one byte string."""
    parts = [b"data: " + dumps(c) + b"\n\n" for c in chunks]
    parts.append(DONE)
    return b"".join(parts)


def _header(name: str, value: str) -> bytes:
    n, v = name.encode(), value.encode()
    return struct.pack(">B", len(n)) + n + b"\x07" + struct.pack(">H", len(v)) + v


def encode_event(
    event_type: str,
    payload: bytes,
    *,
    message_type: str = "event",
    type_key: str = ":event-type",
    content_type: str = "application/octet-stream",
) -> bytes:
    """One ``application/vnd.amazon.eventstream`` frame (prelude, headers, payload, CRCs)."""
    headers = (
        _header(type_key, event_type)
        + _header(":content-type", content_type)
        + _header(":message-type", message_type)
    )
    prelude = struct.pack(">II", 12 + len(headers) + len(payload) + 4, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + payload
    return message + struct.pack(">I", zlib.crc32(message) & 0xFFFFFFFF)


def eventstream_body(chunks: Iterable[dict[str, Any]]) -> bytes:
    """The SSE lines of :func:`sse_body`, each wrapped in a ``PayloadPart`` event frame."""
    frames = [encode_event("PayloadPart", b"data: " + dumps(c) + b"\n\n") for c in chunks]
    frames.append(encode_event("PayloadPart", DONE))
    return b"".join(frames)
