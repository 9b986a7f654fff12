"""``agent-kit doctor reward``: audit a recorded run's reward before a real job pays for it.

:func:`audit_reward` reads a run directory (read-only), builds one
:class:`~agent_kit.doctor.invariants.EpisodeView` per scored slot (the rollout the metrics use),
optionally re-scores every episode with the entrypoint's current reward
(:mod:`agent_kit.doctor.rescore`), and returns findings from four checks:

- **ordering**: the entrypoint's ``REWARD_ORDERINGS`` on every pair of episodes
  (:mod:`agent_kit.doctor.invariants`);
- **zero-variance**: groups whose rewards are all equal give no gradient; their share, their
  prompts, and from each prompt's observed success rate ``p`` the chance a group of size ``G``
  is all-equal in success, ``p^G + (1−p)^G``, at the configured ``G`` and the ``G`` that
  would bring it under 10 %;
- **hacking**: reward vs turns / tokens / tool calls (Pearson, :func:`statistics.correlation`)
  compared with the outcome terms' own correlation; rewards at or above the success threshold
  without a positive outcome term; a component whose share of the reward variance
  (``cov(contribution, reward) / var(reward)``) is far above its declared weight's share; and
  whether any component responds to tool calls recovered from text;
- **projection**: tokens per rollout × the planned steps → cost (the summary's projection),
  an error above ``budget``.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent_kit.contract import TrajectoryState
from agent_kit.doctor.findings import Finding, count_by_severity
from agent_kit.doctor.invariants import EpisodeView, check_orderings, load_orderings
from agent_kit.doctor.rescore import Rescored, rescore_run
from agent_kit.emulator.loader import load_module, module_name_for
from agent_kit.errors import UsageError
from agent_kit.reporting.breakdown import RunData, load_run_data, prompt_label
from agent_kit.reporting.metrics import is_degenerate
from agent_kit.reporting.pricing import Pricing
from agent_kit.reporting.summary import resolve_job, summarize
from agent_kit.reporting.summary_schema import Summary, flat_config
from agent_kit.reporting.words import plural
from agent_kit.store import Rollout, RunStore, load_rollouts, resolve_path
from agent_kit.store.events import ROLLOUT_DONE_EVENT
from agent_kit.store.records import INTERRUPTED_STATE
from agent_kit.store.runlock import live_holder

__all__ = ["RewardAudit", "audit_reward", "episode_views"]

#: Correlation magnitude from which a length signal is reported as a warning.
STRONG_CORRELATION: Final = 0.5
#: Target share of all-equal groups when suggesting a group size.
TARGET_NO_GRADIENT: Final = 0.10
_MAX_GROUP: Final = 64
_SHOWN: Final = 5
#: States (as reports read them) of an attempt that ended without a reward.
_ENDED_WITHOUT_REWARD: Final = TrajectoryState.unrewarded() | {INTERRUPTED_STATE}


@dataclass(frozen=True)
class RewardAudit:
    """The findings on one run, with what was read."""

    run_dir: str
    job_name: str
    entrypoint: str | None
    rescored: bool
    episodes: int
    scored: int
    findings: tuple[Finding, ...]
    #: Who plays the run now (pid, host, command) when it was still being played: the audit
    #: then covers only the rollouts finished at the moment it read the store.
    live: Mapping[str, Any] | None = None
    #: Rollouts of a live run left out of the audit because they had not finished yet.
    in_flight: int = 0

    @property
    def ok(self) -> bool:
        """True when no finding is an error."""
        return not any(f.severity == "error" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``--json``)."""
        return {
            "schema": "agent_kit.doctor.reward/1",
            "run_dir": self.run_dir,
            "job": self.job_name,
            "entrypoint": self.entrypoint,
            "rescored": self.rescored,
            "episodes": self.episodes,
            "scored": self.scored,
            "live": self.live is not None,
            "in_flight": self.in_flight,
            "counts": count_by_severity(self.findings),
            "ok": self.ok,
            "findings": [f.to_dict() for f in self.findings],
        }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(float(value)) else None


def _parts(
    breakdown: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[dict[str, float], dict[str, float], dict[str, float], dict[str, str]]:
    values: dict[str, float] = {}
    contributions: dict[str, float] = {}
    weights: dict[str, float] = {}
    kinds: dict[str, str] = {}
    for name, part in (breakdown or {}).items():
        value, weight = _number(part.get("value")), _number(part.get("weight"))
        contribution = _number(part.get("contribution"))
        values[name] = value if value is not None else 0.0
        weights[name] = weight if weight is not None else 1.0
        contributions[name] = (
            contribution if contribution is not None else values[name] * weights[name]
        )
        kinds[name] = str(part.get("kind", ""))
    return values, contributions, weights, kinds


def _outcome(reward: float | None, floor: bool, threshold: float) -> str:
    if reward is None:
        return "failed"
    if floor:
        return "floor"
    return "succeeded" if reward >= threshold else "unsolved"


def episode_views(
    data: RunData, rescored: Mapping[str, Rescored] | None = None
) -> list[EpisodeView]:
    """One view per chosen (scored or floor-scored) slot, re-scored ones when given."""
    views: list[EpisodeView] = []
    for record in data.chosen:
        reward, floor, breakdown, result = (
            record.reward,
            record.floor_reward,
            record.reward_breakdown,
            None,
        )
        again = (rescored or {}).get(record.id)
        if again is not None and again.reward is not None:
            reward, floor, breakdown, result = (
                again.reward,
                again.floor,
                again.breakdown,
                again.result,
            )
        values, contributions, weights, kinds = _parts(breakdown)
        views.append(
            EpisodeView(
                rollout=record,
                reward=reward,
                outcome=_outcome(reward, floor, data.threshold),
                floor=floor,
                components=values,
                contributions=contributions,
                weights=weights,
                kinds=kinds,
                result=result,
            )
        )
    return views


# -- checks -------------------------------------------------------------------------------------


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
    flat_groups = [k for k, g in groups.items() if is_degenerate([_reward(v) for v in g])]
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
        "prompts": [labels.get(i, str(i)) for i in flat_prompts[: _SHOWN * 2]],
        "success_rate_by_prompt": {labels.get(i, str(i)): rates[i] for i in sorted(rates)},
        "expected_all_equal_success_at_group_size": expected,
        "always_solved_prompts": len(always),
        "never_solved_prompts": len(never),
        "group_size_for_10pct": fix,
    }
    hint = _zero_variance_hint(size, fix, always, never, temperature)
    ids = [v.trajectory_id for k in flat_groups[:_SHOWN] for v in groups[k][:1]]
    title = (
        f"{len(flat_groups)} of {plural(len(groups), 'group')} ({share:.0%}) have zero reward "
        "variance "
        f"(no gradient at group size {size}); by success alone {expected:.0%} would be "
        f"all-equal ({len(always)} prompts always, {len(never)} never solved)"
    )
    if share >= 0.999:
        return [Finding("zero-variance", "error", title, hint, evidence, ids)]
    if share >= 0.25:
        return [Finding("zero-variance", "warn", title, hint, evidence, ids)]
    return [Finding("zero-variance", "info", title, hint if flat_groups else "", evidence, ids)]


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
            f"{len(always)} prompts always and {len(never)} never succeed: a larger group "
            f"only helps if equal outcomes score differently; raise the temperature{t}, or "
            "drop / re-balance those prompts"
        )
    if not parts:
        parts.append("give equal outcomes different rewards (a bounded strategy term)")
    return "; ".join(parts)


def _labels(data: RunData) -> dict[int, str]:
    return {index: prompt_label(prompt) or str(index) for index, prompt in data.prompts.items()}


def _reward(view: EpisodeView) -> float:
    assert view.reward is not None
    return view.reward


def _correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return statistics.correlation(xs, ys)


def _outcome_sum(view: EpisodeView) -> float | None:
    terms = [c for n, c in view.contributions.items() if view.kinds.get(n) == "outcome"]
    return math.fsum(terms) if terms else None


def length_signals(views: Sequence[EpisodeView]) -> list[Finding]:
    """Reward vs turns / tokens / tool calls, against the outcome terms' own correlation."""
    scored = [v for v in views if v.scored]
    findings: list[Finding] = []
    measures: dict[str, list[EpisodeView]] = {
        "turns": scored,
        "tokens": scored,
        "tool_calls": [v for v in scored if v.tool_calls is not None],
    }
    for measure, eps in measures.items():
        xs = [float(getattr(v, measure)) for v in eps]
        r = _correlation(xs, [_reward(v) for v in eps])
        with_outcome = [v for v in eps if _outcome_sum(v) is not None]
        r_outcome = _correlation(
            [float(getattr(v, measure)) for v in with_outcome],
            [_outcome_sum(v) or 0.0 for v in with_outcome],
        )
        evidence = {"measure": measure, "episodes": len(eps), "r_reward": r, "r_outcome": r_outcome}
        if r is None:
            findings.append(
                Finding(
                    "hacking",
                    "info",
                    f"reward vs {measure}: not measurable (fewer than 3 episodes or no spread)",
                    "",
                    evidence,
                )
            )
            continue
        explained = r_outcome is not None and r_outcome * r > 0 and abs(r_outcome) >= abs(r) / 2
        if abs(r) >= STRONG_CORRELATION and not explained:
            direction = "shorter" if r < 0 else "longer"
            ranked = sorted(eps, key=_reward, reverse=True)
            findings.append(
                Finding(
                    "hacking",
                    "warn",
                    f"reward follows {measure} (r = {r:+.2f}) but the outcome does not "
                    f"(r = {_fmt(r_outcome)}): {direction} episodes score higher for no outcome",
                    f"pay for the outcome, not for {measure}: bound or remove the length term",
                    evidence,
                    [v.trajectory_id for v in ranked[:_SHOWN]],
                )
            )
        else:
            findings.append(
                Finding(
                    "hacking",
                    "info",
                    f"reward vs {measure}: r = {r:+.2f} (outcome terms: {_fmt(r_outcome)})",
                    "",
                    evidence,
                )
            )
    return findings


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.2f}"


def unearned_rewards(views: Sequence[EpisodeView], threshold: float) -> list[Finding]:
    """Episodes at or above the success threshold whose outcome terms are absent or ≤ 0."""
    scored = [v for v in views if v.scored]
    with_breakdown = [v for v in scored if v.components]
    if not with_breakdown:
        return [
            Finding(
                "hacking",
                "info",
                "no reward breakdown recorded: high rewards without an outcome are not detectable",
                "return a Reward with named components (Reward.weighted(outcome=…, …))",
                {"episodes": len(scored)},
            )
        ]
    high = [v for v in with_breakdown if _reward(v) >= threshold]
    unearned = [v for v in high if (_outcome_sum(v) or 0.0) <= 0.0]
    evidence = {
        "threshold": threshold,
        "high_reward": len(high),
        "without_outcome": len(unearned),
        "examples": [
            {"trajectory_id": v.trajectory_id, "reward": v.reward, "turns": v.turns}
            for v in unearned[:_SHOWN]
        ],
    }
    if not unearned:
        return [
            Finding(
                "hacking",
                "info",
                f"all {plural(len(high), 'episode')} at or above {threshold:g} carry a "
                "positive outcome term",
                "",
                evidence,
            )
        ]
    return [
        Finding(
            "hacking",
            "error",
            f"{len(unearned)} of {len(high)} episodes scored ≥ {threshold:g} with no positive "
            "outcome term",
            "make the outcome term dominant (kind='outcome', names starting with 'outcome') so "
            "only a solved task reaches the success threshold",
            evidence,
            [v.trajectory_id for v in unearned[:_SHOWN]],
        )
    ]


def dominance(views: Sequence[EpisodeView]) -> list[Finding]:
    """A component whose variance share is far above the share of its declared weight."""
    eps = [v for v in views if v.scored and v.components]
    rewards = [_reward(v) for v in eps]
    if len(eps) < 3 or len(set(rewards)) < 2:
        return []
    variance = statistics.variance(rewards)
    findings: list[Finding] = []
    names = sorted({n for v in eps for n, w in v.weights.items() if w != 0})
    shares: dict[str, float] = {}
    declared: dict[str, float] = {}
    for name in names:
        contributions = [v.contributions.get(name, 0.0) for v in eps]
        shares[name] = statistics.covariance(contributions, rewards) / variance
        weight_shares = [
            abs(v.weights[name]) / math.fsum(abs(w) for w in v.weights.values())
            for v in eps
            if name in v.weights
        ]
        declared[name] = statistics.fmean(weight_shares) if weight_shares else 0.0
    evidence = {"variance_share": shares, "declared_weight_share": declared, "episodes": len(eps)}
    for name in names:
        if shares[name] >= 0.5 and shares[name] > 2 * declared[name]:
            findings.append(
                Finding(
                    "hacking",
                    "warn",
                    f"component {name!r} drives {shares[name]:.0%} of the reward variance with "
                    f"{declared[name]:.0%} of the declared weight",
                    f"scale or clip {name!r} so its spread matches its weight (normalize its value "
                    "to [-1, 1])",
                    evidence,
                )
            )
    if not findings:
        top = max(names, key=lambda n: shares[n], default=None)
        title = "no component dominates against its weight"
        if top is not None:
            title += f" (largest: {top!r}, {shares[top]:.0%} of the variance)"
        findings.append(Finding("hacking", "info", title, "", evidence))
    return findings


def recovered_calls(views: Sequence[EpisodeView]) -> list[Finding]:
    """Does any component respond to tool calls recovered from text?"""
    eps = [v for v in views if v.scored and v.recovered_tool_calls is not None]
    if not eps:
        return [
            Finding(
                "hacking",
                "info",
                "recovered text tool calls: not detectable (the answers do not count them)",
                "",
            )
        ]
    counts = [float(v.recovered_tool_calls or 0) for v in eps]
    with_text = [v for v in eps if v.recovered_tool_calls]
    if not with_text:
        return [
            Finding(
                "hacking",
                "info",
                "no tool call was recovered from text in this run",
                "",
                {"episodes": len(eps)},
            )
        ]
    names = sorted({n for v in eps for n in v.components})
    responses = {n: _correlation(counts, [v.components.get(n, 0.0) for v in eps]) for n in names}
    penalizing = {n: r for n, r in responses.items() if r is not None and r <= -STRONG_CORRELATION}
    evidence = {
        "episodes": len(eps),
        "with_recovered_calls": len(with_text),
        "recovered_calls": int(sum(counts)),
        "component_correlation": responses,
    }
    ids = [v.trajectory_id for v in with_text[:_SHOWN]]
    if penalizing:
        best = min(penalizing, key=lambda n: penalizing[n])
        return [
            Finding(
                "hacking",
                "info",
                f"{plural(len(with_text), 'episode')} used text tool calls; "
                f"component {best!r} penalizes "
                f"them (r = {penalizing[best]:+.2f})",
                "",
                evidence,
                ids,
            )
        ]
    return [
        Finding(
            "hacking",
            "warn",
            f"{plural(len(with_text), 'episode')} used text tool calls and no reward "
            "component responds "
            "to them: recovered calls are rewarded as well as real ones",
            "add a small penalty per recovered call (Episode.recovered_calls) so the policy "
            "learns the structured format",
            evidence,
            ids,
        )
    ]


def projection(summary: Summary, budget: float | None) -> list[Finding]:
    """Tokens per slot × the planned job's slots → cost; an error above ``budget``."""
    proj = summary.projection
    if proj is None:
        return [Finding("projection", "info", "no finished rollout: nothing to project", "")]
    cost = proj.cost
    evidence = {
        "steps": proj.steps,
        "batch_size": proj.batch_size,
        "group_size": proj.group_size,
        "slots": proj.slots,
        "tokens_per_slot": proj.tokens_per_slot,
        "tokens": proj.tokens,
        "cost": cost.total,
        "currency": cost.currency,
        "pricing": cost.label,
        "budget": budget,
    }
    text = f"projected job: {proj.text}"
    if budget is not None and cost.total <= budget:
        text += f", within the budget of {budget:,.2f} {cost.currency}"
    if budget is not None and cost.total > budget:
        return [
            Finding(
                "projection",
                "error",
                f"{text}, above the budget of {budget:,.2f} {cost.currency}",
                "cut tokens per rollout (shorter prompts, fewer turns, max_tokens), the group "
                "size or the steps, or raise --budget",
                evidence,
            )
        ]
    return [Finding("projection", "info", text, "", evidence)]


# -- the audit ----------------------------------------------------------------------------------


def _entry_path(data: RunData, entrypoint: str | Path | None) -> Path | None:
    if entrypoint is not None:
        return Path(entrypoint)
    recorded = flat_config(data.job.config).get("entrypoint") or data.job.config.get("entrypoint")
    if isinstance(recorded, str) and recorded.endswith(".py"):
        return Path(recorded)
    return None


def audit_reward(
    run_dir: str | Path,
    *,
    entrypoint: str | Path | None = None,
    budget: float | None = None,
    steps: int | None = None,
    pricing: Pricing | None = None,
) -> RewardAudit:
    """Audit the latest job of ``run_dir`` (see the module docstring).

    With ``entrypoint`` every finished episode is re-scored by that file's RolloutApp reward and
    its ``REWARD_ORDERINGS`` are checked; without it the orderings come from the entrypoint the
    run recorded (when that file still exists) and the recorded rewards are used. ``steps`` is
    the planned job's length (default: the summary's projection, 100 steps).
    """
    folder = Path(run_dir)
    if not resolve_path(folder).is_file():
        raise UsageError(f"no run store at {resolve_path(folder)} (expected a run directory)")
    if budget is not None and not budget > 0:
        raise UsageError(f"--budget must be > 0, got {budget}")
    live = live_holder(resolve_path(folder).parent)
    with RunStore.open(folder, readonly=True) as store, store.snapshot():
        job = resolve_job(store, None)
        records = load_rollouts(store, job.arn)
        in_flight = 0
        if live is not None:
            records, in_flight = _finished(store, records)
        data = load_run_data(store, job.arn, records=records)
        summary = summarize(
            store, job.arn, pricing=pricing, projection_steps=steps, records=records
        )
    findings: list[Finding] = []
    path = _entry_path(data, entrypoint)
    rescored: dict[str, Rescored] | None = None
    if entrypoint is not None:
        rescored = rescore_run(folder, entrypoint)
        findings.extend(_rescore_findings(data, rescored))
    views = episode_views(data, rescored)
    findings.extend(_ordering_findings(views, path, explicit=entrypoint is not None))
    findings.extend(zero_variance(views, data))
    findings.extend(length_signals(views))
    findings.extend(unearned_rewards(views, data.threshold))
    findings.extend(dominance(views))
    findings.extend(recovered_calls(views))
    findings.extend(projection(summary, budget))
    order = {"error": 0, "warn": 1, "info": 2}
    findings.sort(key=lambda f: order[f.severity])
    return RewardAudit(
        run_dir=str(folder),
        job_name=data.job.name,
        entrypoint=None if path is None else str(path),
        rescored=rescored is not None,
        episodes=len(data.records),
        scored=sum(v.scored for v in views),
        findings=tuple(findings),
        live=live,
        in_flight=in_flight,
    )


def _finished(store: RunStore, records: Sequence[Rollout]) -> tuple[list[Rollout], int]:
    """The rollouts of a live run that are over (the driver recorded the slot done, or the
    attempt ended without a reward), and how many are not: a rollout can be rewarded before
    the driver has stored the agent's answer (its reward breakdown), and judging it then would
    see an episode without its game."""
    done = {e.trajectory_id for e in store.list_events(kind=ROLLOUT_DONE_EVENT)}
    over = [r for r in records if r.id in done or r.state in _ENDED_WITHOUT_REWARD]
    return over, len(records) - len(over)


def _ordering_findings(
    views: Sequence[EpisodeView], path: Path | None, *, explicit: bool
) -> list[Finding]:
    hint = "declare REWARD_ORDERINGS next to the reward (docs/doctor.md)"
    if path is None:
        return [Finding("ordering", "info", "no entrypoint recorded: orderings not checked", hint)]
    if not path.is_file():
        if explicit:
            raise UsageError(f"entrypoint not found: {path}")
        return [
            Finding(
                "ordering",
                "info",
                f"the run's entrypoint {path} no longer exists: orderings not checked",
                "pass --entrypoint",
            )
        ]
    module = load_module(
        path, name=module_name_for(path.resolve(), "_agent_kit_entry"), what="entrypoint"
    )
    orderings = load_orderings(module)
    if not orderings:
        return [Finding("ordering", "info", f"{path.name} declares no REWARD_ORDERINGS", hint)]
    return check_orderings(views, orderings)


def _rescore_findings(data: RunData, rescored: Mapping[str, Rescored]) -> list[Finding]:
    changed = [
        (r, again)
        for r in data.chosen
        if (again := rescored.get(r.id)) is not None
        and again.reward is not None
        and r.reward is not None
        and abs(again.reward - r.reward) > 1e-9 * max(1.0, abs(r.reward))
    ]
    errors = [again for again in rescored.values() if again.error]
    evidence = {
        "rescored": len(rescored),
        "changed": len(changed),
        "agent_failures": len(errors),
        "examples": [
            {"trajectory_id": r.id, "recorded": r.reward, "rescored": a.reward}
            for r, a in changed[:_SHOWN]
        ],
    }
    title = (
        f"re-scored {plural(len(rescored), 'episode')} with the entrypoint: "
        f"{plural(len(changed), 'reward')} changed"
    )
    if errors:
        title += f", {len(errors)} failed on the agent's side ({errors[0].error})"
    return [
        Finding(
            "rescore",
            "warn" if errors else "info",
            title,
            "see `agent-kit replay --in-process` for where an episode diverges" if errors else "",
            evidence,
            [r.id for r, _ in changed[:_SHOWN]],
        )
    ]
