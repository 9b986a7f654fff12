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
  rollouts with c successes (:func:`agent_kit.reporting.metrics.pass_at_k`), over prompts with
  at least k rollouts;
- the **difference** of cells A and B is ``mean_A − mean_B`` with standard error
  ``√(SE_A² + SE_B²)`` (independent cells); it is *significant* when ``|difference| > 2·SE``.
  There is no verdict (``significant`` None) without both means and SEs, nor when a cell did
  not play all its rollouts (a state other than ``completed`` / ``rollouts_failed``: an
  interrupted cell's figures are partial).

Turns, tokens and cost come with the run (its ``summary.json``): turns and prompt / sample
tokens are means per rewarded rollout, cost the run's total estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from agent_kit.reporting.metrics import mean_and_se, pass_at_k

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
    """The reward figures of a cell's rollouts (see the module docstring)."""

    mean: float | None
    se: float | None
    success_rate: float | None
    pass_at_k: dict[int, float | None]
    rollouts: int
    prompts: int


def reward_figures(
    per_prompt: Mapping[int, Sequence[float | None]], threshold: float, ks: Sequence[int]
) -> RewardFigures:
    """The figures of rewards grouped by prompt (None: a lost rollout, counted as reward 0 and
    a failure); ``ks`` the k of pass@k."""
    rewarded = any(r is not None for rs in per_prompt.values() for r in rs)
    rewards = {p: [0.0 if r is None else float(r) for r in rs] for p, rs in per_prompt.items()}
    rewards = {p: rs for p, rs in rewards.items() if rs}
    mean, se = mean_and_se([math.fsum(rs) / len(rs) for rs in rewards.values()])
    if not rewarded:  # no rollout got a reward: there is no mean to report
        mean, se = None, None
    shares = [sum(r >= threshold for r in rs) / len(rs) for rs in rewards.values()]
    passes: dict[int, float | None] = {}
    for k in sorted(set(ks)):
        at = [
            pass_at_k(len(rs), sum(r >= threshold for r in rs), k)
            for rs in rewards.values()
            if len(rs) >= k
        ]
        passes[k] = math.fsum(at) / len(at) if at else None
    return RewardFigures(
        mean=mean,
        se=se,
        success_rate=math.fsum(shares) / len(shares) if shares else None,
        pass_at_k=passes,
        rollouts=sum(len(rs) for rs in rewards.values()),
        prompts=len(rewards),
    )


@dataclass(frozen=True)
class CellFigures:
    """Everything the table shows of one cell, from whatever played it (a local run, a job).

    Undefined figures are None. ``n`` counts the rollouts the figures are over, ``prompts``
    the prompts; ``prompt_tokens`` / ``sample_tokens`` / ``turns`` are means per rollout;
    ``cost`` the cell's total estimate in ``currency``. ``state`` is one of
    :data:`CELL_STATES`, ``reason`` why a cell is not ``completed``; ``source`` says what
    played it (``local``: a run directory, ``job``: an evaluation job) and ``location`` where
    (the run directory, the job's ARN).
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
    """``a − b``: two cells' mean rewards, the difference's standard error and whether the
    difference exceeds two of them (None where a mean or an SE is missing)."""

    a: str
    b: str
    setting: str
    difference: float | None
    se: float | None
    significant: bool | None

    def document(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def difference(a: str, b: str, fa: CellFigures, fb: CellFigures, setting: str = "") -> Difference:
    """Cell ``a`` minus cell ``b`` (ids ``a``, ``b``, figures ``fa``, ``fb``): see the module
    docstring."""
    if fa.mean is None or fb.mean is None:
        return Difference(a, b, setting, None, None, None)
    diff = fa.mean - fb.mean
    if fa.se is None or fb.se is None:
        return Difference(a, b, setting, diff, None, None)
    se = math.hypot(fa.se, fb.se)
    whole = fa.state in _WHOLE and fb.state in _WHOLE
    return Difference(a, b, setting, diff, se, abs(diff) > 2 * se if whole else None)
