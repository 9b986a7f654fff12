"""The reward audit's zero-variance check: groups whose rewards are all equal give no gradient.

:func:`zero_variance` reports their share and prompts and, from each prompt's observed success
rate ``p``, the chance a group of size ``G`` is all-equal in success, ``p^G + (1−p)^G``, at the
configured ``G`` and the ``G`` that would bring it under :data:`TARGET_NO_GRADIENT`; its hint
names the fix (temperature, group size, re-balanced prompts).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Final

from agent_kit.doctor.findings import Finding, Severity
from agent_kit.doctor.invariants import EpisodeView
from agent_kit.doctor.views import SHOWN, view_reward
from agent_kit.reporting.breakdown import RunData, prompt_label
from agent_kit.reporting.metrics import is_degenerate
from agent_kit.reporting.summary_schema import flat_config
from agent_kit.reporting.words import plural

__all__ = ["TARGET_NO_GRADIENT", "zero_variance"]

#: Target share of all-equal groups when suggesting a group size.
TARGET_NO_GRADIENT: Final = 0.10
_MAX_GROUP: Final = 64


def zero_variance(views: Sequence[EpisodeView], data: RunData) -> list[Finding]:
    """Share of all-equal groups, their prompts, and the group size that would fix them."""
    groups: dict[tuple[int, int], list[EpisodeView]] = defaultdict(list)
    for v in views:
        if v.reward is not None:
            groups[(v.step, v.prompt_index)].append(v)
    if not groups:
        return [Finding("zero-variance", "info", "no rewarded group to check", "")]
    flat = flat_config(data.job.config)
    configured = flat.get("group_size")
    size = (
        configured
        if isinstance(configured, int) and configured > 1
        else max(len(g) for g in groups.values())
    )
    flat_groups = [k for k, g in groups.items() if is_degenerate([view_reward(v) for v in g])]
    share = len(flat_groups) / len(groups)
    labels = _labels(data)
    by_prompt: dict[int, list[EpisodeView]] = defaultdict(list)
    for v in views:
        if v.reward is not None:
            by_prompt[v.prompt_index].append(v)
    rates = {
        i: sum(v.outcome == "succeeded" for v in eps) / len(eps) for i, eps in by_prompt.items()
    }
    always = sorted(i for i, p in rates.items() if p == 1.0)
    never = sorted(i for i, p in rates.items() if p == 0.0)
    expected = statistics.fmean(p**size + (1 - p) ** size for p in rates.values())
    mixed = [p for p in rates.values() if 0.0 < p < 1.0]
    fix = next(
        (
            g
            for g in range(2, _MAX_GROUP + 1)
            if mixed and statistics.fmean(p**g + (1 - p) ** g for p in mixed) <= TARGET_NO_GRADIENT
        ),
        None,
    )
    flat_prompts = sorted({k[1] for k in flat_groups})
    temperature = flat.get("temperature")
    evidence: dict[str, Any] = {
        "groups": len(groups),
        "zero_variance_groups": len(flat_groups),
        "share": share,
        "group_size": size,
        "temperature": temperature,
        "prompts": [labels.get(i, str(i)) for i in flat_prompts[: SHOWN * 2]],
        "success_rate_by_prompt": {labels.get(i, str(i)): rates[i] for i in sorted(rates)},
        "expected_all_equal_success_at_group_size": expected,
        "always_solved_prompts": len(always),
        "never_solved_prompts": len(never),
        "group_size_for_10pct": fix,
    }
    hint = _zero_variance_hint(size, fix, always, never, temperature)
    ids = [v.trajectory_id for k in flat_groups[:SHOWN] for v in groups[k][:1]]
    severity: Severity
    if share >= 0.999:
        severity, verdict = "error", "no group teaches the policy anything"
    elif share >= 0.25:
        severity, verdict = "warn", "a quarter or more of the job's groups would teach nothing"
    else:
        severity, verdict = "info", "fine (under a quarter)"
    title = (
        f"{len(flat_groups)} of {plural(len(groups), 'group')} ({share:.0%}) have zero reward "
        f"variance, so they give no gradient at group size {size}: {verdict}. Success alone "
        f"would make {expected:.0%} of such groups all-equal: {len(always)} of "
        f"{plural(len(rates), 'prompt')} succeeded in every rollout and {len(never)} in none"
        + ("; the reward's other terms tell those apart" if expected > share + 0.05 else "")
    )
    hint = hint if severity != "info" or flat_groups else ""
    return [Finding("zero-variance", severity, title, hint, evidence, ids)]


def _zero_variance_hint(
    size: int, fix: int | None, always: Sequence[int], never: Sequence[int], temperature: Any
) -> str:
    parts: list[str] = []
    if isinstance(temperature, (int, float)) and temperature == 0:
        parts.append(
            "temperature 0 plays the same episode in every slot of a group: sample at "
            "temperature > 0 (0.7-1.0)"
        )
    if fix is not None and fix > size:
        parts.append(f"a group size of {fix} brings all-equal groups under 10 %")
    if always or never:
        t = f" from {temperature}" if temperature is not None else ""
        parts.append(
            f"{len(always)} prompts succeed in every rollout and {len(never)} in none: a "
            "larger group only helps if equal outcomes score differently; raise the "
            f"temperature{t}, or "
            "drop / re-balance those prompts"
        )
    if not parts:
        parts.append("give equal outcomes different rewards (a bounded strategy term)")
    return "; ".join(parts)


def _labels(data: RunData) -> dict[int, str]:
    return {index: prompt_label(prompt) or str(index) for index, prompt in data.prompts.items()}
