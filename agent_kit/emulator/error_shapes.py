"""The emulator's error answers, in the shape of the route's caller.

Errors are raised as :class:`~agent_kit.errors.JobRuntimeError` anywhere in the app and
answered here: the contract's shape (status, header ``x-amzn-ErrorType``, body
``{"Message"}``) everywhere, except that ``/v1/chat/completions`` answers in OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``, ``code`` = the ``x-amzn-ErrorType`` name,
header kept), which OpenAI clients read. :class:`ErrorShapes` holds the app's exception handlers
(a 4xx is logged as one INFO line; Starlette's 404/405 become ResourceNotFound/Validation) and
hides the run's secret path prefix wherever a path is shown.
"""

from __future__ import annotations

import logging
from typing import Final

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from agent_kit.emulator.routes import ROUTE_CHAT
from agent_kit.emulator.sse import dumps
from agent_kit.errors import InternalServiceError, JobRuntimeError, NotFoundError, ValidationError

__all__ = ["ErrorShapes", "error_response", "openai_error_response"]

logger = logging.getLogger("agent_kit.emulator")

#: OpenAI's error ``type`` for a status (anything else: ``invalid_request_error``).
_OPENAI_TYPES: Final = {402: "insufficient_quota", 429: "rate_limit_error"}


def error_response(exc: JobRuntimeError) -> Response:
    """The contract's error shape: status, ``x-amzn-ErrorType`` header, ``{"Message": ...}``."""
    return Response(
        dumps(exc.to_body()),
        status_code=exc.status,
        headers={"x-amzn-ErrorType": exc.error_type},
        media_type="application/json",
    )


def openai_error_response(exc: JobRuntimeError) -> Response:
    """OpenAI's error shape for the same error: ``{"error": {"message", "type", "param",
    "code"}}`` with ``code`` = the ``x-amzn-ErrorType`` name (also kept as the header)."""
    kind = "server_error" if exc.status >= 500 else _OPENAI_TYPES.get(exc.status)
    body = {
        "error": {
            "message": exc.message,
            "type": kind or "invalid_request_error",
            "param": getattr(exc, "param", None),
            "code": exc.error_type,
        }
    }
    return Response(
        dumps(body),
        status_code=exc.status,
        headers={"x-amzn-ErrorType": exc.error_type},
        media_type="application/json",
    )


class ErrorShapes:
    """The app's exception handlers and its last-resort guard, sharing how paths are shown."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def shown(self, path: str) -> str:
        """``path`` for logs and messages, with the (secret) prefix hidden."""
        if self.prefix and path.startswith(self.prefix + "/"):
            return "/<prefix>" + path[len(self.prefix) :]
        return path

    def respond(self, path: str, exc: JobRuntimeError) -> Response:
        """``exc`` in the shape of the route at ``path``."""
        if path.endswith(ROUTE_CHAT):
            return openai_error_response(exc)
        return error_response(exc)

    async def service_error(self, request: Request, exc: Exception) -> Response:
        """Handler of every JobRuntimeError raised by a route or its middleware."""
        if not isinstance(exc, JobRuntimeError):  # registered for JobRuntimeError only
            exc = InternalServiceError("Internal error in the emulator")
        path = request.url.path
        if exc.status < 500:
            logger.info(
                "%s %s -> %d %s: %s",
                request.method,
                self.shown(path),
                exc.status,
                exc.error_type,
                exc.message[:300],
            )
        return self.respond(path, exc)

    async def unrouted(self, request: Request, exc: Exception) -> Response:
        """Handler of Starlette's 404 / 405: the contract's ResourceNotFound / Validation
        (in the contract's shape on every path: no route took the request)."""
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        path = self.shown(request.url.path)
        err: JobRuntimeError
        if status == 405:
            err = ValidationError(f"Method {request.method} not allowed on {path}")
        else:
            err = NotFoundError(f"Unknown route {request.method} {path[:200]}")
        return error_response(err)  # no route answered, so the service's own shape
