"""Agent-side routes for the Lambda forwarder (runtime half).

Agents hosted on EKS/EC2/Fargate are reached through a Lambda forwarder (see
``agent-kit package --target lambda-forwarder``) that POSTs the MTRL payload to
``{AGENT_ENDPOINT}/rollout`` with ``Authorization: Bearer <secret>``.
:func:`enable_forwarder_routes` adds that route to a ``BedrockAgentCoreApp``:

- ``POST /rollout``: checks the bearer secret (constant-time), then runs the app's own
  ``/invocations`` handler on the same request, so a forwarded rollout behaves exactly like an
  AgentCore invocation. 401 on a missing/wrong secret; 500 when no secret is configured.
- ``GET /health``: the app's ``/ping`` answer (no secret needed, for load-balancer checks).

Imports only the standard library and Starlette (a dependency of bedrock-agentcore).
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ["DEFAULT_SECRET_ENV", "enable_forwarder_routes"]

#: Environment variable holding the shared bearer secret the forwarder sends.
DEFAULT_SECRET_ENV = "AGENT_KIT_FORWARDER_SECRET"  # noqa: S105 - a variable name, not a secret

_Endpoint = Callable[[Request], Any]


def _endpoint(app: Any, path: str) -> _Endpoint:
    for route in app.router.routes:
        if isinstance(route, Route) and route.path == path:
            endpoint: _Endpoint = route.endpoint
            return endpoint
    raise ValueError(f"the app has no {path} route; is it a BedrockAgentCoreApp?")


def _error(status: int, error_type: str, message: str) -> JSONResponse:
    return JSONResponse({"errorType": error_type, "errorMessage": message}, status_code=status)


def enable_forwarder_routes(app: Any, secret_env: str = DEFAULT_SECRET_ENV) -> None:
    """Add ``POST /rollout`` (bearer-authenticated) and ``GET /health`` to ``app``.

    The secret is read from ``secret_env`` at request time, so the app still imports and runs
    locally without it; ``/rollout`` refuses every request until it is set. Calling this twice
    on the same app is a no-op.
    """
    if any(isinstance(r, Route) and r.path == "/rollout" for r in app.router.routes):
        return
    invocations = _endpoint(app, "/invocations")
    ping = _endpoint(app, "/ping")

    async def rollout(request: Request) -> Response:
        secret = os.environ.get(secret_env, "")
        if not secret:
            return _error(500, "InternalServerError", f"{secret_env} is not configured")
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode(), secret.encode()
        ):
            return _error(401, "AccessDenied", "missing or wrong bearer secret")
        result = invocations(request)
        if isinstance(result, Awaitable):
            result = await result
        response: Response = result
        return response

    async def health(request: Request) -> Response:
        result = ping(request)
        if isinstance(result, Awaitable):
            result = await result
        response: Response = result
        return response

    app.router.routes.append(Route("/rollout", rollout, methods=["POST"]))
    app.router.routes.append(Route("/health", health, methods=["GET"]))
