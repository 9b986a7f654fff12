"""Serve an ASGI app (the emulator) from inside the current event loop, on loopback by default.

Every server here speaks HTTP/1.1 through :class:`GuardedH11Protocol`, uvicorn's h11 protocol
with two guards the emulator needs once it is reachable from outside (``--allow-remote``, a
tunnel): a client that has not sent a complete request (headers and body) within
:data:`REQUEST_READ_TIMEOUT_S` seconds of connecting — or of the first byte of its next request
on a kept-alive connection — is dropped with one log line (an idle kept-alive connection is
closed quietly by uvicorn's keep-alive timeout instead); and a request with malformed framing
(bad chunked encoding, a truncated body, oversized headers) gets uvicorn's 400 and one log
line, never a traceback (the application's late answer to a request the server has already
refused is discarded).

The job driver, the replay runner and ``agent-kit emulate`` all run the emulator in their own
process, as a task of their event loop, on ``127.0.0.1`` (``emulate`` on its ``--host``) and a
port bound up front — ephemeral by default, or a fixed one (``agent-kit run --emulator-port``
for a tunnel, ``emulate --port``) — so the URL is known before the server starts and no other
process can take the port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any, Final

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from agent_kit.errors import AgentKitError, UsageError

__all__ = [
    "REQUEST_READ_TIMEOUT_S",
    "EmbeddedServer",
    "GuardedH11Protocol",
    "PromptExitServer",
    "quiet_after_disconnect",
    "serve_in_thread",
    "uvicorn_config",
]

logger = logging.getLogger("agent_kit.emulator")

#: Seconds a connection has to deliver one complete request (headers and body).
REQUEST_READ_TIMEOUT_S: Final = 10.0


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request read timeout and quiet malformed-framing errors."""

    read_timeout_s: float = REQUEST_READ_TIMEOUT_S

    def connection_made(self, transport: Any) -> None:  # uvicorn's hook
        super().connection_made(transport)
        self._read_timer: asyncio.TimerHandle | None = None
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(self.read_timeout_s, self._read_timed_out)

    def _disarm(self) -> None:
        timer = getattr(self, "_read_timer", None)
        if timer is not None:
            timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        logger.warning(
            "dropped a connection from %s that sent no complete request within %g s",
            self.client,
            self.read_timeout_s,
        )
        self._abandon_cycle()
        self.transport.close()

    def _abandon_cycle(self) -> None:
        """Tell the running application the client is gone (its late answer is dropped)."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()

    def data_received(self, data: bytes) -> None:  # uvicorn's hook
        idle = self.cycle is None or self.cycle.response_complete
        if idle and getattr(self, "_read_timer", None) is None:
            self._arm()  # the first bytes of a new request on a kept-alive connection
        super().data_received(data)
        cycle = self.cycle
        if cycle is not None and not cycle.more_body:
            self._disarm()  # a whole request is in; its handler's time is not the client's

    def on_response_complete(self) -> None:  # uvicorn's hook
        super().on_response_complete()
        # An idle kept-alive connection is not a slow client: uvicorn's keep-alive timeout
        # closes it quietly. The read window starts again with the next request's first byte.
        self._disarm()

    def send_400_response(self, msg: str) -> None:  # uvicorn's hook
        super().send_400_response(msg)
        self._abandon_cycle()

    def connection_lost(self, exc: Exception | None) -> None:  # uvicorn's hook
        self._disarm()
        super().connection_lost(exc)


def quiet_after_disconnect(app: Any) -> Any:
    """Wrap an ASGI app so an error it raises *after* its client went away (a request the
    server refused mid-body, a dropped slow client) is logged at debug level, not as a traceback.
    """

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        gone = False

        async def watched_receive() -> Any:
            nonlocal gone
            message = await receive()
            if message.get("type") == "http.disconnect":
                gone = True
            return message

        try:
            await app(scope, watched_receive, send)
        except Exception as exc:
            if not gone:
                raise
            logger.debug("request abandoned by its client: %s: %s", type(exc).__name__, exc)

    return guarded


def uvicorn_config(app: Any, **options: Any) -> uvicorn.Config:
    """The uvicorn config every emulator server uses: quiet logs, no lifespan, guarded h11."""
    app = quiet_after_disconnect(app)
    settings: dict[str, Any] = {
        "log_level": "warning",
        "access_log": False,
        "lifespan": "off",
        "http": GuardedH11Protocol,
    }
    settings.update(options)
    return uvicorn.Config(app, **settings)


class PromptExitServer(uvicorn.Server):
    """uvicorn's server, but it starts shutting down as soon as it is asked to.

    uvicorn looks at ``should_exit`` once per 0.1 s tick; this main loop keeps the ticks (they
    refresh the Date header) and also wakes on :meth:`wake`, which a stop request and a
    SIGINT/SIGTERM caught by uvicorn both call.
    """

    _wake_event: asyncio.Event | None = None
    _wake_loop: asyncio.AbstractEventLoop | None = None

    def wake(self) -> None:
        """Make the main loop look at ``should_exit`` now (safe from a signal handler)."""
        loop, event = self._wake_loop, self._wake_event
        if loop is not None and event is not None and not loop.is_closed():
            loop.call_soon_threadsafe(event.set)

    def handle_exit(self, sig: int, frame: Any) -> None:  # uvicorn's signal handler
        """uvicorn's handling of the signal, then :meth:`wake`."""
        super().handle_exit(sig, frame)
        self.wake()

    async def main_loop(self) -> None:  # uvicorn's hook
        """Tick as uvicorn does until ``on_tick`` says exit, waking early on :meth:`wake`."""
        self._wake_loop, self._wake_event = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake_event.wait(), 0.1)
            self._wake_event.clear()


class EmbeddedServer:
    """uvicorn serving ``app`` on ``host`` (127.0.0.1 unless told; an IPv6 address works too)
    and ``port`` (0 = ephemeral) as a task of the running loop.

    Use ``await start()`` / ``await stop()`` or ``async with EmbeddedServer(app) as url``.
    The caller keeps SIGINT/SIGTERM: uvicorn's own signal capture is disabled. A fixed ``port``
    that cannot be bound is a :class:`UsageError`.
    """

    def __init__(
        self, app: Any, *, keep_alive_s: float = 75.0, port: int = 0, host: str = "127.0.0.1"
    ) -> None:
        class _Server(PromptExitServer):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield  # the caller owns SIGINT/SIGTERM; uvicorn must not swallow them

        if not 0 <= port <= 65535:
            raise UsageError(f"emulator port must be 0..65535, got {port}")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        if port:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((host, port))
        except OSError as exc:
            self._sock.close()
            raise UsageError(f"cannot bind the emulator to {host}:{port}: {exc}") from None
        shown = f"[{host}]" if ":" in host else host
        #: ``http://<host>:<port>``, known before the server starts.
        self.url = f"http://{shown}:{self._sock.getsockname()[1]}"
        self._server = _Server(uvicorn_config(app, timeout_keep_alive=int(keep_alive_s)))
        self._task: asyncio.Task[None] | None = None

    async def start(self, timeout_s: float = 15.0) -> str:
        """Start serving; return the URL once uvicorn is accepting connections."""
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]))
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise AgentKitError("the emulator server stopped during startup")
            if time.monotonic() > deadline:
                raise AgentKitError(f"the emulator server did not start within {timeout_s:g} s")
            await asyncio.sleep(0.005)
        return self.url

    async def wait(self) -> None:
        """Wait until the server stops (its task ends); a cancelled waiter leaves it serving,
        for :meth:`stop` to end gracefully."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Ask uvicorn to exit, wait up to ``timeout_s`` for the requests in flight, and release
        the socket."""
        if self._task is not None:
            self._server.should_exit = True
            self._server.wake()
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
                await asyncio.wait_for(self._task, timeout_s)
            self._task = None
        self._sock.close()

    async def __aenter__(self) -> str:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


@contextlib.contextmanager
def serve_in_thread(app: Any, *, start_timeout_s: float = 15.0) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1:<ephemeral> in a background thread; yield its URL.

    For synchronous callers (tests, scripts); the server stops when the block exits.
    """
    import threading

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(app))
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve(sockets=[sock])),
        name="agent-kit-serve",
        daemon=True,
    )
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    try:
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise AgentKitError("the server did not start")
            time.sleep(0.005)  # polling a flag with a deadline
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
