"""The ``summary.json`` document: its pydantic models, version ``agent_kit.summary/2``.

:class:`Summary` is what :func:`agent_kit.reporting.summary.summarize` returns and what every
reader of a summary (terminal, HTML report, comparison, MLflow export, doctor, CLI) takes; the
other models are its sections, and the driver's ``run`` section is
:class:`~agent_kit.store.run_figures.RunFigures`. Every model of this module forbids unknown
fields, and undefined statistics are ``None`` (``null`` in JSON), never NaN. A summary becomes
JSON only where it is written (:meth:`Summary.document`); a ``summary.json`` is read back
through :func:`read_summary`. Re-exported from :mod:`agent_kit.reporting.summary`.

Version 2 renamed the counts that said rollouts but counted slots: the projection's
``rollouts`` and ``tokens_per_rollout`` are ``slots`` and ``tokens_per_slot``, the ``run``
section's ``rollouts_total``/``_succeeded``/``_failed``/``_per_s`` are ``slots_*``
(:data:`~agent_kit.store.run_figures.OLD_NAMES`). A version-1 document still reads: its old
names are mapped on read (:meth:`Summary._from_version_1`) and it reads as version 2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent_kit.contract import TrajectoryState
from agent_kit.store.run_figures import OLD_NAMES, RunFigures

__all__ = [
    "SUMMARY_SCHEMA",
    "SUMMARY_SCHEMA_V1",
    "AgentFailure",
    "AuxKindFigures",
    "Auxiliary",
    "ChaosFault",
    "ChaosSection",
    "CostInfo",
    "Counts",
    "FailureCount",
    "JobInfo",
    "Number",
    "Projection",
    "RolloutBrief",
    "Settings",
    "StepRow",
    "Summary",
    "Timing",
    "Tokens",
    "flat_config",
    "read_summary",
]

#: The ``schema`` tag of a summary document.
SUMMARY_SCHEMA: Final = "agent_kit.summary/2"

#: The tag of the version before: read, mapped to version 2, never written.
SUMMARY_SCHEMA_V1: Final = "agent_kit.summary/1"

#: Version 1's names of the projection's slot counts, old name → field.
_OLD_PROJECTION_NAMES: Final = {"rollouts": "slots", "tokens_per_rollout": "tokens_per_slot"}

#: A statistic that is undefined (``None``) when there is nothing to compute it over.
Number = float | None


def flat_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A job config flattened: the driver nests its settings under ``"job"``; those win over
    the top level's."""
    nested = config.get("job")
    return {**config, **nested} if isinstance(nested, dict) else dict(config)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class JobInfo(_Strict):
    """Identity and status of the summarized job."""

    arn: str
    name: str
    status: str
    created_at: float
    mode: Literal["training", "evaluation"]


class Settings(_Strict):
    """How the numbers were computed."""

    advantage: str
    advantage_eps: float
    std: Literal["population"] = "population"
    success_threshold: float
    pass_k: list[int]


class Counts(_Strict):
    """Trajectory and slot counts (a slot is one step × prompt × sample; attempts retry it).

    ``slots`` counts the whole planned job (steps × batch size × group size, when the config
    gives them), played or not; ``pending`` the slots without an outcome yet (in flight, cut
    short by a stop, or never started): ``slots = rewarded + lost + pending``."""

    trajectories: int
    by_state: dict[str, int]
    slots: int
    rewarded: int
    lost: int
    pending: int
    retries: int
    groups: int
    degenerate_groups: int
    turns: int

    @property
    def failed_rollouts(self) -> int:
        """Trajectories that ended without a reward (FAILED or TIMED_OUT)."""
        return self.by_state.get(TrajectoryState.FAILED.value, 0) + self.timed_out

    @property
    def timed_out(self) -> int:
        """Trajectories that ended TIMED_OUT."""
        return self.by_state.get(TrajectoryState.TIMED_OUT.value, 0)


class FailureCount(_Strict):
    """A failure reason and how many trajectories ended with it (one row of ``failures``)."""

    reason: str
    count: int


class AgentFailure(_Strict):
    """A reason the agent's own side failed (reset, tool, policy call, reward …), how many
    rollouts ended with it, how many of those were scored with the floor reward, and the first
    trajectory ids."""

    reason: str
    count: int
    floor_rewards: int
    trajectory_ids: list[str]


class Tokens(_Strict):
    """Token totals in the billing categories; ``estimated`` when any turn's usage was."""

    prefill: int
    sample: int
    train: int
    total: int
    turns: int
    estimated: bool
    estimated_turns: int
    per_rollout: dict[str, Number]


class CostInfo(_Strict):
    """A cost estimate per category with the pricing's label and source."""

    currency: str
    prefill: float
    sample: float
    train: float
    total: float
    label: str
    source: str
    estimated_tokens: bool


class AuxKindFigures(_Strict):
    """The auxiliary calls of one kind (``judge`` or ``user``)."""

    calls: int
    input_tokens: int
    output_tokens: int


class Auxiliary(_Strict):
    """Auxiliary model calls (LLM judges, simulated users): Bedrock on-demand tokens, counted
    and priced apart from MTRL's prefill/sample/train (``agent_kit.reporting.auxiliary``)."""

    calls: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    estimated: bool
    by_kind: dict[str, AuxKindFigures]
    calls_per_rollout: float
    tokens_per_rollout: float
    cost: float
    cost_per_rollout: float
    currency: str
    input_per_million: float
    output_per_million: float
    label: str


class Projection(_Strict):
    """``steps × batch_size × group_size`` slots at this run's tokens per slot (and, when the
    run made auxiliary calls, at its auxiliary calls per rollout)."""

    steps: int
    batch_size: int
    group_size: int
    slots: int
    tokens_per_slot: dict[str, float]
    tokens: dict[str, int]
    cost: CostInfo
    dataset_rows: int | None = None
    epochs: float | None = None
    text: str
    #: The run's auxiliary calls (judge, simulated user) per rollout × ``slots``, at the
    #: auxiliary price (:func:`agent_kit.reporting.auxiliary.plan_auxiliary`); None when the
    #: run made none.
    auxiliary: dict[str, Any] | None = None
    #: ``cost.total`` plus the auxiliary calls' cost: what the job would cost in all.
    total_cost: float | None = None


class StepRow(_Strict):
    """Per-step curves: reward and token figures of one training step."""

    step: int
    trajectories: int
    rewarded: int
    lost: int
    reward_mean: Number
    reward_std: Number
    reward_min: Number
    reward_max: Number
    valid_mean: Number
    zero_frac: Number
    turns_mean: Number
    advantage_abs_mean: Number
    prefill: int
    sample: int
    train: int


class RolloutBrief(_Strict):
    """One trajectory as listed among the slowest, lowest-scoring or failed rollouts."""

    id: str
    step: int
    prompt_index: int
    sample_index: int
    attempt: int
    state: str
    reward: Number
    turns: int
    tokens: int
    duration_s: float
    reason: str | None
    retry_of: str | None


class Timing(_Strict):
    """Wall-clock span of the recorded trajectories and the rollout rate."""

    started_at: Number
    ended_at: Number
    wall_s: float
    rollouts_per_s: Number


class ChaosFault(_Strict):
    """One injected fault of a chaos run: calls and rollouts it hit, how those ended."""

    fault: str
    calls: int
    rollouts: int
    #: Rollouts by outcome: recovered, floor, retried, lost, open (agent_kit.reporting.chaos).
    outcomes: dict[str, int]
    #: Up to five trajectory ids per outcome other than recovered.
    examples: dict[str, list[str]]


class ChaosSection(_Strict):
    """The chaos section: the ``--chaos`` spec, one row per fault that hit, the job's fate."""

    spec: str
    job_failed: bool
    faults: list[ChaosFault]


class Summary(_Strict):
    """The ``summary.json`` document, version ``agent_kit.summary/2`` (a version-1 document
    reads as one, see :meth:`_from_version_1`)."""

    schema_id: Literal["agent_kit.summary/2"] = Field(alias="schema")
    generated_at: float
    job: JobInfo
    config: dict[str, Any]
    settings: Settings
    counts: Counts
    failures: list[FailureCount]
    #: Agent-side failures (from the agent's invocation responses), most frequent first.
    agent_failures: list[AgentFailure] = Field(default_factory=list)
    #: Rewarded rollouts whose reward was the agent's floor reward.
    floor_rewards: int = 0
    metrics: dict[str, Number]
    tokens: Tokens
    cost: CostInfo
    projection: Projection | None
    steps: list[StepRow]
    timing: Timing
    slowest: list[RolloutBrief]
    failed: list[RolloutBrief]
    #: Rewarded rollouts, lowest reward first (ties: the earliest id), at most 10.
    lowest: list[RolloutBrief] = Field(default_factory=list)
    #: What ``--chaos`` injected and how the rollouts it hit ended (None without chaos).
    chaos: ChaosSection | None = None
    #: One-line advice the run's records call for (e.g. a new connection per policy call).
    hints: list[str] = Field(default_factory=list)
    #: Figures the job driver adds about its own run (progress counters, elapsed time).
    run: RunFigures | None = None
    #: Auxiliary model calls (judge, simulated user) and their Bedrock cost; None without any.
    auxiliary: Auxiliary | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_version_1(cls, data: Any) -> Any:
        """A version-1 document as version 2: the schema tag and the slot counts' old names
        (projection, ``run``) mapped to the new ones; anything else is left to validation."""
        if not isinstance(data, dict) or data.get("schema") != SUMMARY_SCHEMA_V1:
            return data
        data = {**data, "schema": SUMMARY_SCHEMA}
        for section, names in (("projection", _OLD_PROJECTION_NAMES), ("run", OLD_NAMES)):
            if isinstance(data.get(section), dict):
                data[section] = {names.get(k, k): v for k, v in data[section].items()}
        return data

    def flat_config(self) -> dict[str, Any]:
        """The job's config with the driver's nested settings merged in (:func:`flat_config`)."""
        return flat_config(self.config)

    @property
    def agent_failure_count(self) -> int:
        """Rollouts with an agent-side failure, over every reason."""
        return sum(failure.count for failure in self.agent_failures)

    def document(self) -> dict[str, Any]:
        """The ``summary.json`` content: JSON-ready, fields under their JSON names (``schema``),
        in the order declared here; what is written to a file or printed."""
        return self.model_dump(mode="json", by_alias=True)


def read_summary(path: Path) -> Summary | None:
    """The summary in the ``summary.json`` at ``path``; None when there is none to trust: no
    file, unreadable, not JSON, another schema, or not a valid :class:`Summary` (a file from
    another agent_kit version). A version-1 file reads as version 2. Callers then summarize
    the run store again."""
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    try:  # the schema tag is a Literal: another schema (but version 1) does not validate
        return Summary.model_validate(loaded)
    except ValidationError:
        return None
