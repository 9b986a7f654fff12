"""The replay policy backend: serve recorded responses, detect divergences.

:class:`ReplayBackend` answers each policy call of a replayed episode with the response recorded
for that turn, after comparing the request with the recorded one under a
:class:`~agent_kit.replay.divergence.Normalization` (the comparison is
:mod:`agent_kit.replay.divergence`). The first mismatch is a
:class:`~agent_kit.replay.divergence.Divergence` (turn, first differing field, readable diff of
the two requests); by default the backend then raises
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
import re
from collections.abc import Callable, Sequence
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
from agent_kit.replay.divergence import Divergence, Normalization, first_difference, request_diff
from agent_kit.replay.recording import Recording
from agent_kit.settings import DEFAULTS, Settings
from agent_kit.store import AuxTurnRow, Rollout

__all__ = [
    "AuxMiss",
    "AuxReplay",
    "ReplayBackend",
    "from_spec",
    "match_aux_call",
    "reply_from_completion",
]

_TID_SLOT: Final = re.compile(r"-s(\d+)-p(\d+)-g(\d+)-a\d+\Z")


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


@dataclass(frozen=True)
class AuxMiss:
    """An auxiliary call the recording does not hold: where it departs (which call, which
    judge, the first differing field) and the diff against the nearest recorded call."""

    where: str
    diff: str


def match_aux_call(
    calls: Sequence[AuxTurnRow],
    used: set[int],
    *,
    kind: Any,
    name: Any,
    index: int,
    body: dict[str, Any],
    view: Callable[[dict[str, Any]], dict[str, Any]],
) -> AuxTurnRow | AuxMiss:
    """The earliest recorded call of ``kind`` not in ``used`` whose request, under ``view``,
    equals ``body`` (its index is added to ``used``), else an :class:`AuxMiss`. ``index`` and
    ``name`` (a judge's) only name the call in the miss. The subprocess replay
    (:class:`AuxReplay`) and the in-process player (:mod:`agent_kit.replay.inprocess`) both
    answer auxiliary calls with it."""
    free = [c for c in calls if c.kind == kind and c.idx not in used]
    now = view(body)
    for recorded in free:
        if view(recorded.request) == now:
            used.add(recorded.idx)
            return recorded
    call = f"auxiliary call {index} ({kind}{f' {name!r}' if name else ''})"
    if not free:
        return AuxMiss(
            f"{call}: the recording holds no such {kind} call", request_diff({}, now, label=call)
        )
    nearest = next((c for c in free if c.idx == index), free[0])
    before = view(nearest.request)
    where = f"{call}: differs from recorded call {nearest.idx}: {first_difference(before, now)}"
    return AuxMiss(where, request_diff(before, now, label=call))


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
        found = match_aux_call(
            self.replay.recording.aux.get(episode.id, []),
            self._used.setdefault(request.trajectory_id, set()),
            kind=request.context.get("aux_kind"),
            name=request.context.get("aux_name"),
            index=request.turn,
            body=request.raw,
            view=self.replay.normalization.view,
        )
        if isinstance(found, AuxTurnRow):
            usage = Usage(found.prompt_tokens, found.completion_tokens, found.usage_estimated)
            return PolicyResult(response=copy.deepcopy(found.response), usage=usage)
        self.replay._diverged(request, episode, found.where, found.diff, stop=True, aux=True)
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
