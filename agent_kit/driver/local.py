"""Run a local job and write its outputs: the facade over the driver and the reporting half."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from agent_kit.driver.job import JobResult, redact_summary, run_job
from agent_kit.driver.tunnel import redact
from agent_kit.errors import RunStoreError
from agent_kit.reporting.report import REPORT_FILE, SUMMARY_FILE, write_reports
from agent_kit.reporting.summary import summarize
from agent_kit.store import RunStore, load_rollouts
from agent_kit.store.events import REPORT_ERROR_EVENT

__all__ = ["REPORT_ERROR_EVENT", "run_local", "write_run_outputs"]

logger = logging.getLogger("agent_kit.runs")

#: Store event recorded when report.html could not be rendered (summary.json is still written).


def write_run_outputs(
    store: RunStore, job_arn: str, run_dir: Path, token: str | None = None
) -> dict[str, Any]:
    """Summarize the job from its store and write ``summary.json`` and ``report.html``.

    A report that fails to render never costs the summary: the error is recorded as a
    ``report_error`` event, logged, and ``summary.json`` is written alone. A route ``token`` is
    scrubbed from both files. Returns the summary.
    """
    records = load_rollouts(store, job_arn)  # read once, for the summary and the report
    summary = redact_summary(summarize(store, job_arn, records=records), token)
    try:
        paths: tuple[Path, ...] = write_reports(run_dir, summary, store, records=records)
    except OSError as exc:  # the directory cannot be written: no file of ours can land there
        raise RunStoreError(
            f"cannot write the summary into {run_dir}: {exc.strerror or exc} (run.sqlite keeps "
            "what was recorded; `agent-kit report RUN_DIR --html` writes it later)"
        ) from None
    except Exception as exc:  # noqa: BLE001 - a report bug must not lose the run's summary
        error = f"{type(exc).__name__}: {exc}"
        store.add_event(REPORT_ERROR_EVENT, {"error": error})
        logger.warning("report.html of %s was not written: %s", job_arn, error)
        (run_dir / REPORT_FILE).unlink(missing_ok=True)
        paths = (run_dir / SUMMARY_FILE,)
        paths[0].write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    if token:
        for path in paths:
            text = path.read_text(encoding="utf-8")
            if token in text:
                path.write_text(redact(text, token), encoding="utf-8")
    return summary


async def run_local(
    entrypoint: str | None, dataset: str | Path | None, *args: Any, **options: Any
) -> JobResult:
    """:func:`~agent_kit.driver.job.run_job` (same arguments) with the run's outputs
    written as it ends (:func:`write_run_outputs`), interrupted or not."""
    return await run_job(entrypoint, dataset, *args, finish=write_run_outputs, **options)
