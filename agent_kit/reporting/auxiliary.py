"""Auxiliary model calls of a job (LLM judges, simulated users): tokens and their cost.

Auxiliary calls are recorded by the emulator's ``/aux`` route as turns of their own kind
(:class:`~agent_kit.store.rows.AuxTurnRow`). They are never MTRL tokens: in a real job they run
in the agent's runtime on Bedrock and are billed on demand, so the summary counts them apart —
``summary.json``'s ``auxiliary`` section — priced at the pricing's ``aux_*_per_million``
(:mod:`agent_kit.reporting.pricing`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from agent_kit.reporting.plan_groups import Band
from agent_kit.reporting.pricing import Pricing
from agent_kit.reporting.summary_schema import Auxiliary, AuxKindFigures
from agent_kit.store import RunStore
from agent_kit.store.rows import AuxTurnRow

__all__ = ["auxiliary_of", "auxiliary_section", "plan_auxiliary"]


def auxiliary_of(
    calls: Mapping[str, Sequence[AuxTurnRow]], rollouts: int, pricing: Pricing
) -> Auxiliary | None:
    """The ``auxiliary`` section over ``calls`` (per trajectory) for a job of ``rollouts``
    rollouts; None when no auxiliary call was made."""
    rows = [row for found in calls.values() for row in found]
    if not rows:
        return None
    by_kind: dict[str, AuxKindFigures] = {}
    for kind in sorted({r.kind for r in rows}):
        mine = [r for r in rows if r.kind == kind]
        by_kind[kind] = AuxKindFigures(
            calls=len(mine),
            input_tokens=sum(r.prompt_tokens for r in mine),
            output_tokens=sum(r.completion_tokens for r in mine),
        )
    inp = sum(r.prompt_tokens for r in rows)
    out = sum(r.completion_tokens for r in rows)
    cost = inp / 1e6 * pricing.aux_input_per_million + out / 1e6 * pricing.aux_output_per_million
    per = max(1, rollouts)
    return Auxiliary(
        calls=len(rows),
        input_tokens=inp,
        output_tokens=out,
        total_tokens=inp + out,
        estimated=any(r.usage_estimated for r in rows),
        by_kind=by_kind,
        calls_per_rollout=round(len(rows) / per, 4),
        tokens_per_rollout=round((inp + out) / per, 4),
        cost=round(cost, 9),
        cost_per_rollout=round(cost / per, 12),
        currency=pricing.currency,
        input_per_million=pricing.aux_input_per_million,
        output_per_million=pricing.aux_output_per_million,
        label=pricing.aux_label,
    )


def auxiliary_section(
    store: RunStore, job_arn: str, rollouts: int, pricing: Pricing
) -> Auxiliary | None:
    """:func:`auxiliary_of` the job's recorded auxiliary calls."""
    return auxiliary_of(store.job_aux_turns(job_arn), rollouts, pricing)


def plan_auxiliary(
    aux: Auxiliary | None, rollouts: int, *, job_cost: Band | None = None
) -> dict[str, Any] | None:
    """The planned job's auxiliary calls: this run's per-rollout figures × ``rollouts`` (the
    job's rollouts), priced as the run's section is; None when the run made no auxiliary call.
    Given the job's MTRL cost band (``job plan``'s), ``total_with_auxiliary`` is that band plus
    the auxiliary cost."""
    if aux is None:
        return None
    cost = round(aux.cost_per_rollout * rollouts, 6)
    both = {} if job_cost is None else {"total_with_auxiliary": asdict(job_cost.plus(cost))}
    return {
        "calls_per_rollout": aux.calls_per_rollout,
        "tokens_per_rollout": aux.tokens_per_rollout,
        "cost_per_rollout": aux.cost_per_rollout,
        "rollouts": rollouts,
        "calls": round(aux.calls_per_rollout * rollouts),
        "tokens": round(aux.tokens_per_rollout * rollouts),
        "cost": cost,
        "currency": aux.currency,
        "label": aux.label,
        **both,
    }
