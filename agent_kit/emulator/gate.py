"""What stands between a connection and the routes: the request gate and the last-resort guard.

:class:`RequestGate` counts the requests in flight and, once closed, turns new ones away (the
job driver closes it as the job ends). :class:`Guard`, the app's outermost middleware, passes
every request through the gate and turns a bug of ours (any exception no handler took) into
one logged traceback and a 500 in the route's shape, never a crashed connection; a request the
job ended under (its close stopped waiting for it, its store and policy closed since) gets the
gate's "job has ended" answer instead, with no traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_kit.emulator.error_shapes import ErrorShapes
from agent_kit.errors import InternalServiceError, RunStoreError, ValidationError

__all__ = ["Guard", "RequestGate"]

logger = logging.getLogger("agent_kit.emulator")


class RequestGate:
    """The door of one app: counts the HTTP requests in flight and, once closed (:meth:`close`),
    answers every new one with a ValidationException in the route's shape ("the job has
    ended"). The job driver closes it as the job ends, so no turn lands while the run's figures
    are taken, and lets uvicorn's own (slower) shutdown run beside the writing of the outputs.
    """

    def __init__(self) -> None:
        self.open = True
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def inflight(self) -> int:
        """Requests that passed the gate and have not finished yet."""
        return self._inflight

    def enter(self) -> bool:
        """Let one request in (False once the gate is closed)."""
        if not self.open:
            return False
        self._inflight += 1
        self._idle.clear()
        return True

    def leave(self) -> None:
        """One request that :meth:`enter` let in has finished."""
        self._inflight -= 1
        if self._inflight == 0:
            self._idle.set()

    async def close(self, timeout_s: float = 10.0) -> int:
        """Turn new requests away and wait up to ``timeout_s`` for those in flight; return how
        many are still running."""
        self.open = False
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        return self._inflight


class Guard:
    """Outermost middleware: a bug of ours (any exception no handler took) becomes one logged
    traceback and a 500 in the route's shape, never a crashed connection; with a
    :class:`RequestGate`, requests pass through it."""

    def __init__(self, app: ASGIApp, shapes: ErrorShapes, gate: RequestGate | None) -> None:
        self.app = app
        self.shapes = shapes
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app (behind the gate); answer 500 if it raised before its response."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        gate = self.gate
        if gate is None:
            await self._guarded(scope, receive, send)
            return
        if not gate.enter():
            err = ValidationError("The job has ended: the emulator accepts no more requests")
            await self.shapes.respond(scope["path"], err)(scope, receive, send)
            return
        try:
            await self._guarded(scope, receive, send)
        finally:
            gate.leave()

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except RunStoreError as exc:  # e.g. a full disk: the run's driver reports it, once
            logger.debug("emulator cannot record %s: %s", self.shapes.shown(scope["path"]), exc)
            if not started:
                err = InternalServiceError(
                    "The emulator cannot record the request: its run store cannot be written"
                )
                await self.shapes.respond(scope["path"], err)(scope, receive, send)
        except Exception as exc:
            if self.gate is not None and not self.gate.open:
                # the job ended under a request its close stopped waiting for (a rollout its
                # agent gave up on, still queued at the policy): the run's store and policy are
                # closed by now; that is the job's end, not a bug
                logger.debug("request ended with the job: %s: %r", scope["path"], exc)
                if not started:
                    ended = ValidationError(
                        "The job has ended: the emulator accepts no more requests"
                    )
                    await self.shapes.respond(scope["path"], ended)(scope, receive, send)
                return
            logger.exception("emulator error on %s", self.shapes.shown(scope["path"]))
            if not started:
                err = InternalServiceError("Internal error in the emulator")
                await self.shapes.respond(scope["path"], err)(scope, receive, send)
