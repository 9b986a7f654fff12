"""The rows of the run store: one frozen dataclass per table, and their decoders.

:class:`~agent_kit.store.RunStore` returns these; the ``*_from_row`` functions turn a
``SELECT *`` tuple (column order of :mod:`~agent_kit.store.schema`) into one, decoding
the JSON columns.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

from agent_kit.errors import DamagedRowError

__all__ = [
    "AUX_KINDS",
    "AuxTurnRow",
    "EventRow",
    "JobRow",
    "RewardRow",
    "TrajectoryRow",
    "TurnRow",
    "TurnTotals",
    "aux_turn_from_row",
    "event_from_row",
    "fields_from",
    "job_from_row",
    "reward_from_row",
    "trajectory_from_row",
    "turn_from_row",
]


_Record = TypeVar("_Record")


@dataclass(frozen=True)
class JobRow:
    """One emulated job (an MTRL training or evaluation job)."""

    arn: str
    name: str
    created_at: float
    config: dict[str, Any]
    status: str
    summary: dict[str, Any] | None


@dataclass(frozen=True)
class TrajectoryRow:
    """One trajectory (= one rollout id) and its state-machine state."""

    id: str
    job_arn: str
    state: str
    prompt: str
    payload: dict[str, Any] | None = None
    step: int = 0
    prompt_index: int = 0
    sample_index: int = 0
    attempt: int = 0
    retry_of: str | None = None
    replay_of: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    reason: str | None = None
    #: The policy's adapter that sampled it, where the policy says (schema version 4).
    adapter: str | None = None


@dataclass(frozen=True)
class TurnRow:
    """One policy call of a trajectory: full request and response bodies, usage and latency.

    ``route`` is the HTTP route that carried it (``/sample``, ``/sample-with-response-stream``,
    ``/v1/chat/completions``); ``stream`` tells whether the caller asked for SSE.
    """

    trajectory_id: str
    idx: int
    route: str
    request: dict[str, Any]
    response: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    usage_estimated: bool
    latency_ms: float
    created_at: float = 0.0
    stream: bool = False


#: The kinds of auxiliary call: an LLM judge scoring an episode, a simulated user's turn.
AUX_KINDS: Final = ("judge", "user")


@dataclass(frozen=True)
class AuxTurnRow:
    """One auxiliary model call of a trajectory (``kind`` judge or user): the request and
    response bodies, usage and latency. Numbered apart from the policy's turns (``idx`` 0, 1, …
    over the rollout's auxiliary calls) and never trained or billed as MTRL tokens."""

    trajectory_id: str
    idx: int
    kind: str
    request: dict[str, Any]
    response: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    usage_estimated: bool
    latency_ms: float
    created_at: float = 0.0


@dataclass(frozen=True)
class TurnTotals:
    """The turns of one trajectory in sums (what the summary needs, without their JSON)."""

    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: Turns whose token counts are estimated (no usage from the policy, no tokenizer).
    estimated: int = 0


@dataclass(frozen=True)
class RewardRow:
    """The rewards reported for a trajectory; ``total`` is their sum."""

    trajectory_id: str
    rewards: list[float]
    total: float
    client_token: str | None
    body_hash: str | None
    created_at: float


@dataclass(frozen=True)
class EventRow:
    """A state change or notable occurrence (``kind``) with JSON details."""

    id: int
    trajectory_id: str | None
    kind: str
    detail: dict[str, Any]
    created_at: float


def decode_json(text: Any, where: str, *, kind: type | None = dict) -> Any:
    """The JSON value stored at ``where`` (``"table.column of <row>"``); a value that is not
    JSON text, or (``kind``) not of that type, raises :class:`DamagedRowError`."""
    try:
        if not isinstance(text, str):
            raise ValueError(f"a {type(text).__name__} value where JSON text belongs")
        value = json.loads(text)
    except ValueError as exc:
        raise DamagedRowError(f"{where} is not valid JSON ({exc})") from None
    if kind is not None and not isinstance(value, kind):
        raise DamagedRowError(f"{where} is JSON but not a {kind.__name__} ({text[:40]!r})")
    return value


def _loads_opt(text: str | None, where: str) -> Any:
    return None if text is None else decode_json(text, where)


def job_from_row(r: Sequence[Any]) -> JobRow:
    """A ``jobs`` row."""
    where = f"of job {r[0]}"
    config = decode_json(r[3], f"jobs.config {where}")
    return JobRow(r[0], r[1], float(r[2]), config, r[4], _loads_opt(r[5], f"jobs.summary {where}"))


def trajectory_from_row(r: Sequence[Any]) -> TrajectoryRow:
    """A ``trajectories`` row."""
    return TrajectoryRow(
        id=r[0],
        job_arn=r[1],
        state=r[2],
        prompt=r[3],
        payload=_loads_opt(r[4], f"trajectories.payload of trajectory {r[0]}"),
        step=int(r[5]),
        prompt_index=int(r[6]),
        sample_index=int(r[7]),
        attempt=int(r[8]),
        retry_of=r[9],
        replay_of=r[10],
        created_at=float(r[11]),
        updated_at=float(r[12]),
        reason=r[13],
        adapter=r[14] if len(r) > 14 else None,  # an older file read as it is has no column
    )


def _exchange(r: Sequence[Any], table: str, what: str) -> dict[str, Any]:
    """The columns a ``turns`` and an ``aux_turns`` row share (the call and its answer, tokens,
    latency, time), decoded; ``what`` names the row in a decoding error."""
    where = f"of trajectory {r[0]}, {what} {r[1]}"
    return {
        "trajectory_id": r[0],
        "idx": int(r[1]),
        "request": decode_json(r[3], f"{table}.request {where}"),
        "response": decode_json(r[4], f"{table}.response {where}"),
        "prompt_tokens": int(r[5]),
        "completion_tokens": int(r[6]),
        "usage_estimated": bool(r[7]),
        "latency_ms": float(r[8]),
        "created_at": float(r[9]),
    }


def turn_from_row(r: Sequence[Any]) -> TurnRow:
    """A ``turns`` row."""
    return TurnRow(route=r[2], stream=bool(r[10]), **_exchange(r, "turns", "turn"))


def aux_turn_from_row(r: Sequence[Any]) -> AuxTurnRow:
    """An ``aux_turns`` row."""
    return AuxTurnRow(kind=r[2], **_exchange(r, "aux_turns", "auxiliary turn"))


def reward_from_row(r: Sequence[Any], rewards: list[float] | None = None) -> RewardRow:
    """A ``rewards`` row; ``rewards`` is its reward list when the caller decoded it already."""
    where = f"rewards.rewards of trajectory {r[0]}"
    values = decode_json(r[1], where, kind=list) if rewards is None else rewards
    return RewardRow(r[0], values, float(r[2]), r[3], r[4], float(r[5]))


def event_from_row(r: Sequence[Any], detail: dict[str, Any] | None = None) -> EventRow:
    """An ``events`` row; ``detail`` is its decoded detail when the caller decoded it already."""
    decoded = decode_json(r[3], f"events.detail of event {r[0]}") if detail is None else detail
    return EventRow(int(r[0]), r[1], str(r[2]), decoded, float(r[4]))


def fields_from(record: type[_Record], source: object, **given: Any) -> _Record:
    """A ``record`` (a dataclass or a pydantic model) whose fields are ``source``'s attributes
    of the same names, but for those ``given`` (a value the source spells differently or lacks).

    For one record built from another whose fields it shares by name (a snapshot of live
    counters, a summary of a stored row): the shared names are read, never listed twice.
    """
    model_fields = getattr(record, "model_fields", None)
    if model_fields is not None:
        names = list(model_fields)
    else:
        names = [f.name for f in dataclasses.fields(cast(Any, record)) if f.init]
    taken = {name: getattr(source, name) for name in names if name not in given}
    return record(**taken, **given)
