"""Who may call the emulator: the Authorization check and the shared secret, as route middleware.

Given the credentials a run handed its agents (``auth="verify"``), the emulator verifies SigV4
and bearer signatures against them (:mod:`agent_kit.emulator.sigv4`); without them (lenient,
``"sigv4-or-bearer"``) it only checks that a request *carries* credentials of a shape the
service accepts — SigV4 (``AWS4-HMAC-SHA256
Credential=AKID/…``) or ``Bearer sagemaker-api-key-<base64 of a SigV4-presigned URL>`` — and
answers 403 AccessDeniedException for a missing or garbled one (docs/contract.md §3). With a
shared secret every request must also carry it, as header ``X-Agent-Kit-Secret`` or as the
access key id of its credential. A rollout token the run minted (``Bearer
agent-kit-rollout-…``, :mod:`agent_kit.emulator.run_keys`) is always checked against the run's
secret and binds the request to its one trajectory. :class:`AuthGate` runs the check for one
route, after routing
(so an unknown path is still a 404 and a wrong method a 405), and raises into the app's
exception handlers.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable, Mapping
from typing import Final, Literal
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_kit.emulator.run_keys import TOKEN_PREFIX, RunKeys
from agent_kit.emulator.sigv4 import LENIENT_HINT, Verifier
from agent_kit.errors import AccessDeniedError

__all__ = ["BODY_CHECK", "BOUND_ROLLOUT", "SECRET_HEADER", "Auth", "AuthGate", "AuthMode"]

#: Header carrying the shared secret when the emulator is bound beyond loopback.
SECRET_HEADER: Final = "x-agent-kit-secret"  # noqa: S105 - a header name, not a secret
AuthMode = Literal["verify", "sigv4-or-bearer", "none"]
#: Scope key of the check that needs the request body (a SigV4 header's signature), run by the
#: route once it has read the body.
BODY_CHECK: Final = "agent_kit.body_check"
#: Scope key of the (job ARN, trajectory id) a rollout token binds the request to.
BOUND_ROLLOUT: Final = "agent_kit.bound_rollout"
_BEARER_PREFIX: Final = "sagemaker-api-key-"
_TOKEN_CACHE_MAX: Final = 4096


def _access_key_from_sigv4(value: str) -> str:
    # AWS4-HMAC-SHA256 Credential=AKID/20260101/us-west-2/sagemaker/aws4_request, SignedHeaders=..
    for part in value[len("AWS4-HMAC-SHA256") :].split(","):
        key, _, val = part.strip().partition("=")
        if key == "Credential" and "/" in val:
            return val.split("/", 1)[0]
    raise AccessDeniedError("Malformed SigV4 Authorization header (no Credential)")


def _presigned_url(token: str) -> str:
    if not token.startswith(_BEARER_PREFIX):
        raise AccessDeniedError("Bearer token is not a SageMaker API key (sagemaker-api-key-...)")
    encoded = token[len(_BEARER_PREFIX) :]
    try:
        text = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        raise AccessDeniedError("Bearer token is not valid base64") from None
    return text


def _access_key_from_bearer(token: str) -> str:
    text = _presigned_url(token)
    url = urlsplit(text if "://" in text else "https://" + text)
    credential = parse_qs(url.query).get("X-Amz-Credential", [""])[0]
    if not url.netloc or "/" not in credential:
        raise AccessDeniedError("Bearer token does not encode a SigV4-presigned URL")
    return credential.split("/", 1)[0]


class Auth:
    """The checks of one app: ``mode`` for the Authorization header, ``secret`` if any.

    ``"verify"`` checks the signature of a SigV4 header or of a bearer token's presigned URL
    against ``credentials`` (access key id → secret access key: what the run gave its agents);
    ``"sigv4-or-bearer"`` (lenient) checks only their shape; ``"none"`` checks nothing. Parsed
    and verified bearer tokens are cached (an agent sends the same one for hours). With
    ``keys`` (the run's :class:`~agent_kit.emulator.run_keys.RunKeys`), a rollout token
    (``Bearer agent-kit-rollout-…``) is checked against the run's secret in every mode but
    ``"none"`` and binds the request to its trajectory (scope key :data:`BOUND_ROLLOUT`).
    ``region`` (the emulator's) is the only region a verified signature's scope may name; a
    verified SigV4 header must also be dated within 5 minutes of now, as AWS requires
    (:class:`~agent_kit.emulator.sigv4.Verifier`); a repeated signature is no reason to refuse.
    """

    def __init__(
        self,
        mode: AuthMode,
        secret: str | None,
        credentials: Mapping[str, str] | None = None,
        keys: RunKeys | None = None,
        region: str | None = None,
    ) -> None:
        self.mode = mode
        self.secret = secret
        self.keys = keys
        self.verifier = Verifier(credentials or {}, region=region) if mode == "verify" else None
        if self.verifier is not None and not self.verifier.credentials:
            raise ValueError(f"auth='verify' needs the run's credentials: {LENIENT_HINT}")
        self._tokens: dict[str, str] = {}

    def check(self, request: Request) -> None:
        """The service routes' check: credentials of a known shape (verified in ``"verify"``
        mode), then the shared secret; AccessDeniedError otherwise. A SigV4 header's signature
        covers the body, so its check is left in the scope under :data:`BODY_CHECK`."""
        access_key = ""
        if self.mode != "none":
            value = request.headers.get("authorization")
            if not value:
                raise AccessDeniedError("Missing Authentication Token")
            if value.startswith("AWS4-HMAC-SHA256 "):
                access_key = _access_key_from_sigv4(value)
                if self.verifier is not None:
                    request.scope[BODY_CHECK] = self._body_check(request, value)
            elif value[:7].lower() == "bearer ":
                token = value[7:].strip()
                if token.startswith(TOKEN_PREFIX):
                    # Minted by this run (from its secret): as good as the shared secret.
                    request.scope[BOUND_ROLLOUT] = self._rollout(token)
                    return
                access_key = self._bearer(token)
            else:
                raise AccessDeniedError("Unsupported Authorization scheme")
        self.check_secret(request, access_key)

    def _body_check(self, request: Request, value: str) -> Callable[[bytes], None]:
        verifier = self.verifier
        assert verifier is not None
        scope = request.scope
        raw_path = scope.get("raw_path") or scope["path"].encode()
        path = raw_path.decode("latin-1")
        query = scope.get("query_string", b"").decode("latin-1")

        def run(body: bytes) -> None:
            verifier.verify_header(value, request.method, path, query, request.headers, body)

        return run

    def _rollout(self, token: str) -> tuple[str, str]:
        if self.keys is None:
            raise AccessDeniedError("This emulator mints no rollout tokens; sign with SigV4")
        return self.keys.check(token)

    def _bearer(self, token: str) -> str:
        if self.verifier is not None:
            return self.verifier.verify_bearer(_presigned_url(token))
        cached = self._tokens.get(token)
        if cached is None:
            cached = _access_key_from_bearer(token)
            if len(self._tokens) >= _TOKEN_CACHE_MAX:
                self._tokens.clear()
            self._tokens[token] = cached
        return cached

    def check_secret(self, request: Request, access_key: str = "") -> None:
        """The admin routes' check (and the second half of :meth:`check`): the shared secret,
        from its header or the credential's access key id; nothing when there is no secret."""
        if self.secret is None:
            return
        given = request.headers.get(SECRET_HEADER) or access_key
        if not hmac.compare_digest(given.encode(), self.secret.encode()):
            raise AccessDeniedError("Missing or wrong emulator secret")


class AuthGate:
    """Route middleware: run ``check`` on the request before the endpoint (raises into the
    app's exception handlers, so the error has the route's shape)."""

    def __init__(self, app: ASGIApp, check: Callable[[Request], None]) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check, then pass the request on."""
        if scope["type"] == "http":
            self.check(Request(scope))
        await self.app(scope, receive, send)
