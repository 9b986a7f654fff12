"""The emulator's HTTP face: an ASGI app factory speaking the Job Runtime wire (docs/contract.md
§3).

:func:`create_app` wraps an :class:`~agent_kit.emulator.core.Emulator` in a Starlette app with
these routes:

- ``POST /sample`` → the ``chat.completion`` JSON; ``POST /sample-with-response-stream`` → OpenAI
  SSE (or AWS event-stream frames if the caller ``Accept``\\ s only
  ``application/vnd.amazon.eventstream``); ``POST /v1/chat/completions`` → JSON or SSE per the
  body's ``stream``. Job ARN and trajectory id come from the ``X-Amzn-SageMaker-*`` headers.
- ``POST /complete-rollout``, ``POST /update-reward`` → ``{}``; job ARN from header or body.
- ``GET /health`` → ``{"status": "healthy"}`` (no auth).
- ``POST /_emulator/rollouts`` → mints an OPEN trajectory, returns a ready-to-send payload;
  ``GET /_emulator/trajectories/{id}`` → its state, turn count and reward (admin, no AWS auth).

Every error is the contract's shape: status, header ``x-amzn-ErrorType``, body ``{"Message"}``;
unknown routes are 404 ResourceNotFoundException; nothing answers 500 for bad input. Auth
accepts SigV4 (not verified) or ``Bearer sagemaker-api-key-<base64 presigned URL>``; a missing
or garbled ``Authorization`` is 403. With a shared ``secret`` (required by the CLI for non-loopback
binds) every request must also carry it, either as header ``X-Agent-Kit-Secret`` or as the AWS
access key id of its SigV4 credential / bearer token (so SDK agents need no code change: set
``AWS_ACCESS_KEY_ID`` to the secret).

With a ``path_prefix`` (the driver's per-run token behind ``agent-kit run --advertise-url``) every
route but ``GET /health`` is served only under ``/<prefix>/…``: the root paths answer 404
ResourceNotFoundException, so a tunnel exposes nothing to whoever lacks the prefix.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal, TypeVar
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from agent_kit.contract import (
    CompleteRolloutBody,
    UpdateRewardBody,
    format_validation_error,
)
from agent_kit.emulator.core import Emulator
from agent_kit.emulator.sse import chunks_from_completion, dumps, eventstream_body, sse_body
from agent_kit.errors import (
    AccessDeniedError,
    InternalServiceError,
    JobRuntimeError,
    NotFoundError,
    UsageError,
    ValidationError,
)

__all__ = ["SECRET_HEADER", "AuthMode", "create_app", "error_response"]

logger = logging.getLogger("agent_kit.emulator")

#: Header carrying the shared secret when the emulator is bound beyond loopback.
SECRET_HEADER: Final = "x-agent-kit-secret"  # noqa: S105 - a header name, not a secret
AuthMode = Literal["sigv4-or-bearer", "none"]
_BEARER_PREFIX: Final = "sagemaker-api-key-"
_EVENTSTREAM: Final = "application/vnd.amazon.eventstream"
_EMPTY: Final = b"{}"
_ROUTE_SAMPLE: Final = "/sample"
_ROUTE_STREAM: Final = "/sample-with-response-stream"
_ROUTE_CHAT: Final = "/v1/chat/completions"
_TOKEN_CACHE_MAX: Final = 4096
_PREFIX_RE: Final = re.compile(r"^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$")

Handler = Callable[[Request], Awaitable[Response]]


def error_response(exc: JobRuntimeError) -> Response:
    """The contract's error shape: status, ``x-amzn-ErrorType`` header, ``{"Message": ...}``."""
    return Response(
        dumps(exc.to_body()),
        status_code=exc.status,
        headers={"x-amzn-ErrorType": exc.error_type},
        media_type="application/json",
    )


_BodyModel = TypeVar("_BodyModel", bound=BaseModel)


def _validated(model: type[_BodyModel], body: dict[str, Any]) -> _BodyModel:
    """``body`` as ``model``; a pydantic error becomes a 400 ValidationException naming fields."""
    try:
        return model.model_validate(body)
    except PydanticValidationError as exc:
        raise ValidationError(format_validation_error(exc)) from None


def _access_key_from_sigv4(value: str) -> str:
    # AWS4-HMAC-SHA256 Credential=AKID/20260101/us-west-2/sagemaker/aws4_request, SignedHeaders=..
    for part in value[len("AWS4-HMAC-SHA256") :].split(","):
        key, _, val = part.strip().partition("=")
        if key == "Credential" and "/" in val:
            return val.split("/", 1)[0]
    raise AccessDeniedError("Malformed SigV4 Authorization header (no Credential)")


def _access_key_from_bearer(token: str) -> str:
    if not token.startswith(_BEARER_PREFIX):
        raise AccessDeniedError("Bearer token is not a SageMaker API key (sagemaker-api-key-...)")
    encoded = token[len(_BEARER_PREFIX) :]
    try:
        text = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        raise AccessDeniedError("Bearer token is not valid base64") from None
    url = urlsplit(text if "://" in text else "https://" + text)
    credential = parse_qs(url.query).get("X-Amz-Credential", [""])[0]
    if not url.netloc or "/" not in credential:
        raise AccessDeniedError("Bearer token does not encode a SigV4-presigned URL")
    return credential.split("/", 1)[0]


class _Auth:
    """Authorization checks with a small cache of already-parsed bearer tokens."""

    def __init__(self, mode: AuthMode, secret: str | None) -> None:
        self.mode = mode
        self.secret = secret
        self._tokens: dict[str, str] = {}

    def check(self, request: Request) -> None:
        headers = request.headers
        access_key = ""
        if self.mode != "none":
            value = headers.get("authorization")
            if not value:
                raise AccessDeniedError("Missing Authentication Token")
            if value.startswith("AWS4-HMAC-SHA256 "):
                access_key = _access_key_from_sigv4(value)
            elif value[:7].lower() == "bearer ":
                token = value[7:].strip()
                cached = self._tokens.get(token)
                if cached is None:
                    cached = _access_key_from_bearer(token)
                    if len(self._tokens) >= _TOKEN_CACHE_MAX:
                        self._tokens.clear()
                    self._tokens[token] = cached
                access_key = cached
            else:
                raise AccessDeniedError("Unsupported Authorization scheme")
        if self.secret is not None:
            self.check_secret(request, access_key)

    def check_secret(self, request: Request, access_key: str = "") -> None:
        if self.secret is None:
            return
        given = request.headers.get(SECRET_HEADER) or access_key
        if not hmac.compare_digest(given.encode(), self.secret.encode()):
            raise AccessDeniedError("Missing or wrong emulator secret")


async def _read_body(request: Request, limit: int) -> bytes:
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
    return b"".join(parts)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_json(raw: bytes) -> Any:
    """Strict JSON (no NaN/Infinity); anything else is a 400 ValidationException."""
    if not raw:
        raise ValidationError("Request body is empty; expected JSON")
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise ValidationError("Request body is not valid JSON") from None


def _wants_eventstream(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return _EVENTSTREAM in accept and "text/event-stream" not in accept


def create_app(
    emu: Emulator,
    *,
    auth: AuthMode = "sigv4-or-bearer",
    secret: str | None = None,
    endpoint: str | None = None,
    path_prefix: str | None = None,
) -> Starlette:
    """Build the ASGI app for ``emu`` (see the module docstring for routes and rules).

    ``auth="none"`` skips the Authorization check (benchmarks, in-process tests); ``secret``
    adds the shared-secret check to every route but ``/health``; ``endpoint`` is the URL put in
    minted payloads (default: the URL the admin request came in on, prefix included);
    ``path_prefix`` (unreserved URL characters, segments separated by ``/``) moves every route
    but ``/health`` under ``/<path_prefix>``. A bad prefix is a :class:`UsageError`.
    """
    checker = _Auth(auth, secret)
    limit = emu.max_body_bytes
    prefix = ""
    if path_prefix is not None:
        stripped = path_prefix.strip("/")
        if not _PREFIX_RE.match(stripped):
            raise UsageError("path_prefix must be URL path segments of unreserved characters")
        prefix = "/" + stripped

    def shown(path: str) -> str:
        """``path`` for logs and messages, with the (secret) prefix hidden."""
        if prefix and path.startswith(prefix + "/"):
            return "/<prefix>" + path[len(prefix) :]
        return path

    def guarded(handler: Handler) -> Handler:
        async def endpoint_fn(request: Request) -> Response:
            try:
                return await handler(request)
            except JobRuntimeError as exc:
                return error_response(exc)
            except Exception:  # a bug of ours: contract-shaped 500, logged once
                logger.exception("emulator error on %s", shown(request.url.path))
                return error_response(InternalServiceError("Internal error in the emulator"))

        return endpoint_fn

    async def _turn(request: Request, route: str, mode: str) -> Response:
        checker.check(request)
        headers = request.headers
        raw = await _read_body(request, limit)
        body = _parse_json(raw)
        if mode == "chat":
            stream_flag = body.get("stream", False) if isinstance(body, dict) else False
            if not isinstance(stream_flag, bool):
                raise ValidationError("stream must be a boolean")
            stream = stream_flag
        else:
            stream = mode == "stream"
        outcome = await emu.turn(
            headers.get("x-amzn-sagemaker-job-arn"),
            headers.get("x-amzn-sagemaker-trajectory-id"),
            body,
            route=route,
            stream=stream,
            raw=raw,
        )
        if not stream:
            return Response(outcome.response_json, media_type="application/json")
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        chunks = outcome.chunks
        if chunks is None:
            chunks = chunks_from_completion(outcome.response, include_usage=include_usage)
        elif not include_usage:
            chunks = [c for c in chunks if c.get("choices") or c.get("usage") is None]
        if route == _ROUTE_STREAM and _wants_eventstream(request):
            return Response(eventstream_body(chunks), media_type=_EVENTSTREAM)
        return Response(
            sse_body(chunks),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache"},
        )

    async def sample(request: Request) -> Response:
        return await _turn(request, _ROUTE_SAMPLE, "json")

    async def sample_stream(request: Request) -> Response:
        return await _turn(request, _ROUTE_STREAM, "stream")

    async def chat(request: Request) -> Response:
        return await _turn(request, _ROUTE_CHAT, "chat")

    def _job_arn(request: Request, body: dict[str, Any]) -> str | None:
        header = request.headers.get("x-amzn-sagemaker-job-arn")
        in_body = body.get("JobArn", body.get("job_arn"))
        if in_body is not None and not isinstance(in_body, str):
            raise ValidationError("JobArn must be a string")
        if header and in_body and header != in_body:
            raise ValidationError("JobArn in the header and in the body differ")
        return header or in_body

    async def _control_body(request: Request) -> dict[str, Any]:
        checker.check(request)
        body = _parse_json(await _read_body(request, limit))
        if not isinstance(body, dict):
            raise ValidationError("Request body must be a JSON object")
        return body

    async def complete_rollout(request: Request) -> Response:
        body = await _control_body(request)
        arn = _job_arn(request, body)
        emu.complete_rollout(arn, _validated(CompleteRolloutBody, body))
        return Response(_EMPTY, media_type="application/json")

    async def update_reward(request: Request) -> Response:
        body = await _control_body(request)
        arn = _job_arn(request, body)
        emu.update_reward(arn, _validated(UpdateRewardBody, body))
        return Response(_EMPTY, media_type="application/json")

    async def health(request: Request) -> Response:
        return Response(b'{"status":"healthy"}', media_type="application/json")

    async def mint_rollout(request: Request) -> Response:
        checker.check_secret(request)
        raw = await _read_body(request, limit)
        body = _parse_json(raw) if raw.strip() else {}
        if not isinstance(body, dict):
            raise ValidationError("Request body must be a JSON object")
        arn = body.get("jobArn", body.get("job_arn")) or emu.default_job_arn
        if not isinstance(arn, str):
            raise ValidationError("No job: pass jobArn or start the emulator with a job")
        arn = emu.check_job(arn)
        prompt = body.get("prompt", "")
        if not isinstance(prompt, str):
            prompt = json.dumps(prompt)
        params = body.get("inferenceParams", body.get("inference_params"))
        if params is not None and not isinstance(params, dict):
            raise ValidationError("inferenceParams must be an object")
        tid = body.get("rolloutId", body.get("trajectoryId"))
        if tid is not None and not (isinstance(tid, str) and 1 <= len(tid) <= 256):
            raise ValidationError("rolloutId must be a string of 1..256 characters")
        if tid is not None and emu.state(tid) is not None:
            raise ValidationError(f"Trajectory {tid} already exists")
        traj = emu.open_trajectory(arn, prompt, trajectory_id=tid)
        url = endpoint or str(request.base_url).rstrip("/") + prefix
        return Response(
            dumps(emu.rollout_payload(traj, url, params)), media_type="application/json"
        )

    async def show_trajectory(request: Request) -> Response:
        checker.check_secret(request)
        tid = request.path_params["trajectory_id"]
        row = emu.store.get_trajectory(tid)
        if row is None:
            raise NotFoundError(f"Trajectory {tid} not found")
        reward = emu.store.get_reward(tid)
        info = {
            "trajectoryId": row.id,
            "jobArn": row.job_arn,
            "state": getattr(emu.state(tid), "value", row.state),
            "turns": emu.turn_count(tid),
            "reason": row.reason,
            "rewards": None if reward is None else reward.rewards,
        }
        return Response(dumps(info), media_type="application/json")

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        if status == 405:
            err: JobRuntimeError = ValidationError(
                f"Method {request.method} not allowed on {shown(request.url.path)}"
            )
        else:
            err = NotFoundError(f"Unknown route {request.method} {shown(request.url.path)[:200]}")
        return error_response(err)

    routes = [
        Route(prefix + _ROUTE_SAMPLE, guarded(sample), methods=["POST"]),
        Route(prefix + _ROUTE_STREAM, guarded(sample_stream), methods=["POST"]),
        Route(prefix + _ROUTE_CHAT, guarded(chat), methods=["POST"]),
        Route(prefix + "/complete-rollout", guarded(complete_rollout), methods=["POST"]),
        Route(prefix + "/update-reward", guarded(update_reward), methods=["POST"]),
        Route("/health", health, methods=["GET"]),
        Route(prefix + "/_emulator/rollouts", guarded(mint_rollout), methods=["POST"]),
        Route(
            prefix + "/_emulator/trajectories/{trajectory_id}",
            guarded(show_trajectory),
            methods=["GET"],
        ),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={404: not_found, 405: not_found},
    )
