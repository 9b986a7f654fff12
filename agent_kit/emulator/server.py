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
- ``POST /aux/v1/chat/completions`` → the auxiliary model's answer to a judge's or simulated
  user's call (header ``X-Agent-Kit-Aux-Kind: judge|user``; auth and headers as the chat
  route), recorded as an auxiliary turn, never a policy turn (:mod:`~agent_kit.emulator.aux_route`).
- ``POST /trainer/{trajectory_id}/v1/chat/completions`` (only with a ``trainer_key``): the
  chat route as an open-source trainer serves it to agents under the agentcore-rl-toolkit
  contract (docs/trainers.md): the trajectory is named by the path (the per-rollout
  ``base_url`` the driver sends), the job is the trajectory's, and the caller must send
  ``Authorization: Bearer <that trajectory's api_key>``
  (:func:`~agent_kit.emulator.run_keys.trainer_api_key` of ``trainer_key``, the job and the
  trajectory; 403 otherwise, also for a trajectory that does not exist). Turns are recorded
  like any other.
- ``GET /health`` → ``{"status": "healthy"}`` (no auth).
- ``POST /_emulator/rollouts`` (``Content-Type: application/json`` only) → mints an OPEN
  trajectory, returns a ready-to-send payload whose ``endpoint`` is ``create_app``'s
  ``endpoint`` or the server's own address (never the request's ``Host`` header) and, when
  the app has the run's keys, whose ``metadata.apiKey`` is the trajectory's rollout token
  (at most ``max_minted`` rollouts and ``max_minted_bytes`` bytes of prompts: 402
  ServiceQuotaExceededException past either, since the emulator keeps every one);
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

This module assembles the app; its parts are their own modules: the endpoints
(:mod:`~agent_kit.emulator.routes`), what they read of a request
(:mod:`~agent_kit.emulator.http_request`), the error answers
(:mod:`~agent_kit.emulator.error_shapes`), the request gate and last-resort guard
(:mod:`~agent_kit.emulator.gate`) and the auth checks (:mod:`~agent_kit.emulator.auth`).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Mapping
from typing import Final

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from agent_kit.emulator.auth import Auth, AuthGate, AuthMode
from agent_kit.emulator.aux_route import AUX_PREFIX
from agent_kit.emulator.core import Emulator
from agent_kit.emulator.error_shapes import ErrorShapes
from agent_kit.emulator.gate import Guard, RequestGate
from agent_kit.emulator.routes import (
    MINT_MAX_BYTES,
    MINT_MAX_ROLLOUTS,
    ROUTE_CHAT,
    ROUTE_SAMPLE,
    ROUTE_STREAM,
    Routes,
)
from agent_kit.emulator.run_keys import RunKeys, trainer_api_key
from agent_kit.errors import AccessDeniedError, JobRuntimeError, UsageError

__all__ = ["create_app"]

_PREFIX_RE: Final = re.compile(r"^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$")


def _trainer_check(key: str, emu: Emulator) -> Callable[[Request], None]:
    """The trainer route's check: ``Authorization: Bearer <api_key>`` of the trajectory the
    path names (bound to it and its job; a trajectory that does not exist has no key)."""

    def check(request: Request) -> None:
        tid = str(request.path_params.get("trajectory_id", ""))
        row = emu.store.get_trajectory(tid) if 0 < len(tid) <= 256 else None
        expected = trainer_api_key(key, "" if row is None else row.job_arn, tid)
        value = request.headers.get("authorization", "")
        given = value[7:].strip() if value[:7].lower() == "bearer " else ""
        if row is None or not hmac.compare_digest(given.encode(), expected.encode()):
            raise AccessDeniedError(
                "Missing or wrong api_key for this trainer base_url (each rollout's base_url "
                "takes the api_key of its own _rollout block)"
            )

    return check


def _trainer_route(key: str, emu: Emulator, r: Routes) -> Route:
    """The trainer's chat route, each trajectory's path guarded by its own api_key."""
    trainer = [Middleware(AuthGate, check=_trainer_check(key, emu))]
    path = "/trainer/{trajectory_id}" + ROUTE_CHAT
    return Route(path, r.trainer_chat, methods=["POST"], middleware=trainer)


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
    max_minted: int = MINT_MAX_ROLLOUTS,
    max_minted_bytes: int = MINT_MAX_BYTES,
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
    (see the module docstring), each trajectory's path guarded by the api_key derived from it
    (:func:`~agent_kit.emulator.run_keys.trainer_api_key`); ``max_minted`` and
    ``max_minted_bytes`` bound the rollouts ``POST /_emulator/rollouts`` mints and the bytes of
    their prompts (402 ServiceQuotaExceededException past either). A bad prefix is a
    :class:`UsageError`.
    """
    prefix = _prefix(path_prefix)
    if credentials is None and keys is not None:
        credentials = keys.credentials
    mode: AuthMode = auth or ("verify" if credentials else "sigv4-or-bearer")
    checker = Auth(mode, secret, credentials, keys, region=emu.region)
    shapes = ErrorShapes(prefix)
    bounds = {"max_minted": max_minted, "max_minted_bytes": max_minted_bytes}
    r = Routes(emu, endpoint, prefix, keys, **bounds)
    service = [Middleware(AuthGate, check=checker.check)]
    admin = [Middleware(AuthGate, check=checker.check_secret)]
    post = ["POST"]
    routes: list[BaseRoute] = [
        Route(ROUTE_SAMPLE, r.sample, methods=post, middleware=service),
        Route(ROUTE_STREAM, r.sample_stream, methods=post, middleware=service),
        Route(ROUTE_CHAT, r.chat, methods=post, middleware=service),
        Route(AUX_PREFIX + ROUTE_CHAT, r.aux_chat, methods=post, middleware=service),
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
        routes.append(_trainer_route(trainer_key, emu, r))
    return Starlette(
        routes=[
            Route("/health", _health, methods=["GET"]),
            *([Mount(prefix, routes=routes)] if prefix else routes),
        ],
        middleware=[Middleware(Guard, shapes=shapes, gate=gate)],
        exception_handlers={
            JobRuntimeError: shapes.service_error,
            404: shapes.unrouted,
            405: shapes.unrouted,
        },
    )
