"""The open-source trainers' contract: agentcore-rl-toolkit's ``_rollout`` and ``_config`` payloads.

Trainers such as verl, slime, rLLM or Tinker drive AgentCore runtimes through the contract of
``awslabs/agentcore-rl-toolkit`` (docs/trainers.md). A payload carries the dataset row's fields
at its top level plus one block that names the policy:

- ``_config`` (HTTP mode, trainer-side gateways): ``{"base_url", "model_id", "api_key"?,
  "sampling_params"?}``. The agent plays against ``base_url`` (OpenAI-compatible, ``model`` =
  ``model_id``, ``Authorization: Bearer <api_key>``) and answers ``{"reward": float,
  "metrics": {name: float}}``.
- ``_rollout`` (S3 mode): the same policy fields plus ``exp_id``, ``input_id`` and
  ``s3_bucket``. The agent answers at once ``{"status": "processing", "s3_bucket",
  "result_key"}`` with ``result_key = <exp_id>/<input_id>/<session id>.json``, plays in the
  background (``/ping`` says ``HealthyBusy``) and writes the result object to that key.

There is no Job Runtime in these modes: nothing is reported through CompleteRollout or
UpdateReward; the reward travels in the answer or the result object. This module holds the
wire models and the documents; :class:`~agent_kit.app.RolloutApp` serves them.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
)
from pydantic import ValidationError as _PydanticValidationError

from agent_kit.contract import RolloutPayload, format_validation_error
from agent_kit.errors import ContractError

if TYPE_CHECKING:
    from agent_kit.episode_loop import EpisodeOutcome

__all__ = [
    "CONFIG_KEY",
    "REDACTED",
    "ROLLOUT_KEY",
    "S3Rollout",
    "TrainerMode",
    "TrainerPayload",
    "TrainerPolicy",
    "episode_metrics",
    "error_result",
    "http_answer",
    "parse_trainer_payload",
    "redacted_payload",
    "result_key",
    "s3_result",
]

#: The payload key of S3 mode (a background rollout whose result is an S3 object).
ROLLOUT_KEY: Final = "_rollout"
#: The payload key of HTTP mode (the reward comes back in the answer).
CONFIG_KEY: Final = "_config"
#: What stands in for the ``api_key`` wherever a payload is written down.
REDACTED: Final = "<redacted>"
_URL_RE: Final = re.compile(r"^https?://[^\s/]+(/\S*)?$")
_KEY_PART_RE: Final = re.compile(r"^[A-Za-z0-9._=@:+-]{1,256}$")

TrainerMode = Literal["http", "s3"]
_SamplingValue = StrictFloat | StrictInt | StrictBool | StrictStr | list[Any] | dict[str, Any]


class TrainerPolicy(BaseModel):
    """The trainer's policy endpoint: an OpenAI-compatible ``base_url``, its model and key."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    base_url: str = Field(min_length=1, max_length=2048)
    model_id: str = Field(min_length=1, max_length=512)
    api_key: str | None = Field(default=None, max_length=8192, repr=False)
    sampling_params: dict[str, _SamplingValue] = Field(default_factory=dict)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not _URL_RE.match(value):
            raise ValueError(f"base_url must be an http:// or https:// URL, got {value[:200]!r}")
        return value


class S3Rollout(TrainerPolicy):
    """The ``_rollout`` block: the policy plus where the result object goes."""

    exp_id: str = Field(min_length=1, max_length=256)
    input_id: str = Field(min_length=1, max_length=256)
    s3_bucket: str = Field(min_length=3, max_length=63)


@dataclass(frozen=True)
class TrainerPayload:
    """A parsed trainer payload: its mode, policy, the episode's payload and the raw body."""

    mode: TrainerMode
    policy: TrainerPolicy
    rollout: RolloutPayload
    raw: dict[str, Any]

    @property
    def s3(self) -> S3Rollout:
        """The ``_rollout`` block (S3 mode only; :class:`ContractError` in HTTP mode)."""
        if not isinstance(self.policy, S3Rollout):
            raise ContractError("this payload has no _rollout block")
        return self.policy


def _task_prompt(raw: dict[str, Any]) -> str:
    """The episode's ``prompt``: a JSON-object ``prompt`` string as it is (the MTRL dataset
    convention), else the row's top-level fields packed as one JSON object."""
    prompt = raw.get("prompt")
    if isinstance(prompt, str):
        try:
            if isinstance(json.loads(prompt), dict):
                return prompt
        except ValueError:
            pass
    fields = {k: v for k, v in raw.items() if k not in (ROLLOUT_KEY, CONFIG_KEY)}
    return json.dumps(fields, ensure_ascii=False)


def parse_trainer_payload(raw: Any) -> TrainerPayload | None:
    """The trainer payload in ``raw``, or None when it carries neither ``_rollout`` nor
    ``_config`` (an MTRL or plain payload). A bad block is a :class:`ContractError`."""
    if not isinstance(raw, dict) or (ROLLOUT_KEY not in raw and CONFIG_KEY not in raw):
        return None
    if ROLLOUT_KEY in raw and CONFIG_KEY in raw:
        raise ContractError(f"a payload carries {ROLLOUT_KEY} or {CONFIG_KEY}, not both")
    key = ROLLOUT_KEY if ROLLOUT_KEY in raw else CONFIG_KEY
    block = raw[key]
    if not isinstance(block, dict):
        raise ContractError(f"{key} must be a JSON object, got {type(block).__name__}")
    model: type[TrainerPolicy] = S3Rollout if key == ROLLOUT_KEY else TrainerPolicy
    try:
        policy = model.model_validate(block)
    except _PydanticValidationError as exc:
        detail = format_validation_error(exc).replace("Value error, ", "")
        raise ContractError(f"invalid {key}: {detail}") from None
    if isinstance(policy, S3Rollout):
        for name in ("exp_id", "input_id"):
            if not _KEY_PART_RE.match(getattr(policy, name)):
                raise ContractError(
                    f"invalid {key}: {name} may hold letters, digits and ._=@:+- only"
                )
    mode: TrainerMode = "s3" if key == ROLLOUT_KEY else "http"
    return TrainerPayload(mode, policy, RolloutPayload(prompt=_task_prompt(raw)), raw)


def result_key(exp_id: str, input_id: str, session_id: str | None) -> str:
    """``<exp_id>/<input_id>/<session id>.json`` (a fresh uuid4 when there is no session)."""
    return f"{exp_id}/{input_id}/{session_id or uuid.uuid4()}.json"


def redacted_payload(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with the ``api_key`` of its ``_rollout`` / ``_config`` block replaced."""
    out = dict(raw)
    for key in (ROLLOUT_KEY, CONFIG_KEY):
        block = out.get(key)
        if isinstance(block, dict) and "api_key" in block:
            out[key] = {**block, "api_key": REDACTED}
    return out


def episode_metrics(outcome: EpisodeOutcome) -> dict[str, float]:
    """The episode's figures as floats only (what trainers log): turns, tool calls, tokens,
    whether it got the floor reward, each reward component's contribution and the environment's
    own figures (``task/NAME``, :meth:`~agent_kit.environment.Environment.metrics`)."""
    ep = outcome.episode
    usage = ep.usage
    metrics = {
        "turns": float(ep.turns),
        "tool_calls": float(len(ep.tool_calls)),
        "recovered_tool_calls": float(len(ep.recovered_calls)),
        "input_tokens": float(usage["input_tokens"]),
        "output_tokens": float(usage["output_tokens"]),
        "floor_reward": 1.0 if outcome.reward.floor else 0.0,
    }
    for name, component in outcome.reward.components.items():
        metrics[f"reward/{name}"] = float(component.contribution)
    for name, value in outcome.metrics.items():
        metrics[f"task/{name}"] = value
    return metrics


def http_answer(outcome: EpisodeOutcome) -> dict[str, Any]:
    """The ``_config`` answer: ``reward``, float-only ``metrics``, ``stop_reason`` (and the
    ``failure`` when the episode failed on the agent's side)."""
    ep = outcome.episode
    out: dict[str, Any] = {
        "reward": outcome.reward.total,
        "metrics": episode_metrics(outcome),
        "stop_reason": ep.stop_reason,
    }
    if ep.failure is not None:
        out["failure"] = {"boundary": ep.failure.boundary, "reason": ep.failure.reason}
    return out


def _stamped(
    doc: dict[str, Any], payload: TrainerPayload, key: str, status_code: int
) -> dict[str, Any]:
    s3 = payload.s3
    doc.setdefault("stop_reason", "end_turn")
    doc.update(
        status_code=status_code,
        input_id=s3.input_id,
        s3_bucket=s3.s3_bucket,
        result_key=key,
        payload=redacted_payload(payload.raw),
    )
    return doc


def s3_result(outcome: EpisodeOutcome, payload: TrainerPayload, key: str) -> dict[str, Any]:
    """The result object of a played episode: ``rewards`` (the episode reward), ``metrics``,
    ``status_code`` 200, ``stop_reason``, ``input_id``, ``s3_bucket``, ``result_key`` and the
    payload (its ``api_key`` redacted)."""
    doc = http_answer(outcome)
    doc["rewards"] = doc.pop("reward")
    return _stamped(doc, payload, key, 200)


def error_result(
    payload: TrainerPayload, key: str, status_code: int, reason: str, trace: str | None
) -> dict[str, Any]:
    """The result object of an episode that could not be played: ``status_code`` (400 for a
    task the environment refuses, 500 for an error), ``stop_reason`` and the traceback."""
    doc: dict[str, Any] = {"stop_reason": reason}
    if trace is not None:
        doc["traceback"] = trace
    return _stamped(doc, payload, key, status_code)
