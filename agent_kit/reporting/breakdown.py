"""What the RL report computes beyond ``summary.json``: outcomes, reward components, prompts.

:func:`load_run_data` reads a job's store once (trajectories, rewards, the agent's invocation
answers, job-failure events) into a :class:`RunData`; the functions below are pure over it.

Vocabulary (docs/metrics.md): a rollout **failed** when it got no reward (trajectory state
``FAILED`` or ``TIMED_OUT``: the job's sense of the word); a rewarded episode is **succeeded**
when its reward is ≥ the job's success threshold and **unsolved** below it; **floor** marks a
rewarded episode whose reward is the agent's floor reward (a failure on the agent's own side,
``floor_reward: true`` in its answer). The service's metric ``eval/reward/failed_rollouts``
counts *unsolved and lost* slots; that name is kept as the service spells it.

Reward components come from the agent's answer (``reward_breakdown``: ``{name: {value, weight,
contribution, kind}}``, recorded in the store's ``invocation`` events); the rewards table only
holds the reported totals. The share of a component in the reward variance is
``cov(contribution, reward) / var(reward)`` over the rewarded, non-floor rollouts that carry a
breakdown: the shares add up to 1 when the contributions add up to the reward (a residual row
holds any difference), and a negative share means the component works against the spread.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from agent_kit.contract import TrajectoryState
from agent_kit.reporting.metrics import GroupResult, build_groups
from agent_kit.reporting.summary import resolve_job
from agent_kit.reporting.summary_schema import flat_config
from agent_kit.store import JobRow, Rollout, RunStore, load_rollouts
from agent_kit.store.events import JOB_FAILURE_EVENT
from agent_kit.store.records import breakdown_of

__all__ = [
    "FAILED_STATES",
    "OUTCOMES",
    "RESIDUAL",
    "ComponentStat",
    "FailureOverview",
    "Outcome",
    "PromptRow",
    "ReasonCount",
    "RewardBreakdown",
    "RunData",
    "component_stats",
    "failure_overview",
    "is_non_finite",
    "load_run_data",
    "outcome_of",
    "prompt_label",
    "prompt_rows",
]

#: The outcome of one trajectory, in the report's vocabulary (see the module docstring).
Outcome = Literal["succeeded", "unsolved", "floor", "failed", "pending"]
#: Every outcome, in the order the report lists them.
OUTCOMES: Final[tuple[Outcome, ...]] = ("succeeded", "unsolved", "floor", "failed", "pending")
#: Trajectory states of a rollout that got no reward (the job's "failed").
FAILED_STATES: Final = TrajectoryState.unrewarded()
#: Name of the row holding ``reward − Σ contributions`` when the breakdown does not add up.
RESIDUAL: Final = "(not in breakdown)"
_LIST_LIMIT: Final = 10
_NON_FINITE = re.compile(r"not finite|non-finite|\bnan\b|\binf(inity)?\b", re.IGNORECASE)


@dataclass(frozen=True)
class RunData:
    """One job as read from its store: its rollouts (each with the agent's answer), their
    groups, the job-failure events, and the threshold the outcomes are judged by."""

    job: JobRow
    records: tuple[Rollout, ...]
    groups: tuple[GroupResult, ...]
    #: The ``job_failure`` events (reason, trajectory_id, step, prompt_index, sample_index).
    job_failures: tuple[Mapping[str, Any], ...]
    threshold: float
    advantage: str = "group_based"

    def outcome(self, record: Rollout) -> Outcome:
        """The rollout's outcome against this job's success threshold."""
        return outcome_of(record, self.threshold)

    @property
    def chosen(self) -> list[Rollout]:
        """Each slot's rewarded rollout (what the metrics are computed over), group order."""
        return [r for g in self.groups for r in g.rollouts]

    @property
    def prompts(self) -> dict[int, str]:
        """Prompt index → the prompt of its first rollout (creation order)."""
        prompts: dict[int, str] = {}
        for rollout in self.records:
            prompts.setdefault(rollout.prompt_index, rollout.prompt)
        return prompts


def load_run_data(
    store: RunStore,
    job_arn: str | None = None,
    *,
    threshold: float | None = None,
    advantage: str = "group_based",
    records: Sequence[Rollout] | None = None,
) -> RunData:
    """Read a job (ARN, name, or None for the latest) from ``store`` into a :class:`RunData`.

    ``threshold`` None means the job config's ``success_threshold``, else 1.0 (as the summary);
    ``records`` are the job's :func:`~agent_kit.store.load_rollouts`, when the caller has them
    already.
    """
    job = resolve_job(store, job_arn)
    records = list(load_rollouts(store, job.arn) if records is None else records)
    ids = {r.id for r in records}
    job_failures = tuple(e.detail for e in store.list_events(kind=JOB_FAILURE_EVENT))
    return RunData(
        job=job,
        records=tuple(records),
        groups=tuple(build_groups(records, advantage)),
        job_failures=tuple(f for f in job_failures if f.get("trajectory_id") in ids),
        threshold=_threshold(job.config, threshold),
        advantage=advantage,
    )


def _threshold(config: Mapping[str, Any], given: float | None) -> float:
    if given is not None:
        return given
    value = flat_config(config).get("success_threshold")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return 1.0


def outcome_of(record: Rollout, threshold: float) -> Outcome:
    """``failed`` (no reward), ``floor`` (agent's floor reward), ``succeeded`` (≥ threshold),
    ``unsolved`` (below it) or ``pending`` (no outcome yet)."""
    if record.rewarded and record.reward is not None:
        if record.floor_reward:
            return "floor"
        return "succeeded" if record.reward >= threshold else "unsolved"
    if record.state in FAILED_STATES:
        return "failed"
    return "pending"


def is_non_finite(record: Rollout, body: Mapping[str, Any] | None) -> bool:
    """True when the agent's reward was not a finite number (NaN/inf; scored as the floor)."""
    if record.agent_failure and _NON_FINITE.search(record.agent_failure):
        return True
    if body is not None:
        value = body.get("reward")
        if isinstance(value, float) and not math.isfinite(value):
            return True
    return False


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    mean = math.fsum(values) / len(values)
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))


@dataclass(frozen=True)
class ComponentStat:
    """One reward component over the analysed rollouts (population std, like the metrics).

    ``weights`` are the distinct declared weights seen (a reward may weight a term differently
    per episode); ``share`` is its share of the reward variance (None when the variance is 0).
    """

    name: str
    kind: str
    weights: tuple[float, ...]
    n: int
    value_mean: float | None
    value_std: float | None
    contribution_mean: float | None
    contribution_std: float | None
    share: float | None

    @classmethod
    def of(
        cls,
        name: str,
        kind: str,
        weights: Sequence[float],
        n: int,
        values: Sequence[float],
        contributions: Sequence[float],
        share: float | None,
    ) -> ComponentStat:
        """The component ``name`` of ``n`` rollouts: the mean and std of its ``values`` and of
        its ``contributions``."""
        return cls(
            name, kind, tuple(weights), n, *_mean_std(values), *_mean_std(contributions), share
        )


@dataclass(frozen=True)
class RewardBreakdown:
    """Reward components of a job's rewarded rollouts, and who was left out and why."""

    components: tuple[ComponentStat, ...]
    #: Rewarded, non-floor rollouts whose answer carried a breakdown (the analysed ones).
    analysed: int
    #: Rewarded, non-floor rollouts without a breakdown in the agent's answer.
    without_breakdown: int
    #: Rewarded rollouts scored with the agent's floor reward (left out of the components).
    floor: int
    #: Of those, the ones whose reward function gave a non-finite value.
    non_finite: int
    reward_mean: float | None
    reward_std: float | None


def component_stats(data: RunData) -> RewardBreakdown:
    """Mean, std, declared weight and variance share of every component (see module doc)."""
    analysed: list[tuple[float, dict[str, dict[str, Any]]]] = []
    without = floor = non_finite = 0
    for record in data.chosen:
        body = record.body
        if record.floor_reward:
            floor += 1
            non_finite += is_non_finite(record, body)
            continue
        parts = breakdown_of(body)
        if parts is None or record.reward is None:
            without += 1
            continue
        analysed.append((float(record.reward), parts))
    names: list[str] = []
    for _, parts in analysed:
        names.extend(n for n in parts if n not in names)
    totals = [total for total, _ in analysed]
    reward_mean, reward_std = _mean_std(totals)
    variance = (reward_std or 0.0) ** 2
    stats: list[ComponentStat] = []
    residuals: list[float] = []
    for total, parts in analysed:
        summed = math.fsum(_contribution(p) for p in parts.values())
        residuals.append(total - summed)
    for name in names:
        present = [parts[name] for _, parts in analysed if name in parts]
        values = [v for v in (_number(p.get("value")) for p in present) if v is not None]
        contributions = [_contribution(parts.get(name, {})) for _, parts in analysed]
        weights = sorted({w for w in (_number(p.get("weight")) for p in present) if w is not None})
        kinds = Counter(str(p.get("kind", "")) for p in present)
        kind = kinds.most_common(1)[0][0] if kinds else ""
        share = _share(contributions, totals, reward_mean, variance)
        stats.append(
            ComponentStat.of(name, kind, weights, len(present), values, contributions, share)
        )
    if any(abs(r) > 1e-9 * max(1.0, abs(t)) for r, t in zip(residuals, totals, strict=True)):
        share = _share(residuals, totals, reward_mean, variance)
        stats.append(
            ComponentStat.of(RESIDUAL, "", (), len(residuals), residuals, residuals, share)
        )
    return RewardBreakdown(
        components=tuple(stats),
        analysed=len(analysed),
        without_breakdown=without,
        floor=floor,
        non_finite=non_finite,
        reward_mean=reward_mean,
        reward_std=reward_std,
    )


def _contribution(part: Mapping[str, Any]) -> float:
    given = _number(part.get("contribution"))
    if given is not None:
        return given
    value, weight = _number(part.get("value")), _number(part.get("weight"))
    return (value or 0.0) * (1.0 if weight is None else weight)


def _share(
    contributions: Sequence[float], totals: Sequence[float], mean: float | None, variance: float
) -> float | None:
    if mean is None or not variance > 0:
        return None
    c_mean = math.fsum(contributions) / len(contributions)
    cov = math.fsum(
        (c - c_mean) * (t - mean) for c, t in zip(contributions, totals, strict=True)
    ) / len(totals)
    return cov / variance


def prompt_label(prompt: str, limit: int = 48) -> str:
    """A short name for a dataset prompt: its JSON ``id`` when it has one, else its start."""
    try:
        parsed = json.loads(prompt)
    except (TypeError, ValueError):
        parsed = None
    if isinstance(parsed, dict):
        for key in ("id", "task_id", "name"):
            if isinstance(parsed.get(key), (str, int)) and not isinstance(parsed.get(key), bool):
                return str(parsed[key])[:limit]
        inner = parsed.get("prompt")
        if isinstance(inner, str):
            prompt = inner
    text = " ".join(str(prompt).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class PromptRow:
    """One dataset prompt over every step it was played in.

    ``success_rate`` is succeeded / finished slots (a lost slot counts as not succeeded, like
    ``eval/reward/pass_at_1``); reward statistics are over its rewarded rollouts (population
    std); ``zero_variance_groups`` of its ``groups`` gave no gradient.
    """

    prompt_index: int
    label: str
    prompt: str
    groups: int
    finished: int
    rewarded: int
    succeeded: int
    unsolved: int
    floor: int
    lost: int
    success_rate: float | None
    reward_mean: float | None
    reward_std: float | None
    zero_variance_groups: int
    trajectory_ids: tuple[str, ...] = field(default=())

    @property
    def no_gradient(self) -> bool:
        """True when every group of this prompt had zero reward variance."""
        return self.groups > 0 and self.zero_variance_groups == self.groups


def prompt_rows(data: RunData) -> list[PromptRow]:
    """One :class:`PromptRow` per prompt index, in index order."""
    prompts = data.prompts
    rows: list[PromptRow] = []
    for index in sorted({g.prompt_index for g in data.groups}):
        groups = [g for g in data.groups if g.prompt_index == index]
        chosen = [r for g in groups for r in g.rollouts]
        rewards = [float(r.reward) for r in chosen if r.reward is not None]
        outcomes = Counter(data.outcome(r) for r in chosen)
        finished = sum(g.finished_slots for g in groups)
        succeeded = sum(1 for r in rewards if r >= data.threshold)
        mean, std = _mean_std(rewards)
        prompt = prompts.get(index, "")
        rows.append(
            PromptRow(
                prompt_index=index,
                label=prompt_label(prompt) or f"prompt {index}",
                prompt=prompt,
                groups=len(groups),
                finished=finished,
                rewarded=len(rewards),
                succeeded=succeeded,
                unsolved=outcomes["unsolved"],
                floor=outcomes["floor"],
                lost=sum(g.lost for g in groups),
                success_rate=succeeded / finished if finished else None,
                reward_mean=mean,
                reward_std=std,
                zero_variance_groups=sum(1 for g in groups if g.rollouts and g.degenerate),
                trajectory_ids=tuple(r.id for r in chosen),
            )
        )
    return rows


@dataclass(frozen=True)
class ReasonCount:
    """A failure reason, how many trajectories had it, and the first of their ids."""

    reason: str
    count: int
    trajectory_ids: tuple[str, ...]


@dataclass(frozen=True)
class FailureOverview:
    """Everything that went wrong in a job, for the top of the report."""

    #: Agent-side failures by reason (the agent's ``failure`` or error answer), floor-scored or not.
    agent: tuple[ReasonCount, ...]
    #: Rewarded rollouts scored with the floor reward, and of those the non-finite ones.
    floor: int
    non_finite: int
    non_finite_ids: tuple[str, ...]
    #: Job-killing failures (``job_failure`` events), by reason.
    job: tuple[ReasonCount, ...]
    #: Rollouts that got no reward (FAILED / TIMED_OUT), by reason; retried or lost.
    rollouts: tuple[ReasonCount, ...]
    timed_out: int
    failed_state: int
    lost_slots: int
    retried: int

    @property
    def empty(self) -> bool:
        """True when nothing failed anywhere."""
        return not (self.agent or self.floor or self.job or self.rollouts)


def _by_reason(pairs: Sequence[tuple[str, str]]) -> tuple[ReasonCount, ...]:
    ids: dict[str, list[str]] = {}
    for reason, tid in pairs:
        ids.setdefault(reason, []).append(tid)
    ranked = sorted(ids.items(), key=lambda item: (-len(item[1]), item[0]))
    return tuple(ReasonCount(r, len(t), tuple(t[:_LIST_LIMIT])) for r, t in ranked)


def failure_overview(data: RunData) -> FailureOverview:
    """Agent-side failures, floor and non-finite rewards, job failures and failed rollouts."""
    agent = [(r.agent_failure, r.id) for r in data.records if r.agent_failure is not None]
    floor = [r for r in data.records if r.floor_reward and r.rewarded]
    non_finite = [r for r in floor if is_non_finite(r, r.body)]
    job = [
        (str(f.get("reason") or "unknown"), str(f.get("trajectory_id") or ""))
        for f in data.job_failures
    ]
    failed = [r for r in data.records if r.state in FAILED_STATES]
    retried_ids = {r.retry_of for r in data.records if r.retry_of is not None}
    return FailureOverview(
        agent=_by_reason(agent),
        floor=len(floor),
        non_finite=len(non_finite),
        non_finite_ids=tuple(r.id for r in non_finite[:_LIST_LIMIT]),
        job=_by_reason(job),
        rollouts=_by_reason([(r.reason or r.state, r.id) for r in failed]),
        timed_out=sum(1 for r in failed if r.state == TrajectoryState.TIMED_OUT),
        failed_state=sum(1 for r in failed if r.state == TrajectoryState.FAILED),
        lost_slots=sum(g.lost for g in data.groups),
        retried=sum(1 for r in failed if r.id in retried_ids),
    )
