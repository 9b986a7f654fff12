"""One rollout, one record: what a run store knows of one attempt at one slot, and its views.

Vocabulary (docs/internals.md, "Glossary"): a **rollout** is one attempt at one slot as the
service sees it; its id is the wire's trajectory id, and its row lives in the store's
``trajectories`` table. A **turn** is one policy call of a rollout. The agent-side record of
what was played is :class:`agent_kit.episode.Episode`, a different thing.

:class:`Rollout` is the record every reader of a run works on: the summary and report, the
export's traces, the doctor's episode views, replay and cassettes. It is *composed of* the
store's rows (its trajectory row, reward row, turn sums, the agent's recorded answer and, when
asked for, its turn rows), never handed copies of their fields; everything else (slot, state as
reports read it, reward, tokens, agent failure, reward breakdown, …) is a view computed from
them in one place: once when the record is built for what the metrics read over and over,
else on access. :func:`load_rollouts` reads a job's rollouts in four queries whatever their
number.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agent_kit.contract import TrajectoryState
from agent_kit.store.events import INVOCATION_EVENT, STOPPED_REASON
from agent_kit.store.rows import RewardRow, TrajectoryRow, TurnRow, TurnTotals
from agent_kit.store.run_store import RunStore

__all__ = [
    "INTERRUPTED_STATE",
    "Rollout",
    "agent_failure_of",
    "breakdown_of",
    "load_rollouts",
    "metrics_of",
    "turn_totals_of",
]

#: The state reports give an attempt cut short by Ctrl-C/SIGTERM. The store keeps the service's
#: state (TIMED_OUT, reason "job stopped: interrupted"); reports count its slot as pending, not
#: lost, since ``--resume`` plays it again without counting a retry.
INTERRUPTED_STATE: Final = "INTERRUPTED"
_CUT_REASONS: Final = frozenset({f"{STOPPED_REASON}: interrupted", f"{STOPPED_REASON}: cancelled"})


def agent_failure_of(invocation: Mapping[str, Any]) -> tuple[str | None, bool]:
    """(agent-side failure reason or None, floor reward?) from a recorded invocation event.

    A RolloutApp answers ``failure: {boundary, reason}`` and ``floor_reward: true``; any other
    agent's failure is what its error answer says (HTTP status and message).
    """
    body = invocation.get("body")
    if isinstance(body, dict):
        failure = body.get("failure")
        floor = body.get("floor_reward") is True
        if isinstance(failure, dict) and failure.get("reason"):
            return f"{failure.get('boundary', 'agent')}: {failure['reason']}", floor
        if floor:
            return "floor reward (no reason given)", True
    status = invocation.get("status")
    if status not in (None, "ok") and invocation.get("error"):
        return f"agent: {invocation['error']}", False
    return None, False


def breakdown_of(body: Mapping[str, Any] | None) -> dict[str, dict[str, Any]] | None:
    """The ``reward_breakdown`` of an agent answer, or None when it has none (or a bad one)."""
    if body is None:
        return None
    value = body.get("reward_breakdown")
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        return None
    return {str(k): dict(v) for k, v in value.items()}


def metrics_of(body: Mapping[str, Any] | None) -> dict[str, float]:
    """The ``metrics`` of an agent answer (name → finite number), empty when it has none."""
    value = (body or {}).get("metrics")
    if not isinstance(value, dict):
        return {}
    return {
        str(name): float(v)
        for name, v in value.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


def turn_totals_of(turns: Iterable[TurnRow]) -> TurnTotals:
    """The sums of some turn rows: what :meth:`RunStore.turn_totals` computes in SQL."""
    rows = list(turns)
    return TurnTotals(
        turns=len(rows),
        prompt_tokens=sum(t.prompt_tokens for t in rows),
        completion_tokens=sum(t.completion_tokens for t in rows),
        estimated=sum(1 for t in rows if t.usage_estimated),
    )


def _derived() -> Any:
    """A field computed by :meth:`Rollout.__post_init__`, never passed in or compared."""
    return field(init=False, repr=False, compare=False)


@dataclass(frozen=True)
class Rollout:
    """One rollout (one attempt at one slot) as the store knows it; plain data, no store handle.

    Guarantees: the fields passed in are the store's own rows, unchanged: ``trajectory`` (its
    ``trajectories`` row), ``reward_row`` (None until a reward is reported), ``usage`` (the sums
    over its turns, always set), ``invocation`` (the detail of its last ``invocation`` event:
    the agent's answer; None when none was recorded) and ``turn_rows`` (its turns in order,
    loaded only on request, else empty: ``turns`` is the count either way). Every other
    attribute is a view of these: the ones the metrics read over and over are computed once
    when the record is built (``init=False``: never passed in, never compared, recomputed by
    :func:`dataclasses.replace`), the rest are properties.
    """

    trajectory: TrajectoryRow
    reward_row: RewardRow | None = None
    usage: TurnTotals = field(default_factory=TurnTotals)
    invocation: Mapping[str, Any] | None = None
    turn_rows: tuple[TurnRow, ...] = ()

    #: The rollout id (the wire's trajectory id).
    id: str = _derived()
    #: The training step of the slot.
    step: int = _derived()
    #: The dataset row of the slot within its step.
    prompt_index: int = _derived()
    #: The sample of the slot within its group.
    sample_index: int = _derived()
    #: 0 for the first attempt at the slot, n for its n-th retry.
    attempt: int = _derived()
    #: The state reports read: the stored state, except :data:`INTERRUPTED_STATE` for an
    #: attempt cut short when the job was stopped (``trajectory.state`` keeps the service's).
    state: str = _derived()
    #: The reward the metrics count: the total once the stored state is REWARDED, else None.
    reward: float | None = _derived()
    #: True when the rollout reached REWARDED with a reward.
    rewarded: bool = _derived()
    #: When the rollout was opened and when its state last changed (epoch seconds).
    started_at: float = _derived()
    ended_at: float = _derived()
    #: How many turns (policy calls) the rollout made.
    turns: int = _derived()
    #: Prompt and completion tokens summed over its turns, and their sum.
    prefill_tokens: int = _derived()
    sample_tokens: int = _derived()
    tokens: int = _derived()
    #: Turns whose token counts are estimated (no usage from the policy, no tokenizer).
    estimated_turns: int = _derived()
    #: Why the agent's own side went wrong (``"reward: ValueError: …"``), from its answer: a
    #: RolloutApp's ``failure``, or a foreign agent's error answer. None if it did not.
    agent_failure: str | None = _derived()
    #: True when the agent reported its floor reward (a failure on its side).
    floor_reward: bool = _derived()

    def __post_init__(self) -> None:
        row, usage, put = self.trajectory, self.usage, object.__setattr__  # frozen: set once
        state = INTERRUPTED_STATE if row.reason in _CUT_REASONS else row.state
        reward = (
            self.reward_row.total
            if self.reward_row and row.state == TrajectoryState.REWARDED
            else None
        )
        failure, floor = agent_failure_of(self.invocation) if self.invocation else (None, False)
        put(self, "id", row.id)
        put(self, "step", row.step)
        put(self, "prompt_index", row.prompt_index)
        put(self, "sample_index", row.sample_index)
        put(self, "attempt", row.attempt)
        put(self, "state", state)
        put(self, "reward", reward)
        put(self, "rewarded", state == TrajectoryState.REWARDED and reward is not None)
        put(self, "started_at", row.created_at)
        put(self, "ended_at", row.updated_at)
        put(self, "turns", usage.turns)
        put(self, "prefill_tokens", usage.prompt_tokens)
        put(self, "sample_tokens", usage.completion_tokens)
        put(self, "tokens", usage.prompt_tokens + usage.completion_tokens)
        put(self, "estimated_turns", usage.estimated)
        put(self, "agent_failure", failure)
        put(self, "floor_reward", floor)

    @property
    def slot(self) -> tuple[int, int, int]:
        """(step, prompt_index, sample_index): what every attempt of this slot shares."""
        return (self.step, self.prompt_index, self.sample_index)

    @property
    def group_key(self) -> tuple[int, int]:
        """(step, prompt_index): the group of slots whose advantages are computed together."""
        return (self.step, self.prompt_index)

    @property
    def prompt(self) -> str:
        """The prompt the rollout was opened with (the dataset row's JSON or text)."""
        return self.trajectory.prompt

    @property
    def adapter(self) -> str | None:
        """The policy's adapter that sampled the rollout (``agent-kit train``: ``base``,
        ``warm``, ``step-NNNN``), or None when the policy did not say."""
        return self.trajectory.adapter

    @property
    def inference_params(self) -> dict[str, Any] | None:
        """The payload's sampling parameters, or None when it carries none."""
        payload = self.trajectory.payload or {}
        params = payload.get("inferenceParams", payload.get("inference_params"))
        return params if isinstance(params, dict) else None

    @property
    def retry_of(self) -> str | None:
        """The id of the attempt this one retries, if any."""
        return self.trajectory.retry_of

    @property
    def reason(self) -> str | None:
        """Why the rollout reached its state (failure or timeout reason), if recorded."""
        return self.trajectory.reason

    @property
    def duration_s(self) -> float:
        """Wall-clock seconds from creation to the last state change (≥ 0)."""
        return max(0.0, self.ended_at - self.started_at)

    @property
    def rewards(self) -> tuple[float, ...] | None:
        """The reported reward list, or None when no reward was reported."""
        return None if self.reward_row is None else tuple(self.reward_row.rewards)

    @property
    def reward_total(self) -> float | None:
        """The sum of the reported rewards whatever the state, or None when none was reported."""
        return None if self.reward_row is None else self.reward_row.total

    @property
    def body(self) -> Mapping[str, Any] | None:
        """The agent's JSON answer to its invocation (None when none was recorded)."""
        body = (self.invocation or {}).get("body")
        return body if isinstance(body, dict) else None

    @property
    def reward_breakdown(self) -> dict[str, dict[str, Any]] | None:
        """The agent's ``{component: {value, weight, contribution, kind}}``, when it sent one."""
        return breakdown_of(self.body)

    @property
    def task_metrics(self) -> dict[str, float]:
        """The task's own figures of this episode (``Environment.metrics()``: Wordle's
        ``solved``, ``valid_guess_rate``), from the agent's answer: its finite numbers only,
        empty when it sent none."""
        return metrics_of(self.body)


def load_rollouts(
    store: RunStore,
    job_arn: str,
    *,
    states: Iterable[str] | None = None,
    with_turns: bool = False,
) -> list[Rollout]:
    """Every rollout of the job (optionally only those in ``states``), in creation order.

    Four queries whatever the number of rollouts: trajectories, rewards, invocation events, and
    either the turn sums or, ``with_turns``, the turn rows themselves (then ``turn_rows`` is
    filled and ``usage`` is their sums).
    """
    wanted = None if states is None else [str(getattr(s, "value", s)) for s in states]
    rows = store.list_trajectories(job_arn=job_arn, states=wanted)
    invocations = {
        e.trajectory_id: e.detail
        for e in store.list_events(kind=INVOCATION_EVENT)
        if e.trajectory_id is not None
    }
    rewards = store.job_rewards(job_arn)
    turns: Mapping[str, Sequence[TurnRow]] = {}
    totals: Mapping[str, TurnTotals] = {}
    if with_turns:
        turns = store.job_turns(job_arn, states=wanted)
    else:
        totals = store.turn_totals(job_arn)
    none = TurnTotals()
    return [
        Rollout(
            trajectory=row,
            reward_row=rewards.get(row.id),
            usage=turn_totals_of(turns.get(row.id, ())) if with_turns else totals.get(row.id, none),
            invocation=invocations.get(row.id),
            turn_rows=tuple(turns.get(row.id, ())),
        )
        for row in rows
    ]
