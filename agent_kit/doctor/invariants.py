"""Reward ordering invariants: what the user says must score higher, checked on recorded episodes.

Declare them next to the reward, in the entrypoint module, as plain data (a deployed agent must
not import the tooling half, so there is nothing to import)::

    REWARD_ORDERINGS = [
        # (name, better, worse): every episode `better` accepts must outscore every one `worse`
        # accepts
        ("win > loss", lambda ep: ep.outcome == "succeeded", lambda ep: ep.outcome == "unsolved"),
        # (name, rank): a lower rank must score strictly higher; rank None leaves the episode out
        ("fast win > slow win > loss > no play", wordle_rank),
    ]

Each predicate or rank function receives an :class:`EpisodeView` of one recorded episode. An
ordering is checked on *every* pair the run offers (floor-scored and unrewarded episodes are
left out: their reward is not the reward function's); a pair violates it when the better
episode's reward is not strictly above the worse one's. Violations are counted over all pairs
with a sorted search, so large runs stay cheap.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import ModuleType
from typing import Any, Final

from agent_kit.doctor.findings import Finding
from agent_kit.errors import UsageError
from agent_kit.reporting.words import plural
from agent_kit.store import Rollout

__all__ = [
    "ORDERINGS_NAME",
    "EpisodeView",
    "Ordering",
    "check_orderings",
    "load_orderings",
    "parse_orderings",
]

#: The module variable an entrypoint declares its orderings in.
ORDERINGS_NAME: Final = "REWARD_ORDERINGS"
_SHOWN: Final = 5


@dataclass(frozen=True)
class EpisodeView:
    """One recorded rollout as an ordering predicate sees it: the episode the agent played.

    A view of the :class:`~agent_kit.store.Rollout` record plus what the checks decide about
    it, not a copy: ``trajectory_id``, ``step``, ``prompt_index``, ``sample_index``, ``turns``,
    ``tokens``, ``recorded_reward`` (the stored reward), ``body`` (the agent's answer),
    ``tool_calls``/``recovered_tool_calls`` (from that answer) and ``task`` (the dataset row: the
    prompt's JSON, or ``{"prompt": text}``) are read from the rollout. ``reward`` is the reward
    the checks use: the re-scored one when the run was re-scored with the entrypoint.
    ``components`` maps each reward component to its *value* (``contributions`` to weight ×
    value, ``weights`` to its declared weight, ``kinds`` to outcome/strategy), from the agent's
    ``reward_breakdown``. ``result`` is what the environment passed to ``finish()``, known only
    when the episode was re-played with the entrypoint (else None).
    """

    rollout: Rollout
    reward: float | None
    outcome: str
    floor: bool
    components: Mapping[str, float] = field(default_factory=dict)
    contributions: Mapping[str, float] = field(default_factory=dict)
    weights: Mapping[str, float] = field(default_factory=dict)
    kinds: Mapping[str, str] = field(default_factory=dict)
    result: Any = None

    @property
    def trajectory_id(self) -> str:
        """The rollout's id."""
        return self.rollout.id

    @property
    def step(self) -> int:
        """The rollout's training step."""
        return self.rollout.step

    @property
    def prompt_index(self) -> int:
        """The rollout's dataset row within its step."""
        return self.rollout.prompt_index

    @property
    def sample_index(self) -> int:
        """The rollout's sample within its group."""
        return self.rollout.sample_index

    @property
    def recorded_reward(self) -> float | None:
        """The reward the run stored (None when it got none)."""
        return self.rollout.reward

    @property
    def turns(self) -> int:
        """How many policy calls the episode made."""
        return self.rollout.turns

    @property
    def tokens(self) -> int:
        """Prompt + completion tokens over its turns."""
        return self.rollout.tokens

    @property
    def body(self) -> Mapping[str, Any] | None:
        """The agent's recorded answer, or None."""
        return self.rollout.body

    @property
    def tool_calls(self) -> int | None:
        """The tool calls the agent reported, or None when its answer does not say."""
        calls = self.body.get("tool_calls") if self.body else None
        return calls if isinstance(calls, int) else None

    @property
    def recovered_tool_calls(self) -> int | None:
        """Tool calls recovered from text, as the agent reported them, or None."""
        calls = self.body.get("recovered_tool_calls") if self.body else None
        return calls if isinstance(calls, int) else None

    @cached_property
    def task(self) -> Mapping[str, Any]:
        """The dataset row (the prompt's JSON, or ``{"prompt": text}``)."""
        return task_of(self.rollout.prompt)

    @property
    def scored(self) -> bool:
        """True when the reward function scored this episode (rewarded, not the floor)."""
        return self.reward is not None and not self.floor


def task_of(prompt: str) -> dict[str, Any]:
    """The dataset row packed in a payload prompt (``{"prompt": text}`` when it is not JSON)."""
    try:
        parsed = json.loads(prompt)
    except (TypeError, ValueError):
        parsed = None
    return parsed if isinstance(parsed, dict) else {"prompt": prompt}


@dataclass(frozen=True)
class Ordering:
    """One declared ordering: two predicates (better, worse) or one rank function.

    Exactly one of (``better`` and ``worse``) or ``rank`` is set; see the module docstring.
    """

    name: str
    better: Callable[[EpisodeView], Any] | None = None
    worse: Callable[[EpisodeView], Any] | None = None
    rank: Callable[[EpisodeView], Any] | None = None


def parse_orderings(value: Any, source: str = ORDERINGS_NAME) -> list[Ordering]:
    """Read a ``REWARD_ORDERINGS`` value: ``(name, better, worse)`` or ``(name, rank)`` items."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise UsageError(f"{source} must be a list of (name, better, worse) or (name, rank)")
    orderings: list[Ordering] = []
    for i, item in enumerate(value):
        if isinstance(item, Ordering):
            orderings.append(item)
            continue
        ok = isinstance(item, tuple) and len(item) in (2, 3) and isinstance(item[0], str)
        if not ok or not all(callable(f) for f in item[1:]):
            raise UsageError(
                f"{source}[{i}] must be (name, better, worse) or (name, rank) with callables"
            )
        if len(item) == 3:
            orderings.append(Ordering(item[0], better=item[1], worse=item[2]))
        else:
            orderings.append(Ordering(item[0], rank=item[1]))
    return orderings


def load_orderings(module: ModuleType) -> list[Ordering]:
    """The orderings a loaded entrypoint module declares (empty when it declares none)."""
    value = getattr(module, ORDERINGS_NAME, None)
    if value is None:
        return []
    return parse_orderings(value, f"{module.__name__}.{ORDERINGS_NAME}")


class _PredicateError(Exception):
    def __init__(self, view: EpisodeView, exc: Exception) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.view = view


def _apply(fn: Callable[[EpisodeView], Any], view: EpisodeView) -> Any:
    try:
        return fn(view)
    except Exception as exc:  # a user predicate: any failure is a finding, never a crash
        raise _PredicateError(view, exc) from exc


def _levels(ordering: Ordering, views: Sequence[EpisodeView]) -> list[list[EpisodeView]]:
    """Episodes per level, best level first."""
    if ordering.rank is not None:
        ranked: dict[Any, list[EpisodeView]] = {}
        for v in views:
            key = _apply(ordering.rank, v)
            if key is not None:
                ranked.setdefault(key, []).append(v)
        return [ranked[k] for k in sorted(ranked)]
    assert ordering.better is not None
    assert ordering.worse is not None
    better = [v for v in views if _apply(ordering.better, v)]
    worse = [v for v in views if _apply(ordering.worse, v)]
    return [better, worse]


def _reward(view: EpisodeView) -> float:
    assert view.reward is not None
    return view.reward


def _check(ordering: Ordering, views: Sequence[EpisodeView]) -> Finding:
    levels = _levels(ordering, views)
    pairs = violations = 0
    worst: tuple[float, EpisodeView, EpisodeView] | None = None
    for i, better in enumerate(levels):
        below = [v for level in levels[i + 1 :] for v in level]
        if not better or not below:
            continue
        rewards = sorted(_reward(v) for v in below)
        top = max(below, key=_reward)
        below_ids = {id(v) for v in below}
        for b in better:
            both = id(b) in below_ids  # overlapping predicates: never pair an episode with itself
            pairs += len(below) - both
            # pairs whose worse episode scores ≥ the better one
            violations += len(rewards) - bisect.bisect_left(rewards, _reward(b)) - both
            gap = _reward(b) - _reward(top)
            if top is not b and gap <= 0 and (worst is None or gap < worst[0]):
                worst = (gap, b, top)
    evidence: dict[str, Any] = {
        "ordering": ordering.name,
        "levels": [len(level) for level in levels],
        "pairs": pairs,
        "violations": violations,
    }
    if pairs == 0:
        return Finding(
            "ordering",
            "info",
            f"ordering {ordering.name!r} not checked: the run has no pair of episodes for it",
            "record a run whose episodes reach both sides (more prompts, a varied policy)",
            evidence,
        )
    if violations == 0:
        return Finding(
            "ordering",
            "info",
            f"ordering {ordering.name!r} holds on all {plural(pairs, 'pair')}",
            "",
            evidence,
        )
    assert worst is not None
    gap, b, w = worst
    evidence["worst_pair"] = {
        "better": {"trajectory_id": b.trajectory_id, "reward": b.reward},
        "worse": {"trajectory_id": w.trajectory_id, "reward": w.reward},
        "gap": gap,
    }
    return Finding(
        "ordering",
        "error",
        f"ordering {ordering.name!r} violated on {violations} of {plural(pairs, 'pair')}: "
        f"{b.trajectory_id} (better) scored {b.reward:.4g} ≤ {w.trajectory_id} scored "
        f"{w.reward:.4g}",
        "fix the reward's weights or signs so the better episode always scores strictly higher",
        evidence,
        (b.trajectory_id, w.trajectory_id),
    )


def check_orderings(views: Sequence[EpisodeView], orderings: Sequence[Ordering]) -> list[Finding]:
    """One finding per ordering over the scored episodes (see the module docstring)."""
    scored = [v for v in views if v.scored]
    findings: list[Finding] = []
    for ordering in orderings:
        try:
            findings.append(_check(ordering, scored))
        except _PredicateError as exc:
            findings.append(
                Finding(
                    "ordering",
                    "error",
                    f"ordering {ordering.name!r}: its predicate raised on "
                    f"{exc.view.trajectory_id}: {exc}",
                    "make the predicate total over recorded episodes (use .get, check None)",
                    {"ordering": ordering.name, "error": str(exc)},
                    (exc.view.trajectory_id,),
                )
            )
    return findings
