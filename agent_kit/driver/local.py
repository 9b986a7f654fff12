"""Run a local job and write its outputs: the facade over the driver and the reporting half.

:func:`run_local` is :func:`~agent_kit.driver.job.run_job` with ``summary.json`` and
``report.html`` written as the job ends; :func:`play_local` plays a whole
:class:`~agent_kit.driver.config.RunConfig` in its own event loop, stopped gracefully by the
first SIGINT/SIGTERM and aborted by a second (:mod:`agent_kit.driver.stop`): what
``agent-kit run`` calls.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from dataclasses import dataclass, replace
from pathlib import Path

from agent_kit.driver.config import RunConfig
from agent_kit.driver.hooks import JobHooks, ProgressHook
from agent_kit.driver.invokers import Invoker
from agent_kit.driver.job import JobResult, run_job
from agent_kit.driver.job_stats import redact_summary
from agent_kit.driver.stop import StopHook, play_stoppable
from agent_kit.driver.tunnel import redact
from agent_kit.emulator.policies import PolicyBackend
from agent_kit.errors import RunStoreError
from agent_kit.reporting.report import write_reports
from agent_kit.reporting.summary import summarize
from agent_kit.reporting.summary_schema import Summary
from agent_kit.store import RunStore, load_rollouts
from agent_kit.store.events import REPORT_ERROR_EVENT
from agent_kit.store.layout import RunLayout

__all__ = ["LocalRun", "play_local", "run_local", "write_run_outputs"]

logger = logging.getLogger("agent_kit.driver.local")


def write_run_outputs(
    store: RunStore, job_arn: str, run_dir: Path, token: str | None = None
) -> Summary:
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
        RunLayout(run_dir).report.unlink(missing_ok=True)
        paths = (RunLayout(run_dir).summary,)
        text = json.dumps(summary.document(), indent=2, default=str)
        paths[0].write_text(text + "\n", encoding="utf-8")
    if token:
        for path in paths:
            text = path.read_text(encoding="utf-8")
            if token in text:
                path.write_text(redact(text, token), encoding="utf-8")
    return summary


async def run_local(
    config: RunConfig,
    hooks: JobHooks | None = None,
    *,
    invoker: Invoker | None = None,
    policy: PolicyBackend | None = None,
) -> JobResult:
    """:func:`~agent_kit.driver.job.run_job` (same arguments) with the run's outputs
    written as it ends (:func:`write_run_outputs`), interrupted or not."""
    hooks = replace(hooks or JobHooks(), finish=write_run_outputs)
    return await run_job(config, hooks, invoker=invoker, policy=policy)


@dataclass(frozen=True)
class LocalRun:
    """A run played by :func:`play_local`: the job's result and the signal that stopped it.

    ``stopped_by`` is the first SIGINT/SIGTERM received (the result's status is then
    ``interrupted``), or None when no signal came.
    """

    result: JobResult
    stopped_by: signal.Signals | None


def play_local(
    config: RunConfig, *, progress: ProgressHook | None = None, on_stop: StopHook | None = None
) -> LocalRun:
    """Play ``config`` to its end in a new event loop, its outputs written as it ends.

    The first SIGINT/SIGTERM stops the job gracefully (``config.grace`` seconds for the
    rollouts in flight) and calls ``on_stop`` with the signal; the result then has status
    ``interrupted``. A second one aborts at once: the store is closed and the summary written,
    then :class:`~agent_kit.errors.Aborted` is raised. ``progress`` gets every progress
    snapshot. Raises what :func:`run_local` raises for bad settings or an agent that cannot
    start. Call :meth:`RunConfig.check` first to refuse bad options before anything is created.
    """

    async def job(stopped: asyncio.Event) -> JobResult:
        return await run_local(config, JobHooks(progress=progress, stop=stopped))

    result, first = play_stoppable(job, on_stop)
    return LocalRun(result=result, stopped_by=first)
