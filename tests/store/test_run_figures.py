"""The driver's figures as stored with the job: typed, written back exactly as they were given."""

from __future__ import annotations

import json
from typing import Any

from agent_kit.store.rows import JobRow
from agent_kit.store.run_figures import JobFailureNote, RunFigures, run_figures_of

ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/figures"


def _job(summary: dict[str, Any] | None) -> JobRow:
    return JobRow(ARN, "figures", 1.0, {}, "completed", summary)


def test_partial_figures_dump_only_what_was_given() -> None:
    """A partial or older section (unknown keys included, after the known ones) is written
    back key for key, in the driver's order."""
    stored = {"failure_reason": None, "elapsed_s": 2.5, "from_an_older_version": [1, 2]}
    figures = RunFigures.model_validate(stored)
    assert figures.elapsed_s == 2.5
    assert figures.retries is None
    assert figures.stored() == stored
    assert json.dumps(figures.stored()) == json.dumps(stored)


def test_full_figures_keep_the_driver_order_and_typed_failures() -> None:
    """Figures built by keyword dump in the declared order, job failures as given."""
    note = {"reason": "boom", "trajectory_id": "t-1", "step": 0, "prompt_index": 1}
    failures = [JobFailureNote.model_validate(note)]
    figures = RunFigures(status="failed", retries=2, job_arn=ARN, job_failures=failures)
    assert list(figures.stored()) == ["job_arn", "status", "retries", "job_failures"]
    assert figures.stored()["job_failures"] == [note]


def test_run_figures_of_a_job_row() -> None:
    """The job row's ``run`` section is read as figures; none, another section or a section
    that is not figures at all reads as None."""
    assert run_figures_of(_job({"run": {"retries": 3}})) == RunFigures(retries=3)
    assert run_figures_of(_job(None)) is None
    assert run_figures_of(_job({"replay": {"turns": 4}})) is None
    assert run_figures_of(_job({"run": {"retries": "many"}})) is None


def test_figures_stored_under_the_old_rollout_names_still_load() -> None:
    """A job row written before the slot counts were renamed (``rollouts_total`` …) reads back
    with those counts under their slot names, and is written again under them."""
    old = {"status": "completed", "rollouts_total": 8, "rollouts_succeeded": 7}
    old |= {"rollouts_failed": 1, "rollouts_per_s": 2.5, "retries": 1}
    figures = run_figures_of(_job({"run": old}))
    assert figures is not None
    assert (figures.slots_total, figures.slots_succeeded, figures.slots_failed) == (8, 7, 1)
    assert figures.slots_per_s == 2.5
    assert figures.stored() == {
        "status": "completed",
        "slots_total": 8,
        "slots_succeeded": 7,
        "slots_failed": 1,
        "slots_per_s": 2.5,
        "retries": 1,
    }


def test_old_names_read_back_under_the_new_ones() -> None:
    """Figures stored under the slot counts' old rollout names validate into the new fields,
    and the new names are what is stored again."""
    figures = RunFigures.model_validate(
        {"rollouts_total": 4, "rollouts_succeeded": 3, "rollouts_failed": 1}
    )
    assert figures == RunFigures(slots_total=4, slots_succeeded=3, slots_failed=1)
    assert list(figures.stored()) == ["slots_total", "slots_succeeded", "slots_failed"]
