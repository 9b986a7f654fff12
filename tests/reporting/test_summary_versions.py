"""summary.json versions: version 2 is written; a version-1 document still reads, its old
names of the slot counts mapped to the new ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes.rollouts import rollout
from pydantic import ValidationError

from agent_kit.reporting.summary import summarize_records
from agent_kit.reporting.summary_schema import (
    SUMMARY_SCHEMA,
    SUMMARY_SCHEMA_V1,
    Summary,
    read_summary,
)
from agent_kit.store import JobRow
from agent_kit.store.run_figures import RunFigures

JOB = JobRow(
    arn="arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/versions",
    name="versions",
    created_at=0.0,
    config={"group_size": 2, "batch_size": 1},
    status="completed",
    summary=None,
)


def _summary() -> Summary:
    records = [
        rollout("a0", sample_index=0, reward=1.0, prefill_tokens=100, sample_tokens=10),
        rollout("a1", sample_index=1, reward=0.0, prefill_tokens=120, sample_tokens=20),
    ]
    summary = summarize_records(JOB, records, projection_steps=3)
    summary.run = RunFigures(
        status="completed", slots_total=2, slots_succeeded=2, slots_failed=0, slots_per_s=4.0
    )
    return summary


def _as_version_1(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` as agent_kit wrote it before version 2."""
    old = json.loads(json.dumps(document))
    old["schema"] = SUMMARY_SCHEMA_V1
    projection = old["projection"]
    old["projection"] = {
        ("rollouts" if k == "slots" else "tokens_per_rollout" if k == "tokens_per_slot" else k): v
        for k, v in projection.items()
    }
    old["run"] = {k.replace("slots_", "rollouts_"): v for k, v in old["run"].items()}
    return old


def test_a_summary_is_written_as_version_2() -> None:
    """The document carries the version-2 tag and the slot counts under their slot names."""
    document = _summary().document()
    assert document["schema"] == SUMMARY_SCHEMA == "agent_kit.summary/2"
    assert document["projection"]["slots"] == 3 * 1 * 2
    assert set(document["projection"]["tokens_per_slot"]) == {"prefill", "sample", "train", "total"}
    assert document["run"]["slots_total"] == 2
    assert not any(key.startswith("rollouts_") for key in document["run"])


def test_a_version_1_document_reads_as_version_2(tmp_path: Path) -> None:
    """A version-1 summary.json (old rollout names) reads as the same summary, version 2."""
    summary = _summary()
    old = _as_version_1(summary.document())
    assert old["schema"] == "agent_kit.summary/1"
    assert old["projection"]["rollouts"] == 6
    assert "tokens_per_rollout" in old["projection"]
    assert old["run"]["rollouts_total"] == 2
    assert "rollouts_per_s" in old["run"]
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    assert read_summary(path) == summary
    assert Summary.model_validate(old).document() == summary.document()


def test_version_2_does_not_take_the_old_projection_names() -> None:
    """Only a version-1 document is mapped: a version-2 one with the old names is invalid."""
    document = _summary().document()
    old_names = _as_version_1(document)["projection"]
    with pytest.raises(ValidationError):
        Summary.model_validate({**document, "projection": old_names})
