"""The emulator's HTTP server guards: quiet 400s for malformed framing, a request read timeout."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent_kit.emulator.serving import GuardedH11Protocol, serve_in_thread

pytestmark = pytest.mark.e2e


async def _echo(request: Request) -> JSONResponse:
    return JSONResponse({"bytes": len(await request.body())})


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An echo app on the guarded server, with a 0.5 s request read timeout."""
    monkeypatch.setattr(GuardedH11Protocol, "read_timeout_s", 0.5)
    app = Starlette(routes=[Route("/echo", _echo, methods=["POST"])])
    with serve_in_thread(app) as base:
        yield base


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=5)


def _read_all(sock: socket.socket, deadline_s: float = 5.0) -> bytes:
    sock.settimeout(deadline_s)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _one_response(sock: socket.socket) -> bytes:
    """Read one whole echo response (headers and its JSON body) from a kept-alive socket."""
    sock.settimeout(5)
    data = b""
    while not data.endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_malformed_chunked_body_gets_400_and_no_traceback(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Bad chunked framing is answered 400 with one log line and no traceback."""
    with caplog.at_level(logging.DEBUG), _connect(url) as sock:
        sock.sendall(
            b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"ZZZ\r\nhello\r\n0\r\n\r\n"
        )
        answer = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_client_dripping_headers_is_dropped_within_the_timeout(url: str) -> None:
    """A client that sends its headers one byte at a time is disconnected after the timeout."""
    request = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
    started = time.monotonic()
    with _connect(url) as sock:
        dropped = False
        for byte in request[:-4]:
            try:
                sock.sendall(bytes([byte]))
                sock.settimeout(0.05)
                if sock.recv(1) == b"":
                    dropped = True
                    break
            except TimeoutError:
                continue  # still open: keep dripping
            except (ConnectionResetError, BrokenPipeError):
                dropped = True
                break
        elapsed = time.monotonic() - started
    assert dropped
    assert elapsed < 5


def test_slow_body_is_dropped_but_a_prompt_client_is_served(url: str) -> None:
    """Headers alone do not keep a connection: a body that never comes is dropped too."""
    with _connect(url) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
        assert _read_all(sock) == b""
    with httpx.Client(base_url=url) as client:
        for _ in range(3):  # kept-alive requests each get a fresh read window
            assert client.post("/echo", content=b"x" * 1000).json() == {"bytes": 1000}
            time.sleep(0.6)  # idle longer than the read timeout between requests (not a wait)


def test_idle_kept_alive_connection_is_not_dropped_as_a_slow_client(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Between requests an agent's pooled connection may idle longer than the read timeout:
    the same socket is then still served, and no 'dropped a connection' line is logged."""
    request = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
    with caplog.at_level(logging.WARNING, logger="agent_kit.emulator"), _connect(url) as sock:
        sock.sendall(request)
        assert _one_response(sock).startswith(b"HTTP/1.1 200 ")
        time.sleep(1.0)  # idle for twice the read timeout (the condition under test, not a wait)
        sock.sendall(request)
        assert _one_response(sock).startswith(b"HTTP/1.1 200 ")
    assert not [r for r in caplog.records if "dropped a connection" in r.getMessage()]


async def test_agent_kit_emulate_serves_with_the_guarded_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server `agent-kit emulate` serves on (the one bring-up's, on its ``--host``) drops a
    connection that sends nothing (before any authentication) while requests are answered."""
    import asyncio

    from agent_kit.emulator.serving import EmbeddedServer

    monkeypatch.setattr(GuardedH11Protocol, "read_timeout_s", 0.5)
    app = Starlette(routes=[Route("/echo", _echo, methods=["POST"])])
    async with EmbeddedServer(app, host="127.0.0.1") as base:
        assert base.startswith("http://127.0.0.1:")
        silent = await asyncio.to_thread(_connect, base)
        with silent:
            assert await asyncio.to_thread(_read_all, silent) == b""  # dropped by the timeout
        async with httpx.AsyncClient(base_url=base) as client:
            assert (await client.post("/echo", content=b"ok")).json() == {"bytes": 2}
