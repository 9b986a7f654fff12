"""The job driver's own figures, as it stores them with its job: the summary's ``run`` section.

The driver (:func:`agent_kit.driver.job_stats.driver_stats`) fills :class:`RunFigures` as a job
ends and stores it in the job row (``{"run": figures}``); the summary
(:class:`agent_kit.reporting.summary_schema.Summary`) carries it over as its ``run`` section.
It lives in the store room because both the driver and the reporting half read it, and the
reporting half may not import the driver.

Every field is optional and a figures section dumps only the fields it was given, in the
order declared here (then any unknown ones, kept as they were): a row written by an older
agent_kit, or a hand-made partial one, reads back and is written again as it was.
:func:`run_figures_of` is the one reader of a job row's figures.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from agent_kit.store.rows import JobRow

__all__ = ["ROLLOUTS_FAILED", "JobFailureNote", "RunFigures", "run_figures_of"]

#: The status of a job that played every slot but whose rollouts failed as a whole: none got a
#: real reward, or too many got the agent's floor reward
#: (:func:`agent_kit.driver.job_stats.rollouts_verdict`; ``failure_reason`` says which).
#: Not ``failed``, which is only the service's job failure: such a run stays resumable.
ROLLOUTS_FAILED: Final = "rollouts_failed"


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
    run reports the same totals as an uninterrupted one); only ``rollouts_per_s`` is of the
    last invocation. None where the driver had no figure (or an older row has no field)."""

    job_arn: str | None = None
    status: str | None = None
    failure_reason: str | None = None
    trajectories: int | None = None
    trajectories_by_state: dict[str, int] | None = None
    rollouts_total: int | None = None
    rollouts_succeeded: int | None = None
    rollouts_failed: int | None = None
    retries: int | None = None
    rewarded: int | None = None
    reward_mean: float | None = None
    turns: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    job_failures: list[JobFailureNote] | None = None
    elapsed_s: float | None = None
    rollouts_per_s: float | None = None

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
