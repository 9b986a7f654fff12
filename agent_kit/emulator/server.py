"""The emulator's HTTP face: an ASGI app factory speaking the Job Runtime wire (docs/contract.md
§3).

:func:`create_app` wraps an :class:`~agent_kit.emulator.core.Emulator` in a Starlette app with
these routes:

- ``POST /sample`` → the ``chat.completion`` JSON; ``POST /sample-with-response-stream`` → OpenAI
  SSE (or AWS event-stream frames if the caller ``Accept``\\ s only
  ``application/vnd.amazon.eventstream``); ``POST /v1/chat/completions`` → JSON or SSE per the
  body's ``stream``. Job ARN and trajectory id come from the ``X-Amzn-SageMaker-*`` headers; the
  body is validated as :class:`~agent_kit.emulator.schemas.ChatCompletionBody` (known roles, a
  string ``model``, typed sampling parameters) and must be strict JSON without lone UTF-16
  surrogates (``"\\ud800"``).
- ``POST /complete-rollout``, ``POST /update-reward`` → ``{}``; job ARN from header or body. A
  request whose ``X-Amzn-SageMaker-Trajectory-Id`` header (the trajectory its session is for)
  names another trajectory than its body is refused with 403 AccessDeniedException
  (**[chosen]**: a rollout's credentials act on that rollout only). A rollout token
  (``Bearer agent-kit-rollout-…``, minted from the run's secret) acts on its own job and
  trajectory only: a turn, CompleteRollout or UpdateReward for any other is 403
  AccessDeniedException, and a token the run did not mint is 403 too.
- ``POST /trainer/{trajectory_id}/v1/chat/completions`` (only with a ``trainer_key``): the
  chat route as an open-source trainer serves it to agents under the agentcore-rl-toolkit
  contract (docs/trainers.md): the trajectory is named by the path (the per-rollout
  ``base_url`` the driver sends), the job is the trajectory's, and the caller must send
  ``Authorization: Bearer <trainer_key>`` (403 otherwise). Turns are recorded like any other.
- ``GET /health`` → ``{"status": "healthy"}`` (no auth).
- ``POST /_emulator/rollouts`` (``Content-Type: application/json`` only) → mints an OPEN
  trajectory, returns a ready-to-send payload whose ``endpoint`` is ``create_app``'s
  ``endpoint`` or the server's own address (never the request's ``Host`` header) and, when
  the app has the run's keys, whose ``metadata.apiKey`` is the trajectory's rollout token;
  ``GET /_emulator/trajectories/{id}`` → its state, turn count and reward (admin, no AWS auth).

Errors are raised as :class:`~agent_kit.errors.JobRuntimeError` anywhere below and answered by
the app's exception handlers, in the shape of the route's caller: the contract's (status, header
``x-amzn-ErrorType``, body ``{"Message"}``) everywhere, except that ``/v1/chat/completions``
answers in OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``, ``code`` = the
``x-amzn-ErrorType`` name, header kept), which OpenAI clients read. Unknown routes are 404
ResourceNotFoundException; a 4xx is logged as one INFO line; nothing answers 500 for bad input
(a bug of ours is one logged traceback and a 500 in the same shape).

Auth is a route middleware: SigV4 or ``Bearer sagemaker-api-key-<base64 presigned URL>``
(signatures verified against ``credentials`` in ``auth="verify"``, else only their shape); a
missing or garbled ``Authorization`` is 403. With a shared ``secret``
(required by the CLI for non-loopback binds) every request must also carry it, either as header
``X-Agent-Kit-Secret`` or as the AWS access key id of its SigV4 credential / bearer token (so
SDK agents need no code change: set ``AWS_ACCESS_KEY_ID`` to the secret).

With a ``path_prefix`` (the driver's per-run token behind ``agent-kit run --advertise-url``) every
route but ``GET /health`` is mounted under ``/<prefix>/…``: the root paths answer 404
ResourceNotFoundException, so a tunnel exposes nothing to whoever lacks the prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_kit.contract import CompleteRolloutBody, UpdateRewardBody
from agent_kit.emulator.auth import (
    BODY_CHECK,
    BOUND_ROLLOUT,
    SECRET_HEADER,
    Auth,
    AuthGate,
    AuthMode,
)
from agent_kit.emulator.chat_request import parse_chat
from agent_kit.emulator.core import Emulator
from agent_kit.emulator.run_keys import RunKeys
from agent_kit.emulator.schemas import MintRolloutBody, parse_body
from agent_kit.emulator.sse import chunks_from_completion, dumps, eventstream_body, sse_body
from agent_kit.errors import (
    AccessDeniedError,
    InternalServiceError,
    JobRuntimeError,
    NotFoundError,
    RunStoreError,
    UsageError,
    ValidationError,
)

__all__ = [
    "SECRET_HEADER",
    "AuthMode",
    "RequestGate",
    "create_app",
    "error_response",
    "openai_error_response",
]

logger = logging.getLogger("agent_kit.emulator")

_EVENTSTREAM: Final = "application/vnd.amazon.eventstream"
_EMPTY: Final = b"{}"
_ROUTE_SAMPLE: Final = "/sample"
_ROUTE_STREAM: Final = "/sample-with-response-stream"
_ROUTE_CHAT: Final = "/v1/chat/completions"
_PREFIX_RE: Final = re.compile(r"^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$")
#: A JSON ``\uXXXX`` escape of a UTF-16 surrogate (the only way a JSON text can hold a lone one).
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")
#: OpenAI's error ``type`` for a status (anything else: ``invalid_request_error``).
_OPENAI_TYPES: Final = {402: "insufficient_quota", 429: "rate_limit_error"}


# -- error shapes ----------------------------------------------------------------------------


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


class _Shapes:
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
        if path.endswith(_ROUTE_CHAT):
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


class _Guard:
    """Outermost middleware: a bug of ours (any exception no handler took) becomes one logged
    traceback and a 500 in the route's shape, never a crashed connection; with a
    :class:`RequestGate`, requests pass through it."""

    def __init__(self, app: ASGIApp, shapes: _Shapes, gate: RequestGate | None) -> None:
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
        except Exception:
            logger.exception("emulator error on %s", self.shapes.shown(scope["path"]))
            if not started:
                err = InternalServiceError("Internal error in the emulator")
                await self.shapes.respond(scope["path"], err)(scope, receive, send)


# -- bodies ----------------------------------------------------------------------------------


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
    body = b"".join(parts)
    check = request.scope.get(BODY_CHECK)
    if check is not None:  # a SigV4 signature to verify, which covers the body
        check(body)
    return body


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_json(raw: bytes) -> Any:
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


def _wants_eventstream(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return _EVENTSTREAM in accept and "text/event-stream" not in accept


def _is_json(content_type: str | None) -> bool:
    """Whether a Content-Type is JSON (``application/json``, parameters allowed)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json"


def _served_url(scope: Scope) -> str:
    """The URL the request reached, from the server's own address (the ASGI ``server``, the
    bound socket), never from the client's ``Host`` header."""
    host, port = scope.get("server") or ("127.0.0.1", None)
    scheme = scope.get("scheme", "http")
    shown = f"[{host}]" if ":" in host else host
    default = 443 if scheme == "https" else 80
    return f"{scheme}://{shown}" if port in (None, default) else f"{scheme}://{shown}:{port}"


def _job_arn(request: Request, in_body: str | None) -> str | None:
    header = request.headers.get("x-amzn-sagemaker-job-arn")
    if header and in_body and header != in_body:
        raise ValidationError("JobArn in the header and in the body differ")
    return header or in_body


def _bound(request: Request, job_arn: str | None, trajectory_id: str | None) -> None:
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


def _same_trajectory(request: Request, trajectory_id: str, job_arn: str | None) -> None:
    """403 when the request's session or rollout token names another trajectory than its body
    (module doc)."""
    scoped = request.headers.get("x-amzn-sagemaker-trajectory-id")
    if scoped and scoped != trajectory_id:
        raise AccessDeniedError(
            f"This request's session is for trajectory {scoped[:256]}; it may not act on "
            f"trajectory {trajectory_id}"
        )
    _bound(request, job_arn, trajectory_id)


# -- the routes ------------------------------------------------------------------------------


class _Routes:
    """The endpoints of one app over one emulator (auth is done before they run)."""

    def __init__(
        self, emu: Emulator, endpoint: str | None, prefix: str, keys: RunKeys | None
    ) -> None:
        self.emu = emu
        self.keys = keys
        self.limit = emu.max_body_bytes
        self.endpoint = endpoint
        self.prefix = prefix

    async def _json(self, request: Request) -> tuple[bytes, Any]:
        raw = await _read_body(request, self.limit)
        return raw, _parse_json(raw)

    async def _turn(
        self,
        request: Request,
        route: str,
        job_arn: str | None = None,
        trajectory_id: str | None = None,
    ) -> Response:
        headers = request.headers
        job_arn = job_arn or headers.get("x-amzn-sagemaker-job-arn")
        trajectory_id = trajectory_id or headers.get("x-amzn-sagemaker-trajectory-id")
        _bound(request, job_arn, trajectory_id)
        raw, body = await self._json(request)
        chat = parse_chat(body)
        stream = chat.stream if route == _ROUTE_CHAT else route == _ROUTE_STREAM
        outcome = await self.emu.turn(
            job_arn,
            trajectory_id,
            body,
            route=route,
            stream=stream,
            raw=raw,
            parsed=chat,
            peer=f"{request.client.host}:{request.client.port}" if request.client else None,
        )
        if not stream:
            body_bytes = outcome.response_json
            if outcome.truncated:  # chaos: a JSON body that stops mid-way
                body_bytes = body_bytes[: max(1, len(body_bytes) // 2)]
            return Response(body_bytes, media_type="application/json")
        chunks = outcome.chunks
        if chunks is None:
            chunks = chunks_from_completion(outcome.response, include_usage=chat.include_usage)
        elif not chat.include_usage:
            chunks = [c for c in chunks if c.get("choices") or c.get("usage") is None]
        if route == _ROUTE_STREAM and _wants_eventstream(request):
            frames = eventstream_body(chunks[:1] if outcome.truncated else chunks)
            return Response(frames, media_type=_EVENTSTREAM)
        sse = sse_body(chunks)
        if outcome.truncated:  # chaos: the stream stops after its first event, no [DONE]
            sse = sse[: sse.index(b"\n\n") + 2]
        return Response(sse, media_type="text/event-stream", headers={"cache-control": "no-cache"})

    async def sample(self, request: Request) -> Response:
        """``POST /sample``."""
        return await self._turn(request, _ROUTE_SAMPLE)

    async def sample_stream(self, request: Request) -> Response:
        """``POST /sample-with-response-stream``."""
        return await self._turn(request, _ROUTE_STREAM)

    async def chat(self, request: Request) -> Response:
        """``POST /v1/chat/completions``."""
        return await self._turn(request, _ROUTE_CHAT)

    async def trainer_chat(self, request: Request) -> Response:
        """``POST /trainer/{trajectory_id}/v1/chat/completions`` (the trainer's base_url)."""
        tid = request.path_params["trajectory_id"]
        row = self.emu.store.get_trajectory(tid)
        if row is None:
            raise NotFoundError(f"Trajectory {tid[:256]} not found")
        return await self._turn(request, _ROUTE_CHAT, row.job_arn, tid)

    async def complete_rollout(self, request: Request) -> Response:
        """``POST /complete-rollout``."""
        body = parse_body(CompleteRolloutBody, (await self._json(request))[1])
        arn = _job_arn(request, body.job_arn)
        _same_trajectory(request, body.trajectory_id, arn)
        self.emu.complete_rollout(arn, body)
        return Response(_EMPTY, media_type="application/json")

    async def update_reward(self, request: Request) -> Response:
        """``POST /update-reward``."""
        body = parse_body(UpdateRewardBody, (await self._json(request))[1])
        arn = _job_arn(request, body.job_arn)
        _same_trajectory(request, body.trajectory_id, arn)
        self.emu.update_reward(arn, body)
        return Response(_EMPTY, media_type="application/json")

    async def mint_rollout(self, request: Request) -> Response:
        """``POST /_emulator/rollouts``: an OPEN trajectory and its ready-to-send payload."""
        if not _is_json(request.headers.get("content-type")):
            raise ValidationError(
                "POST /_emulator/rollouts takes JSON only: send Content-Type: application/json"
            )
        raw = await _read_body(request, self.limit)
        body = parse_body(MintRolloutBody, _parse_json(raw) if raw.strip() else {})
        arn = body.job_arn or self.emu.default_job_arn
        if arn is None:
            raise ValidationError("No job: pass jobArn or start the emulator with a job")
        arn = self.emu.check_job(arn)
        tid = body.rollout_id
        if tid is not None and self.emu.state(tid) is not None:
            raise ValidationError(f"Trajectory {tid} already exists")
        traj = self.emu.open_trajectory(arn, body.prompt_text, trajectory_id=tid)
        url = self.endpoint or _served_url(request.scope) + self.prefix
        token = None if self.keys is None else self.keys.mint(arn, traj.id)
        payload = self.emu.rollout_payload(traj, url, body.inference_params, api_key=token)
        return Response(dumps(payload), media_type="application/json")

    async def show_trajectory(self, request: Request) -> Response:
        """``GET /_emulator/trajectories/{trajectory_id}``."""
        tid = request.path_params["trajectory_id"]
        row = self.emu.store.get_trajectory(tid)
        if row is None:
            raise NotFoundError(f"Trajectory {tid} not found")
        reward = self.emu.store.get_reward(tid)
        info = {
            "trajectoryId": row.id,
            "jobArn": row.job_arn,
            "state": getattr(self.emu.state(tid), "value", row.state),
            "turns": self.emu.turn_count(tid),
            "reason": row.reason,
            "rewards": None if reward is None else reward.rewards,
        }
        return Response(dumps(info), media_type="application/json")


def _trainer_check(key: str) -> Callable[[Request], None]:
    """The trainer route's check: ``Authorization: Bearer <key>`` and nothing else."""

    def check(request: Request) -> None:
        value = request.headers.get("authorization", "")
        given = value[7:].strip() if value[:7].lower() == "bearer " else ""
        if not hmac.compare_digest(given.encode(), key.encode()):
            raise AccessDeniedError("Missing or wrong api_key for the trainer's base_url")

    return check


async def _health(request: Request) -> Response:
    return Response(b'{"status":"healthy"}', media_type="application/json")


def _prefix(path_prefix: str | None) -> str:
    if path_prefix is None:
        return ""
    stripped = path_prefix.strip("/")
    if not _PREFIX_RE.match(stripped):
        raise UsageError("path_prefix must be URL path segments of unreserved characters")
    return "/" + stripped


def create_app(
    emu: Emulator,
    *,
    auth: AuthMode | None = None,
    secret: str | None = None,
    credentials: Mapping[str, str] | None = None,
    keys: RunKeys | None = None,
    endpoint: str | None = None,
    path_prefix: str | None = None,
    gate: RequestGate | None = None,
    trainer_key: str | None = None,
) -> Starlette:
    """Build the ASGI app for ``emu`` (see the module docstring for routes and rules).

    ``auth`` (default: ``"verify"`` when ``credentials`` are given, else ``"sigv4-or-bearer"``)
    is how the Authorization header is checked: ``"verify"`` verifies SigV4 and bearer
    signatures against ``credentials`` (access key id → secret access key, those the run gave
    its agents), ``"sigv4-or-bearer"`` (lenient) only their shape, ``"none"`` nothing
    (benchmarks, in-process tests); ``keys`` (the run's
    :class:`~agent_kit.emulator.run_keys.RunKeys`) are the default ``credentials`` and let the
    app mint and check rollout tokens (minted payloads carry one as ``metadata.apiKey``; a
    token acts on its own trajectory only, in every mode but ``"none"``); ``secret``
    adds the shared-secret check to every route but ``/health``; ``endpoint`` is the URL put in
    minted payloads (default: the server's own address, prefix included; never the request's
    ``Host``);
    ``path_prefix`` (unreserved URL characters, segments separated by ``/``) mounts every route
    but ``/health`` under ``/<path_prefix>``; every request passes ``gate`` (see
    :class:`RequestGate`) when one is given; ``trainer_key`` serves the trainer's chat route
    (see the module docstring) guarded by that bearer key. A bad prefix is a
    :class:`UsageError`.
    """
    prefix = _prefix(path_prefix)
    if credentials is None and keys is not None:
        credentials = keys.credentials
    mode: AuthMode = auth or ("verify" if credentials else "sigv4-or-bearer")
    checker = Auth(mode, secret, credentials, keys)
    shapes = _Shapes(prefix)
    r = _Routes(emu, endpoint, prefix, keys)
    service = [Middleware(AuthGate, check=checker.check)]
    admin = [Middleware(AuthGate, check=checker.check_secret)]
    post = ["POST"]
    routes: list[BaseRoute] = [
        Route(_ROUTE_SAMPLE, r.sample, methods=post, middleware=service),
        Route(_ROUTE_STREAM, r.sample_stream, methods=post, middleware=service),
        Route(_ROUTE_CHAT, r.chat, methods=post, middleware=service),
        Route("/complete-rollout", r.complete_rollout, methods=post, middleware=service),
        Route("/update-reward", r.update_reward, methods=post, middleware=service),
        Route("/_emulator/rollouts", r.mint_rollout, methods=post, middleware=admin),
        Route(
            "/_emulator/trajectories/{trajectory_id}",
            r.show_trajectory,
            methods=["GET"],
            middleware=admin,
        ),
    ]
    if trainer_key is not None:
        trainer = [Middleware(AuthGate, check=_trainer_check(trainer_key))]
        routes.append(
            Route(
                "/trainer/{trajectory_id}" + _ROUTE_CHAT,
                r.trainer_chat,
                methods=post,
                middleware=trainer,
            )
        )
    return Starlette(
        routes=[
            Route("/health", _health, methods=["GET"]),
            *([Mount(prefix, routes=routes)] if prefix else routes),
        ],
        middleware=[Middleware(_Guard, shapes=shapes, gate=gate)],
        exception_handlers={
            JobRuntimeError: shapes.service_error,
            404: shapes.unrouted,
            405: shapes.unrouted,
        },
    )
