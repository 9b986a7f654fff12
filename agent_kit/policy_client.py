"""Policy transports: turn a rollout payload into the Strands model an episode calls.

Chosen per payload by :func:`build_model` (see docs/policy-client.md):

- **openai** (default): Strands ``OpenAIModel`` → ``{endpoint}/v1/chat/completions``, model
  ``"default"``, headers ``X-Amzn-SageMaker-Job-Arn`` + ``X-Amzn-SageMaker-Trajectory-Id`` and
  ``Authorization: Bearer sagemaker-api-key-…`` from the process's :class:`TokenProvider`
  (re-signed once on a 403).
- **sample**: the same OpenAI request body through boto3 ``sagemakerjobruntime``
  ``sample`` / ``sample_with_response_stream`` (SigV4, botocore retries).
- **plain** (payload without ``metadata``): any OpenAI-compatible server from
  :class:`PolicyConfig` (``AGENT_KIT_POLICY_URL`` …); no SageMaker headers, no token.

Every transport failure (HTTP error, timeout, unreachable endpoint, garbage answer) is raised as
:class:`~agent_kit.errors.PolicyError` with a readable reason. Out of ``Agent.invoke_async`` it
comes raw when the first model call of the invocation fails, and wrapped in Strands'
``EventLoopException`` (as ``__cause__``) when a later one does: :func:`find_policy_error`
finds it either way, so the episode runner can record it and report the floor reward.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import ssl
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Final, Literal, cast

import botocore.session
import httpx
import openai
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from strands.models.openai import OpenAIModel

from agent_kit.contract import (
    DEFAULT_REGION,
    HEADER_JOB_ARN,
    HEADER_TRAJECTORY_ID,
    SIGNING_NAME,
    RolloutPayload,
    resolve_endpoint,
)
from agent_kit.errors import PolicyError, UsageError
from agent_kit.runtime_client import job_runtime_client, shared_session
from agent_kit.settings import DEFAULTS, Settings
from agent_kit.transport import OpenAIChat, SampleChat

__all__ = [
    "POLICY_MODEL_ID",
    "PolicyConfig",
    "PolicyHandle",
    "TokenProvider",
    "Transport",
    "build_model",
    "default_token_provider",
    "find_policy_error",
    "reset_default_token_provider",
]

Transport = Literal["openai", "sample"]
#: The model name the Job Runtime expects in every chat-completions body.
POLICY_MODEL_ID: Final = "default"
TOKEN_PREFIX: Final = "sagemaker-api-key-"  # noqa: S105 - a format prefix, not a secret
_TOKEN_HOST: Final = "sagemaker.amazonaws.com"  # noqa: S105 - the presigned URL's host
_MAX_LIFETIME_S: Final = 43_200.0
#: api_key placeholder for clients whose Authorization header is set by the bearer auth flow.
_UNUSED_KEY: Final = "unused"
_DEFAULT_TRANSPORT: Final = cast(Transport, DEFAULTS.policy_transport)


@dataclass(frozen=True)
class _Token:
    value: str
    refresh_at: float


class TokenProvider:
    """``sagemaker-api-key-…`` bearer tokens: SigV4-presigned by botocore, cached, shared.

    One provider serves every rollout of the process (thread-safe). Credentials come from one
    botocore session — :func:`~agent_kit.runtime_client.shared_session` unless ``session`` or
    ``session_factory`` is given — resolved once; botocore's refreshable credentials keep them
    fresh. A token is valid ``lifetime_s`` (capped by the credentials' own expiry) and re-signed
    ``refresh_margin_s`` before it ends; :meth:`invalidate` forces a re-sign (after a 403).
    ``clock`` (epoch seconds) is injectable for tests.
    """

    def __init__(
        self,
        session: botocore.session.Session | None = None,
        region: str | None = None,
        *,
        lifetime_s: float = 3600.0,
        refresh_margin_s: float = 300.0,
        clock: Callable[[], float] = time.time,
        session_factory: Callable[[], botocore.session.Session] | None = None,
    ) -> None:
        if not 1 <= lifetime_s <= _MAX_LIFETIME_S:
            raise ValueError("lifetime_s must be between 1 s and 12 h")
        if not 0 <= refresh_margin_s < lifetime_s:
            raise ValueError("refresh_margin_s must be >= 0 and below lifetime_s")
        self.region = region
        self.lifetime_s = float(lifetime_s)
        self.refresh_margin_s = float(refresh_margin_s)
        self._session = session
        self._session_factory = session_factory or shared_session
        self._clock = clock
        self._lock = threading.Lock()
        self._credentials: Any = None
        self._cache: dict[str, _Token] = {}
        self._signed = 0

    @property
    def sign_count(self) -> int:
        """How many tokens this provider has signed (cache misses), for tests and metrics."""
        return self._signed

    @property
    def session(self) -> botocore.session.Session:
        """The botocore session the provider signs with (created on first use)."""
        with self._lock:
            return self._get_session()

    def token(self, region: str | None = None) -> str:
        """A valid token for ``region`` (default: the provider's, the session's, us-west-2).

        Raises :class:`PolicyError` when no AWS credentials can be found.
        """
        region = self._region_for(region)
        cached = self._cache.get(region)
        if cached is not None and self._clock() < cached.refresh_at:
            return cached.value
        with self._lock:
            now = self._clock()
            cached = self._cache.get(region)
            if cached is None or now >= cached.refresh_at:
                cached = self._sign(region, now)
                self._cache[region] = cached
            return cached.value

    async def atoken(self, region: str | None = None) -> str:
        """:meth:`token` for async code: cached tokens return at once; signing runs in a thread."""
        region = self._region_for(region)
        cached = self._cache.get(region)
        if cached is not None and self._clock() < cached.refresh_at:
            return cached.value
        return await asyncio.to_thread(self.token, region)

    def invalidate(self, token: str | None = None) -> None:
        """Drop cached tokens (only ``token`` if given) so the next call re-signs."""
        with self._lock:
            for region, cached in list(self._cache.items()):
                if token is None or cached.value == token:
                    del self._cache[region]

    def _get_session(self) -> botocore.session.Session:
        if self._session is None:
            self._session = self._session_factory()
        return self._session

    def _region_for(self, region: str | None) -> str:
        if region or self.region:
            return str(region or self.region)
        with self._lock:
            configured = self._get_session().get_config_variable("region")
        self.region = configured or os.environ.get("AWS_REGION") or DEFAULT_REGION
        return self.region

    def _sign(self, region: str, now: float) -> _Token:
        try:
            if self._credentials is None:
                self._credentials = self._get_session().get_credentials()
            if self._credentials is None:
                raise PolicyError(
                    "no AWS credentials to sign the policy token: give the agent an IAM role "
                    "(AmazonSageMakerJobRuntimeAccess) or set AWS credentials"
                )
            # One consistent snapshot (botocore refreshes under its own lock if needed).
            frozen = self._credentials.get_frozen_credentials()
        except PolicyError:
            raise
        except Exception as exc:
            raise PolicyError(f"cannot load AWS credentials for the policy token: {exc}") from exc
        request = AWSRequest(
            method="POST",
            url=f"https://{_TOKEN_HOST}/",
            headers={"host": _TOKEN_HOST},
            params={"Action": "CallWithBearerToken"},
        )
        SigV4QueryAuth(frozen, SIGNING_NAME, region, expires=int(self.lifetime_s)).add_auth(request)
        url = request.url.removeprefix("https://") + "&Version=1"
        value = TOKEN_PREFIX + base64.b64encode(url.encode()).decode()
        expires_at = now + self.lifetime_s
        left = _credentials_left_s(self._credentials)
        if left is not None:
            expires_at = min(expires_at, now + left)
        self._signed += 1
        return _Token(value, max(now, expires_at - self.refresh_margin_s))


def _credentials_left_s(credentials: Any) -> float | None:
    """Seconds until refreshable credentials expire (None for static credentials)."""
    expiry = getattr(credentials, "_expiry_time", None)
    if not isinstance(expiry, datetime):
        return None
    return (expiry - datetime.now(timezone.utc)).total_seconds()


_provider_lock = threading.Lock()
_default_provider: TokenProvider | None = None


def reset_default_token_provider() -> None:
    """Forget the process-wide :class:`TokenProvider` (its cached bearer tokens go with it)."""
    global _default_provider
    with _provider_lock:
        _default_provider = None


def default_token_provider() -> TokenProvider:
    """The process-wide :class:`TokenProvider` on the shared session (created on first use)."""
    global _default_provider
    with _provider_lock:
        if _default_provider is None:
            _default_provider = TokenProvider()
        return _default_provider


@dataclass(frozen=True)
class PolicyConfig:
    """How episodes reach the policy. Defaults suit the MTRL service; see docs/policy-client.md.

    ``stream`` is False by default: the service records whole turns and the agent acts on whole
    messages, so one JSON body per turn costs less CPU than per-chunk SSE parsing, always
    carries usage, and has no mid-stream failures; ``stream=True`` works on every transport.
    ``base_url`` / ``model_id`` / ``api_key`` are used only for payloads without ``metadata``.
    ``timeout_s`` is the read timeout of one policy call; ``max_retries`` the retries of the
    OpenAI client (or botocore's for ``sample``) on 429/5xx/connection errors.
    """

    transport: Transport = _DEFAULT_TRANSPORT
    stream: bool = DEFAULTS.policy_stream
    timeout_s: float = DEFAULTS.policy_timeout
    connect_timeout_s: float = 10.0
    max_retries: int = DEFAULTS.policy_max_retries
    base_url: str | None = None
    model_id: str | None = None
    api_key: str | None = field(default=None, repr=False)
    extra_params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.transport not in ("openai", "sample"):
            raise UsageError(
                f"policy transport must be 'openai' or 'sample', not {self.transport!r}"
            )
        if self.timeout_s <= 0 or self.connect_timeout_s <= 0:
            raise UsageError("policy timeouts must be positive")
        if self.max_retries < 0:
            raise UsageError("policy max_retries must be >= 0")

    @classmethod
    def from_settings(cls, settings: Settings = DEFAULTS, **overrides: Any) -> PolicyConfig:
        """The agent's ``AGENT_KIT_POLICY_*`` settings (read at its door,
        :class:`~agent_kit.app.RolloutApp`; ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` their
        fallbacks) as a config; keyword overrides win."""
        values: dict[str, Any] = {
            "transport": settings.policy_transport,
            "stream": settings.policy_stream,
            "timeout_s": settings.policy_timeout,
            "max_retries": settings.policy_max_retries,
            "base_url": settings.policy_url,
            "model_id": settings.policy_model,
            "api_key": settings.policy_api_key,
        }
        return cls(**{**values, **overrides})


@dataclass
class PolicyHandle:
    """The Strands model of one episode and the client to close when the episode ends.

    Use it as ``async with build_model(...) as handle:`` or call :meth:`aclose` yourself, on the
    event loop that ran the episode. ``transport`` is ``"openai"``, ``"sample"`` or ``"plain"``;
    ``client`` is the OpenAI-compatible object injected into the model (its ``openai``
    attribute is the episode's AsyncOpenAI, or its ``boto`` attribute the shared boto3 client).
    """

    model: OpenAIModel
    transport: str
    endpoint: str
    client: Any = None
    _close: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)

    async def aclose(self) -> None:
        """Close the episode's HTTP client (idempotent; errors while closing are ignored)."""
        close, self._close = self._close, None
        if close is not None:
            with contextlib.suppress(RuntimeError, OSError, httpx.HTTPError):
                await close()

    async def __aenter__(self) -> PolicyHandle:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def find_policy_error(exc: BaseException) -> PolicyError | None:
    """The :class:`PolicyError` behind ``exc`` (itself, or in its cause/context chain), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, PolicyError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


# -- building the model ----------------------------------------------------------------------

_ssl_lock = threading.Lock()
_ssl_context: ssl.SSLContext | None = None


def _shared_ssl_context() -> ssl.SSLContext:
    """One SSL context for every episode's client (building one costs ~20-30 ms)."""
    global _ssl_context
    with _ssl_lock:
        if _ssl_context is None:
            _ssl_context = httpx.create_ssl_context()
        return _ssl_context


class _BearerAuth(httpx.Auth):
    """Sets ``Authorization: Bearer sagemaker-api-key-…`` per request; re-signs once on 403."""

    requires_request_body = True

    def __init__(self, provider: TokenProvider, region: str) -> None:
        self.provider = provider
        self.region = region

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        for name in ("OpenAI-Organization", "OpenAI-Project"):
            request.headers.pop(name, None)
        token = await self.provider.atoken(self.region)
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 403:
            self.provider.invalidate(token)
            token = await self.provider.atoken(self.region)
            request.headers["Authorization"] = f"Bearer {token}"
            yield request


def _openai_client(
    config: PolicyConfig,
    base_url: str,
    api_key: str,
    *,
    auth: httpx.Auth | None = None,
    headers: Mapping[str, str] | None = None,
) -> openai.AsyncOpenAI:
    timeout = httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s)
    http_client = httpx.AsyncClient(
        verify=_shared_ssl_context(),
        timeout=timeout,
        limits=httpx.Limits(max_connections=16, max_keepalive_connections=4),
        auth=auth,
    )
    return openai.AsyncOpenAI(
        api_key=api_key,
        base_url=base_url,
        http_client=http_client,
        max_retries=config.max_retries,
        timeout=timeout,
        default_headers=dict(headers or {}),
    )


def build_model(
    payload: RolloutPayload,
    config: PolicyConfig | None = None,
    *,
    token_provider: TokenProvider | None = None,
    boto_client: Any = None,
) -> PolicyHandle:
    """The Strands ``OpenAIModel`` of one episode, wrapped in a :class:`PolicyHandle`.

    ``inferenceParams`` become ``temperature`` / ``top_p`` / ``max_tokens`` (over
    ``config.extra_params``). With ``metadata``: the ``openai`` transport (one AsyncOpenAI per
    episode on a shared SSL context; ``token_provider`` defaults to
    :func:`default_token_provider`) or ``sample`` (``boto_client`` defaults to the cached
    shared-session client). Without: the plain OpenAI-compatible server of ``config``, or a
    :class:`PolicyError` saying how to configure one.
    """
    config = config or PolicyConfig()
    params = {**config.extra_params, **payload.inference_params.to_openai()}
    meta = payload.metadata
    if meta is None:
        if not config.base_url:
            raise PolicyError(
                "no policy for a payload without metadata: set AGENT_KIT_POLICY_URL to an "
                "OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1) and "
                "AGENT_KIT_POLICY_MODEL (and AGENT_KIT_POLICY_API_KEY if it needs one), or "
                "pass PolicyConfig(base_url=..., model_id=...)"
            )
        base_url = config.base_url.rstrip("/")
        client = _openai_client(config, base_url, config.api_key or _UNUSED_KEY)
        chat = OpenAIChat(client, base_url, garbage_retries=config.max_retries)
        model = OpenAIModel(
            client=chat,
            model_id=config.model_id or POLICY_MODEL_ID,
            params=params,
            stream=config.stream,
        )
        return PolicyHandle(model, "plain", base_url, chat, client.close)
    if config.transport == "sample":
        endpoint = resolve_endpoint(meta)
        region = meta.resolved_region()
        sm = boto_client or job_runtime_client(
            region,
            endpoint,
            max_attempts=config.max_retries + 1,
            connect_timeout=config.connect_timeout_s,
            read_timeout=config.timeout_s,
        )
        where = endpoint or f"sagemakerjobruntime ({region})"
        sample = SampleChat(sm, meta, where)
        model = OpenAIModel(
            client=sample, model_id=POLICY_MODEL_ID, params=params, stream=config.stream
        )
        return PolicyHandle(model, "sample", where, sample)
    provider = token_provider or default_token_provider()
    base_url = resolve_endpoint(meta) + "/v1"
    client = _openai_client(
        config,
        base_url,
        _UNUSED_KEY,
        auth=_BearerAuth(provider, meta.resolved_region()),
        headers={HEADER_JOB_ARN: meta.job_arn, HEADER_TRAJECTORY_ID: meta.trajectory_id},
    )
    chat = OpenAIChat(client, base_url, garbage_retries=config.max_retries)
    model = OpenAIModel(client=chat, model_id=POLICY_MODEL_ID, params=params, stream=config.stream)
    return PolicyHandle(model, "openai", base_url, chat, client.close)
