"""What a route reads of an HTTP request: its body (size-limited, strict JSON), its headers,
the server's own address, and whether the request's credentials may act on what it names.

A rollout token (``Bearer agent-kit-rollout-…``) or a session scoped to one trajectory (header
``X-Amzn-SageMaker-Trajectory-Id``) acts on that rollout only: :func:`check_bound` and
:func:`check_same_trajectory` answer 403 AccessDeniedException otherwise (**[chosen]**).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from starlette.requests import ClientDisconnect, Request
from starlette.types import Scope

from agent_kit.emulator.auth import BODY_CHECK, BOUND_ROLLOUT
from agent_kit.errors import AccessDeniedError, ValidationError

__all__ = [
    "EVENTSTREAM",
    "check_bound",
    "check_same_trajectory",
    "is_json",
    "job_arn_of",
    "parse_json",
    "read_body",
    "served_url",
    "wants_eventstream",
]

#: AWS event-stream framing, which a caller may ask for instead of SSE.
EVENTSTREAM: Final = "application/vnd.amazon.eventstream"
#: A JSON ``\uXXXX`` escape of a UTF-16 surrogate (the only way a JSON text can hold a lone one).
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, at most ``limit`` bytes (400 beyond, or for a bad Content-Length or
    a client gone mid-body); a SigV4 signature that covers the body is verified here."""
    length = request.headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise ValidationError("Invalid Content-Length")
        if int(length) > limit:
            raise ValidationError(f"Request body exceeds the {limit}-byte limit")
    parts: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ValidationError(f"Request body exceeds the {limit}-byte limit")
            parts.append(chunk)
    except ClientDisconnect:
        raise ValidationError("Client disconnected before sending the body") from None
    body = b"".join(parts)
    check = request.scope.get(BODY_CHECK)
    if check is not None:  # a SigV4 signature to verify, which covers the body
        check(body)
    return body


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(raw: bytes) -> Any:
    """Strict JSON (no NaN/Infinity, no lone surrogate); anything else is a 400."""
    if not raw:
        raise ValidationError("Request body is empty; expected JSON")
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise ValidationError("Request body is not valid JSON") from None
    if _SURROGATE_ESCAPE.search(raw):
        # Paired surrogates decode to one character; a lone one stays and is not Unicode text.
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError(
                "Request body holds an invalid UTF-16 surrogate (a lone \\ud800-\\udfff escape)"
            ) from None
    return value


def wants_eventstream(request: Request) -> bool:
    """Whether the caller accepts only AWS event-stream frames (not SSE)."""
    accept = request.headers.get("accept", "")
    return EVENTSTREAM in accept and "text/event-stream" not in accept


def is_json(content_type: str | None) -> bool:
    """Whether a Content-Type is JSON (``application/json``, parameters allowed)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json"


def served_url(scope: Scope) -> str:
    """The URL the request reached, from the server's own address (the ASGI ``server``, the
    bound socket), never from the client's ``Host`` header."""
    host, port = scope.get("server") or ("127.0.0.1", None)
    scheme = scope.get("scheme", "http")
    shown = f"[{host}]" if ":" in host else host
    default = 443 if scheme == "https" else 80
    return f"{scheme}://{shown}" if port in (None, default) else f"{scheme}://{shown}:{port}"


def job_arn_of(request: Request, in_body: str | None) -> str | None:
    """The job ARN from the header or else the body; 400 when both are given and differ."""
    header = request.headers.get("x-amzn-sagemaker-job-arn")
    if header and in_body and header != in_body:
        raise ValidationError("JobArn in the header and in the body differ")
    return header or in_body


def check_bound(request: Request, job_arn: str | None, trajectory_id: str | None) -> None:
    """403 when the request's rollout token names another job or trajectory (module doc)."""
    bound = request.scope.get(BOUND_ROLLOUT)
    if bound is None:
        return
    bound_job, bound_tid = bound
    if bound_tid != trajectory_id or (job_arn is not None and bound_job != job_arn):
        raise AccessDeniedError(
            f"This rollout token is for trajectory {bound_tid[:256]}; it may not act on "
            f"trajectory {(trajectory_id or '')[:256]}"
        )


def check_same_trajectory(request: Request, trajectory_id: str, job_arn: str | None) -> None:
    """403 when the request's session or rollout token names another trajectory than its body
    (module doc)."""
    scoped = request.headers.get("x-amzn-sagemaker-trajectory-id")
    if scoped and scoped != trajectory_id:
        raise AccessDeniedError(
            f"This request's session is for trajectory {scoped[:256]}; it may not act on "
            f"trajectory {trajectory_id}"
        )
    check_bound(request, job_arn, trajectory_id)
