"""A cell's figures and the difference of two cells, as pure functions (docs/eval.md).

The unit is the **prompt**: a prompt's ``samples`` rollouts share it, so they are not
independent draws, and pass@k is a per-prompt statistic. So every figure is computed per prompt
first and then averaged over the prompts:

- **mean reward** = the mean over prompts of each prompt's mean reward (a rollout that ended
  without a reward, *lost*, counts as 0); with the same number of rollouts per prompt this is
  the mean over rollouts. A cell none of whose rollouts got a reward has **no mean** (nor SE):
  its reason says so, and it is not ranked by a 0 it never scored;
- **SE** = the standard error of that mean: the sample standard deviation of the per-prompt
  means (divide by P − 1) over √P, for P prompts (None with fewer than two);
- **success rate** = the mean over prompts of the share of its rollouts whose reward reaches
  the success threshold (lost ones fail);
- **pass@k** = the mean over prompts of the unbiased estimator ``1 − C(n−c, k)/C(n, k)`` for n
  rollouts with c successes (:func:`agent_kit.reporting.metrics.mean_pass`, the one pass@k of
  the project), over prompts with at least k rollouts;
- the **difference** of cells A and B (:func:`difference`) goes through
  :func:`agent_kit.reporting.paired.difference`: when both played the same prompts it is the
  mean of the per-prompt differences with the standard error of those differences (paired);
  else ``mean_A − mean_B`` with ``√(SE_A² + SE_B²)``; it is *beyond two SE* when
  ``|difference| > 2·SE``. A cell known only by its mean and SE (an evaluation job's metrics)
  is compared unpaired.
  There is no verdict without both means and SEs, nor when a cell did not play all its rollouts
  (a state other than ``completed`` / ``rollouts_failed``: an interrupted cell's figures are
  partial).

Beside the reward (:meth:`CellFigures.from_rollouts`, :mod:`~agent_kit.evaluation.rollouts`):
the tool-call rate, the rollouts that hit the token limit, the rollouts cut early, why a cell
failed as a whole, and the task's own figures. Turns, tokens and cost come with the run (its
``summary.json``): turns and prompt / sample tokens are means per rewarded rollout, cost the
run's total estimate.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from agent_kit.evaluation.rollouts import (
    holdout_cuts,
    holdout_failure,
    task_figures,
    token_limited,
    tool_call_rate,
)
from agent_kit.reporting import paired
from agent_kit.reporting.metrics import build_groups, mean_and_se, mean_pass
from agent_kit.store import Rollout

__all__ = [
    "CELL_STATES",
    "CellFigures",
    "CellState",
    "Difference",
    "RewardFigures",
    "difference",
    "reward_figures",
]

CellState = Literal["completed", "rollouts_failed", "failed", "interrupted", "error", "pending"]
#: A cell's states: ``completed`` (every rollout played), ``rollouts_failed`` (played, but its
#: rollouts failed as a whole), ``failed`` (the job failed: a job-killing reason),
#: ``interrupted`` (stopped; a re-run resumes it), ``error`` (it could not run: the reason
#: says why), ``pending`` (not run yet).
CELL_STATES: Final[tuple[str, ...]] = (
    "completed",
    "rollouts_failed",
    "failed",
    "interrupted",
    "error",
    "pending",
)


#: The states of a cell that played all its rollouts (the others' figures are partial).
_WHOLE: Final = ("completed", "rollouts_failed")


@dataclass(frozen=True)
class RewardFigures:
    """The reward figures of a cell's rollouts (see the module docstring); ``per_prompt`` is
    each prompt's mean reward, keyed by the prompt (its dataset row, as text)."""

    mean: float | None
    se: float | None
    success_rate: float | None
    pass_at_k: dict[int, float | None]
    rollouts: int
    prompts: int
    per_prompt: dict[str, float] = field(default_factory=dict)


def reward_figures(
    per_prompt: Mapping[int, Sequence[float | None]], threshold: float, ks: Sequence[int]
) -> RewardFigures:
    """The figures of rewards grouped by prompt (None: a lost rollout, counted as reward 0 and
    a failure); ``ks`` the k of pass@k."""
    rewarded = any(r is not None for rs in per_prompt.values() for r in rs)
    rewards = {p: [0.0 if r is None else float(r) for r in rs] for p, rs in per_prompt.items()}
    rewards = {p: rs for p, rs in rewards.items() if rs}
    means = {str(p): math.fsum(rs) / len(rs) for p, rs in rewards.items()}
    mean, se = mean_and_se(list(means.values()))
    if not rewarded:  # no rollout got a reward: there is no mean to report
        mean, se = None, None
    shares = [sum(r >= threshold for r in rs) / len(rs) for rs in rewards.values()]
    counts = [(len(rs), sum(r >= threshold for r in rs)) for rs in rewards.values()]
    return RewardFigures(
        mean=mean,
        se=se,
        success_rate=math.fsum(shares) / len(shares) if shares else None,
        pass_at_k={k: mean_pass(counts, k) for k in sorted(set(ks))},
        rollouts=sum(len(rs) for rs in rewards.values()),
        prompts=len(rewards),
        per_prompt=means,
    )


@dataclass(frozen=True)
class CellFigures:
    """Everything the table shows of one cell, from whatever played it (a local run, a job).

    Undefined figures are None. ``n`` counts the rollouts the figures are over, ``prompts``
    the prompts, ``per_prompt`` each prompt's mean reward (what a paired difference pairs;
    empty for a job's cell); ``prompt_tokens`` / ``sample_tokens`` / ``turns`` are means per
    rollout; ``cost`` the cell's total estimate in ``currency``. ``state`` is one of
    :data:`CELL_STATES`, ``reason`` why a cell is not ``completed``; ``source`` says what
    played it (``local``: a run directory, ``job``: an evaluation job) and ``location`` where
    (the run directory, the job's ARN). From the rollouts (:mod:`~agent_kit.evaluation.
    rollouts`): ``tool_call_rate``, ``token_limited`` (of the ``n``, those that hit the token
    limit),
    ``cut`` and ``failure`` (one phrase each, or None) and ``task`` (the task's own figures).
    """

    state: CellState
    reason: str | None = None
    mean: float | None = None
    se: float | None = None
    success_rate: float | None = None
    pass_at_k: dict[int, float | None] = field(default_factory=dict)
    turns: float | None = None
    prompt_tokens: float | None = None
    sample_tokens: float | None = None
    cost: float | None = None
    currency: str = "USD"
    n: int = 0
    prompts: int = 0
    source: str = "local"
    location: str | None = None
    per_prompt: dict[str, float] = field(default_factory=dict)
    tool_call_rate: float | None = None
    token_limited: int = 0
    cut: str | None = None
    failure: str | None = None
    task: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_rewards(cls, rewards: RewardFigures, **rest: Any) -> CellFigures:
        """The figures of ``rewards`` with the rest (state, tokens, cost …) given; when rollouts
        were played and none got a reward, the reason says there is no mean."""
        if rewards.rollouts and rewards.mean is None:
            why = f"none of its {rewards.rollouts} rollouts got a reward: no mean"
            rest["reason"] = f"{rest['reason']}; {why}" if rest.get("reason") else why
        return cls(
            mean=rewards.mean,
            se=rewards.se,
            success_rate=rewards.success_rate,
            pass_at_k=dict(rewards.pass_at_k),
            n=rewards.rollouts,
            prompts=rewards.prompts,
            per_prompt=dict(rewards.per_prompt),
            **rest,
        )

    @classmethod
    def from_rollouts(
        cls,
        records: Sequence[Rollout],
        *,
        threshold: float,
        k: int,
        max_tokens: int | None = None,
        **rest: Any,
    ) -> CellFigures:
        """The figures of a cell's rollouts (loaded with their turns): the rewards per prompt
        (a slot's rollout, lost slots as 0), pass@1 and pass@``k``, and what the rollouts say
        beside (module docstring); ``max_tokens`` is the cap the policy had (named by
        ``failure``); ``rest`` as for :meth:`from_rewards`."""
        groups = build_groups(records)
        per_prompt: dict[int, list[float | None]] = defaultdict(list)
        for group in groups:
            per_prompt[group.prompt_index].extend(group.rewards)
            per_prompt[group.prompt_index].extend([None] * group.lost)
        return cls.from_rewards(
            reward_figures(per_prompt, threshold, sorted({1, k})),
            tool_call_rate=tool_call_rate(records),
            token_limited=token_limited(records),
            cut=holdout_cuts(records),
            failure=holdout_failure(records, max_tokens),
            task=task_figures(groups),
            **rest,
        )

    @property
    def has_figures(self) -> bool:
        """True when the cell has a mean reward to show (it played some rollouts)."""
        return self.mean is not None

    def document(self) -> dict[str, Any]:
        """JSON-ready: pass@k keyed ``"k"`` (JSON keys are text)."""
        out = asdict(self)
        out["pass_at_k"] = {str(k): v for k, v in self.pass_at_k.items()}
        return out

    @classmethod
    def from_document(cls, data: Mapping[str, Any]) -> CellFigures:
        """The inverse of :meth:`document`."""
        values = dict(data)
        values["pass_at_k"] = {int(k): v for k, v in (data.get("pass_at_k") or {}).items()}
        return cls(**values)


@dataclass(frozen=True)
class Difference:
    """``a − b`` of two cells (ids ``a``, ``b``; ``setting`` the setting they share, else
    empty): the difference of their mean rewards, the standard error the verdict uses (``se``:
    the paired one when ``paired``), the unpaired SE beside it, the prompts it rests on, and
    whether the difference is beyond two SE (``significant``). Figures are None where a mean
    or an SE is missing."""

    a: str
    b: str
    setting: str
    difference: float | None
    se: float | None
    significant: bool | None
    unpaired_se: float | None = None
    paired: bool = False
    prompts: int = 0

    def document(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def difference(a: str, b: str, fa: CellFigures, fb: CellFigures, setting: str = "") -> Difference:
    """Cell ``a`` minus cell ``b`` (ids ``a``, ``b``, figures ``fa``, ``fb``): paired by prompt
    when both hold per-prompt means of the same prompts, else unpaired (module docstring)."""
    if fa.mean is None or fb.mean is None:
        return Difference(a, b, setting, None, None, None)
    found = paired.difference(fa.per_prompt, fb.per_prompt)
    if found is None:  # a cell known by its mean and SE only (a job's metrics)
        se = None if fa.se is None or fb.se is None else math.hypot(fa.se, fb.se)
        found = paired.Difference(fa.mean - fb.mean, se, se, False, min(fa.prompts, fb.prompts))
    whole = fa.state in _WHOLE and fb.state in _WHOLE  # a partial cell's figures get no verdict
    return Difference(
        a,
        b,
        setting,
        found.mean,
        found.se,
        found.beyond() if whole else None,
        unpaired_se=found.unpaired_se,
        paired=found.paired,
        prompts=found.prompts,
    )
