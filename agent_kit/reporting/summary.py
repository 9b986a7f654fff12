"""The run summary (``summary.json``): a versioned, validated digest of one emulated job.

Why one module of ~440 lines: it owns a single thing, computing the summary. The document's
models are :mod:`agent_kit.reporting.summary_schema`, the metric and cost formulas are
:mod:`~agent_kit.reporting.metrics` and :mod:`~agent_kit.reporting.pricing`, and the rollout
record is :mod:`agent_kit.store.records`; what is left here (the config look-ups, the
projection, and one small builder per section, which :func:`summarize_records` calls in
document order) is read together.

:func:`summarize` reads a :class:`~agent_kit.store.RunStore` into
:class:`~agent_kit.store.Rollout` records (:func:`~agent_kit.store.load_rollouts`), runs the pure
metric functions of :mod:`agent_kit.reporting.metrics` and the cost functions of
:mod:`agent_kit.reporting.pricing`, and returns the :class:`Summary`
(``"schema": "agent_kit.summary/2"``; :meth:`Summary.document` is its JSON). The document's
models live in :mod:`agent_kit.reporting.summary_schema` (import them from there). Undefined
statistics (no rollouts yet) are ``None``, never NaN.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

from agent_kit.contract import TrajectoryState
from agent_kit.errors import RunStoreError, UsageError
from agent_kit.reporting.auxiliary import auxiliary_section, plan_auxiliary
from agent_kit.reporting.chaos import chaos_report
from agent_kit.reporting.hints import connection_hint, extra_hint
from agent_kit.reporting.metrics import (
    ADVANTAGE_EPS,
    GroupResult,
    TokenUsage,
    build_groups,
    eval_metrics,
    token_usage,
    training_metrics,
)
from agent_kit.reporting.plan import PROJECTION_RULE, project_tokens
from agent_kit.reporting.plan_groups import read_recorded
from agent_kit.reporting.pricing import Pricing, TokenCounts, default_pricing, estimate_cost
from agent_kit.reporting.summary_schema import (
    SUMMARY_SCHEMA,
    AgentFailure,
    Auxiliary,
    ChaosSection,
    CostInfo,
    Counts,
    FailureCount,
    JobInfo,
    Projection,
    RolloutBrief,
    Settings,
    StepRow,
    Summary,
    Timing,
    Tokens,
    flat_config,
)
from agent_kit.store import JobRow, Rollout, RunStore, load_rollouts
from agent_kit.store.rows import fields_from
from agent_kit.store.run_figures import run_figures_of

__all__ = ["resolve_job", "summarize", "summarize_records"]

#: Steps of the projection when the caller gives none: the published reference run's 100.
DEFAULT_PROJECTION_STEPS: Final = 100
_LIST_LIMIT: Final = 10


def resolve_job(store: RunStore, job_arn: str | None) -> JobRow:
    """The job named by ``job_arn`` (an ARN or a job name), or the store's only/latest job."""
    jobs = store.list_jobs()
    if not jobs:
        raise UsageError(f"run store {store.path} holds no job")
    if job_arn is None:
        return jobs[-1]
    for job in jobs:
        if job_arn in (job.arn, job.name):
            return job
    known = ", ".join(j.name for j in jobs)
    raise UsageError(f"no job {job_arn!r} in {store.path} (jobs: {known})")


def _config_int(config: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = config.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _is_evaluation(config: dict[str, Any]) -> bool:
    mode = str(config.get("mode") or config.get("job_type") or "").lower()
    return mode in {"eval", "evaluation"}


def _cost(tokens: TokenCounts, pricing: Pricing, estimated: bool) -> CostInfo:
    return CostInfo(**estimate_cost(tokens, pricing).to_dict(), estimated_tokens=estimated)


def _human(n: float) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f}"


def _projection(
    records: Sequence[Rollout],
    *,
    steps: int,
    batch_size: int,
    group_size: int,
    pricing: Pricing,
    estimated: bool,
    dataset_rows: int | None,
    auxiliary: Auxiliary | None,
) -> Projection | None:
    """``steps`` steps of this run's shape priced by the one projection rule of ``job plan``
    (:func:`~agent_kit.reporting.plan.project_tokens`, its p50), plus the run's auxiliary calls
    per rollout × the projected rollouts; None without a rewarded rollout to project from."""
    try:
        recorded = read_recorded(records)
    except UsageError:
        return None
    bands, _ = project_tokens(
        recorded.groups, prompt_groups=steps * batch_size, group_size=group_size, pricing=pricing
    )
    planned = steps * batch_size * group_size
    counts = TokenCounts(**{k: round(bands[k].p50) for k in ("prefill", "sample", "train")})
    per = {k: getattr(counts, k) / planned for k in ("prefill", "sample", "train")}
    cost = _cost(counts, pricing, estimated)
    epochs = steps * batch_size / dataset_rows if dataset_rows else None
    aux = plan_auxiliary(auxiliary, planned)
    total = cost.total + float(aux["cost"]) if aux is not None else cost.total
    text = (
        f"{steps} steps of this run's shape ({batch_size} prompts × {group_size} rollouts a "
        f"step, {planned:,} rollouts) ≈ {_human(counts.total)} tokens ≈ {cost.total:,.2f} "
        f"{cost.currency}, {cost.label}"
    )
    if aux is not None:
        text += (
            f"; + auxiliary calls (judge, simulated user) ≈ {float(aux['cost']):,.2f} "
            f"{aux['currency']}, {aux['label']}: ≈ {total:,.2f} {cost.currency} in all"
        )
    text += f"; the rule of job plan: {PROJECTION_RULE}"
    return Projection(
        steps=steps,
        batch_size=batch_size,
        group_size=group_size,
        slots=planned,
        tokens_per_slot={**per, "total": sum(per.values())},
        tokens={**counts.__dict__, "total": counts.total},
        cost=cost,
        dataset_rows=dataset_rows,
        epochs=epochs,
        text=text,
        auxiliary=aux,
        total_cost=total,
    )


def _step_rows(
    records: Sequence[Rollout], groups: Sequence[GroupResult], evaluation: bool
) -> list[StepRow]:
    rows: list[StepRow] = []
    for step in sorted({r.step for r in records}):
        step_records = [r for r in records if r.step == step]
        step_groups = [g for g in groups if g.step == step]
        m = training_metrics(step_records, step_groups, evaluation=evaluation)
        usage = token_usage(step_records, step_groups, evaluation=evaluation)
        rows.append(
            StepRow(
                step=step,
                trajectories=len(step_records),
                rewarded=sum(len(g.rollouts) for g in step_groups),
                lost=sum(g.lost for g in step_groups),
                reward_mean=m["rollout/reward/mean"],
                reward_std=m["rollout/reward/std"],
                reward_min=m["rollout/reward/min"],
                reward_max=m["rollout/reward/max"],
                valid_mean=m["rollout/reward/valid_mean"],
                zero_frac=m["rollout/reward/zero_frac"],
                turns_mean=m["rollout/turns/mean"],
                advantage_abs_mean=m["rollout/advantage/abs_mean"],
                prefill=usage.prefill,
                sample=usage.sample,
                train=usage.train,
            )
        )
    return rows


def _brief(r: Rollout) -> RolloutBrief:
    """The summary's line for one rollout (the one place a :class:`RolloutBrief` is built)."""
    return fields_from(RolloutBrief, r, duration_s=round(r.duration_s, 6))


def _success_threshold(flat: dict[str, Any], given: float | None) -> float:
    """The caller's threshold, else the job config's ``success_threshold``, else 1.0."""
    if given is not None:
        return given
    configured = flat.get("success_threshold")
    if isinstance(configured, (int, float)) and not isinstance(configured, bool):
        return float(configured)
    return 1.0


def _group_shape(flat: dict[str, Any], groups: Sequence[GroupResult]) -> tuple[int, int]:
    """(group size, batch size): configured, else the largest group / step seen (at least 1)."""
    group_size = _config_int(flat, "group_size") or max(
        (g.finished_slots + g.pending for g in groups), default=1
    )
    batch_size = _config_int(flat, "batch_size", "global_batch_size") or max(
        (sum(1 for g in groups if g.step == s) for s in {g.step for g in groups}), default=1
    )
    return group_size, batch_size


def _pass_ks(pass_k: Sequence[int] | None, group_size: int) -> list[int]:
    """The k of pass@k, sorted and ≥ 1: the caller's, else (1, group size)."""
    return sorted({int(k) for k in (pass_k if pass_k is not None else (1, group_size)) if k >= 1})


def _planned_slots(flat: dict[str, Any]) -> int:
    """Slots of the whole planned job: steps × batch size × group size, 0 when the config does
    not give all three."""
    steps = _config_int(flat, "steps", "max_steps")
    batch_size = _config_int(flat, "batch_size", "global_batch_size")
    group_size = _config_int(flat, "group_size")
    return steps * batch_size * group_size if steps and batch_size and group_size else 0


def _counts(
    records: Sequence[Rollout], groups: Sequence[GroupResult], slots: int, turns: int
) -> Counts:
    """The counts section: ``slots`` are the planned job's (at least those played), and
    ``pending`` every slot without an outcome yet, played or not (an interrupted run's rest)."""
    rewarded = sum(len(g.rollouts) for g in groups)
    lost = sum(g.lost for g in groups)
    seen = rewarded + lost + sum(g.pending for g in groups)
    slots = max(slots, seen)
    return Counts(
        trajectories=len(records),
        by_state=dict(sorted(Counter(r.state for r in records).items())),
        slots=slots,
        rewarded=rewarded,
        lost=lost,
        pending=slots - rewarded - lost,
        retries=sum(1 for r in records if r.attempt > 0),
        groups=len(groups),
        degenerate_groups=sum(1 for g in groups if g.rollouts and g.degenerate),
        turns=turns,
    )


def _agent_failures(records: Sequence[Rollout]) -> list[AgentFailure]:
    """Agent-side failure reasons, most frequent first, with their first trajectory ids."""
    by_reason: dict[str, list[Rollout]] = {}
    for record in records:
        if record.agent_failure is not None:
            by_reason.setdefault(record.agent_failure, []).append(record)
    ranked = sorted(by_reason.items(), key=lambda item: (-len(item[1]), item[0]))
    return [
        AgentFailure(
            reason=reason,
            count=len(rows),
            floor_rewards=sum(1 for r in rows if r.floor_reward),
            trajectory_ids=[r.id for r in rows[:_LIST_LIMIT]],
        )
        for reason, rows in ranked
    ]


def _lowest(records: Sequence[Rollout]) -> list[Rollout]:
    """Rewarded rollouts with a finite reward, lowest first (ties: by id), at most 10."""
    scored = [(r.reward, r.id, r) for r in records if r.reward is not None]
    finite = [item for item in scored if math.isfinite(item[0])]
    return [r for _, _, r in sorted(finite, key=lambda item: item[:2])[:_LIST_LIMIT]]


def _failures(records: Sequence[Rollout]) -> list[FailureCount]:
    """Failure reasons (the state when none was recorded), most frequent first."""
    reasons = Counter(
        r.reason or r.state for r in records if r.state in TrajectoryState.unrewarded()
    )
    return [FailureCount(reason=k, count=v) for k, v in reasons.most_common()]


def _tokens(usage: TokenUsage, counts: TokenCounts) -> Tokens:
    return fields_from(Tokens, usage, total=counts.total)


def _timing(records: Sequence[Rollout]) -> Timing:
    """The span from the first trajectory's start to the last one's end, and finished per s."""
    started = min((r.started_at for r in records), default=None)
    ended = max((r.ended_at for r in records), default=None)
    wall = (ended - started) if started is not None and ended is not None else 0.0
    finished = sum(1 for r in records if r.state in TrajectoryState.finished())
    return Timing(
        started_at=started,
        ended_at=ended,
        wall_s=wall,
        rollouts_per_s=finished / wall if wall > 0 else None,
    )


def summarize_records(
    job: JobRow,
    records: Sequence[Rollout],
    *,
    success_threshold: float | None = None,
    advantage: str = "group_based",
    pricing: Pricing | None = None,
    projection_steps: int | None = None,
    pass_k: Sequence[int] | None = None,
    auxiliary: Auxiliary | None = None,
) -> Summary:
    """Build the summary of a job row and its records (pure; no store access), with the job's
    ``auxiliary`` section (which the projection prices too) when the caller read it; without
    the sections that need the store (``chaos``, the connection hint, ``run``: :func:`summarize`).

    ``success_threshold`` defaults to the job config's ``success_threshold``, else 1.0. The job
    config may hold the settings at the top level or under ``"job"`` (the driver's layout):
    ``group_size``, ``batch_size``, ``steps``, ``dataset_rows``, ``mode``.

    ``pass_k`` defaults to (1, group size), the group size from the config (else the largest
    group seen). ``projection_steps`` defaults to the config's ``steps`` when that is more than
    :data:`DEFAULT_PROJECTION_STEPS` (100, the published run's length), else 100."""
    config = dict(job.config)
    flat = flat_config(config)
    evaluation = _is_evaluation(flat)
    threshold = _success_threshold(flat, success_threshold)
    pricing = pricing or default_pricing()
    groups = build_groups(records, advantage)
    group_size, batch_size = _group_shape(flat, groups)
    ks = _pass_ks(pass_k, group_size)
    metrics = training_metrics(records, groups, evaluation=evaluation)
    metrics.update(eval_metrics(groups, success_threshold=threshold, ks=ks))
    usage = token_usage(records, groups, evaluation=evaluation)
    tokens = TokenCounts(usage.prefill, usage.sample, usage.train)
    projection = None
    if records:
        projection = _projection(
            records,
            steps=projection_steps
            or max(_config_int(flat, "steps", "max_steps") or 0, DEFAULT_PROJECTION_STEPS),
            batch_size=batch_size,
            group_size=group_size,
            pricing=pricing,
            estimated=usage.estimated,
            dataset_rows=_config_int(flat, "dataset_rows", "dataset_size"),
            auxiliary=auxiliary,
        )
    return Summary(
        schema=SUMMARY_SCHEMA,
        generated_at=time.time(),
        job=fields_from(JobInfo, job, mode="evaluation" if evaluation else "training"),
        config=config,
        settings=Settings(
            advantage=advantage,
            advantage_eps=ADVANTAGE_EPS,
            success_threshold=threshold,
            pass_k=ks,
        ),
        counts=_counts(records, groups, _planned_slots(flat), usage.turns),
        failures=_failures(records),
        agent_failures=_agent_failures(records),
        floor_rewards=sum(1 for r in records if r.floor_reward and r.rewarded),
        hints=[h for h in (extra_hint(records),) if h],
        auxiliary=auxiliary,
        metrics=metrics,
        tokens=_tokens(usage, tokens),
        cost=_cost(tokens, pricing, usage.estimated),
        projection=projection,
        steps=_step_rows(records, groups, evaluation),
        timing=_timing(records),
        slowest=[_brief(r) for r in sorted(records, key=lambda r: -r.duration_s)[:_LIST_LIMIT]],
        failed=[_brief(r) for r in _failed(records)],
        lowest=[_brief(r) for r in _lowest(records)],
    )


def _failed(records: Sequence[Rollout]) -> list[Rollout]:
    """The first rollouts that ended without a reward (summary.json's ``failed``)."""
    return [r for r in records if r.state in TrajectoryState.unrewarded()][: _LIST_LIMIT * 5]


def _check_finite_totals(store: RunStore, records: Sequence[Rollout]) -> None:
    """A stored non-finite reward total (older versions stored one; the emulator now refuses
    them) is a one-line RunStoreError naming the rollout: no metric can be computed over it."""
    for record in records:
        total = record.reward_total
        if total is not None and not math.isfinite(total):
            raise RunStoreError(
                f"run store {store.path} holds a non-finite reward total ({total}) for rollout "
                f"{record.id}: it cannot be summarised (the emulator now refuses such rewards)"
            )


def summarize(
    store: RunStore,
    job_arn: str | None = None,
    *,
    success_threshold: float | None = None,
    advantage: str = "group_based",
    pricing: Pricing | None = None,
    projection_steps: int | None = None,
    pass_k: Sequence[int] | None = None,
    records: Sequence[Rollout] | None = None,
) -> Summary:
    """The summary (``summary.json``) of a job in ``store``, schema-validated.

    ``job_arn`` may be an ARN, a job name, or None for the store's latest job;
    ``success_threshold`` None means the job's configured one (else 1.0). The ``run`` section
    the driver stored with the job's summary is carried over; ``records`` are the job's
    :func:`~agent_kit.store.load_rollouts`, when the caller has them already. Reads the store
    only; safe on a store another process is still writing (it summarizes what is committed).
    """
    job = resolve_job(store, job_arn)
    records = list(load_rollouts(store, job.arn) if records is None else records)
    _check_finite_totals(store, records)
    prices = pricing or default_pricing()
    summary = summarize_records(
        job,
        records,
        success_threshold=success_threshold,
        advantage=advantage,
        pricing=prices,
        projection_steps=projection_steps,
        pass_k=pass_k,
        auxiliary=auxiliary_section(store, job.arn, len(records), prices),
    )
    spec = flat_config(dict(job.config)).get("chaos")
    chaos = chaos_report(
        store, records, spec=spec if isinstance(spec, str) else "", job_status=job.status
    )
    summary.chaos = None if chaos is None else ChaosSection.model_validate(chaos.to_dict())
    hint = connection_hint(store, records)
    summary.hints = [*summary.hints, *([hint] if hint else [])]
    summary.run = run_figures_of(job)  # the driver's figures survive a re-render
    return summary
