"""Serve an ASGI app (the emulator) from inside the current event loop, on loopback.

The job driver and the replay runner both run the emulator in their own process, as a task of
their event loop, on ``127.0.0.1`` and a port bound up front — ephemeral by default, or a fixed one
for a tunnel (``agent-kit run --emulator-port``) — so the URL is known before the server starts
and no other process can take the port.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Iterator
from typing import Any

from agent_kit.errors import AgentKitError, UsageError

__all__ = ["EmbeddedServer", "serve_in_thread"]


class EmbeddedServer:
    """uvicorn serving ``app`` on 127.0.0.1 (``port``, 0 = ephemeral) as a task of the running loop.

    Use ``await start()`` / ``await stop()`` or ``async with EmbeddedServer(app) as url``.
    The caller keeps SIGINT/SIGTERM: uvicorn's own signal capture is disabled. A fixed ``port``
    that cannot be bound is a :class:`UsageError`.
    """

    def __init__(self, app: Any, *, keep_alive_s: float = 75.0, port: int = 0) -> None:
        import uvicorn

        class _Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield  # the caller owns SIGINT/SIGTERM; uvicorn must not swallow them

        if not 0 <= port <= 65535:
            raise UsageError(f"emulator port must be 0..65535, got {port}")
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if port:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind(("127.0.0.1", port))
        except OSError as exc:
            self._sock.close()
            raise UsageError(f"cannot bind the emulator to 127.0.0.1:{port}: {exc}") from None
        #: ``http://127.0.0.1:<port>``, known before the server starts.
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_keep_alive=int(keep_alive_s),
        )
        self._server = _Server(config)
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

    async def stop(self) -> None:
        """Ask uvicorn to exit, wait up to 10 s for it, and release the socket."""
        if self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
                await asyncio.wait_for(self._task, 10.0)
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

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    )
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
