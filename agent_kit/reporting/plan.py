"""Plan a real MTRL training job from a recorded local run: its shape, tokens, cost and time.

The inputs are a recorded run's rollouts (tokens per slot in the three billing categories, turns,
rollout durations), the job's hyperparameters (checked against the documented ranges of
:data:`agent_kit.deploy.jobs.TRAINING_HYPERPARAMETERS`) and the size of the training dataset.
The output, :class:`JobPlan`, is the planned job (schema ``agent_kit.job_plan/1``; fields in
docs/plan.md):

- **Shape.** A step plays ``global_batch_size`` prompts × ``group_size`` rollouts
  (docs/contract.md §1; the published reference run — 105,486 rollouts in 100 steps at the
  defaults 128 × 8 = 1,024 — agrees, the rest being retries). Steps per epoch are
  ``⌈dataset_rows / global_batch_size⌉``; the job ends at ``max_steps`` or after ``max_epochs``
  epochs, whichever comes first.
- **Tokens**, as bands (10th, 50th, 90th percentiles), never a point. The unit is a *prompt
  group* (its rollouts share a prompt, so they are not independent of each other). For each
  recorded group, the expected value ``u`` of a planned group of ``group_size`` G and its spread
  ``w`` are computed; the job's total over ``n = steps × global_batch_size`` groups is then a
  predictive interval for a sum of ``n`` independent groups whose mean is estimated from ``K``
  recorded ones: ``n·ū ± t·√(n·(s² + w̄) + n²·s²/K)``, with ``s²`` the recorded groups' sample
  variance of ``u`` and ``t`` the 90th percentile of Student's t with ``K − 1`` degrees of
  freedom. The second term (the uncertainty of the recorded mean) dominates for real jobs:
  record more prompt groups for a narrower band. Analytical, so the same run always gives the
  same plan. Prefill and sample count every attempt of a slot (so the recorded retry rate is
  priced in). Train counts the chosen rollout's tokens of groups that give a gradient; the
  share of all-equal groups is recomputed per recorded group for the planned G (from its
  rewards: ``Σ_v C(n_v, G) / C(n, G)``, the unbiased estimate, when G ≤ the recorded group
  size, else ``Σ_v (n_v / n)^G``), so a smaller planned group loses more train tokens.
- **Cost**: the token bands priced per category with a
  :class:`~agent_kit.reporting.pricing.Pricing`.
- **Wall clock**: per step, the ``rollouts_per_step`` sessions run at most ``concurrency`` at a
  time (``rollout_max_concurrency``, capped by the region's session quota) and start at most
  :data:`INVOCATIONS_PER_S` a second. Low end ``max(n / rate, busy_p10 / c, d_p90)``; high end
  ``n / rate + busy_p90 / c + d_max`` (a greedy schedule never exceeds total work over ``c``
  plus the longest rollout). ``busy`` is the summed session time of a step's rollouts. A
  training-update time per step (:attr:`PlanSettings.train_step_s`) is an assumption, added as is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from agent_kit.deploy.jobs import TRAINING_HYPERPARAMETERS, validate_hyperparameters
from agent_kit.errors import UsageError
from agent_kit.reporting.plan_groups import (
    Band,
    RecordedRun,
    Slot,
    combined,
    group_unit,
    quantile,
    read_recorded,
    recorded_figures,
    sum_band,
)
from agent_kit.reporting.pricing import Pricing
from agent_kit.store.records import Rollout

__all__ = [
    "DEFAULT_TRAIN_STEP_S",
    "INVOCATIONS_PER_S",
    "MODEL_LATENCY_FLOOR_S",
    "PLAN_SCHEMA",
    "PROJECTION_RULE",
    "REGION_PATTERN",
    "SESSION_MEMORY_GB",
    "SESSION_VCPU",
    "SYNC_REQUEST_LIMIT_S",
    "Flag",
    "JobPlan",
    "JobShape",
    "PlanSettings",
    "job_shape",
    "plan_job",
    "project_tokens",
    "session_quota",
]

PLAN_SCHEMA: Final = "agent_kit.job_plan/1"
#: AgentCore Runtime: InvokeAgentRuntime calls a second, per runtime.
INVOCATIONS_PER_S: Final = 25.0
#: AgentCore Runtime: concurrent sessions per account in a region (1,000 in these, else 500).
_SESSION_QUOTAS: Final[Mapping[str, int]] = {"us-east-1": 1000, "us-west-2": 1000}
_DEFAULT_SESSION_QUOTA: Final = 500
#: AgentCore Runtime: resources of one session.
SESSION_VCPU: Final = 2
SESSION_MEMORY_GB: Final = 8
#: AgentCore Runtime: a synchronous request is cut after 15 minutes.
SYNC_REQUEST_LIMIT_S: Final = 900.0
#: Seconds of training update per step when the caller gives none: an assumption, not a figure
#: anyone published (the reference run's wall clock is dominated by rollouts).
DEFAULT_TRAIN_STEP_S: Final = 60.0
#: Upper bounds of the plan's assumptions, so no figure overflows to inf or NaN: a policy call
#: or a training step longer than the longest rollout_timeout MTRL allows (24 h) is no job; an
#: agent 10,000 times slower than recorded is no plan; no account holds a million sessions.
_LONGEST_S: Final = 86_400.0
_MAX_AGENT_SCALE: Final = 10_000.0
_MAX_SESSIONS: Final = 1_000_000.0
#: The shape of an AWS region name (us-west-2, eu-central-1, us-gov-west-1, cn-north-1).
REGION_PATTERN: Final = re.compile(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]{1,2}")
_FEW_GROUPS: Final = 10
#: A recorded policy call faster than this (median) is no model's: a scripted, random or
#: replayed policy, whose latency would make the planned wall clock the agent's alone.
MODEL_LATENCY_FLOOR_S: Final = 0.25
#: Policy schemes that are no model (their recorded latency says nothing of a real job's).
_NOT_A_MODEL: Final = ("scripted", "random", "replay")
#: The ``--turn-latency`` the flag suggests: seconds a call of a ~20B model takes (an example,
#: not a measurement: measure yours).
_SUGGESTED_TURN_LATENCY_S: Final = 4
_TOKENS: Final = ("prefill", "sample", "train")


def session_quota(region: str) -> int:
    """AgentCore's concurrent-session quota in ``region``: 1,000 in us-east-1 and us-west-2,
    else 500."""
    return _SESSION_QUOTAS.get(region, _DEFAULT_SESSION_QUOTA)


@dataclass(frozen=True)
class JobShape:
    """The hyperparameters that shape a training job, and the dataset size."""

    global_batch_size: int
    group_size: int
    max_steps: int
    max_epochs: int
    rollout_max_concurrency: int
    rollout_timeout: int
    sampling_max_tokens: int
    dataset_rows: int | None = None

    @property
    def steps_per_epoch(self) -> int | None:
        """``⌈dataset_rows / global_batch_size⌉``, or None when the dataset size is unknown."""
        if not self.dataset_rows:
            return None
        return math.ceil(self.dataset_rows / self.global_batch_size)

    @property
    def steps(self) -> int:
        """Steps the job plays: ``max_steps`` or ``max_epochs`` epochs, whichever ends first."""
        per_epoch = self.steps_per_epoch
        if per_epoch is None:
            return self.max_steps
        return min(self.max_steps, self.max_epochs * per_epoch)

    @property
    def ends_by(self) -> Literal["max_steps", "max_epochs"]:
        """Which limit ends the job (``max_steps`` when the dataset size is unknown)."""
        per_epoch = self.steps_per_epoch
        if per_epoch is not None and self.max_epochs * per_epoch < self.max_steps:
            return "max_epochs"
        return "max_steps"

    @property
    def epochs(self) -> float | None:
        """Passes over the dataset: ``steps × global_batch_size / dataset_rows``."""
        if not self.dataset_rows:
            return None
        return self.steps * self.global_batch_size / self.dataset_rows

    @property
    def rollouts_per_step(self) -> int:
        """``global_batch_size × group_size`` rollouts (sessions) a step."""
        return self.global_batch_size * self.group_size


_SHAPE_NAMES: Final = (
    "global_batch_size",
    "group_size",
    "max_steps",
    "max_epochs",
    "rollout_max_concurrency",
    "rollout_timeout",
    "sampling_max_tokens",
)


def job_shape(
    hyperparameters: Mapping[str, str], dataset_rows: int | None = None
) -> tuple[JobShape, dict[str, Any], list[str]]:
    """(shape, every hyperparameter typed, names not validated locally) for ``-H`` values.

    Values are checked against the documented ranges (a :class:`UsageError` names the bad one);
    a shape hyperparameter not given takes its documented default.
    """
    if dataset_rows is not None and dataset_rows < 1:
        raise UsageError(f"the dataset must have at least one row, got {dataset_rows}")
    typed, unknown = validate_hyperparameters(hyperparameters, TRAINING_HYPERPARAMETERS)
    values = {
        name: int(typed.get(name, TRAINING_HYPERPARAMETERS[name].default)) for name in _SHAPE_NAMES
    }
    return JobShape(**values, dataset_rows=dataset_rows), typed, unknown


@dataclass(frozen=True)
class PlanSettings:
    """The assumptions of a plan that no recorded run can tell.

    ``turn_latency_s``: seconds each policy call takes in the real job, replacing the recorded
    policy time (None keeps the recorded latency); ``agent_scale`` multiplies the recorded time
    the agent spent outside policy calls; ``other_sessions``: sessions other work holds in the
    region's quota.
    """

    region: str = "us-west-2"
    train_step_s: float = DEFAULT_TRAIN_STEP_S
    turn_latency_s: float | None = None
    agent_scale: float = 1.0
    other_sessions: int = 0
    invocations_per_s: float = INVOCATIONS_PER_S

    def __post_init__(self) -> None:
        latency = 0.0 if self.turn_latency_s is None else self.turn_latency_s
        checks = (
            ("train step seconds (--train-step-s)", self.train_step_s, 0.0, _LONGEST_S),
            ("agent scale (--agent-scale)", self.agent_scale, 0.0, _MAX_AGENT_SCALE),
            ("turn latency (--turn-latency)", latency, 0.0, _LONGEST_S),
            ("other sessions (--other-sessions)", float(self.other_sessions), 0.0, _MAX_SESSIONS),
            ("invocations per second", self.invocations_per_s, 1e-9, _MAX_SESSIONS),
        )
        for name, value, low, high in checks:
            if not math.isfinite(value) or not low <= value <= high:
                raise UsageError(f"{name} must be from {low:g} to {high:g}, got {value:g}")
        if not REGION_PATTERN.fullmatch(self.region):
            raise UsageError(
                f"--region {self.region!r} is not an AWS region name (e.g. us-west-2, eu-west-1)"
            )


@dataclass(frozen=True)
class Flag:
    """Something the plan cannot fit (``error``) or should make the user look twice
    (``warning``); ``code`` is stable, ``message`` one sentence."""

    level: Literal["error", "warning"]
    code: str
    message: str


@dataclass(frozen=True)
class JobPlan:
    """The planned job; :meth:`document` is its JSON (schema ``agent_kit.job_plan/1``)."""

    source: dict[str, Any]
    hyperparameters: dict[str, Any]
    passed_through: list[str]
    shape: JobShape
    tokens: dict[str, Band]
    cost: dict[str, Any]
    wall_clock: dict[str, Any]
    assumptions: PlanSettings
    flags: list[Flag] = field(default_factory=list)
    #: The shape hyperparameters nobody gave: the service's documented defaults.
    defaulted: list[str] = field(default_factory=list)
    #: Auxiliary calls (judge, simulated user) per rollout and for the job, Bedrock on-demand
    #: (:func:`agent_kit.reporting.auxiliary.plan_auxiliary`); None when the run made none.
    auxiliary: dict[str, Any] | None = None

    @property
    def fits(self) -> bool:
        """True when no flag is an error."""
        return not any(f.level == "error" for f in self.flags)

    def document(self) -> dict[str, Any]:
        """The plan as one JSON-ready document (fields in docs/plan.md)."""
        shape = self.shape
        return {
            "schema": PLAN_SCHEMA,
            "fits": self.fits,
            "source": self.source,
            "hyperparameters": self.hyperparameters,
            "defaulted": self.defaulted,
            "passed_through": self.passed_through,
            "shape": {
                "dataset_rows": shape.dataset_rows,
                "steps_per_epoch": shape.steps_per_epoch,
                "steps": shape.steps,
                "epochs": shape.epochs,
                "ends_by": shape.ends_by,
                "prompts_per_step": shape.global_batch_size,
                "rollouts_per_step": shape.rollouts_per_step,
                "rollouts": shape.steps * shape.rollouts_per_step,
                "attempts": self.source["recorded"]["attempts_per_slot"]
                * shape.steps
                * shape.rollouts_per_step,
            },
            "tokens": {name: asdict(band) for name, band in self.tokens.items()},
            "cost": {k: asdict(v) if isinstance(v, Band) else v for k, v in self.cost.items()},
            "wall_clock": self.wall_clock,
            "assumptions": asdict(self.assumptions),
            "flags": [asdict(f) for f in self.flags],
            **({"auxiliary": self.auxiliary} if self.auxiliary is not None else {}),
        }


def _cost(
    units: Sequence[Mapping[str, tuple[float, float]]], count: int, pricing: Pricing
) -> dict[str, Any]:
    prices = {
        "prefill": pricing.prefill_per_million / 1e6,
        "sample": pricing.sample_per_million / 1e6,
        "train": pricing.train_per_million / 1e6,
    }
    return {
        **{name: sum_band(combined(units, {name: p}), count) for name, p in prices.items()},
        "total": sum_band(combined(units, prices), count),
        "currency": pricing.currency,
        "label": pricing.label,
        "source": pricing.source,
    }


def _wall_clock(
    shape: JobShape, busy: Band, recorded: RecordedRun, settings: PlanSettings
) -> dict[str, Any]:
    quota = session_quota(settings.region)
    concurrency = max(1, min(shape.rollout_max_concurrency, quota - settings.other_sessions))
    n = shape.rollouts_per_step
    starting = n / settings.invocations_per_s
    ordered = sorted(recorded.durations)
    low = max(starting, busy.p10 / concurrency, quantile(ordered, 0.9))
    high = starting + busy.p90 / concurrency + ordered[-1]
    step = {"low": low + settings.train_step_s, "high": high + settings.train_step_s}
    return {
        "region": settings.region,
        "session_quota": quota,
        "concurrency": concurrency,
        "invocations_per_s": settings.invocations_per_s,
        "paced_by": "invocation rate" if starting >= busy.p50 / concurrency else "concurrency",
        "step_rollouts_s": {"low": low, "high": high},
        "train_step_s": settings.train_step_s,
        "step_s": step,
        "total_s": {"low": shape.steps * step["low"], "high": shape.steps * step["high"]},
    }


def _session_flags(
    shape: JobShape, figures: Mapping[str, Any], settings: PlanSettings
) -> list[Flag]:
    """Sessions that outlast a limit, and concurrency beyond the region's session quota."""
    seconds, flags = figures["session_s"], []
    limits = (
        (SYNC_REQUEST_LIMIT_S, "sync-request-limit", "AgentCore's 15-minute request limit"),
        (shape.rollout_timeout, "rollout-timeout", f"rollout_timeout {shape.rollout_timeout} s"),
    )
    for limit, code, what in limits:
        if seconds["p99"] > limit:
            text = f"the recorded p99 session ({seconds['p99']:.0f} s) exceeds {what}"
            flags.append(Flag("error", code, text))
        elif seconds["max"] > limit:
            text = f"the longest recorded session ({seconds['max']:.0f} s) exceeds {what}"
            flags.append(Flag("warning", code, text))
    quota = session_quota(settings.region)
    if shape.rollout_max_concurrency + settings.other_sessions > quota:
        text = (
            f"rollout_max_concurrency {shape.rollout_max_concurrency} + "
            f"{settings.other_sessions} other sessions exceed the {quota} concurrent "
            f"sessions of {settings.region}"
        )
        flags.append(Flag("error", "session-quota", text))
    return flags


def _flags(
    shape: JobShape,
    figures: Mapping[str, Any],
    wall: Mapping[str, Any],
    settings: PlanSettings,
    local_max_tokens: int | None,
) -> list[Flag]:
    """Everything the plan cannot fit (errors) or that weakens it (warnings)."""
    longest, limit = figures["max_completion_tokens_per_turn"], shape.sampling_max_tokens
    rows, batch = shape.dataset_rows, shape.global_batch_size
    rate = f"{settings.invocations_per_s:g}"
    checks: list[tuple[bool, Literal["error", "warning"], str, str]] = [
        (longest > limit, "error", "sampling-max-tokens",
         f"a recorded turn generated {longest} tokens, over sampling_max_tokens {limit}: "
         "the job truncates such turns"),
        (local_max_tokens is not None and local_max_tokens < limit, "warning", "local-max-tokens",
         f"the run capped turns at {local_max_tokens} tokens, the job allows {limit}: "
         "sample tokens may run higher"),
        (wall["paced_by"] == "invocation rate", "warning", "invocation-rate",
         f"rollouts end faster than {rate} invocations/s can start them: the invocation "
         "quota, not concurrency, sets the pace"),
        (rows is None, "warning", "dataset-size-unknown",
         "no dataset size: the plan assumes max_steps ends the job"),
        (rows is not None and rows < batch, "warning", "dataset-smaller-than-batch",
         f"the dataset ({rows} rows) is smaller than one batch ({batch} prompts)"),
        (figures["groups"] < _FEW_GROUPS, "warning", "few-recorded-groups",
         f"only {figures['groups']} recorded prompt groups: the bands are rough"),
        (figures["estimated_tokens"], "warning", "estimated-tokens",
         "some recorded token counts are estimates (the policy reported no usage)"),
    ]  # fmt: skip
    flags = _session_flags(shape, figures, settings)
    return flags + [Flag(level, code, text) for hit, level, code, text in checks if hit]


def _latency_flag(
    rollouts: Sequence[Rollout], policy: str | None, settings: PlanSettings
) -> Flag | None:
    """A warning when the recorded policy calls are no model's (a scripted, random or replayed
    policy, or a median call under :data:`MODEL_LATENCY_FLOOR_S`) and no ``--turn-latency``
    replaces them: the wall clock would be the agent's and the emulator's alone."""
    if settings.turn_latency_s is not None:
        return None
    latencies = sorted(t.latency_ms / 1000.0 for r in rollouts for t in r.turn_rows)
    if not latencies:
        return None
    median = quantile(latencies, 0.5)
    scheme = (policy or "").split(":", 1)[0]
    if scheme not in _NOT_A_MODEL and median >= MODEL_LATENCY_FLOOR_S:
        return None
    what = f"the {scheme} policy" if scheme in _NOT_A_MODEL else "the recorded policy"
    return Flag(
        "warning",
        "policy-latency",
        f"the recorded policy calls took {median * 1000:.0f} ms each (median; {what}, not a "
        "model's latency), so the planned wall clock is the agent's time alone: pass "
        "--turn-latency S, the seconds one call of the job's model takes (e.g. "
        f"--turn-latency {_SUGGESTED_TURN_LATENCY_S} for a 20B model)",
    )


#: The projection rule of the run summary and ``job plan``, in words (both print it).
PROJECTION_RULE: Final = (
    "p50 of the recorded tokens per prompt group, retries included; train tokens only from "
    "groups whose rewards differ"
)


def project_tokens(
    groups: Sequence[Sequence[Slot]],
    *,
    prompt_groups: int,
    group_size: int,
    pricing: Pricing,
) -> tuple[dict[str, Band], dict[str, Any]]:
    """(token bands, cost bands) of a job of ``prompt_groups`` prompt groups of ``group_size``
    rollouts, from a recorded run's prompt groups (:func:`read_recorded`): the one projection
    rule of the run summary's projection and of :func:`plan_job` (:data:`PROJECTION_RULE`)."""
    units = [group_unit(group, group_size) for group in groups]
    tokens = {name: sum_band([u[name] for u in units], prompt_groups) for name in _TOKENS}
    tokens["total"] = sum_band(combined(units, dict.fromkeys(_TOKENS, 1.0)), prompt_groups)
    return tokens, _cost(units, prompt_groups, pricing)


def plan_job(
    rollouts: Sequence[Rollout],
    shape: JobShape,
    pricing: Pricing,
    settings: PlanSettings | None = None,
    *,
    hyperparameters: Mapping[str, Any] | None = None,
    passed_through: Sequence[str] = (),
    source: Mapping[str, Any] | None = None,
    local_max_tokens: int | None = None,
    policy: str | None = None,
) -> JobPlan:
    """Plan the job of ``shape`` from a recorded run's ``rollouts`` (loaded ``with_turns``, so
    policy latency and per-turn completions count); see the module docstring for the method.
    ``policy`` is the run's policy spec: a plan of a scripted, random or replayed policy's
    latency is flagged (``policy-latency``) unless ``settings.turn_latency_s`` replaces it.

    Raises :class:`UsageError` when the run has no rewarded rollout.
    """
    settings = settings or PlanSettings()
    recorded = read_recorded(rollouts, settings.turn_latency_s, settings.agent_scale)
    units = [group_unit(group, shape.group_size) for group in recorded.groups]
    tokens, cost = project_tokens(
        recorded.groups,
        prompt_groups=shape.steps * shape.global_batch_size,
        group_size=shape.group_size,
        pricing=pricing,
    )
    busy = sum_band([u["busy"] for u in units], shape.global_batch_size)
    wall = _wall_clock(shape, busy, recorded, settings)
    figures = recorded_figures(recorded)
    return JobPlan(
        source={**(source or {}), "recorded": figures},
        hyperparameters={
            **{name: getattr(shape, name) for name in _SHAPE_NAMES},
            **(hyperparameters or {}),
        },
        passed_through=list(passed_through),
        shape=shape,
        tokens=tokens,
        cost=cost,
        wall_clock=wall,
        assumptions=settings,
        flags=_flags(shape, figures, wall, settings, local_max_tokens)
        + [f for f in (_latency_flag(rollouts, policy, settings),) if f is not None],
        defaulted=[name for name in _SHAPE_NAMES if name not in (hyperparameters or {})],
    )
