"""Agent-side routes for the Lambda forwarder (runtime half).

Agents hosted on EKS/EC2/Fargate are reached through a Lambda forwarder (see
``agent-kit package --target lambda-forwarder``) that POSTs the MTRL payload to
``{AGENT_ENDPOINT}/rollout`` with ``Authorization: Bearer <secret>``.
:func:`enable_forwarder_routes` adds that route to a ``BedrockAgentCoreApp``:

- ``POST /rollout``: checks the bearer secret (constant-time), then runs the app's own
  ``/invocations`` handler on the same request, so a forwarded rollout behaves exactly like an
  AgentCore invocation. 401 on a missing/wrong secret; 500 when no secret is configured
  (``AGENT_KIT_FORWARDER_SECRET``, which :class:`~agent_kit.app.RolloutApp` reads at its door
  and hands to :func:`enable_forwarder_routes`).
- ``GET /health``: the app's ``/ping`` answer (no secret needed, for load-balancer checks).

Imports only the standard library and Starlette (a dependency of bedrock-agentcore).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ["enable_forwarder_routes"]

#: The variable that gives the secret (named in the answer when none is configured).
_SECRET_NAME: Final = "AGENT_KIT_FORWARDER_SECRET"  # noqa: S105 - a variable name, not a secret

_Endpoint = Callable[[Request], Any]


def _endpoint(app: Any, path: str) -> _Endpoint:
    for route in app.router.routes:
        if isinstance(route, Route) and route.path == path:
            endpoint: _Endpoint = route.endpoint
            return endpoint
    raise ValueError(f"the app has no {path} route; is it a BedrockAgentCoreApp?")


def _error(status: int, error_type: str, message: str) -> JSONResponse:
    return JSONResponse({"errorType": error_type, "errorMessage": message}, status_code=status)


def enable_forwarder_routes(app: Any, secret: str | None) -> None:
    """Add ``POST /rollout`` (bearer-authenticated with ``secret``) and ``GET /health`` to
    ``app``.

    Without a secret the app still imports and runs locally; ``/rollout`` then refuses every
    request (500, naming ``AGENT_KIT_FORWARDER_SECRET``). Calling this twice on the same app is
    a no-op.
    """
    if any(isinstance(r, Route) and r.path == "/rollout" for r in app.router.routes):
        return
    invocations = _endpoint(app, "/invocations")
    ping = _endpoint(app, "/ping")

    async def rollout(request: Request) -> Response:
        if not secret:
            return _error(500, "InternalServerError", f"{_SECRET_NAME} is not configured")
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
