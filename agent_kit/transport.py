"""Wire helpers of the policy transports: decoding, error mapping, the injected chat clients.

- :class:`SSEDecoder`: the package's one incremental ``text/event-stream`` decoder, giving
  :class:`ServerSentEvent` s (multi-line ``data`` joined by newlines, ``event``/``id``/``retry``
  fields, comments skipped, ``\\n`` / ``\\r\\n`` / ``\\r`` line ends split anywhere across
  chunks); :func:`decode_sse` for a whole body, :func:`aiter_sse` over an async byte stream.
- :class:`EventStreamDecoder`: ``application/vnd.amazon.eventstream`` frames, decoded by
  botocore's :class:`~botocore.eventstream.EventStreamBuffer`; ``PayloadPart`` payloads are
  returned (they carry SSE bytes), exception/error frames raise :class:`PolicyError`.
- :func:`parse_chunk` / :func:`parse_completion`: one SSE ``data:`` payload / one JSON body into
  the openai types Strands' ``OpenAIModel`` reads; anything else is a :class:`PolicyError`.
- :class:`OpenAIChat` / :class:`SampleChat`: objects with ``.chat.completions.create(**request)``
  that Strands' ``OpenAIModel(client=...)`` calls — over an AsyncOpenAI, or over boto3
  ``sample`` / ``sample_with_response_stream`` — mapping every failure through
  :func:`policy_error` to a readable :class:`PolicyError`.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import httpx
from botocore.eventstream import EventStreamBuffer, ParserError
from botocore.exceptions import BotoCoreError, ClientError, ReadTimeoutError

from agent_kit.contract import RolloutMetadata
from agent_kit.errors import PolicyError

if TYPE_CHECKING:  # openai is imported where it is used: the CLI starts without it (~0.5 s)
    import openai
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

__all__ = [
    "DONE",
    "EventStreamDecoder",
    "OpenAIChat",
    "SSEDecoder",
    "SampleChat",
    "ServerSentEvent",
    "aiter_sse",
    "check_completion",
    "decode_sse",
    "guard_stream",
    "parse_chunk",
    "parse_completion",
    "policy_error",
    "sample_chunks",
]

#: The OpenAI end-of-stream sentinel (``data: [DONE]``).
DONE: Final = "[DONE]"
_SNIPPET: Final = 200
_READ_SIZE: Final = 16_384


def _snippet(data: str | bytes) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched ``text/event-stream`` event (WHATWG HTML §9.2 field semantics).

    ``data`` is the event's ``data:`` lines joined with ``"\\n"``; ``event`` its type
    (``"message"`` when the stream names none); ``id`` the last event id seen so far on the
    stream (``None`` before any); ``retry`` the reconnection time of this event, if it set one.
    """

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Incremental ``text/event-stream`` decoder: feed bytes, get whole events.

    Lines may be split anywhere across chunks and end in ``\\n``, ``\\r\\n`` or ``\\r``; a
    leading BOM is skipped; comment lines (``:``…) and unknown fields are ignored; ``data:``
    lines of one event are joined with ``"\\n"``; an event is dispatched at a blank line, and
    one without any ``data`` line is not dispatched (as in a browser's EventSource). The
    one decoder of the package: the policy transports, the emulator's upstream policy and
    the invokers all read SSE through it.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self._retry: int | None = None
        self._last_id: str | None = None

    def feed_events(self, chunk: bytes) -> list[ServerSentEvent]:
        """Consume ``chunk``; return the events it completed, in order."""
        buffer = self._buffer + chunk
        if not self._started:
            if len(buffer) < 3 and b"\xef\xbb\xbf".startswith(buffer):
                self._buffer = buffer  # maybe the start of a BOM: wait for more
                return []
            buffer = buffer.removeprefix(b"\xef\xbb\xbf")
            self._started = True
        events: list[ServerSentEvent] = []
        start = 0
        while True:
            lf = buffer.find(b"\n", start)
            cr = buffer.find(b"\r", start, lf if lf >= 0 else len(buffer))
            if cr >= 0:
                if cr == len(buffer) - 1:
                    break  # a CR at the end may be the first half of a CRLF
                end, after = cr, cr + 2 if buffer[cr + 1 : cr + 2] == b"\n" else cr + 1
            elif lf >= 0:
                end, after = lf, lf + 1
            else:
                break
            self._line(buffer[start:end], events)
            start = after
        self._buffer = buffer[start:]
        return events

    def close_events(self) -> list[ServerSentEvent]:
        """End of stream: the event of a last block that had no blank line after it."""
        events: list[ServerSentEvent] = []
        tail = self._buffer.removesuffix(b"\r")
        if tail:
            self._line(tail, events)
        self._buffer = b""
        self._line(b"", events)
        return events

    def feed(self, chunk: bytes) -> list[str]:
        """:meth:`feed_events`, returning only each event's ``data``."""
        return [event.data for event in self.feed_events(chunk)]

    def close(self) -> list[str]:
        """:meth:`close_events`, returning only each event's ``data``."""
        return [event.data for event in self.close_events()]

    def _line(self, line: bytes, events: list[ServerSentEvent]) -> None:
        if not line:
            if self._data:
                events.append(
                    ServerSentEvent(
                        "\n".join(self._data), self._event or "message", self._last_id, self._retry
                    )
                )
            self._data, self._event, self._retry = [], "", None
            return
        if line.startswith(b":"):
            return
        name, colon, raw = line.partition(b":")
        if colon and raw.startswith(b" "):
            raw = raw[1:]
        value = raw.decode("utf-8", "replace")
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value
        elif name == b"id":
            if "\0" not in value:
                self._last_id = value
        elif name == b"retry" and value.isascii() and value.isdigit():
            self._retry = int(value)


def decode_sse(data: bytes) -> list[ServerSentEvent]:
    """Every event of a complete ``text/event-stream`` body."""
    decoder = SSEDecoder()
    return decoder.feed_events(data) + decoder.close_events()


async def aiter_sse(chunks: AsyncIterator[bytes]) -> AsyncIterator[ServerSentEvent]:
    """The events of a byte stream (e.g. ``httpx.Response.aiter_bytes()``), as they complete."""
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed_events(chunk):
            yield event
    for event in decoder.close_events():
        yield event


class EventStreamDecoder:
    """Feed bytes of an AWS event stream, get the payload bytes of its ``PayloadPart`` events."""

    def __init__(self) -> None:
        self._buffer = EventStreamBuffer()

    def feed(self, chunk: bytes) -> list[bytes]:
        """Consume ``chunk``; return payloads of completed events; PolicyError on an error frame."""
        self._buffer.add_data(chunk)
        parts: list[bytes] = []
        try:
            for message in self._buffer:
                headers = message.headers
                kind = headers.get(":message-type", "event")
                if kind == "exception":
                    name = headers.get(":exception-type", "exception")
                    raise PolicyError(
                        f"policy stream failed: {name}: {_error_message(message.payload)}"
                    )
                if kind == "error":
                    code = headers.get(":error-code", "error")
                    raise PolicyError(
                        f"policy stream failed: {code}: {headers.get(':error-message', '')}"
                    )
                if headers.get(":event-type") == "PayloadPart":
                    parts.append(_payload_bytes(message.payload, headers))
        except ParserError as exc:
            raise PolicyError(f"policy stream is not a valid AWS event stream: {exc}") from exc
        return parts


def _payload_bytes(payload: bytes, headers: dict[str, Any]) -> bytes:
    """The bytes of a PayloadPart: raw, or ``{"Bytes": "<base64>"}`` when framed as JSON."""
    if headers.get(":content-type") == "application/json" and payload.startswith(b"{"):
        try:
            value = json.loads(payload)
        except ValueError:
            return payload
        if isinstance(value, dict) and isinstance(value.get("Bytes"), str):
            return base64.b64decode(value["Bytes"])
    return payload


def _error_message(payload: bytes) -> str:
    try:
        value = json.loads(payload)
    except ValueError:
        return _snippet(payload)
    if isinstance(value, dict):
        return str(value.get("Message") or value.get("message") or _snippet(payload))
    return _snippet(payload)


def _load_object(data: str | bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError:
        raise PolicyError(
            f"policy answered garbage ({what} is not JSON): {_snippet(data)!r}"
        ) from None
    if not isinstance(value, dict):
        raise PolicyError(f"policy answered garbage ({what} is not an object): {_snippet(data)!r}")
    error = value.get("error")
    if error:
        detail = error.get("message", error) if isinstance(error, dict) else error
        raise PolicyError(f"policy returned an error: {_snippet(str(detail))}")
    return value


def _choices(value: dict[str, Any], key: str, what: str, raw: str | bytes) -> list[Any]:
    choices = value.get("choices")
    if choices is None and key == "delta":
        return []
    if not isinstance(choices, list) or not all(
        isinstance(c, dict) and isinstance(c.get(key, {}), dict) for c in choices
    ):
        raise PolicyError(
            f"policy answered garbage ({what} has no valid choices): {_snippet(raw)!r}"
        )
    return choices


def parse_chunk(data: str) -> ChatCompletionChunk:
    """One SSE ``data:`` payload as a ``ChatCompletionChunk``; PolicyError if it is not one."""
    value = _load_object(data, "stream chunk")
    choices = _choices(value, "delta", "stream chunk", data)
    fixed = [{"index": i, "delta": {}, **c} for i, c in enumerate(choices)]
    value = {"id": "", "created": 0, "model": "", "object": "chat.completion.chunk", **value}
    value["choices"] = fixed
    from openai.types.chat import ChatCompletionChunk

    return ChatCompletionChunk.construct(**value)


def parse_completion(body: bytes | str) -> ChatCompletion:
    """A non-stream response body as a ``ChatCompletion`` with at least one choice."""
    value = _load_object(body, "response")
    choices = _choices(value, "message", "response", body)
    if not choices:
        raise PolicyError(f"policy answered no choices: {_snippet(body)!r}")
    fixed = [
        {
            "index": i,
            "finish_reason": "stop",
            **c,
            "message": {"role": "assistant", **c.get("message", {})},
        }
        for i, c in enumerate(choices)
    ]
    value = {"id": "", "created": 0, "model": "", "object": "chat.completion", **value}
    value["choices"] = fixed
    from openai.types.chat import ChatCompletion

    return ChatCompletion.construct(**value)


def check_completion(response: Any) -> Any:
    """Pass a non-stream response through if it has a choice with a message; else PolicyError."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices or getattr(choices[0], "message", None) is None:
        raise PolicyError(f"policy answered garbage (no choices): {_snippet(str(response))!r}")
    return response


# -- the OpenAI-compatible clients injected into Strands' OpenAIModel -----------------------


def policy_error(exc: BaseException, where: str) -> PolicyError:
    """A readable PolicyError for any failure of a policy call."""
    if isinstance(exc, PolicyError):
        return exc
    import openai

    if isinstance(exc, openai.APIStatusError):
        return PolicyError(
            f"policy endpoint {where} answered HTTP {exc.status_code}: {exc.message}"
        )
    if isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException, ReadTimeoutError)):
        return PolicyError(f"policy call to {where} timed out")
    if isinstance(exc, (openai.APIConnectionError, httpx.TransportError)):
        cause = exc.__cause__ or exc
        return PolicyError(f"cannot reach policy endpoint {where}: {type(cause).__name__}: {cause}")
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        http = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return PolicyError(
            f"policy endpoint {where} answered HTTP {http}: "
            f"{error.get('Code', 'Unknown')}: {error.get('Message', '')}"
        )
    if isinstance(exc, BotoCoreError):
        return PolicyError(f"policy call to {where} failed: {exc}")
    return PolicyError(f"policy endpoint {where} answered garbage: {type(exc).__name__}: {exc}")


async def guard_stream(stream: Any, where: str) -> AsyncGenerator[Any, None]:
    """Re-yield a chunk stream, mapping failures to PolicyError; an empty stream is garbage."""
    seen = False
    try:
        async for chunk in stream:
            seen = seen or bool(getattr(chunk, "choices", None))
            yield chunk
    except Exception as exc:
        raise policy_error(exc, where) from exc
    finally:
        close = getattr(stream, "aclose", None) or getattr(stream, "close", None)
        if close is not None:
            await close()
    if not seen:
        raise PolicyError(f"policy stream from {where} ended without any choice")


class _Chat:
    def __init__(self, completions: Any) -> None:
        self.completions = completions


class OpenAIChat:
    """``chat.completions.create`` over one AsyncOpenAI, with failures mapped to PolicyError."""

    def __init__(self, client: openai.AsyncOpenAI, where: str, garbage_retries: int = 2) -> None:
        self.openai = client
        self.where = where
        #: A non-stream 200 whose body does not parse (cut short on the way, a proxy's page) is
        #: asked again this many times (``build_model`` passes the policy's ``max_retries``); the
        #: OpenAI client retries only 408/429/5xx and transport errors itself.
        self.garbage_retries = garbage_retries
        self.chat = _Chat(self)

    async def create(self, **request: Any) -> Any:
        """Send one chat-completions request; PolicyError on any failure."""
        attempt = 0
        while True:
            try:
                response = await self.openai.chat.completions.create(**request)
                if request.get("stream"):
                    return guard_stream(response, self.where)
                return check_completion(response)
            except Exception as exc:
                garbage = isinstance(exc, ValueError) or (
                    isinstance(exc, PolicyError) and "garbage" in str(exc)
                )
                if not garbage or attempt >= self.garbage_retries:
                    raise policy_error(exc, self.where) from exc
            attempt += 1
            await asyncio.sleep(0.05 * 2**attempt)  # back off before asking again


class SampleChat:
    """``chat.completions.create`` through boto3 ``sample`` / ``sample_with_response_stream``."""

    def __init__(self, client: Any, metadata: RolloutMetadata, where: str) -> None:
        self.boto = client
        self.metadata = metadata
        self.where = where
        self.chat = _Chat(self)

    async def create(self, **request: Any) -> Any:
        """Send one request through Sample / SampleWithResponseStream; PolicyError on failure."""
        kwargs = {
            "JobArn": self.metadata.job_arn,
            "TrajectoryId": self.metadata.trajectory_id,
            "Body": json.dumps(request).encode(),
        }
        stream = bool(request.get("stream"))
        operation = self.boto.sample_with_response_stream if stream else self.boto.sample
        try:
            response = await asyncio.to_thread(operation, **kwargs)
            if stream:
                return guard_stream(sample_chunks(response), self.where)
            return parse_completion(await asyncio.to_thread(response["Body"].read))
        except Exception as exc:
            raise policy_error(exc, self.where) from exc


async def sample_chunks(response: Mapping[str, Any]) -> AsyncIterator[Any]:
    """Chunks of a SampleWithResponseStream body: SSE, or SSE inside AWS event-stream frames."""
    body = response["Body"]
    content_type = str(response.get("ContentType") or "").lower()
    frames = EventStreamDecoder() if "vnd.amazon.eventstream" in content_type else None
    sse = SSEDecoder()
    try:
        while True:
            raw = await asyncio.to_thread(body.read, _READ_SIZE)
            if raw:
                parts = frames.feed(raw) if frames is not None else [raw]
                events = [event for part in parts for event in sse.feed(part)]
            else:
                events = sse.close()
            for event in events:
                if event.strip() == DONE:
                    return
                yield parse_chunk(event)
            if not raw:
                return
    finally:
        body.close()
