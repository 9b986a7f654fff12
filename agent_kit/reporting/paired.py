"""The difference of two evaluated cells, paired by prompt where they played the same prompts.

The unit of an evaluation is the prompt (Miller 2024, "Adding Error Bars to Evals", arXiv
2411.00640): a cell's figure is the mean of its per-prompt mean rewards, and its standard error
the sample standard deviation of those means over √P (:func:`~agent_kit.reporting.metrics.
mean_and_se`). Two cells that played **the same prompts** are compared prompt by prompt:

- paired: ``d_i = a_i − b_i`` for every prompt i; the difference is ``mean(d)`` and its standard
  error ``sd(d) / √n`` (sample standard deviation, n − 1). When prompts vary in difficulty
  (Wordle's do) most of each cell's spread is the prompts', shared by both cells, and cancels:
  the paired SE is much smaller than the unpaired one, and a real difference that the unpaired
  SE calls noise is reported as what it is;
- unpaired (the cells played different prompts): ``mean(a) − mean(b)`` with
  ``√(SE_a² + SE_b²)``.

A difference is **beyond two SE** when ``|d| > 2 · SE`` (:meth:`Difference.beyond`). With paired
differences of standard deviation σ_d over n prompts, the smallest difference a grid shows
beyond two SE is ``2σ_d/√n`` (:func:`detectable_difference`), and a target difference d is found
with 80 % power at the 5 % level by ``n ≈ (2.8 σ_d / d)²`` prompts (:func:`prompts_needed`;
2.8 = 1.96 + 0.84, Miller 2024 §4).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from agent_kit.reporting.metrics import mean_and_se

__all__ = [
    "POWER_Z",
    "VERDICT_SE",
    "Difference",
    "detectable_difference",
    "difference",
    "paired_sd",
    "prompts_needed",
]

#: How many standard errors a difference must pass to be called a finding.
VERDICT_SE: Final = 2.0
#: z for 80 % power at the two-sided 5 % level (1.96 + 0.84).
POWER_Z: Final = 2.8


@dataclass(frozen=True)
class Difference:
    """``a − b`` of two cells: its ``mean``, the standard error the verdict uses (``se``: the
    paired one when ``paired``), the unpaired SE beside it, and the prompts it rests on
    (``prompts``: the shared prompts when paired, else the smaller cell's). ``se`` is None when
    there are too few prompts to estimate it (fewer than two)."""

    mean: float
    se: float | None
    unpaired_se: float | None
    paired: bool
    prompts: int

    def beyond(self, k: float = VERDICT_SE) -> bool | None:
        """Whether ``|mean| > k · se`` (None when there is no SE; False for a zero SE and a
        zero difference)."""
        if self.se is None:
            return None
        if self.se == 0:
            return self.mean != 0
        return abs(self.mean) > k * self.se


def difference(a: Mapping[str, float], b: Mapping[str, float]) -> Difference | None:
    """``a − b`` for two cells given as per-prompt mean rewards keyed by prompt (module
    docstring): paired when both hold the same prompts, else unpaired. None when a cell has
    no prompt."""
    if not a or not b:
        return None
    mean_a, se_a = mean_and_se(list(a.values()))
    mean_b, se_b = mean_and_se(list(b.values()))
    assert mean_a is not None
    assert mean_b is not None
    unpaired = None if se_a is None or se_b is None else math.hypot(se_a, se_b)
    if a.keys() != b.keys():
        return Difference(mean_a - mean_b, unpaired, unpaired, False, min(len(a), len(b)))
    diffs = [a[key] - b[key] for key in a]
    mean, se = mean_and_se(diffs)
    assert mean is not None
    return Difference(mean, se, unpaired, True, len(diffs))


def paired_sd(a: Mapping[str, float], b: Mapping[str, float]) -> float | None:
    """The sample standard deviation of the per-prompt differences ``a_i − b_i`` over the
    prompts both cells hold (None with fewer than two): the spread :func:`prompts_needed` and
    :func:`detectable_difference` take from a pilot."""
    shared = [key for key in a if key in b]
    if len(shared) < 2:
        return None
    diffs = [a[key] - b[key] for key in shared]
    mean = math.fsum(diffs) / len(diffs)
    return math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))


def detectable_difference(sd: float, prompts: int, k: float = VERDICT_SE) -> float:
    """The smallest difference that stands beyond ``k`` SE over ``prompts`` prompts when the
    per-prompt differences have standard deviation ``sd``: ``k · sd / √prompts``."""
    if prompts < 1:
        raise ValueError("prompts must be at least 1")
    if sd < 0 or not math.isfinite(sd):
        raise ValueError("sd must be a finite number ≥ 0")
    return k * sd / math.sqrt(prompts)


def prompts_needed(target: float, sd: float, z: float = POWER_Z) -> int:
    """How many prompts find a difference of ``target`` with 80 % power at the 5 % level when
    the per-prompt differences have standard deviation ``sd``: ``ceil((z · sd / target)²)``, at
    least 2."""
    if not math.isfinite(target) or target == 0:
        raise ValueError("target must be a finite, non-zero difference")
    if sd < 0 or not math.isfinite(sd):
        raise ValueError("sd must be a finite number ≥ 0")
    return max(2, math.ceil((z * sd / abs(target)) ** 2))
