"""The replay policy backend: serve recorded responses, detect divergences.

:class:`ReplayBackend` answers each policy call of a replayed episode with the response recorded
for that turn, after comparing the request with the recorded one under a
:class:`Normalization`. The first mismatch is a :class:`Divergence` (turn, first differing
field, readable diff of the two requests); by default the backend then raises
:class:`ReplayDivergenceError` (a 400 ValidationException the agent treats as a policy
failure), with ``continue_on_divergence`` it keeps serving. A turn past the end of the
recording always stops. With ``fork_at=K`` and a ``live`` backend, turns ≥ K go to the live
policy.

Importing this module registers the ``replay:RUN_DIR_OR_CASSETTE[#trajectory,…]`` policy spec
(standalone use, e.g. ``agent-kit run --policy replay:runs/w1``: episodes are matched by
``replay_of`` when set, else by prompt and sample index).
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent_kit.emulator.policies import (
    PolicyBackend,
    PolicyResult,
    Usage,
)
from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall
from agent_kit.errors import ReplayDivergenceError, UsageError
from agent_kit.replay.cassette import load_recording
from agent_kit.replay.recording import Recording
from agent_kit.settings import DEFAULTS, Settings
from agent_kit.store import Rollout

__all__ = [
    "DEFAULT_IGNORED_FIELDS",
    "AuxReplay",
    "Divergence",
    "Normalization",
    "ReplayBackend",
    "first_difference",
    "from_spec",
    "render_request",
    "reply_from_completion",
    "request_diff",
]

#: Top-level request fields ignored by default: transport and identity, not behaviour.
DEFAULT_IGNORED_FIELDS: Final = frozenset({"stream", "stream_options", "model", "user"})
_TID_SLOT: Final = re.compile(r"-s(\d+)-p(\d+)-g(\d+)-a\d+\Z")
_MAX_DIFF_LINES: Final = 120


# -- normalisation and diffs -----------------------------------------------------------------------


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


# -- the policy backend ----------------------------------------------------------------------------


def reply_from_completion(response: dict[str, Any]) -> PolicyReply:
    """The :class:`PolicyReply` a recorded ``chat.completion`` holds (tool-call ids kept)."""
    message = (response.get("choices") or [{}])[0].get("message") or {}
    calls = tuple(
        ToolCall(
            str((c.get("function") or {}).get("name", "")),
            (c.get("function") or {}).get("arguments") or "{}",
            c.get("id"),
        )
        for c in message.get("tool_calls") or ()
        if isinstance(c, dict)
    )
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return PolicyReply(
        content=message.get("content"),
        tool_calls=calls,
        reasoning=reasoning if isinstance(reasoning, str) else None,
    )


class ReplayBackend:
    """A policy backend that serves a recording and detects divergences (module docstring).

    ``divergences`` maps a replayed trajectory id to its first :class:`Divergence`;
    ``on_divergence`` (optional) is called once per diverging trajectory. Thread-safe enough for
    the emulator: all calls happen on its event loop.
    """

    def __init__(
        self,
        recording: Recording,
        *,
        normalization: Normalization | None = None,
        continue_on_divergence: bool = False,
        fork_at: int | None = None,
        live: PolicyBackend | None = None,
        on_divergence: Callable[[Divergence], None] | None = None,
        name: str | None = None,
    ) -> None:
        if (fork_at is None) != (live is None):
            raise UsageError("a fork needs both fork_at and a live policy")
        if fork_at is not None and fork_at < 0:
            raise UsageError(f"--fork-at must be ≥ 0, got {fork_at}")
        self.recording = recording
        self.normalization = normalization or Normalization()
        self.continue_on_divergence = continue_on_divergence
        self.fork_at = fork_at
        self.live = live
        self.on_divergence = on_divergence
        self.name = name or f"replay:{recording.source}"
        self.divergences: dict[str, Divergence] = {}
        self._by_id = recording.by_id()
        self._assigned: dict[str, Rollout] = {}
        self._taken: set[str] = set()

    # episode lookup
    def episode_for(self, request: PolicyRequest) -> Rollout:
        """The recorded episode a trajectory replays (ValidationError if there is none)."""
        tid = request.trajectory_id
        found = self._assigned.get(tid)
        if found is not None:
            return found
        context = request.context
        original = context.get("replay_of")
        if isinstance(original, str) and original:
            found = self._by_id.get(original)
            if found is None:
                raise ReplayDivergenceError(
                    f"Trajectory {tid} replays {original}, which the recording does not hold"
                )
        else:
            found = self._match_by_prompt(request)
        self._assigned[tid] = found
        self._taken.add(found.id)
        return found

    def _match_by_prompt(self, request: PolicyRequest) -> Rollout:
        context = request.context
        retry_of = context.get("retry_of")
        if isinstance(retry_of, str) and retry_of in self._assigned:
            return self._assigned[retry_of]
        prompt = context.get("prompt")
        same = [e for e in self.recording.episodes if e.prompt == prompt]
        if not same:
            raise ReplayDivergenceError(
                f"No recorded episode has the prompt of trajectory {request.trajectory_id}"
            )
        sample = context.get("sample_index")
        slot = _TID_SLOT.search(request.trajectory_id)
        if not isinstance(sample, int) and slot is not None:
            sample = int(slot.group(3))
        if isinstance(sample, int):
            exact = [e for e in same if e.sample_index == sample]
            if exact:
                return exact[0]
        free = [e for e in same if e.id not in self._taken]
        return (free or same)[0]

    # the protocol
    async def complete(self, request: PolicyRequest) -> PolicyResult:
        """Serve the recorded response of this turn, after checking the request (docstring)."""
        episode = self.episode_for(request)
        turn = request.turn
        if self.fork_at is not None and self.live is not None and turn >= self.fork_at:
            return await self.live.complete(request)
        if turn >= len(episode.turn_rows):
            self._diverged(
                request,
                episode,
                f"turn {turn} is beyond the recording ({len(episode.turn_rows)} turns)",
                request_diff({}, self.normalization.view(request.raw), label=f"turn {turn}"),
                stop=True,
            )
        recorded = episode.turn_rows[turn]
        before = self.normalization.view(recorded.request)
        now = self.normalization.view(request.raw)
        if before != now:
            self._diverged(
                request,
                episode,
                first_difference(before, now),
                request_diff(before, now, label=f"turn {turn}"),
                stop=not self.continue_on_divergence,
            )
        usage = Usage(recorded.prompt_tokens, recorded.completion_tokens, recorded.usage_estimated)
        return PolicyResult(response=copy.deepcopy(recorded.response), usage=usage)

    def _diverged(
        self,
        request: PolicyRequest,
        episode: Rollout,
        where: str,
        diff: str,
        *,
        stop: bool,
        aux: bool = False,
    ) -> None:
        tid = request.trajectory_id
        divergence = self.divergences.get(tid)
        if divergence is None:
            divergence = Divergence(tid, episode.id, request.turn, where, diff, aux)
            self.divergences[tid] = divergence
            if self.on_divergence is not None:
                self.on_divergence(divergence)
        if stop:
            at = where if aux else f"turn {request.turn}: {where}"
            raise ReplayDivergenceError(f"Replay of {episode.id} diverged at {at}\n{diff}"[:4000])

    async def aclose(self) -> None:
        """Close the live backend of a fork (nothing else to release)."""
        if self.live is not None:
            await self.live.aclose()


class AuxReplay:
    """The auxiliary backend of a replay: each judge or simulated-user call of a replayed
    rollout is answered with the recorded call of the same kind whose request is the same
    (compared as :class:`ReplayBackend` compares policy turns; the earliest unused one), so a
    judged, simulated episode replays with no auxiliary model, whatever order concurrent calls
    (two judges awaited together) arrive in. A call the recording does not hold is a
    :class:`Divergence` of the replay (which call, which judge, the first differing field and
    the diff against the nearest recorded call) and a 400."""

    def __init__(self, replay: ReplayBackend) -> None:
        self.replay = replay
        self.name = f"aux-{replay.name}"
        self._used: dict[str, set[int]] = {}

    async def complete(self, request: PolicyRequest) -> PolicyResult:
        """The recorded answer of this auxiliary call."""
        episode = self.replay.episode_for(request)
        kind = request.context.get("aux_kind")
        used = self._used.setdefault(request.trajectory_id, set())
        free = [
            c
            for c in self.replay.recording.aux.get(episode.id, [])
            if c.kind == kind and c.idx not in used
        ]
        view = self.replay.normalization.view
        now = view(request.raw)
        for recorded in free:
            if view(recorded.request) == now:
                used.add(recorded.idx)
                usage = Usage(
                    recorded.prompt_tokens, recorded.completion_tokens, recorded.usage_estimated
                )
                return PolicyResult(response=copy.deepcopy(recorded.response), usage=usage)
        name = request.context.get("aux_name")
        call = f"auxiliary call {request.turn} ({kind}{f' {name!r}' if name else ''})"
        if not free:
            where = f"{call}: the recording holds no such {kind} call"
            diff = request_diff({}, now, label=call)
        else:
            nearest = next((c for c in free if c.idx == request.turn), free[0])
            before = view(nearest.request)
            where = (
                f"{call}: differs from recorded call {nearest.idx}: {first_difference(before, now)}"
            )
            diff = request_diff(before, now, label=call)
        self.replay._diverged(request, episode, where, diff, stop=True, aux=True)
        raise AssertionError("unreachable: a divergence with stop=True raises")

    async def aclose(self) -> None:
        """Nothing to release (the replay backend is closed by its owner)."""


def from_spec(
    rest: str, *, seed: int, base_dir: Path | None = None, settings: Settings = DEFAULTS
) -> PolicyBackend:
    """The ``replay:`` scheme: ``rest`` is ``SOURCE[#id,…]`` (run dir or cassette); it answers
    with the recorded turns, so no ``settings`` bear on it."""
    path, _, ids = rest.partition("#")
    if not path.strip():
        raise UsageError("replay policy needs a source: replay:RUN_DIR[#trajectory,…]")
    wanted = [t.strip() for t in ids.split(",") if t.strip()] or None
    return ReplayBackend(load_recording(path.strip(), wanted))
