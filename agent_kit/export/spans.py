"""One trace per rollout, as plain data: the span trees :mod:`~agent_kit.export.mlflow` writes.

:func:`rollout_traces` reads a job's rollouts from its :class:`RunData` and the store's
turns and builds, for every rollout (every attempt: failed, timed-out and still-open ones
too), a :class:`RolloutTrace` whose root :class:`SpanData` is the rollout and whose children
are, in time order, one span per policy turn and one per tool call. Nothing here imports
MLflow or OpenTelemetry, so the same trees go to MLflow and to an OTLP collector unchanged.

Shape and names (after the OpenTelemetry GenAI conventions, as Strands' own tracer emits them):

- root ``invoke_agent <agent>``: ``gen_ai.operation.name = invoke_agent``,
  ``gen_ai.agent.name``, ``gen_ai.request.model``, the summed ``gen_ai.usage.input_tokens`` /
  ``output_tokens`` / ``total_tokens``, and agent_kit's own ``agent_kit.*`` attributes: the
  trajectory id, step, prompt/sample index, attempt, state, prompt, reward, each reward
  component (``agent_kit.reward.<name>.{value,weight,contribution}``), the stop reason, and
  the policy adapter that sampled it where the store names one (``agent_kit.adapter``:
  ``agent-kit train``'s ``base``, ``warm``, ``step-NNNN``).
- ``chat`` per policy turn: ``gen_ai.operation.name = chat``, ``gen_ai.request.model``,
  ``gen_ai.response.id``, ``gen_ai.response.finish_reasons``, the turn's
  ``gen_ai.usage.{input,output,total}_tokens`` (whether they were estimated in
  ``agent_kit.usage_estimated``), the latency.
- ``execute_tool <name>`` per tool call of a reply (``tool_calls`` of the assistant message):
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type``,
  ``gen_ai.tool.call.arguments``, and ``gen_ai.tool.call.result`` — the ``role: tool``
  message of the next request, or for the last turn the agent's own tool log when its answer
  carries one (``agent_kit.tool.result_recorded`` says whether a result was found).

Times come from the store, not from the export: a rollout spans its trajectory's creation to
its last state change; a turn ends when the store recorded it and starts its latency earlier; a
tool call fills the gap between the reply that asked for it and the next policy call (or the
rollout's end). Attribute values are OTLP-compatible: strings, numbers, booleans, string lists.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from agent_kit.contract import TrajectoryState
from agent_kit.reporting.breakdown import RunData
from agent_kit.reporting.tool_results import last_tool_results
from agent_kit.reporting.transcripts import stop_reason
from agent_kit.store import Rollout, RunStore, TurnRow
from agent_kit.store.records import breakdown_of

__all__ = [
    "MAX_TEXT_CHARS",
    "AttributeValue",
    "RolloutTrace",
    "SpanData",
    "SpanKind",
    "agent_name_of",
    "rollout_traces",
]

#: A span attribute value both MLflow and OTLP accept.
AttributeValue = str | bool | int | float | list[str]
#: What a span stands for.
SpanKind = Literal["agent", "chat", "tool"]
#: Longest text kept in one attribute (prompts, arguments, tool results); longer is cut.
MAX_TEXT_CHARS: Final = 8000
_NS: Final = 1_000_000_000


@dataclass(frozen=True)
class SpanData:
    """One span: name, kind, start/end (ns since the epoch), attributes, MLflow inputs/outputs.

    ``error`` is set when the span failed (a failed or timed-out rollout); ``children`` are in
    start order.
    """

    name: str
    kind: SpanKind
    start_ns: int
    end_ns: int
    attributes: dict[str, AttributeValue]
    inputs: Any = None
    outputs: Any = None
    error: str | None = None
    children: tuple[SpanData, ...] = ()

    def count(self) -> int:
        """This span and all its descendants."""
        return 1 + sum(child.count() for child in self.children)


@dataclass(frozen=True)
class RolloutTrace:
    """The trace of one rollout: its root span and the trace tags that identify it.

    A document for MLflow and OTLP built from the :class:`~agent_kit.store.Rollout` record and
    its turns, not a copy of the record's fields (``trajectory_id`` is the rollout's id).
    """

    trajectory_id: str
    root: SpanData
    tags: dict[str, str] = field(default_factory=dict)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + "…"


def _text(value: Any) -> str:
    """A message content (string, content-block list, anything JSON) as one string."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [
            str(block.get("text")) if isinstance(block, dict) and "text" in block else _json(block)
            for block in value
        ]
        return "\n".join(parts)
    return "" if value is None else _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _reply(turn: TurnRow) -> dict[str, Any]:
    choices = turn.response.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    if isinstance(first, dict) and isinstance(first.get("message"), dict):
        return dict(first["message"])
    return {}


def _finish_reason(turn: TurnRow) -> str | None:
    choices = turn.response.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    reason = first.get("finish_reason") if isinstance(first, dict) else None
    return str(reason) if reason else None


def _tool_calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    calls = message.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _messages(turn: TurnRow) -> list[dict[str, Any]]:
    messages = turn.request.get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def _tool_results(turn: TurnRow | None) -> dict[str, str]:
    """tool_call_id → content of the ``role: tool`` messages in a turn's request."""
    if turn is None:
        return {}
    return {
        str(m["tool_call_id"]): _text(m.get("content"))
        for m in _messages(turn)
        if m.get("role") == "tool" and m.get("tool_call_id") is not None
    }


def _ns(seconds: float) -> int:
    return round(seconds * _NS)


def _chat_span(turn: TurnRow, previous: TurnRow | None, start: int, end: int) -> SpanData:
    message = _reply(turn)
    messages = _messages(turn)
    new = messages[len(_messages(previous)) :] if previous is not None else messages
    model = turn.request.get("model")
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.usage.input_tokens": int(turn.prompt_tokens),
        "gen_ai.usage.output_tokens": int(turn.completion_tokens),
        "gen_ai.usage.total_tokens": int(turn.prompt_tokens + turn.completion_tokens),
        "agent_kit.turn": int(turn.idx),
        "agent_kit.usage_estimated": bool(turn.usage_estimated),
        "agent_kit.latency_ms": float(turn.latency_ms),
        "agent_kit.route": turn.route,
    }
    if isinstance(model, str):
        attributes["gen_ai.request.model"] = model
    for key, name in (("temperature", "temperature"), ("top_p", "top_p")):
        value = turn.request.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            attributes[f"gen_ai.request.{name}"] = float(value)
    max_tokens = turn.request.get("max_tokens")
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool):
        attributes["gen_ai.request.max_tokens"] = max_tokens
    if isinstance(turn.response.get("id"), str):
        attributes["gen_ai.response.id"] = turn.response["id"]
    if isinstance(turn.response.get("model"), str):
        attributes["gen_ai.response.model"] = turn.response["model"]
    finish = _finish_reason(turn)
    if finish is not None:
        attributes["gen_ai.response.finish_reasons"] = [finish]
    return SpanData(
        name="chat",
        kind="chat",
        start_ns=start,
        end_ns=end,
        attributes=attributes,
        inputs={"messages": new},
        outputs={"message": message, "finish_reason": finish},
    )


def _tool_span(
    call: Mapping[str, Any], result: str | None, start: int, end: int, turn: int
) -> SpanData:
    function = call.get("function")
    function = function if isinstance(function, dict) else {}
    name = str(function.get("name") or "?")
    arguments = function.get("arguments")
    arguments_text = arguments if isinstance(arguments, str) else _json(arguments)
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": str(call.get("id") or ""),
        "gen_ai.tool.type": str(call.get("type") or "function"),
        "gen_ai.tool.call.arguments": _clip(arguments_text),
        "agent_kit.turn": turn,
        "agent_kit.tool.result_recorded": result is not None,
    }
    if result is not None:
        attributes["gen_ai.tool.call.result"] = _clip(result)
    return SpanData(
        name=f"execute_tool {name}",
        kind="tool",
        start_ns=start,
        end_ns=end,
        attributes=attributes,
        inputs={"arguments": arguments_text},
        outputs={"result": result} if result is not None else None,
    )


def _reward_attributes(
    record: Rollout, body: Mapping[str, Any] | None
) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {}
    if record.reward is not None:
        attributes["agent_kit.reward"] = float(record.reward)
    breakdown = breakdown_of(body)
    if breakdown:
        attributes["agent_kit.reward.breakdown"] = _clip(_json(breakdown))
        for name, parts in sorted(breakdown.items()):
            for key in ("value", "weight", "contribution"):
                value = parts.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    attributes[f"agent_kit.reward.{name}.{key}"] = float(value)
            if isinstance(parts.get("kind"), str):
                attributes[f"agent_kit.reward.{name}.kind"] = parts["kind"]
    if record.floor_reward:
        attributes["agent_kit.floor_reward"] = True
    return attributes


def _last_results(
    body: Mapping[str, Any] | None, last: TurnRow, calls: Sequence[Mapping[str, Any]]
) -> dict[str, str]:
    """call id → result of the last turn's calls, from the agent's tool log (if it kept one)."""
    found = last_tool_results(body, last.idx, len(calls)) or []
    if len(found) != len(calls):
        return {}
    return {str(c.get("id") or ""): r.output for c, r in zip(calls, found, strict=True)}


def _turn_spans(turns: Sequence[TurnRow], body: Any, start: int, end: int) -> list[SpanData]:
    """One chat span per turn and one tool span per tool call it asked for, each call lasting
    until the next turn's request (the last turn's until the rollout's ``end``)."""
    children: list[SpanData] = []
    for i, turn in enumerate(turns):
        turn_end = min(max(_ns(turn.created_at), start), end)
        turn_start = max(start, turn_end - _ns(turn.latency_ms / 1000.0))
        previous = turns[i - 1] if i else None
        children.append(_chat_span(turn, previous, turn_start, turn_end))
        calls = _tool_calls(_reply(turn))
        if not calls:
            continue
        following = turns[i + 1] if i + 1 < len(turns) else None
        if following is not None:
            gap_end = _ns(following.created_at) - _ns(following.latency_ms / 1000.0)
            results = _tool_results(following)
        else:
            gap_end = end
            results = _last_results(body, turn, calls)
        gap_end = min(max(gap_end, turn_end), end)
        for call in calls:
            result = results.get(str(call.get("id") or ""))
            children.append(_tool_span(call, result, turn_end, gap_end, turn.idx))
    return children


def _root_attributes(
    record: Rollout, turns: Sequence[TurnRow], data: RunData, agent_name: str, why: str
) -> dict[str, AttributeValue]:
    """The rollout span's attributes: ``gen_ai.*`` (operation, agent, usage, model) and
    ``agent_kit.*`` (slot, state, outcome, prompt, stop reason, failure, reward, adapter)."""
    body = record.body
    model = next(
        (t.request.get("model") for t in turns if isinstance(t.request.get("model"), str)), None
    )
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent_name,
        "gen_ai.usage.input_tokens": int(record.prefill_tokens),
        "gen_ai.usage.output_tokens": int(record.sample_tokens),
        "gen_ai.usage.total_tokens": int(record.tokens),
        "agent_kit.job_arn": data.job.arn,
        "agent_kit.trajectory_id": record.id,
        "agent_kit.step": record.step,
        "agent_kit.prompt_index": record.prompt_index,
        "agent_kit.sample_index": record.sample_index,
        "agent_kit.attempt": record.attempt,
        "agent_kit.state": record.state,
        "agent_kit.outcome": data.outcome(record),
        "agent_kit.turns": record.turns,
        "agent_kit.prompt": _clip(record.prompt),
        "agent_kit.stop_reason": why,
    }
    if isinstance(model, str):
        attributes["gen_ai.request.model"] = model
    if isinstance(body, dict) and isinstance(body.get("stop_reason"), str):
        attributes["agent_kit.stop_reason_code"] = body["stop_reason"]
    if record.reason:
        attributes["agent_kit.reason"] = record.reason
    if record.retry_of:
        attributes["agent_kit.retry_of"] = record.retry_of
    if record.agent_failure:
        attributes["agent_kit.agent_failure"] = record.agent_failure
    if record.adapter:
        attributes["agent_kit.adapter"] = record.adapter
    attributes.update(_reward_attributes(record, body))
    return attributes


def _trace(
    record: Rollout,
    turns: Sequence[TurnRow],
    data: RunData,
    agent_name: str,
    common_tags: Mapping[str, str],
) -> RolloutTrace:
    detail = record.invocation
    body = record.body
    start = _ns(record.started_at)
    last_end = max((_ns(t.created_at) for t in turns), default=start)
    end = max(_ns(record.ended_at), last_end, start)
    children = _turn_spans(turns, body, start, end)
    prompt = record.prompt
    why = stop_reason(record, detail, data.threshold)
    attributes = _root_attributes(record, turns, data, agent_name, why)
    error = why if record.state in TrajectoryState.unrewarded() else None
    root = SpanData(
        name=f"invoke_agent {agent_name}",
        kind="agent",
        start_ns=start,
        end_ns=end,
        attributes=attributes,
        inputs={"prompt": prompt},
        outputs={"reward": record.reward, "state": record.state, "stop_reason": why},
        error=error,
        children=tuple(sorted(children, key=lambda s: s.start_ns)),
    )
    tags = {
        **common_tags,
        "agent_kit.trajectory_id": record.id,
        "agent_kit.step": str(record.step),
        "agent_kit.state": record.state,
        "agent_kit.outcome": data.outcome(record),
    }
    return RolloutTrace(trajectory_id=record.id, root=root, tags=tags)


def agent_name_of(config: Mapping[str, Any]) -> str:
    """The agent's name for ``gen_ai.agent.name``: its entrypoint's file stem, else ``agent``."""
    entrypoint = config.get("entrypoint")
    if isinstance(entrypoint, str) and entrypoint:
        stem = Path(entrypoint.rstrip("/")).stem
        if stem:
            return stem
    return "agent"


def rollout_traces(
    store: RunStore, data: RunData, *, tags: Mapping[str, str] | None = None
) -> list[RolloutTrace]:
    """One :class:`RolloutTrace` per trajectory of ``data``'s job, in trajectory order.

    ``tags`` are added to every trace's tags (the export's identifying ``agent_kit.*`` tags).
    """
    agent = agent_name_of(data.job.config)
    common = dict(tags or {})
    ordered = sorted(
        data.records, key=lambda r: (r.step, r.prompt_index, r.sample_index, r.attempt, r.id)
    )
    return [_trace(r, store.list_turns(r.id), data, agent, common) for r in ordered]
