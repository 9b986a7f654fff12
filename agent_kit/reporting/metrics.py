"""Group advantages, the MTRL metric names, pass@k and token accounting, as pure functions.

Everything here works on plain data (:class:`~agent_kit.store.Rollout` lists, reward lists,
token counts) so it is testable without a store; :mod:`agent_kit.reporting.summary` assembles
``summary.json`` from the rollouts :func:`~agent_kit.store.load_rollouts` reads. Definitions
(also in ``docs/metrics.md``):

- **Slot**: one (step, prompt_index, sample_index) rollout of the job; a retried rollout is a new
  *attempt* of the same slot. A slot's rollout is its highest REWARDED attempt; a slot without
  one is *lost* (its last attempt ended FAILED/TIMED_OUT) or *pending* (still OPEN/READY).
- **Group**: the slots of one (step, prompt_index). Advantages are computed over the group's
  rewarded slots. A group is **degenerate** when it has fewer than two rewards or all rewards are
  equal: every advantage is exactly 0 and it gives no gradient.
- ``group_based`` (GRPO): ``(r − mean) / (std + eps)`` with the **population** standard deviation
  (divide by n, so advantages have unit RMS) and ``eps = 1e-6`` (:data:`ADVANTAGE_EPS`).
  ``rloo``: ``r − mean(other rewards of the group)``. Both sum to 0 over every group.
- pass@k and pass^k are the unbiased estimators over a group of n slots with c successes:
  ``1 − C(n−c, k)/C(n, k)`` and ``C(c, k)/C(n, k)``, averaged over groups with n ≥ k.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final, Literal

from agent_kit.contract import TrajectoryState
from agent_kit.errors import UsageError
from agent_kit.store.records import Rollout

__all__ = [
    "ADVANTAGE_EPS",
    "ADVANTAGE_KINDS",
    "AdvantageKind",
    "GroupResult",
    "TokenUsage",
    "build_groups",
    "eval_metrics",
    "group_advantages",
    "is_degenerate",
    "mean_and_se",
    "mean_pass",
    "pass_at_k",
    "pass_power_k",
    "reward_metrics",
    "token_usage",
    "training_metrics",
    "value_stats",
]

AdvantageKind = Literal["group_based", "rloo"]
#: The advantage estimators the service offers that agent_kit reproduces.
ADVANTAGE_KINDS: Final[tuple[str, ...]] = ("group_based", "rloo")
#: Added to the group standard deviation in ``group_based`` advantages.
ADVANTAGE_EPS: Final = 1e-6


def is_degenerate(rewards: Sequence[float]) -> bool:
    """True when a group gives no gradient: fewer than two rewards, or all rewards equal."""
    return len(rewards) < 2 or max(rewards) == min(rewards)


def mean_and_se(means: Sequence[float]) -> tuple[float | None, float | None]:
    """The mean of per-prompt means and its standard error (sample standard deviation over
    √P): how held-out figures are reported (``agent-kit eval``, ``agent-kit train --eval``).
    (None, None) without prompts; the SE is None with one."""
    if not means:
        return None, None
    mean = math.fsum(means) / len(means)
    if len(means) < 2:
        return mean, None
    var = math.fsum((m - mean) ** 2 for m in means) / (len(means) - 1)
    return mean, math.sqrt(var / len(means))


def group_advantages(
    rewards: Sequence[float], kind: str = "group_based", *, eps: float = ADVANTAGE_EPS
) -> list[float]:
    """Advantages of one group's rewards, in the same order.

    Guarantees: a degenerate group (see :func:`is_degenerate`) gets exactly ``0.0`` everywhere;
    otherwise the advantages sum to 0 (up to rounding). Raises :class:`UsageError` for an
    unknown ``kind`` and :class:`ValueError` for a non-finite reward.
    """
    if kind not in ADVANTAGE_KINDS:
        raise UsageError(f"unknown advantage estimator {kind!r}; use one of {ADVANTAGE_KINDS}")
    values = [float(r) for r in rewards]
    if not all(math.isfinite(v) for v in values):
        raise ValueError("rewards must be finite numbers")
    if is_degenerate(values):
        return [0.0] * len(values)
    n = len(values)
    # Corrected two-pass centering: subtracting the rounded mean can leave the deviations
    # lopsided (e.g. [100.0, 99.99999999999999] → [0.0, -1.4e-14]); removing their own mean
    # once more makes them sum to zero, so the advantages do too.
    mean = math.fsum(values) / n
    deviations = [v - mean for v in values]
    drift = math.fsum(deviations) / n
    deviations = [d - drift for d in deviations]
    if kind == "rloo":  # r − mean of the others = n/(n−1) · (r − mean)
        return [d * n / (n - 1) for d in deviations]
    std = math.sqrt(math.fsum(d * d for d in deviations) / n)
    return [d / (std + eps) for d in deviations]


def _check_nck(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: probability that at least one of k draws (without replacement) from n
    rollouts with c successes succeeds, ``1 − C(n−c, k)/C(n, k)``; exact rational arithmetic."""
    _check_nck(n, c, k)
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def pass_power_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k: probability that all of k draws from n rollouts with c successes
    succeed, ``C(c, k)/C(n, k)``; exact rational arithmetic."""
    _check_nck(n, c, k)
    return float(Fraction(math.comb(c, k), math.comb(n, k)))


def mean_pass(
    counts: Iterable[tuple[int, int]],
    k: int,
    estimator: Callable[[int, int, int], float] = pass_at_k,
) -> float | None:
    """The mean over groups of ``estimator(n, c, k)`` (:func:`pass_at_k` by default, or
    :func:`pass_power_k`) for groups given as (n rollouts, c successes), over the groups with
    n ≥ k; None when none qualifies. The one pass@k of the project: ``summary.json``'s
    ``eval/reward/pass_at_k`` and the evaluation grid's (``agent-kit eval``, ``train --eval``)."""
    values = [estimator(n, c, k) for n, c in counts if n >= k]
    return math.fsum(values) / len(values) if values else None


def value_stats(values: Iterable[float]) -> dict[str, float | None]:
    """``mean``, population ``std``, ``min`` and ``max`` of the values (all None when empty)."""
    data = [float(v) for v in values]
    if not data:
        return {"mean": None, "std": None, "min": None, "max": None}
    mean = math.fsum(data) / len(data)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in data) / len(data))
    return {"mean": mean, "std": std, "min": min(data), "max": max(data)}


@dataclass(frozen=True)
class GroupResult:
    """One prompt group: its rewarded slots (by sample index), their advantages, and how many
    slots were lost or are still pending."""

    step: int
    prompt_index: int
    rollouts: tuple[Rollout, ...]
    advantages: tuple[float, ...]
    lost: int = 0
    pending: int = 0

    @property
    def rewards(self) -> list[float]:
        """The rewards of the rewarded slots, in sample order."""
        return [float(r.reward) for r in self.rollouts if r.reward is not None]

    @property
    def degenerate(self) -> bool:
        """True when the group gives no gradient (see :func:`is_degenerate`)."""
        return is_degenerate(self.rewards)

    @property
    def finished_slots(self) -> int:
        """Slots with an outcome: rewarded + lost (pending excluded)."""
        return len(self.rollouts) + self.lost


def build_groups(
    records: Iterable[Rollout], kind: str = "group_based", *, eps: float = ADVANTAGE_EPS
) -> list[GroupResult]:
    """Group records by (step, prompt_index), pick each slot's rollout, compute advantages.

    A slot's rollout is its highest-attempt REWARDED record; without one the slot counts as
    ``pending`` if its latest attempt is still open, else ``lost``. Groups come sorted by key.
    """
    slots: dict[tuple[int, int], dict[int, list[Rollout]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        slots[rec.group_key][rec.sample_index].append(rec)
    groups: list[GroupResult] = []
    for key in sorted(slots):
        chosen: list[Rollout] = []
        lost = pending = 0
        for sample_index in sorted(slots[key]):
            attempts = sorted(slots[key][sample_index], key=lambda r: (r.attempt, r.started_at))
            rewarded = [r for r in attempts if r.rewarded]
            if rewarded:
                chosen.append(rewarded[-1])
            elif attempts[-1].state in TrajectoryState.unrewarded():
                lost += 1
            else:
                pending += 1
        rewards = [float(r.reward) for r in chosen if r.reward is not None]
        advantages = tuple(group_advantages(rewards, kind, eps=eps))
        groups.append(GroupResult(key[0], key[1], tuple(chosen), advantages, lost, pending))
    return groups


def reward_metrics(
    groups: Sequence[GroupResult], prefix: str = "rollout"
) -> dict[str, float | None]:
    """``{prefix}/reward/{mean,valid_mean,std,min,max,zero_frac}`` over the groups' rewards.

    ``valid_mean``: mean reward over groups with non-zero advantage (non-degenerate).
    ``zero_frac``: fraction of groups that are degenerate (zero reward variance → zero
    advantage → no gradient); None when there are no groups with a reward.
    """
    rewarded = [g for g in groups if g.rollouts]
    rewards = [r for g in rewarded for r in g.rewards]
    valid = [r for g in rewarded if not g.degenerate for r in g.rewards]
    stats = value_stats(rewards)
    zero = sum(1 for g in rewarded if g.degenerate)
    return {
        f"{prefix}/reward/mean": stats["mean"],
        f"{prefix}/reward/valid_mean": value_stats(valid)["mean"],
        f"{prefix}/reward/std": stats["std"],
        f"{prefix}/reward/min": stats["min"],
        f"{prefix}/reward/max": stats["max"],
        f"{prefix}/reward/zero_frac": zero / len(rewarded) if rewarded else None,
    }


@dataclass(frozen=True)
class TokenUsage:
    """Token totals in the three billing categories plus how many turns had estimated usage.

    ``prefill``/``sample``: every turn of every attempt (failed and retried ones too — the
    service samples them, so it bills them). ``train``: prompt + completion tokens of every turn
    of the rollouts in non-degenerate groups (0 for evaluation jobs).
    """

    prefill: int
    sample: int
    train: int
    turns: int
    estimated_turns: int = 0
    per_rollout: dict[str, float | None] = field(default_factory=dict)

    @property
    def estimated(self) -> bool:
        """True when any turn's usage was estimated rather than reported by the policy."""
        return self.estimated_turns > 0


def token_usage(
    records: Sequence[Rollout], groups: Sequence[GroupResult], *, evaluation: bool = False
) -> TokenUsage:
    """Account tokens in the service's categories; see :class:`TokenUsage` for definitions.

    ``per_rollout`` holds mean prefill/sample/total and the max total over the groups'
    rewarded rollouts (None when there are none).
    """
    train = 0
    if not evaluation:
        train = sum(r.tokens for g in groups if not g.degenerate for r in g.rollouts)
    chosen = [r for g in groups for r in g.rollouts]
    n = len(chosen)
    per_rollout: dict[str, float | None] = {
        "prefill": sum(r.prefill_tokens for r in chosen) / n if n else None,
        "sample": sum(r.sample_tokens for r in chosen) / n if n else None,
        "total": sum(r.tokens for r in chosen) / n if n else None,
        "max": float(max(r.tokens for r in chosen)) if n else None,
    }
    return TokenUsage(
        prefill=sum(r.prefill_tokens for r in records),
        sample=sum(r.sample_tokens for r in records),
        train=train,
        turns=sum(r.turns for r in records),
        estimated_turns=sum(r.estimated_turns for r in records),
        per_rollout=per_rollout,
    )


def training_metrics(
    records: Sequence[Rollout], groups: Sequence[GroupResult], *, evaluation: bool = False
) -> dict[str, float | None]:
    """The ``rollout/*`` metrics: reward, turns, tokens and advantage statistics.

    Turns and advantages are over the groups' rewarded rollouts (degenerate groups contribute
    their zero advantages); token totals follow :func:`token_usage`.
    """
    chosen = [r for g in groups for r in g.rollouts]
    turns = value_stats(r.turns for r in chosen)
    advantages = [a for g in groups for a in g.advantages]
    adv = value_stats(advantages)
    usage = token_usage(records, groups, evaluation=evaluation)
    metrics = reward_metrics(groups)
    metrics.update(
        {
            "rollout/turns/mean": turns["mean"],
            "rollout/turns/min": turns["min"],
            "rollout/turns/max": turns["max"],
            "rollout/tokens/prefill": float(usage.prefill),
            "rollout/tokens/sample": float(usage.sample),
            "rollout/tokens/train": float(usage.train),
            "rollout/tokens/total": float(usage.prefill + usage.sample + usage.train),
            "rollout/tokens/mean_per_rollout": usage.per_rollout["total"],
            "rollout/tokens/prefill_per_rollout": usage.per_rollout["prefill"],
            "rollout/tokens/sample_per_rollout": usage.per_rollout["sample"],
            "rollout/tokens/max_per_rollout": usage.per_rollout["max"],
            "rollout/advantage/mean": adv["mean"],
            "rollout/advantage/std": adv["std"],
            "rollout/advantage/min": adv["min"],
            "rollout/advantage/max": adv["max"],
            "rollout/advantage/abs_mean": (
                math.fsum(abs(a) for a in advantages) / len(advantages) if advantages else None
            ),
        }
    )
    return metrics


def eval_metrics(
    groups: Sequence[GroupResult], *, success_threshold: float = 1.0, ks: Sequence[int] = (1,)
) -> dict[str, float | None]:
    """The ``eval/reward/*`` metrics.

    A rollout succeeds when its reward ≥ ``success_threshold``; a lost slot (no reward) counts
    as not succeeded. For each k in ``ks``: ``eval/reward/pass_at_{k}`` and
    ``eval/reward/pass_power_{k}``, averaged over groups with at least k finished slots (None
    when no group qualifies); ``pass_at_k``/``pass_power_k`` repeat the largest k.
    ``succeeded_rollouts`` + ``failed_rollouts`` = all finished slots.
    """
    rewards = [r for g in groups for r in g.rewards]
    stats = value_stats(rewards)
    succeeded = sum(1 for r in rewards if r >= success_threshold)
    finished = sum(g.finished_slots for g in groups)
    metrics: dict[str, float | None] = {
        "eval/reward/mean": stats["mean"],
        "eval/reward/min": stats["min"],
        "eval/reward/max": stats["max"],
        "eval/reward/std": stats["std"],
        "eval/reward/succeeded_rollouts": float(succeeded),
        "eval/reward/failed_rollouts": float(finished - succeeded),
    }
    wanted = sorted({int(k) for k in ks if int(k) >= 1})
    counts = [
        (g.finished_slots, sum(1 for r in g.rewards if r >= success_threshold)) for g in groups
    ]
    for k in wanted:
        metrics[f"eval/reward/pass_at_{k}"] = mean_pass(counts, k)
        metrics[f"eval/reward/pass_power_{k}"] = mean_pass(counts, k, pass_power_k)
    if wanted:
        metrics["eval/reward/pass_at_k"] = metrics[f"eval/reward/pass_at_{wanted[-1]}"]
        metrics["eval/reward/pass_power_k"] = metrics[f"eval/reward/pass_power_{wanted[-1]}"]
    return metrics
