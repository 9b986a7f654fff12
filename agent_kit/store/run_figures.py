"""The job driver's own figures, as it stores them with its job: the summary's ``run`` section.

The driver (:func:`agent_kit.driver.job_stats.driver_stats`) fills :class:`RunFigures` as a job
ends and stores it in the job row (``{"run": figures}``); the summary
(:class:`agent_kit.reporting.summary_schema.Summary`) carries it over as its ``run`` section.
It lives in the store room because both the driver and the reporting half read it, and the
reporting half may not import the driver.

Every field is optional and a figures section dumps only the fields it was given, in the
order declared here (then any unknown ones, kept as they were): a row written by an older
agent_kit, or a hand-made partial one, reads back and is written again as it was, except that
the slot counts an older agent_kit stored under rollout names (``rollouts_total``,
``rollouts_succeeded``, ``rollouts_failed``, ``rollouts_per_s``: :data:`OLD_NAMES`) read back,
and are written again, under their slot names. :func:`run_figures_of` is the one reader of a
job row's figures.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from agent_kit.store.rows import JobRow

__all__ = ["OLD_NAMES", "ROLLOUTS_FAILED", "JobFailureNote", "RunFigures", "run_figures_of"]

#: The status of a job that played every slot but whose rollouts failed as a whole: none got a
#: real reward, or too many got the agent's floor reward
#: (:func:`agent_kit.driver.job_stats.rollouts_verdict`; ``failure_reason`` says which).
#: Not ``failed``, which is only the service's job failure: such a run stays resumable.
ROLLOUTS_FAILED: Final = "rollouts_failed"


#: The slot counts' names before ``agent_kit.summary/2`` (they said rollouts but counted slots),
#: old name → field. Stored figures and version-1 summaries still carry them.
OLD_NAMES: Final = {
    "rollouts_total": "slots_total",
    "rollouts_succeeded": "slots_succeeded",
    "rollouts_failed": "slots_failed",
    "rollouts_per_s": "slots_per_s",
}


def _slot_count(old: str) -> Any:
    """A slot count's field, read under its own name or the rollout name it had before."""
    new = OLD_NAMES[old]
    return Field(default=None, validation_alias=AliasChoices(new, old))


class _AsGiven(BaseModel):
    """Unknown keys are kept; a dump holds only the fields that were given (None included)."""

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if key in self.model_fields_set}


class JobFailureNote(_AsGiven):
    """One job failure as the driver recorded it (a ``job_failure`` event's detail)."""

    reason: str | None = None
    trajectory_id: str | None = None
    step: int | None = None
    prompt_index: int | None = None
    sample_index: int | None = None


class RunFigures(_AsGiven):
    """The driver's figures of one job, counted from the store as the job ended (so a resumed
    run reports the same totals as an uninterrupted one); only ``slots_per_s`` is of the
    last invocation. None where the driver had no figure (or an older row has no field).

    ``trajectories``, ``trajectories_by_state``, ``retries`` and ``rewarded`` count rollouts
    (attempts); ``slots_*`` count slots (step × prompt × sample, whatever its attempts):
    ``slots_total`` the planned job, ``slots_succeeded`` those with a rewarded attempt,
    ``slots_failed`` those finished without one, ``slots_per_s`` slots finished per second."""

    model_config = ConfigDict(populate_by_name=True)

    job_arn: str | None = None
    status: str | None = None
    failure_reason: str | None = None
    trajectories: int | None = None
    trajectories_by_state: dict[str, int] | None = None
    slots_total: int | None = _slot_count("rollouts_total")
    slots_succeeded: int | None = _slot_count("rollouts_succeeded")
    slots_failed: int | None = _slot_count("rollouts_failed")
    retries: int | None = None
    rewarded: int | None = None
    reward_mean: float | None = None
    turns: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    job_failures: list[JobFailureNote] | None = None
    elapsed_s: float | None = None
    slots_per_s: float | None = _slot_count("rollouts_per_s")

    def stored(self) -> dict[str, Any]:
        """The figures as stored in the job row and written in ``summary.json`` (JSON-ready)."""
        return self.model_dump(mode="json")


def run_figures_of(job: JobRow) -> RunFigures | None:
    """The driver's figures stored with ``job``; None when it has none (a job the driver did
    not finish, a replay's job) or when they do not read as figures at all."""
    section = (job.summary or {}).get("run")
    if not isinstance(section, dict):
        return None
    try:
        return RunFigures.model_validate(section)
    except ValidationError:
        return None
