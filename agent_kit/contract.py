"""Pydantic models of the MTRL wire contract (docs/contract.md §2–§4).

Models are lenient where the contract says so (aliases such as ``inferenceParams`` /
``inference_params``, ``rolloutId`` / ``trajectoryId``) and strict on types: a string where a
number is expected is a :class:`ContractError`, never a silent coercion.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, Generic, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    field_validator,
)
from pydantic import ValidationError as _PydanticValidationError

from agent_kit.errors import ContractError

__all__ = [
    "DEFAULT_REGION",
    "ENDPOINT_ENV",
    "HEADER_JOB_ARN",
    "HEADER_SESSION_ID",
    "HEADER_TRAJECTORY_ID",
    "JOB_ARN_PATTERN",
    "MAX_PAYLOAD_BYTES",
    "MAX_TOKENS",
    "SIGNING_NAME",
    "TEMPERATURE",
    "TOP_P",
    "Bounds",
    "CompleteRolloutBody",
    "InferenceParams",
    "RolloutMetadata",
    "RolloutPayload",
    "RolloutStatus",
    "TrajectoryState",
    "UpdateRewardBody",
    "default_endpoint",
    "format_validation_error",
    "parse_job_arn",
    "parse_payload",
    "resolve_endpoint",
]

HEADER_JOB_ARN: Final = "X-Amzn-SageMaker-Job-Arn"
HEADER_TRAJECTORY_ID: Final = "X-Amzn-SageMaker-Trajectory-Id"
HEADER_SESSION_ID: Final = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"
ENDPOINT_ENV: Final = "RFT_RUNTIME_ENDPOINT"
DEFAULT_REGION: Final = "us-west-2"
#: The SigV4 signing name (a credential scope's service) of the Job Runtime API
#: (``sagemakerjobruntime``): what its requests and its bearer tokens are signed for.
SIGNING_NAME: Final = "sagemaker"
#: Largest /invocations body the agent accepts (AgentCore itself allows 100 MB; rollouts are tiny).
MAX_PAYLOAD_BYTES: Final = 1 << 20

JOB_ARN_PATTERN: Final = re.compile(
    r"^arn:aws[a-z\-]*:sagemaker:(?P<region>[a-z0-9\-]*):(?P<account>[0-9]{12}):"
    r"job/(?P<category>[a-zA-Z0-9_\-]+)/(?P<name>[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})$"
)


_N = TypeVar("_N", int, float)


@dataclass(frozen=True)
class Bounds(Generic[_N]):
    """A numeric run setting's default and range, declared once: every place that defaults or
    checks the setting (the CLI's options, the job's settings, the payload's
    :class:`InferenceParams`, the eval grid, the job hyper-parameters) reads it here.

    The range is ``low``..``high``, both included (None: unbounded); ``low_open`` excludes
    ``low`` itself (top-p: (0, 1]).
    """

    default: _N
    low: _N | None = None
    high: _N | None = None
    low_open: bool = False

    def holds(self, value: float) -> bool:
        """Whether ``value`` is in the range (NaN never is)."""
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is not None:
            return value <= self.high
        return not math.isnan(value)

    def words(self) -> str:
        """The range as the messages say it: ``0..2``, ``in (0, 1]``, ``≥ 1``, ``> 0``."""
        low, high = _shown(self.low), _shown(self.high)
        if self.high is None:
            return f"> {low}" if self.low_open else f"≥ {low}"
        if self.low_open:
            return f"in ({low}, {high}]"
        return f"{low}..{high}"


def _shown(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


#: ``inferenceParams.temperature``: what the service samples with when a job sets nothing, and
#: the range it takes.
TEMPERATURE: Final = Bounds(1.0, 0.0, 2.0)
#: ``inferenceParams.topP``.
TOP_P: Final = Bounds(1.0, 0.0, 1.0, low_open=True)
#: ``inferenceParams.maxTokens`` (no upper bound here: a server caps it with its context).
MAX_TOKENS: Final = Bounds(4096, 1)


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


class InferenceParams(_Model):
    """Sampling parameters the service passes (``inferenceParams``); mapped to OpenAI names."""

    temperature: StrictFloat | StrictInt | None = Field(
        default=None, ge=TEMPERATURE.low, le=TEMPERATURE.high
    )
    top_p: StrictFloat | StrictInt | None = Field(
        default=None,
        gt=TOP_P.low,
        le=TOP_P.high,
        validation_alias=AliasChoices("topP", "top_p"),
        serialization_alias="topP",
    )
    max_tokens: StrictInt | None = Field(
        default=None,
        ge=MAX_TOKENS.low,
        validation_alias=AliasChoices("maxTokens", "max_tokens"),
        serialization_alias="maxTokens",
    )

    @classmethod
    def service_defaults(cls) -> InferenceParams:
        """What the service samples with when a job sets nothing: temperature 1, topP 1,
        maxTokens 4096 (the defaults of a local job and of a payload the emulator builds:
        :data:`TEMPERATURE`, :data:`TOP_P`, :data:`MAX_TOKENS`)."""
        return cls(
            temperature=TEMPERATURE.default, top_p=TOP_P.default, max_tokens=MAX_TOKENS.default
        )

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat-completions parameters (``temperature``, ``top_p``, ``max_tokens``)."""
        out: dict[str, Any] = {}
        if self.temperature is not None:
            out["temperature"] = float(self.temperature)
        if self.top_p is not None:
            out["top_p"] = float(self.top_p)
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        return out


class RolloutMetadata(_Model):
    """``payload.metadata``: the rollout's job and trajectory, and where to report."""

    job_arn: str = Field(
        validation_alias=AliasChoices("jobArn", "job_arn"), serialization_alias="jobArn"
    )
    rollout_id: str = Field(
        min_length=1,
        max_length=256,
        validation_alias=AliasChoices("rolloutId", "trajectoryId", "trajectory_id", "rollout_id"),
        serialization_alias="rolloutId",
    )
    endpoint: str | None = None
    region: str | None = None
    #: A bearer for this rollout alone (``agent-kit emulate``'s minted rollout token); never
    #: shown in a repr.
    api_key: str | None = Field(
        default=None,
        repr=False,
        validation_alias=AliasChoices("apiKey", "api_key"),
        serialization_alias="apiKey",
    )

    @field_validator("job_arn")
    @classmethod
    def _check_arn(cls, value: str) -> str:
        if not JOB_ARN_PATTERN.match(value):
            raise ValueError(f"not a SageMaker job ARN: {value!r}")
        return value

    @property
    def trajectory_id(self) -> str:
        """The trajectory id (the contract's ``rolloutId``)."""
        return self.rollout_id

    def resolved_region(self) -> str:
        """``region``, else the region inside the job ARN, else ``AWS_REGION``, else us-west-2."""
        if self.region:
            return self.region
        match = JOB_ARN_PATTERN.match(self.job_arn)
        if match and match.group("region"):
            return match.group("region")
        return (
            os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
        )


class RolloutPayload(_Model):
    """The body the service sends to the agent for one rollout (docs/contract.md §2).

    Read from either spelling; :meth:`wire` writes the contract's camelCase names.
    """

    prompt: str
    metadata: RolloutMetadata | None = None
    inference_params: InferenceParams = Field(
        default_factory=InferenceParams,
        validation_alias=AliasChoices("inferenceParams", "inference_params"),
        serialization_alias="inferenceParams",
    )

    @classmethod
    def for_rollout(
        cls,
        prompt: str,
        *,
        job_arn: str | None = None,
        trajectory_id: str | None = None,
        endpoint: str | None = None,
        region: str | None = None,
        inference_params: InferenceParams | Mapping[str, Any] | None = None,
        api_key: str | None = None,
    ) -> RolloutPayload:
        """The payload of one rollout, the one builder every sender uses (the job driver,
        replay, the emulator's example payloads, the in-process players): ``inference_params``
        as a model or in either spelling, :meth:`InferenceParams.service_defaults` when None;
        ``endpoint`` without a trailing slash. Without ``job_arn`` the payload carries no
        ``metadata`` (an in-process play: nothing is reported), and the other metadata fields
        must be left out too. Invalid values raise :class:`ContractError`."""
        if inference_params is None:
            params = InferenceParams.service_defaults()
        elif isinstance(inference_params, InferenceParams):
            params = inference_params
        else:
            try:
                params = InferenceParams.model_validate(dict(inference_params))
            except _PydanticValidationError as exc:
                raise ContractError(
                    f"invalid inferenceParams: {format_validation_error(exc)}"
                ) from None
        if job_arn is None:
            if trajectory_id is not None or endpoint is not None or region is not None or api_key:
                raise ContractError("a payload's metadata needs its job_arn")
            return cls(prompt=prompt, inference_params=params)
        if trajectory_id is None:
            raise ContractError("a payload's metadata needs its trajectory_id")
        metadata = RolloutMetadata(
            job_arn=job_arn,
            rollout_id=trajectory_id,
            endpoint=endpoint.rstrip("/") if endpoint is not None else None,
            region=region,
            api_key=api_key,
        )
        return cls(prompt=prompt, metadata=metadata, inference_params=params)

    def wire(self) -> dict[str, Any]:
        """The payload as the service sends it: the contract's names (``metadata.jobArn``,
        ``rolloutId``, ``inferenceParams.topP``, …) in field order, unset (None) fields left
        out, nothing else added."""
        return self.model_dump(by_alias=True, exclude_none=True)

    def task(self) -> dict[str, Any]:
        """The JSON object packed in ``prompt``; a non-JSON prompt becomes ``{"prompt": text}``."""
        try:
            value = json.loads(self.prompt)
        except ValueError:
            return {"prompt": self.prompt}
        if isinstance(value, dict):
            return value
        return {"prompt": self.prompt}


class RolloutStatus(str, Enum):
    """``Status`` of CompleteRollout (lower-case on the wire)."""

    READY = "ready"
    FAILED = "failed"


class TrajectoryState(str, Enum):
    """States of the trajectory state machine (docs/contract.md §4)."""

    OPEN = "OPEN"
    READY = "READY"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    REWARDED = "REWARDED"

    @classmethod
    def finished(cls) -> frozenset[TrajectoryState]:
        """The terminal states: REWARDED, FAILED, TIMED_OUT (nothing moves a rollout on)."""
        return _FINISHED

    @classmethod
    def unrewarded(cls) -> frozenset[TrajectoryState]:
        """The terminal states without a reward: FAILED, TIMED_OUT."""
        return _UNREWARDED

    @classmethod
    def unfinished(cls) -> frozenset[TrajectoryState]:
        """The states a rollout still leaves: OPEN, READY (a driver's stale ones on resume)."""
        return _UNFINISHED

    @classmethod
    def settled(cls) -> frozenset[TrajectoryState]:
        """The terminal states the agent itself reached: REWARDED or FAILED (``Status:
        failed``); a slot with one is done and never played again (TIMED_OUT is retried)."""
        return _SETTLED

    @property
    def is_finished(self) -> bool:
        """Whether this state is terminal (see :meth:`finished`)."""
        return self in _FINISHED


#: The state sets of :class:`TrajectoryState` (members compare equal to their string values,
#: so a stored state string tests against them too).
_UNREWARDED: Final = frozenset({TrajectoryState.FAILED, TrajectoryState.TIMED_OUT})
_FINISHED: Final = _UNREWARDED | {TrajectoryState.REWARDED}
_SETTLED: Final = frozenset({TrajectoryState.REWARDED, TrajectoryState.FAILED})
_UNFINISHED: Final = frozenset({TrajectoryState.OPEN, TrajectoryState.READY})


class CompleteRolloutBody(_Model):
    """Body of ``POST /complete-rollout``."""

    trajectory_id: str = Field(
        min_length=1, max_length=256, validation_alias=AliasChoices("TrajectoryId", "trajectory_id")
    )
    status: RolloutStatus = Field(
        default=RolloutStatus.READY, validation_alias=AliasChoices("Status", "status")
    )
    client_token: str | None = Field(
        default=None, max_length=256, validation_alias=AliasChoices("ClientToken", "client_token")
    )
    job_arn: str | None = Field(default=None, validation_alias=AliasChoices("JobArn", "job_arn"))


class UpdateRewardBody(_Model):
    """Body of ``POST /update-reward``; every reward must be finite."""

    trajectory_id: str = Field(
        min_length=1, max_length=256, validation_alias=AliasChoices("TrajectoryId", "trajectory_id")
    )
    rewards: list[StrictFloat | StrictInt] = Field(
        min_length=1, validation_alias=AliasChoices("Rewards", "rewards")
    )
    client_token: str | None = Field(
        default=None, max_length=256, validation_alias=AliasChoices("ClientToken", "client_token")
    )
    job_arn: str | None = Field(default=None, validation_alias=AliasChoices("JobArn", "job_arn"))

    @field_validator("rewards")
    @classmethod
    def _finite(cls, values: list[float | int]) -> list[float | int]:
        for value in values:
            if not math.isfinite(value):
                raise ValueError("rewards must be finite numbers")
        return values


def format_validation_error(exc: _PydanticValidationError) -> str:
    """One readable line per problem: ``field.path: message``."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def parse_payload(raw: Any) -> RolloutPayload:
    """Validate an /invocations body; raise :class:`ContractError` with a readable message."""
    if not isinstance(raw, dict):
        raise ContractError(f"payload must be a JSON object, got {type(raw).__name__}")
    try:
        return RolloutPayload.model_validate(raw)
    except _PydanticValidationError as exc:
        raise ContractError(f"invalid payload: {format_validation_error(exc)}") from None


def parse_job_arn(arn: str) -> tuple[str, str, str, str]:
    """Split a job ARN into (region, account, category, name); :class:`ContractError` if invalid."""
    match = JOB_ARN_PATTERN.match(arn)
    if not match:
        raise ContractError(f"not a SageMaker job ARN: {arn!r}")
    return match["region"], match["account"], match["category"], match["name"]


def default_endpoint(region: str) -> str:
    """The public Job Runtime endpoint of a region."""
    return f"https://job-runtime.sagemaker.{region}.api.aws"


def resolve_endpoint(metadata: RolloutMetadata) -> str:
    """``metadata.endpoint``, else ``$RFT_RUNTIME_ENDPOINT``, else the region's public endpoint."""
    endpoint = metadata.endpoint or os.environ.get(ENDPOINT_ENV)
    if not endpoint:
        endpoint = default_endpoint(metadata.resolved_region())
    return endpoint.rstrip("/")
