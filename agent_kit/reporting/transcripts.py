"""Turn-by-turn transcripts for the HTML report: which rollouts to show, and how.

:func:`select_transcripts` puts the rollouts an RL engineer reads first at the top: the
really low rewarded ones (:func:`really_low`: the bottom decile, below the run's highest reward),
those below the success threshold, then the floor-reward ones (agent-side failures), then the failed
ones (no reward), then a sample of the rest, one prompt after another. :func:`transcript_html`
renders one: every turn's new messages (tool results, user text), the policy's reply with its
tool calls, the reward with its breakdown, and the stop reason.

The last tool result of an episode is in no later request (no policy call follows it): it is
read from the agent's answer (:mod:`agent_kit.reporting.tool_results`), or the transcript says
it was not recorded.

Everything from the run is HTML-escaped. Only chat messages are shown (the store keeps no
headers, so no credential can appear); the task prompt is shown as recorded and may hold the
hidden answer (a local debugging view).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent_kit.contract import TrajectoryState
from agent_kit.reporting.breakdown import (
    FAILED_STATES,
    RunData,
    is_non_finite,
    prompt_label,
)
from agent_kit.reporting.tool_results import NOT_RECORDED, content_text, last_tool_results
from agent_kit.store import AuxTurnRow, Rollout, RunStore, TurnRow
from agent_kit.store.records import breakdown_of

__all__ = [
    "LOWEST",
    "MAX_TRANSCRIPTS",
    "Selected",
    "below_threshold",
    "fmt",
    "message_html",
    "really_low",
    "select_transcripts",
    "stop_reason",
    "transcript_html",
    "value_attr",
]

#: At most this many transcripts in one page.
MAX_TRANSCRIPTS: Final = 40
#: How many of the lowest-scoring rewarded rollouts lead the list (the report's failures
#: section lists as many of those below the success threshold, each linking to its transcript).
LOWEST: Final = 10
_MAX_FLOOR: Final = 15
_MAX_FAILED: Final = 15
_MAX_MESSAGE_CHARS: Final = 4000

_STOP_REASONS: Final = {
    "limit_turns": "turn budget exhausted (max_turns)",
    "limit_budget": "wall-clock budget exhausted",
    "limit_tool_calls": "tool-call limit reached",
    "policy_error": "policy error",
    "environment_error": "environment error",
    "end_turn": "the policy stopped replying with tool calls before the task finished",
    "max_tokens": "the policy's reply hit max_tokens",
    "user_goal_met": "the simulated user's goal was met",
    "user_turns_exhausted": "the simulated user's turns ran out (max_user_turns)",
}


def fmt(value: Any, digits: int = 4) -> str:
    """A compact human form of a value: ``–`` for None, thousands separators for integers,
    ``digits`` significant digits otherwise."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if math.isfinite(value) else str(value)
    return str(value)


def value_attr(value: Any) -> str:
    """A ``data-v`` attribute with the exact value (repr of floats), for sorting and tests."""
    if value is None or isinstance(value, bool):
        return ' data-v=""'
    if isinstance(value, float):
        return f' data-v="{value!r}"'
    if isinstance(value, int):
        return f' data-v="{value}"'
    return ""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _clip(text: str) -> str:
    if len(text) <= _MAX_MESSAGE_CHARS:
        return text
    return text[:_MAX_MESSAGE_CHARS] + f"… [{len(text) - _MAX_MESSAGE_CHARS} more chars]"


def message_html(message: Mapping[str, Any], call_names: Mapping[str, str] | None = None) -> str:
    """One chat message: role, reasoning, text, tool calls (``→ name(args)``); escaped.

    A ``tool`` message is labelled with the call it answers (``call_names``: id → tool name).
    """
    role = str(message.get("role", "?"))
    text = _clip(content_text(message.get("content")))
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    label = role
    call_id = message.get("tool_call_id")
    if role == "tool" and isinstance(call_id, str):
        name = (call_names or {}).get(call_id)
        label = f"tool result ← {name or '?'} ({call_id})"
    out = [f'<div class="msg m-{_e(role)}"><span class="role">{_e(label)}</span>']
    if isinstance(reasoning, str) and reasoning:
        out.append(f"<pre class=muted>{_e(_clip(reasoning))}</pre>")
    if text:
        out.append(f"<pre>{_e(text)}</pre>")
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            fn = {}
        args = fn.get("arguments", "")
        args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        out.append(f'<pre class="call">→ {_e(fn.get("name", "?"))}({_e(_clip(args_text))})</pre>')
    out.append("</div>")
    return "".join(out)


def _reply(turn: TurnRow) -> dict[str, Any] | None:
    choices = turn.response.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    if isinstance(first, dict) and isinstance(first.get("message"), dict):
        return dict(first["message"])
    return None


def _calls(message: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    calls = (message or {}).get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def stop_reason(record: Rollout, detail: Mapping[str, Any] | None, threshold: float) -> str:
    """Why the rollout ended, in words: from the trajectory state and reason, the agent's
    ``failure``/``stop_reason``, and the reward against the success threshold."""
    body = detail.get("body") if detail else None
    body = body if isinstance(body, dict) else {}
    status = detail.get("status") if detail else None
    if record.state == TrajectoryState.TIMED_OUT:
        return f"timeout — failed, no reward ({record.reason or 'rollout_timeout'})"
    if record.state == TrajectoryState.FAILED:
        return f"failed, no reward: {record.reason or 'the trajectory was failed'}"
    if record.state != TrajectoryState.REWARDED:
        return f"pending (state {record.state}: no outcome yet)"
    failure = body.get("failure")
    if isinstance(failure, dict) and failure.get("reason"):
        boundary = str(failure.get("boundary", "agent"))
        kind = {"policy": "policy error", "limit": "limit"}.get(boundary, f"{boundary} failure")
        floor = " — floor reward" if body.get("floor_reward") is True else ""
        return f"{kind}: {failure['reason']}{floor}"
    if body.get("floor_reward") is True:
        return "floor reward (no reason given)"
    reason = body.get("stop_reason")
    succeeded = record.reward is not None and record.reward >= threshold
    verdict = (
        f"succeeded (reward ≥ {fmt(threshold)})"
        if succeeded
        else f"unsolved (reward < {fmt(threshold)})"
    )
    if reason == "finished":
        if succeeded:
            return f"solved: the environment finished, reward ≥ {fmt(threshold)}"
        return f"finished unsolved: the environment finished, reward < {fmt(threshold)}"
    if isinstance(reason, str) and reason:
        return f"{_STOP_REASONS.get(reason, reason)} — {verdict}"
    if status not in (None, "ok"):
        return f"agent answered {status}: {detail.get('error') if detail else ''} — {verdict}"
    return f"stop reason not recorded (no agent answer kept) — {verdict}"


@dataclass(frozen=True)
class Selected:
    """A rollout chosen for a transcript, and why it was chosen."""

    record: Rollout
    why: str


def _round_robin(records: Iterable[Rollout]) -> list[Rollout]:
    by_prompt: dict[int, list[Rollout]] = {}
    for record in sorted(records, key=lambda r: (r.prompt_index, r.step, r.sample_index, r.id)):
        by_prompt.setdefault(record.prompt_index, []).append(record)
    queues = [by_prompt[k] for k in sorted(by_prompt)]
    out: list[Rollout] = []
    while any(queues):
        for queue in queues:
            if queue:
                out.append(queue.pop(0))
    return out


def _lowest(records: Iterable[Rollout]) -> list[Rollout]:
    """The rewarded rollouts, lowest reward first (ties: the smaller id)."""
    rewarded = [r for r in records if r.rewarded and r.reward is not None]
    return sorted(rewarded, key=lambda r: (float(r.reward or 0.0), r.id))


def really_low(records: Iterable[Rollout]) -> list[Rollout]:
    """The rewarded rollouts the report tags "lowest reward": the bottom decile (at least one),
    lowest first, and only those below the run's highest reward (at most :data:`LOWEST`)."""
    ranked = _lowest(records)
    if not ranked:
        return []
    top = max(float(r.reward or 0.0) for r in ranked)
    decile = max(1, math.ceil(len(ranked) / 10))
    return [r for r in ranked[: min(decile, LOWEST)] if float(r.reward or 0.0) < top]


def below_threshold(records: Iterable[Rollout], threshold: float) -> list[Rollout]:
    """The rewarded rollouts below the success threshold (unsolved or floor-scored), lowest
    reward first: a prefix of the order :func:`select_transcripts` starts with, so the first
    :data:`LOWEST` of them always have a transcript on the page."""
    return [r for r in _lowest(records) if float(r.reward or 0.0) < threshold]


def select_transcripts(data: RunData, limit: int = MAX_TRANSCRIPTS) -> list[Selected]:
    """The rollouts to show, most telling first: the lowest-scoring rewarded ones (lowest
    first), the floor-reward ones, the failed ones, then a sample of the rest (round robin over
    the prompts so every prompt appears)."""
    chosen: list[Selected] = []
    seen: set[str] = set()

    def take(records: Iterable[Rollout], why: str, cap: int) -> None:
        for record in records:
            if len(chosen) >= limit or cap <= 0:
                return
            if record.id not in seen:
                seen.add(record.id)
                chosen.append(Selected(record, why))
                cap -= 1

    take(really_low(data.records), "lowest reward", LOWEST)
    take(below_threshold(data.records, data.threshold), "below the success threshold", LOWEST)
    take((r for r in data.records if r.floor_reward and r.rewarded), "floor reward", _MAX_FLOOR)
    take((r for r in data.records if r.state in FAILED_STATES), "lost (no reward)", _MAX_FAILED)
    take(_round_robin(r for r in data.records if r.id not in seen), "sample", limit)
    return chosen


def _breakdown_html(record: Rollout, body: Mapping[str, Any] | None) -> str:
    reward = "no reward (failed)" if record.reward is None else fmt(record.reward, 6)
    out = [f'<div class="reward">reward <b{value_attr(record.reward)}>{_e(reward)}</b>']
    if record.floor_reward:
        out.append(' <span class="badge b-floor">floor reward</span>')
        if is_non_finite(record, body):
            out.append(' <span class="badge b-failed">non-finite reward</span>')
    out.append("</div>")
    parts = breakdown_of(body)
    if parts:
        rows = "".join(
            f"<tr><td>{_e(name)}</td><td>{_e(p.get('kind', ''))}</td>"
            + "".join(
                f'<td class="n"{value_attr(p.get(k))}>{_e(fmt(p.get(k)))}</td>'
                for k in ("value", "weight", "contribution")
            )
            + f"<td>{_e(_judged_note(p))}</td></tr>"
            for name, p in parts.items()
        )
        out.append(
            '<div class="wide"><table class="breakdown"><thead><tr><th>component</th>'
            "<th>kind</th><th>value</th><th>weight</th><th>contribution</th><th>judge</th>"
            "</tr></thead>"
            f"<tbody>{rows}</tbody></table></div>"
        )
    elif record.rewarded and not record.floor_reward:
        out.append("<p class=muted>reward breakdown: not recorded in the agent's answer</p>")
    return "".join(out)


def transcript_html(
    store: RunStore, data: RunData, selected: Selected, *, open_: bool = False
) -> str:
    """One rollout as a ``<details class="tx">`` element with ``data-prompt`` (prompt index),
    ``data-outcome`` and ``data-rewarded`` attributes for the page's filters."""
    record = selected.record
    detail = record.invocation
    body = record.body
    outcome = data.outcome(record)
    label = prompt_label(record.prompt)
    why = stop_reason(record, detail, data.threshold)
    reward = "no reward" if record.reward is None else f"reward {fmt(record.reward)}"
    head = (
        f'<span class="badge b-{outcome}">{outcome}</span> <code>{_e(record.id)}</code> — '
        f"{_e(reward)} — {_e(why)} — {_e(label)} <span class=muted>({_e(selected.why)})</span>"
    )
    attrs = (
        f'class="tx" id="tx-{_e(record.id)}" data-filterable="1" '
        f'data-prompt="{record.prompt_index}" data-outcome="{outcome}" '
        f'data-rewarded="{1 if record.rewarded else 0}" data-trajectory="{_e(record.id)}"'
    )
    parts = [f"<details {attrs}{' open' if open_ else ''}><summary>{head}</summary>"]
    slot = f"{record.step} · {record.prompt_index} · {record.sample_index} · {record.attempt}"
    tokens = f"{fmt(record.prefill_tokens)} + {fmt(record.sample_tokens)}"
    meta = [
        ("state", record.state + (f" ({record.reason})" if record.reason else "")),
        ("stop reason", why),
        ("step · prompt · sample · attempt", slot),
        ("turns", fmt(record.turns)),
        ("tokens (prefill + sample)", tokens),
        ("duration", f"{record.duration_s:.3f} s"),
    ]
    if record.retry_of:
        meta.append(("retry of", record.retry_of))
    if record.agent_failure:
        meta.append(("agent-side failure", record.agent_failure))
    parts.append(
        '<div class="wide"><table class="meta">'
        + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in meta)
        + "</table></div>"
    )
    parts.append(_breakdown_html(record, body))
    parts.append(
        f"<div class=muted>task prompt (local view)</div><pre>{_e(_clip(record.prompt))}</pre>"
    )
    parts.append(_turns_html(store.list_turns(record.id), body))
    parts.append(_aux_html(store.list_aux_turns(record.id)))
    parts.append("</details>")
    return "".join(parts)


def _judged_note(part: Mapping[str, Any]) -> str:
    """A judged component's reason (``judged: reason``), else nothing."""
    if part.get("judged") is not True:
        return ""
    reason = part.get("reason")
    return f"judged: {reason}" if reason else "judged"


def _aux_html(calls: Sequence[AuxTurnRow]) -> str:
    """The rollout's auxiliary calls (judge, simulated user): kind, tokens and the answer."""
    if not calls:
        return ""
    items = []
    for call in calls:
        reply = _reply_of(call.response)
        answer = content_text(reply.get("content")) if reply else ""
        for tool in _calls(reply):
            found = tool.get("function")
            fn: dict[str, Any] = found if isinstance(found, dict) else {}
            answer += f" {fn.get('name', '')}({fn.get('arguments', '')})"
        items.append(
            f"<li><b>{_e(call.kind)}</b> #{call.idx} · {fmt(call.prompt_tokens)} + "
            f"{fmt(call.completion_tokens)} tokens — {_e(_clip(answer.strip()))}</li>"
        )
    return (
        "<div class=muted>auxiliary calls (not policy turns: judge, simulated user)</div>"
        f"<ul class=aux>{''.join(items)}</ul>"
    )


def _reply_of(response: Mapping[str, Any]) -> dict[str, Any] | None:
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        return message if isinstance(message, dict) else None
    return None


def _turns_html(turns: Sequence[TurnRow], body: Mapping[str, Any] | None) -> str:
    if not turns:
        return "<p class=muted>no policy call was recorded for this rollout</p>"
    parts: list[str] = []
    previous: list[Any] = []
    names: dict[str, str] = {}
    reply: dict[str, Any] | None = None
    for turn in turns:
        raw = turn.request.get("messages")
        messages = raw if isinstance(raw, list) else []
        # Show what is new since the previous request (usually tool results), else everything
        # (the agent rewrote its history); skip the echo of the previous reply.
        new = messages[len(previous) :] if messages[: len(previous)] == previous else messages
        echo: dict[str, Any] | None = None
        if previous and new and isinstance(new[0], dict) and new[0].get("role") == "assistant":
            echo, new = new[0], new[1:]
        previous = messages
        if echo is not None and reply is not None and _calls(echo) and not _calls(reply):
            # The policy answered in text; the agent sent it back as tool calls: it recovered
            # them from the text (inferred from this request, not reported by the agent).
            recovered_calls = "".join(
                f'<pre class="call">→ {_e(str((c.get("function") or {}).get("name", "?")))}'
                f"({_e(_clip(str((c.get('function') or {}).get('arguments', ''))))})</pre>"
                for c in _calls(echo)
            )
            parts.append(
                '<div class="msg m-assistant inferred"><span class="role">tool call(s) the '
                "agent recovered from the reply's text (inferred from its next request)"
                f"</span>{recovered_calls}</div>"
            )
        parts.append(
            f'<div class="turn"><div class="turn-head">turn {turn.idx} · {_e(turn.route)} · '
            f"{fmt(turn.prompt_tokens)} prefill + {fmt(turn.completion_tokens)} sample tokens · "
            f"{turn.latency_ms:.1f} ms</div>"
        )
        parts.extend(message_html(m, names) for m in new if isinstance(m, dict))
        reply = _reply(turn)
        if reply is not None:
            for call in _calls(reply):
                fn = call.get("function")
                if isinstance(call.get("id"), str) and isinstance(fn, dict):
                    names[call["id"]] = str(fn.get("name", "?"))
            parts.append(message_html(reply, names))
        parts.append("</div>")
    pending = len(_calls(reply))
    results = last_tool_results(body, turns[-1].idx, pending)
    recovered = (body or {}).get("recovered_tool_calls")
    text_only = reply is not None and not pending and content_text(reply.get("content"))
    if results:
        parts.append(
            '<div class="last-result"><div class="turn-head">after the last turn: tool '
            "result(s) from the agent's answer (in no later request)</div>"
        )
        for result in results:
            flag = result.status if result.status not in ("", "success") else ""
            status = f" [{flag}]" if flag else ""
            args = f"({_clip(result.input)})" if result.input else ""
            parts.append(
                f'<div class="msg m-tool"><span class="role">tool result ← {_e(result.name)}'
                f"{_e(args)}{_e(status)}</span><pre>{_e(_clip(result.output))}</pre></div>"
            )
        parts.append("</div>")
    elif results is None and pending:
        parts.append(
            f'<p class="last-result not-recorded warn">{NOT_RECORDED}: the last reply made '
            f"{pending} tool call(s); no request follows it and the agent's answer carries no "
            "tool log (<code>tool_log</code>).</p>"
        )
    elif results is None and text_only and isinstance(recovered, int) and recovered > 0:
        parts.append(
            f'<p class="last-result not-recorded muted">{NOT_RECORDED}: if the agent recovered '
            "a tool call from the last reply's text, its result is in no request and the "
            "agent's answer carries no tool log.</p>"
        )
    return "".join(parts)
