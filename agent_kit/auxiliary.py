"""Auxiliary models: the model an episode's LLM judge and simulated user call.

They are not the policy: in an MTRL job they run inside the agent's runtime and call their own
model (typically Bedrock with the runtime's role), billed by Bedrock, never trained. Where an
episode's auxiliary calls go (:func:`target_for`, first match wins):

1. ``AGENT_KIT_AUX_URL``: any OpenAI-compatible server (base URL ending ``/v1``), model
   ``AGENT_KIT_AUX_MODEL`` (default ``"default"``), key ``AGENT_KIT_AUX_API_KEY``;
2. ``AGENT_KIT_AUX_MODEL`` alone: a Bedrock model id (the cloud; the runtime's role calls it);
3. otherwise, a payload with ``metadata``: the emulator's auxiliary route,
   ``{endpoint}/aux/v1/chat/completions``, with the rollout's headers and bearer token, where
   each call is recorded as an auxiliary turn of the rollout (``agent-kit run --aux-policy``).

Those variables are read once, at the agent's door (:class:`~agent_kit.app.RolloutApp`), and
handed to :func:`target_for` as :class:`~agent_kit.settings.Settings`. The episode loop puts the
target of the episode in a context variable while the episode and
its reward run (:func:`using_target`); :func:`aux_model` builds a Strands model on it. Every
call made through it opens its own HTTP client, so it works from any event loop or thread
(strands-evals' ``ActorSimulator.act`` runs its agent synchronously). A failing call raises
:class:`~agent_kit.errors.PolicyError` naming the auxiliary endpoint.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import httpx
import openai
from strands.models.openai import OpenAIModel

from agent_kit.contract import HEADER_JOB_ARN, HEADER_TRAJECTORY_ID, RolloutPayload
from agent_kit.contract import resolve_endpoint as _resolve_endpoint
from agent_kit.errors import AuxiliaryError
from agent_kit.policy_client import TokenProvider, default_token_provider
from agent_kit.settings import DEFAULTS, Settings
from agent_kit.transport import OpenAIChat

__all__ = [
    "AUX_KIND_HEADER",
    "AUX_NAME_HEADER",
    "AuxKind",
    "AuxTarget",
    "aux_model",
    "current_target",
    "target_for",
    "using_target",
]

AuxKind = Literal["judge", "user"]
#: The header naming the kind of an auxiliary call on the emulator's route.
AUX_KIND_HEADER: Final = "X-Agent-Kit-Aux-Kind"
#: The header naming the caller of an auxiliary call (a judge's name), shown when a replay of
#: the call diverges.
AUX_NAME_HEADER: Final = "X-Agent-Kit-Aux-Name"
_TIMEOUT: Final = httpx.Timeout(120.0, connect=10.0)


@dataclass(frozen=True)
class AuxTarget:
    """Where auxiliary calls go: an OpenAI-compatible ``base_url`` (None: Bedrock
    ``model_id``), the headers every call carries, and how it authenticates."""

    base_url: str | None
    model_id: str = "default"
    headers: Mapping[str, str] = field(default_factory=dict)
    api_key: str = field(default="unused", repr=False)
    #: Signs ``Bearer sagemaker-api-key-…`` per call (the emulator's route, like the policy's).
    token_provider: TokenProvider | None = field(default=None, repr=False)
    region: str | None = None
    #: An httpx transport (e.g. ``httpx.ASGITransport`` over an in-process emulator).
    transport: httpx.AsyncBaseTransport | None = field(default=None, repr=False)


_current: ContextVar[AuxTarget | None] = ContextVar("agent_kit_aux_target", default=None)


def target_for(payload: RolloutPayload | None, settings: Settings = DEFAULTS) -> AuxTarget | None:
    """The auxiliary target of an episode (module docstring's order: ``settings``' aux URL,
    model and key, which the agent's door reads); None when there is none."""
    model = (settings.aux_model or "").strip()
    if url := (settings.aux_url or "").strip():
        key = settings.aux_api_key or "unused"
        return AuxTarget(url.rstrip("/"), model or "default", api_key=key)
    if model:
        return AuxTarget(None, model)
    meta = payload.metadata if payload is not None else None
    if meta is None:
        return None
    return AuxTarget(
        _resolve_endpoint(meta) + "/aux/v1",
        "default",
        headers={HEADER_JOB_ARN: meta.job_arn, HEADER_TRAJECTORY_ID: meta.trajectory_id},
        token_provider=default_token_provider(),
        region=meta.resolved_region(),
    )


@contextlib.contextmanager
def using_target(target: AuxTarget | None) -> Iterator[None]:
    """Make ``target`` the current auxiliary target for the block (this task and its copies)."""
    token = _current.set(target)
    try:
        yield
    finally:
        _current.reset(token)


def current_target() -> AuxTarget | None:
    """The auxiliary target of the episode being played (None outside one)."""
    return _current.get()


class _Bearer(httpx.Auth):
    """``Authorization: Bearer sagemaker-api-key-…`` from the process's token provider."""

    def __init__(self, provider: TokenProvider, region: str | None) -> None:
        self.provider = provider
        self.region = region

    async def async_auth_flow(self, request: httpx.Request) -> Any:
        token = await self.provider.atoken(self.region)
        request.headers["Authorization"] = f"Bearer {token}"
        yield request


class _AuxChat:
    """``chat.completions.create`` opening one client per call (any loop, any thread)."""

    def __init__(self, target: AuxTarget, kind: AuxKind, name: str | None = None) -> None:
        self.target = target
        self.kind = kind
        self.name = name
        self.chat = self
        self.completions = self

    async def create(self, **request: Any) -> Any:
        """One auxiliary call; PolicyError (naming the auxiliary endpoint) on any failure."""
        target = self.target
        assert target.base_url is not None
        auth = None
        if target.token_provider is not None:
            auth = _Bearer(target.token_provider, target.region)
        headers = {**target.headers, AUX_KIND_HEADER: self.kind}
        if self.name:
            headers[AUX_NAME_HEADER] = self.name.encode("ascii", "replace").decode()[:100]
        request["stream"] = False
        async with httpx.AsyncClient(
            timeout=_TIMEOUT, auth=auth, transport=target.transport
        ) as http:
            client = openai.AsyncOpenAI(
                api_key=target.api_key,
                base_url=target.base_url,
                http_client=http,
                max_retries=1,
                default_headers=headers,
            )
            where = f"the auxiliary model ({self.kind}) at {target.base_url}"
            return await OpenAIChat(client, where, garbage_retries=0).create(**request)


def aux_model(
    kind: AuxKind,
    *,
    target: AuxTarget | None = None,
    params: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> Any:
    """A Strands model for a judge (``kind="judge"``) or a simulated user (``"user"``) on
    ``target`` (default: the current episode's). ``params`` are sampling parameters (default
    temperature 0); ``name`` (a judge's) is sent with each call. Raises
    :class:`AuxiliaryError` when no auxiliary model is configured."""
    target = target or current_target()
    if target is None:
        raise AuxiliaryError(
            "no auxiliary model: set AGENT_KIT_AUX_MODEL (a Bedrock model id) or "
            "AGENT_KIT_AUX_URL (an OpenAI-compatible base URL), or play the episode under the "
            "emulator (agent-kit run --aux-policy SPEC)"
        )
    if target.base_url is None:
        from strands.models.bedrock import BedrockModel

        return BedrockModel(model_id=target.model_id, temperature=0.0)
    chosen = dict(params) if params is not None else {"temperature": 0.0}
    return OpenAIModel(
        client=_AuxChat(target, kind, name), model_id=target.model_id, params=chosen, stream=False
    )
