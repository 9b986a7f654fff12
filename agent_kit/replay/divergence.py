"""How a replayed request is compared with its recording, and what a divergence is.

A :class:`Normalization` says which parts of a policy request count (the top-level fields left
out by default, :data:`DEFAULT_IGNORED_FIELDS`, are transport and identity, not behaviour);
:func:`first_difference` names the first field where two normalised requests differ and
:func:`request_diff` shows both as a readable unified diff (at most 120 lines). A
:class:`Divergence` is where a replayed episode first departed from its recording. The replay
backend (:mod:`agent_kit.replay.policy`) compares every call with these; the verdicts and the
CLI read them.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "DEFAULT_IGNORED_FIELDS",
    "Divergence",
    "Normalization",
    "first_difference",
    "render_request",
    "request_diff",
]

#: Top-level request fields ignored by default: transport and identity, not behaviour.
DEFAULT_IGNORED_FIELDS: Final = frozenset({"stream", "stream_options", "model", "user"})
_MAX_DIFF_LINES: Final = 120


@dataclass(frozen=True)
class Normalization:
    """How requests are made comparable before a recorded and a replayed request are compared.

    - ``ignore``: top-level request fields left out (default :data:`DEFAULT_IGNORED_FIELDS`);
    - ``only``: when set, compare just these top-level fields (the in-process replay uses
      ``messages`` and ``tools``);
    - ``tool_call_ids``: replace tool-call ids by their order of appearance (``call#0``…);
    - ``flatten_content``: message content given as a list of text parts equals the joined
      string (and a missing content equals ``""``);
    - ``whitespace``: collapse runs of whitespace in message contents (off: whitespace counts).
    """

    ignore: frozenset[str] = DEFAULT_IGNORED_FIELDS
    only: frozenset[str] | None = None
    tool_call_ids: bool = True
    flatten_content: bool = True
    whitespace: bool = False

    @classmethod
    def strict(cls) -> Normalization:
        """Compare requests exactly as sent (nothing ignored, nothing rewritten)."""
        return cls(ignore=frozenset(), tool_call_ids=False, flatten_content=False, whitespace=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (kept in the replay run's job config)."""
        return {
            "ignore": sorted(self.ignore),
            "only": None if self.only is None else sorted(self.only),
            "tool_call_ids": self.tool_call_ids,
            "flatten_content": self.flatten_content,
            "whitespace": self.whitespace,
        }

    def view(self, request: dict[str, Any]) -> dict[str, Any]:
        """The normalised form of a chat-completions request body (a new dict)."""
        keys = [k for k in request if k not in self.ignore]
        if self.only is not None:
            keys = [k for k in keys if k in self.only]
        out = {k: request[k] for k in keys}  # values are shared, never mutated
        messages = out.get("messages")
        if isinstance(messages, list):
            ids: dict[str, str] = {}
            out["messages"] = [self._message(m, ids) for m in messages]
        return out

    def _message(self, message: Any, ids: dict[str, str]) -> Any:
        if not isinstance(message, dict):
            return message
        m = dict(message)
        if self.flatten_content:
            m["content"] = _flatten(m.get("content"))
        if self.whitespace and isinstance(m.get("content"), str):
            m["content"] = " ".join(m["content"].split())
        if self.tool_call_ids:
            calls = m.get("tool_calls")
            if isinstance(calls, list):
                m["tool_calls"] = [
                    {**c, "id": _canonical_id(c.get("id"), ids)} if isinstance(c, dict) else c
                    for c in calls
                ]
            if "tool_call_id" in m:
                m["tool_call_id"] = _canonical_id(m["tool_call_id"], ids)
        return m


def _flatten(content: Any) -> Any:
    if content is None:
        return ""
    if isinstance(content, list) and all(
        isinstance(p, dict) and isinstance(p.get("text"), str) for p in content
    ):
        return "\n".join(p["text"] for p in content)
    return content


def _canonical_id(value: Any, ids: dict[str, str]) -> Any:
    if not isinstance(value, str):
        return value
    if value not in ids:
        ids[value] = f"call#{len(ids)}"
    return ids[value]


def first_difference(a: Any, b: Any, path: str = "") -> str:
    """The path of the first difference between two JSON values (e.g. ``messages[3].content``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if key not in a or key not in b:
                return f"{path}.{key}".lstrip(".") + (" is new" if key not in a else " is missing")
            if a[key] != b[key]:
                return first_difference(a[key], b[key], f"{path}.{key}")
        return path.lstrip(".") or "(request)"
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
        if len(a) != len(b):
            return f"{path.lstrip('.')} has {len(b)} items instead of {len(a)}"
        return path.lstrip(".") or "(request)"
    return f"{path.lstrip('.') or '(request)'} differs"


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))


def render_request(view: dict[str, Any]) -> list[str]:
    """A request view as diff-friendly lines: one header per message, its content line by line
    (``| …``), tool calls one per line, other fields as compact sorted JSON."""
    lines: list[str] = []
    for key in sorted(k for k in view if k != "messages"):
        value = view[key]
        if key == "tools" and isinstance(value, list):
            lines.append("tools:")
            lines.extend(f"  {_compact(tool)}" for tool in value)
        else:
            lines.append(f"{key}: {_compact(value)}")
    messages = view.get("messages")
    if isinstance(messages, list):
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                lines.append(f"messages[{i}]: {_compact(message)}")
                continue
            extra = {k: v for k, v in message.items() if k not in ("role", "content", "tool_calls")}
            head = f"messages[{i}] {message.get('role')}"
            lines.append(head + (f" {_compact(extra)}" if extra else ""))
            for call in message.get("tool_calls") or ():
                lines.append(f"  call {_compact(call)}")
            content = message.get("content")
            if isinstance(content, str):
                lines.extend(f"  | {line}" for line in content.split("\n"))
            elif content is not None:
                lines.append(f"  content: {_compact(content)}")
    elif messages is not None:
        lines.append(f"messages: {_compact(messages)}")
    return lines


def request_diff(recorded: dict[str, Any], replayed: dict[str, Any], *, label: str = "turn") -> str:
    """A readable unified diff of two request views (see :func:`render_request`), capped."""
    lines = list(
        difflib.unified_diff(
            render_request(recorded),
            render_request(replayed),
            f"recorded {label}",
            f"replayed {label}",
            n=2,
            lineterm="",
        )
    )
    if len(lines) > _MAX_DIFF_LINES:
        more = len(lines) - _MAX_DIFF_LINES
        lines = [*lines[:_MAX_DIFF_LINES], f"… {more} more diff lines"]
    return "\n".join(lines)


@dataclass(frozen=True)
class Divergence:
    """Where a replayed episode first departed from its recording."""

    trajectory_id: str
    original_id: str
    turn: int
    where: str
    diff: str
    #: True when an auxiliary call (a judge's, a simulated user's) diverged: ``turn`` is then
    #: the auxiliary call's index and ``where`` names the call.
    aux: bool = False

    @property
    def summary(self) -> str:
        """One line: the turn (0-based) and the first differing field."""
        if self.aux:
            return f"diverged at {self.where}"
        return f"diverged at turn {self.turn}: {self.where}"
