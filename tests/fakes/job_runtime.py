"""A small, real loopback HTTP test double of the SageMaker Job Runtime (docs/contract.md §3-§4).

It is a stdlib ``ThreadingHTTPServer`` on 127.0.0.1 and an ephemeral port, so real clients
(Strands ``OpenAIModel`` over AsyncOpenAI/httpx, boto3 ``sagemakerjobruntime`` with
``endpoint_url`` and dummy credentials) talk to it over real sockets. It does not check SigV4 or
bearer tokens; it records them so tests can assert on them.

Usage::

    from fakes.job_runtime import FakeJobRuntime, text, tool

    with FakeJobRuntime([tool("add", {"n": 2}), text("done")]) as fake:
        ...  # point metadata.endpoint (or endpoint_url) at fake.url
        assert fake.requests_to("/v1/chat/completions")[0].header("Authorization").startswith(
            "Bearer sagemaker-api-key-")

Routes (all ``POST``; anything else → 404 in the error shape):

- ``/v1/chat/completions``: answers the next scripted reply; ``"stream": true`` → OpenAI SSE
  (role chunk, content in two pieces, tool calls with arguments split in two deltas, finish
  chunk, a usage chunk when ``stream_options.include_usage``, ``data: [DONE]``), else a
  ``chat.completion`` JSON with ``usage``.
- ``/sample``: the same, always the non-stream JSON.
- ``/sample-with-response-stream``: the SSE stream, framed per ``stream_format``: ``"sse"``
  (``text/event-stream``) or ``"eventstream"`` (``application/vnd.amazon.eventstream``, one
  ``PayloadPart`` frame per SSE event; ``stream_exception="ModelStreamError"`` puts an exception
  frame after the first part).
- ``/complete-rollout`` and ``/update-reward``: ``{}``, following the §4 state machine per
  trajectory (unknown trajectories start OPEN): same-status CompleteRollout → 200, otherwise
  409 ``Cannot transition trajectory T from S to U``; UpdateReward needs READY, else 409
  ``Trajectory T is not in valid status for UpdateReward: S``; a ClientToken replayed with the
  same body → 200, with another body → 400. ``states`` and ``rewards`` hold the results.

Scripting the policy: the constructor's ``replies`` (and :meth:`reply`) queue :class:`Reply`
objects (or plain strings) consumed one per policy call; ``responder(body: dict) -> Reply | str``
is used when the queue is empty; else ``default_reply``.

Fault injection, consumed FIFO per route before normal handling, each ``times`` times:
:meth:`fail` (status + ``x-amzn-ErrorType`` + ``{"Message"}``), :meth:`throttle` (429),
:meth:`hang` (hold the request until :meth:`release` or stop), :meth:`drop` (close the
connection without answering), :meth:`raw` (any status/content-type/body, e.g. garbage).

Recording: ``requests`` lists every :class:`Recorded` request (method, path, lower-cased
headers, body bytes, ``.json()``, ``.header(name)``); :meth:`requests_to` filters by path;
:meth:`wait_for` blocks until requests to a path have arrived (e.g. to release a hang).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import struct
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = [
    "FakeJobRuntime",
    "Fault",
    "Recorded",
    "Reply",
    "ToolCall",
    "encode_event",
    "text",
    "tool",
]

CHAT = "/v1/chat/completions"
SAMPLE = "/sample"
SAMPLE_STREAM = "/sample-with-response-stream"
COMPLETE = "/complete-rollout"
REWARD = "/update-reward"


@dataclass(frozen=True)
class Recorded:
    """One request the fake received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)

    def header(self, name: str) -> str | None:
        """A header value by case-insensitive name."""
        return self.headers.get(name.lower())


@dataclass(frozen=True)
class ToolCall:
    """A tool call the scripted policy makes."""

    name: str
    arguments: dict[str, Any] | str
    id: str | None = None

    def arguments_json(self) -> str:
        """The arguments as the JSON string OpenAI sends."""
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Reply:
    """One scripted assistant message (text and/or tool calls) with its usage."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    prompt_tokens: int = 11
    completion_tokens: int = 7

    @property
    def finish(self) -> str:
        """The finish_reason sent: explicit, else tool_calls / stop."""
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")


def text(content: str, **kwargs: Any) -> Reply:
    """A reply with only text."""
    return Reply(content=content, **kwargs)


def tool(name: str, arguments: dict[str, Any] | str, *, id: str | None = None) -> Reply:
    """A reply with one tool call."""
    return Reply(tool_calls=(ToolCall(name, arguments, id),))


@dataclass(frozen=True)
class Fault:
    """An injected misbehaviour of one route."""

    kind: Literal["error", "hang", "drop", "raw"]
    status: int = 500
    error_type: str | None = "InternalServiceError"
    message: str = "injected failure"
    body: bytes = b""
    content_type: str = "application/json"


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        struct.pack(">B", len(raw_name))
        + raw_name
        + b"\x07"
        + struct.pack(">H", len(raw_value))
        + raw_value
    )


def encode_event(
    event_type: str,
    payload: bytes,
    *,
    message_type: str = "event",
    type_key: str = ":event-type",
    content_type: str = "application/octet-stream",
) -> bytes:
    """One ``application/vnd.amazon.eventstream`` frame (botocore has decoders only)."""
    headers = (
        _header(type_key, event_type)
        + _header(":content-type", content_type)
        + _header(":message-type", message_type)
    )
    prelude = struct.pack(">II", 12 + len(headers) + len(payload) + 4, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + payload
    return message + struct.pack(">I", zlib.crc32(message) & 0xFFFFFFFF)


def completion(reply: Reply, call_index: int) -> dict[str, Any]:
    """The non-stream ``chat.completion`` object of a reply."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id or f"call_{call_index}_{i}",
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json()},
            }
            for i, c in enumerate(reply.tool_calls)
        ]
    return {
        "id": f"chatcmpl-{call_index}",
        "object": "chat.completion",
        "created": 1_796_000_000,
        "model": "default",
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish}],
        "usage": _usage(reply),
    }


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def stream_events(reply: Reply, call_index: int, include_usage: bool) -> list[bytes]:
    """The SSE events (``data: …\\n\\n`` each) of a streamed reply, ending with ``[DONE]``."""
    base = {
        "id": f"chatcmpl-{call_index}",
        "object": "chat.completion.chunk",
        "created": 1_796_000_000,
        "model": "default",
    }
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if reply.content:
        half = len(reply.content) // 2
        deltas += [{"content": reply.content[:half]}, {"content": reply.content[half:]}]
    for i, call in enumerate(reply.tool_calls):
        args = call.arguments_json()
        half = len(args) // 2
        first = {"index": i, "id": call.id or f"call_{call_index}_{i}", "type": "function"}
        deltas.append({"tool_calls": [{**first, "function": {"name": call.name, "arguments": ""}}]})
        deltas.append({"tool_calls": [{"index": i, "function": {"arguments": args[:half]}}]})
        deltas.append({"tool_calls": [{"index": i, "function": {"arguments": args[half:]}}]})
    chunks = [
        {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish}]})
    if include_usage:
        chunks.append({**base, "choices": [], "usage": _usage(reply)})
    events = [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks]
    return [*events, b"data: [DONE]\n\n"]


class FakeJobRuntime:
    """The fake server; see the module docstring for routes, scripting and fault injection."""

    def __init__(
        self,
        replies: Iterable[Reply | str] = (),
        *,
        responder: Callable[[dict[str, Any]], Reply | str] | None = None,
        default_reply: Reply | str = "ok",
        stream_format: Literal["sse", "eventstream"] = "sse",
        stream_exception: str | None = None,
    ) -> None:
        self._replies: deque[Reply | str] = deque(replies)
        self.responder = responder
        self.default_reply = default_reply
        self.stream_format = stream_format
        self.stream_exception = stream_exception
        self.requests: list[Recorded] = []
        self.states: dict[str, str] = {}
        self.rewards: dict[str, list[float]] = {}
        self._tokens: dict[str, tuple[str, str]] = {}
        self._faults: dict[str, deque[Fault]] = {}
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._release = threading.Event()
        self._calls = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> FakeJobRuntime:
        """Bind 127.0.0.1 on an ephemeral port and serve in a daemon thread."""
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hung requests, stop serving and close the socket."""
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> FakeJobRuntime:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        assert self._server is not None, "start the fake first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- scripting -----------------------------------------------------------------------------
    def reply(self, *replies: Reply | str) -> None:
        """Queue more scripted replies."""
        with self._lock:
            self._replies.extend(replies)

    def inject(self, path: str, fault: Fault, times: int = 1) -> None:
        """Queue ``fault`` for the next ``times`` requests to ``path``."""
        with self._lock:
            self._faults.setdefault(path, deque()).extend([fault] * times)

    def fail(
        self,
        path: str,
        status: int = 500,
        error_type: str | None = "InternalServiceError",
        message: str = "injected failure",
        times: int = 1,
    ) -> None:
        """Answer ``status`` with ``x-amzn-ErrorType`` and ``{"Message"}``."""
        self.inject(path, Fault("error", status, error_type, message), times)

    def throttle(self, path: str, times: int = 1) -> None:
        """Answer 429 ThrottlingException."""
        self.fail(path, 429, "ThrottlingException", "Rate exceeded", times)

    def hang(self, path: str, times: int = 1) -> None:
        """Hold the request without answering until :meth:`release` (or stop), then close."""
        self.inject(path, Fault("hang"), times)

    def drop(self, path: str, times: int = 1) -> None:
        """Close the connection without answering."""
        self.inject(path, Fault("drop"), times)

    def raw(
        self,
        path: str,
        body: bytes,
        *,
        status: int = 200,
        content_type: str = "application/json",
        times: int = 1,
    ) -> None:
        """Answer exactly ``body`` with ``status`` and ``content_type``."""
        self.inject(path, Fault("raw", status, None, "", body, content_type), times)

    def release(self) -> None:
        """Let hung requests go (they close their connection)."""
        self._release.set()

    def set_state(self, trajectory_id: str, state: str) -> None:
        """Put a trajectory in a §4 state (OPEN, READY, REWARDED, FAILED, TIMED_OUT)."""
        with self._lock:
            self.states[trajectory_id] = state

    def wait_for(self, path: str, count: int = 1, timeout: float = 10.0) -> bool:
        """Block until ``count`` requests to ``path`` have arrived (False on timeout)."""
        with self._arrived:
            return self._arrived.wait_for(
                lambda: sum(r.path == path for r in self.requests) >= count, timeout
            )

    def requests_to(self, path: str) -> list[Recorded]:
        """The recorded requests to one path, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.path == path]

    # -- behaviour (called from handler threads) ------------------------------------------------
    def _record(self, request: Recorded) -> tuple[Fault | None, int]:
        with self._lock:
            self.requests.append(request)
            self._arrived.notify_all()
            queue = self._faults.get(request.path)
            fault = queue.popleft() if queue else None
            index = self._calls
            if fault is None and request.path in (CHAT, SAMPLE, SAMPLE_STREAM):
                self._calls += 1
            return fault, index

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            item = self._replies.popleft() if self._replies else None
        if item is None:
            item = self.responder(body) if self.responder else self.default_reply
        return Reply(content=item) if isinstance(item, str) else item

    def _rollout_call(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], str]:
        """(status, body, error type) of CompleteRollout / UpdateReward per docs/contract.md §4."""
        tid = str(body.get("TrajectoryId", ""))
        token = body.get("ClientToken")
        payload = {k: v for k, v in body.items() if k != "ClientToken"}
        digest = hashlib.sha256(json.dumps([path, payload], sort_keys=True).encode()).hexdigest()
        with self._lock:
            if token and token in self._tokens:
                if self._tokens[token] == (path, digest):
                    return 200, {}, ""
                return (
                    400,
                    {"Message": "ClientToken reused with another body"},
                    "ValidationException",
                )
            state = self.states.get(tid, "OPEN")
            if path == COMPLETE:
                target = "READY" if body.get("Status", "ready") == "ready" else "FAILED"
                if state == "OPEN":
                    self.states[tid] = target
                elif state != target:
                    msg = f"Cannot transition trajectory {tid} from {state} to {target}"
                    return 409, {"Message": msg}, "ConflictException"
            else:
                if state != "READY":
                    msg = f"Trajectory {tid} is not in valid status for UpdateReward: {state}"
                    return 409, {"Message": msg}, "ConflictException"
                self.states[tid] = "REWARDED"
                self.rewards[tid] = [float(r) for r in body.get("Rewards", [])]
            if token:
                self._tokens[token] = (path, digest)
        return 200, {}, ""


class _Handler(BaseHTTPRequestHandler):
    owner: FakeJobRuntime
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def handle(self) -> None:
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            super().handle()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        path = self.path.split("?", 1)[0]
        fault, index = self.owner._record(Recorded("POST", path, headers, raw))
        if fault is not None:
            self._fault(fault)
            return
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            self._error(400, "ValidationException", "body is not JSON")
            return
        if path in (CHAT, SAMPLE, SAMPLE_STREAM):
            reply = self.owner._next_reply(body)
            if path == SAMPLE or (path == CHAT and not body.get("stream")):
                self._json(200, completion(reply, index))
                return
            usage = path == SAMPLE_STREAM or bool(
                (body.get("stream_options") or {}).get("include_usage")
            )
            self._stream(stream_events(reply, index, usage), path)
        elif path in (COMPLETE, REWARD):
            status, out, error_type = self.owner._rollout_call(path, body)
            if status == 200:
                self._json(200, out)
            else:
                self._error(status, error_type, out["Message"])
        else:
            self._error(404, "ResourceNotFoundException", f"no route {path}")

    def do_GET(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.owner._record(Recorded("GET", self.path, headers, b""))
        self._error(404, "ResourceNotFoundException", f"no route GET {self.path}")

    # -- writers ---------------------------------------------------------------------------------
    def _fault(self, fault: Fault) -> None:
        if fault.kind == "hang":
            self.owner._release.wait(timeout=60)
            self.close_connection = True
        elif fault.kind == "drop":
            self.close_connection = True
        elif fault.kind == "raw":
            self._send(fault.status, fault.content_type, fault.body)
        else:
            self._error(fault.status, fault.error_type, fault.message)

    def _json(self, status: int, body: Any) -> None:
        self._send(status, "application/json", json.dumps(body).encode())

    def _error(self, status: int, error_type: str | None, message: str) -> None:
        extra = {"x-amzn-ErrorType": error_type} if error_type else {}
        body = json.dumps({"Message": message, "message": message}).encode()
        self._send(status, "application/json", body, extra)

    def _send(
        self, status: int, content_type: str, body: bytes, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, events: list[bytes], path: str) -> None:
        eventstream = path == SAMPLE_STREAM and self.owner.stream_format == "eventstream"
        self.send_response(200)
        if eventstream:
            self.send_header("Content-Type", "application/vnd.amazon.eventstream")
        else:
            self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for piece in self._pieces(events, eventstream):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _pieces(self, events: list[bytes], eventstream: bool) -> Iterator[bytes]:
        if not eventstream:
            yield from events
            return
        for i, event in enumerate(events):
            yield encode_event("PayloadPart", event)
            if i == 0 and self.owner.stream_exception:
                payload = json.dumps({"Message": "model stream failed"}).encode()
                yield encode_event(
                    self.owner.stream_exception,
                    payload,
                    message_type="exception",
                    type_key=":exception-type",
                    content_type="application/json",
                )
                return
