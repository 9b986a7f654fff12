"""Recordings: the rollouts a replay serves back, read from a run store or a cassette file.

A :class:`~agent_kit.replay.recording.Recording` is the in-memory form (defined, with the run
store reader, in :mod:`agent_kit.replay.recording`):
:func:`load_recording` reads one from a run directory (``run.sqlite``) or from a cassette, and
:func:`open_recording` also accepts one already loaded.

A **cassette** is the compact, versioned, human-readable export of selected rollouts, so a
test suite can check a recording into the repository without the SQLite file. It is JSON Lines:

- line 1, the header: ``{"format": "agent_kit.cassette/1", "created_at", "source",
  "entrypoint" (relative to the cassette's directory), "job" (recorded settings), "episodes"}``;
- then one line per rollout (an "episode" line): ``{"trajectory_id", "prompt",
  "inference_params", "step", "prompt_index", "sample_index", "state", "reward": {"rewards",
  "total"}, "reward_breakdown", "turns": [...]}``. To stay compact a turn stores only what changed
  since the previous turn: ``keep`` (messages carried over from the previous request),
  ``messages`` (the ones added), ``request`` (the other request fields, omitted when equal to
  the previous turn's), ``response`` (the chat.completion) and ``usage``.

The pydantic models below are the file's format, not a second record: :func:`_episode_line`
builds a line from a :class:`~agent_kit.store.Rollout` and :func:`_rollout` reads one back into
a rollout (what a cassette does not keep, e.g. timestamps and latencies, reads as 0, and the
agent's answer keeps only its ``reward_breakdown``). Both directions are validated with
pydantic: :func:`write_cassette` refuses a recording it could not read back,
:func:`read_cassette` names the line and field of the first problem
(:class:`~agent_kit.errors.UsageError`), and refuses unknown format versions.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from agent_kit.contract import TrajectoryState
from agent_kit.errors import UsageError
from agent_kit.replay.recording import Recording, read_run
from agent_kit.store import RewardRow, Rollout, TrajectoryRow, TurnRow
from agent_kit.store.records import turn_totals_of
from agent_kit.store.rows import fields_from

__all__ = ["CASSETTE_FORMAT", "load_recording", "open_recording", "read_cassette", "write_cassette"]

#: The format tag of the cassette header; bump the suffix when the layout changes.
CASSETTE_FORMAT: Final = "agent_kit.cassette/1"


def load_recording(
    source: str | Path, trajectories: Sequence[str] | None = None, limit: int | None = None
) -> Recording:
    """Read a recording from a run directory / ``.sqlite`` file or from a cassette (``.jsonl``).

    Only finished episodes (REWARDED or FAILED, i.e. the last attempt of each rollout) are
    replayable. UsageError when the source is missing, unreadable, or holds no such episode.
    """
    path = Path(source)
    if path.suffix in (".jsonl", ".cassette") or (path.is_file() and _looks_like_cassette(path)):
        recording = read_cassette(path)
    else:
        recording = read_run(path)
    if not recording.episodes:
        raise UsageError(f"{path} holds no finished episode to replay")
    return recording.select(trajectories, limit)


def open_recording(
    source: str | Path | Recording,
    trajectories: Sequence[str] | None = None,
    limit: int | None = None,
) -> Recording:
    """:func:`load_recording` for a path; for a loaded :class:`Recording`, its
    :meth:`~Recording.select` of ``trajectories`` / ``limit``."""
    if isinstance(source, Recording):
        return source.select(trajectories, limit)
    return load_recording(source, trajectories, limit)


def _looks_like_cassette(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(1) == b"{"


# -- the cassette file format ---------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CassetteSource(_Strict):
    """Where the cassette's episodes were recorded."""

    run_dir: str | None = None
    job_arn: str | None = None
    job_name: str | None = None


class CassetteHeader(_Strict):
    """Line 1 of a cassette."""

    format: Literal["agent_kit.cassette/1"]
    created_at: str
    source: CassetteSource = Field(default_factory=CassetteSource)
    entrypoint: str | None = None
    job: dict[str, Any] = Field(default_factory=dict)
    episodes: int = Field(ge=0)


class CassetteUsage(_Strict):
    """Token usage recorded for a turn."""

    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    estimated: bool = False


class CassetteTurn(_Strict):
    """One turn, stored as a difference from the previous turn's request."""

    route: str = "/v1/chat/completions"
    stream: bool = False
    keep: int = Field(0, ge=0)
    messages: list[dict[str, Any]]
    request: dict[str, Any] | None = None
    response: dict[str, Any]
    usage: CassetteUsage

    @field_validator("response")
    @classmethod
    def _is_completion(cls, value: dict[str, Any]) -> dict[str, Any]:
        choices = value.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ValueError("must be a chat.completion with a non-empty choices list")
        return value

    @field_validator("request")
    @classmethod
    def _no_messages(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and "messages" in value:
            raise ValueError("must not hold messages (they live in keep/messages)")
        return value


class CassetteReward(_Strict):
    """The reported rewards of an episode and their sum."""

    rewards: list[float]
    total: float

    @field_validator("rewards")
    @classmethod
    def _finite(cls, value: list[float]) -> list[float]:
        if not value or not all(math.isfinite(v) for v in value):
            raise ValueError("must be a non-empty list of finite numbers")
        return value


class CassetteEpisode(_Strict):
    """One episode line of a cassette: one recorded rollout and its turns."""

    trajectory_id: str = Field(min_length=1, max_length=256)
    prompt: str
    inference_params: dict[str, Any] | None = None
    step: int = Field(0, ge=0)
    prompt_index: int = Field(0, ge=0)
    sample_index: int = Field(0, ge=0)
    state: str = TrajectoryState.REWARDED.value
    reward: CassetteReward | None = None
    reward_breakdown: dict[str, dict[str, Any]] | None = None
    turns: list[CassetteTurn]


def _encode_turns(turns: Sequence[TurnRow]) -> list[CassetteTurn]:
    out: list[CassetteTurn] = []
    prev_messages: list[Any] = []
    prev_rest: dict[str, Any] | None = None
    for turn in turns:
        messages = turn.request.get("messages")
        messages = list(messages) if isinstance(messages, list) else []
        rest = {k: v for k, v in turn.request.items() if k != "messages"}
        keep = 0
        limit = min(len(prev_messages), len(messages))
        while keep < limit and prev_messages[keep] == messages[keep]:
            keep += 1
        out.append(
            CassetteTurn(
                route=turn.route,
                stream=turn.stream,
                keep=keep,
                messages=messages[keep:],
                request=None if rest == prev_rest else rest,
                response=turn.response,
                usage=CassetteUsage(
                    prompt_tokens=turn.prompt_tokens,
                    completion_tokens=turn.completion_tokens,
                    estimated=turn.usage_estimated,
                ),
            )
        )
        prev_messages, prev_rest = messages, rest
    return out


def _decode_turns(rollout_id: str, turns: Sequence[CassetteTurn]) -> tuple[TurnRow, ...]:
    out: list[TurnRow] = []
    prev_messages: list[dict[str, Any]] = []
    prev_rest: dict[str, Any] | None = None
    for i, turn in enumerate(turns):
        if turn.keep > len(prev_messages):
            raise ValueError(
                f"turns[{i}].keep is {turn.keep} but the previous turn had "
                f"{len(prev_messages)} messages"
            )
        rest = turn.request if turn.request is not None else prev_rest
        if rest is None:
            raise ValueError(f"turns[{i}].request is missing (the first turn must have one)")
        messages = prev_messages[: turn.keep] + list(turn.messages)
        request = {**rest, "messages": messages}
        out.append(
            TurnRow(
                trajectory_id=rollout_id,
                idx=i,
                route=turn.route,
                request=request,
                response=turn.response,
                prompt_tokens=turn.usage.prompt_tokens,
                completion_tokens=turn.usage.completion_tokens,
                usage_estimated=turn.usage.estimated,
                latency_ms=0.0,
                stream=turn.stream,
            )
        )
        prev_messages, prev_rest = messages, rest
    return tuple(out)


def _episode_line(rollout: Rollout) -> CassetteEpisode:
    """The cassette line of a rollout loaded with its turns (the one place a line is built)."""
    reward = None
    if rollout.reward_row is not None:
        reward = CassetteReward(
            rewards=list(rollout.reward_row.rewards), total=rollout.reward_row.total
        )
    return fields_from(
        CassetteEpisode,
        rollout,
        trajectory_id=rollout.id,
        state=rollout.trajectory.state,
        reward=reward,
        turns=_encode_turns(rollout.turn_rows),
    )


def _rollout(line: CassetteEpisode, job_arn: str | None) -> Rollout:
    """The rollout a cassette line records, with its turns (the one place one is read back)."""
    turns = _decode_turns(line.trajectory_id, line.turns)
    params = line.inference_params
    breakdown = line.reward_breakdown
    return Rollout(
        trajectory=TrajectoryRow(
            id=line.trajectory_id,
            job_arn=job_arn or "",
            state=line.state,
            prompt=line.prompt,
            payload=None if params is None else {"inferenceParams": params},
            step=line.step,
            prompt_index=line.prompt_index,
            sample_index=line.sample_index,
        ),
        reward_row=None
        if line.reward is None
        else RewardRow(
            line.trajectory_id, list(line.reward.rewards), line.reward.total, None, None, 0.0
        ),
        usage=turn_totals_of(turns),
        invocation=None if breakdown is None else {"body": {"reward_breakdown": breakdown}},
        turn_rows=turns,
    )


def _line_error(path: Path, line: int, exc: PydanticValidationError | ValueError) -> UsageError:
    if isinstance(exc, PydanticValidationError):
        problems = []
        for err in exc.errors()[:3]:
            where = ".".join(str(p) for p in err.get("loc", ())) or "(line)"
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        detail = "; ".join(problems)
    else:
        detail = str(exc)
    return UsageError(f"{path}: line {line}: {detail}")


def _dump(model: BaseModel) -> str:
    data = model.model_dump(mode="json", exclude_none=False)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def write_cassette(
    path: str | Path,
    recording: Recording,
    *,
    episodes: Iterable[Rollout] | None = None,
) -> Path:
    """Write ``recording`` (or the given subset of its ``episodes``) as a cassette at ``path``.

    The entrypoint is stored relative to the cassette's directory. Every line is validated and
    read back before the file is atomically put in place (a temporary file is renamed), so a
    cassette on disk is always complete and readable; UsageError when a value cannot be stored
    (e.g. a non-finite number).
    """
    target = Path(path)
    chosen = list(recording.episodes if episodes is None else episodes)
    entry: str | None = None
    if recording.entrypoint is not None:
        base = target.resolve().parent
        entry = Path(os.path.relpath(recording.entrypoint.resolve(), base)).as_posix()
    header = CassetteHeader(
        format=CASSETTE_FORMAT,
        created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        source=CassetteSource(
            run_dir=str(recording.source) if recording.kind == "run" else None,
            job_arn=recording.job_arn,
            job_name=recording.job_name,
        ),
        entrypoint=entry,
        job=recording.job,
        episodes=len(chosen),
    )
    try:
        lines = [_dump(header)] + [_dump(_episode_line(e)) for e in chosen]
    except (PydanticValidationError, ValueError) as exc:
        raise UsageError(f"cannot write cassette {target}: {exc}") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        read_cassette(tmp)
    except UsageError:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(target)
    return target


def read_cassette(path: str | Path) -> Recording:
    """Read and validate a cassette; UsageError naming the line (and field) of any problem."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"no cassette at {file}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read cassette {file}: {exc}") from None
    rows: list[tuple[int, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except ValueError as exc:
            raise UsageError(f"{file}: line {number}: not valid JSON ({exc})") from None
    if not rows:
        raise UsageError(f"{file} is empty; expected a cassette header line")
    number, first = rows[0]
    fmt = first.get("format") if isinstance(first, dict) else None
    if fmt != CASSETTE_FORMAT:
        raise UsageError(
            f"{file}: line {number}: not an agent_kit cassette (format {fmt!r}; this agent_kit "
            f"reads {CASSETTE_FORMAT!r})"
        )
    try:
        header = CassetteHeader.model_validate(first)
    except PydanticValidationError as exc:
        raise _line_error(file, number, exc) from None
    episodes: list[Rollout] = []
    for number, row in rows[1:]:
        try:
            episodes.append(_rollout(CassetteEpisode.model_validate(row), header.source.job_arn))
        except (PydanticValidationError, ValueError) as exc:
            raise _line_error(file, number, exc) from None
    if len(episodes) != header.episodes:
        raise UsageError(
            f"{file}: the header announces {header.episodes} episodes but the file holds "
            f"{len(episodes)} (truncated or edited?)"
        )
    entrypoint = None
    if header.entrypoint is not None:
        entrypoint = (file.resolve().parent / header.entrypoint).resolve()
    return Recording(
        source=file,
        kind="cassette",
        episodes=tuple(episodes),
        entrypoint=entrypoint,
        job_arn=header.source.job_arn,
        job_name=header.source.job_name,
        job=header.job,
    )
