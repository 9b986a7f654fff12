"""What a caller of the job driver hooks into a job: :class:`JobHooks`, passed down once.

- ``progress`` gets a :class:`Progress` snapshot after every change (the live display);
- ``on_step`` is awaited at every step boundary with a :class:`StepBoundary` (a trainer updates
  the policy there, before the next step samples it);
- ``finish`` writes the run's outputs as the job ends (:data:`RunFinisher`: summary.json and
  report.html for :func:`agent_kit.driver.local.run_local`);
- ``stop`` is the graceful stop: once set, no new rollout starts (see
  :mod:`agent_kit.driver.stop`);
- ``lock`` is the run directory's lock when the caller took it already (``agent-kit train``
  takes it before loading its model): the driver plays under it instead of taking its own, and
  leaves its release to the caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent_kit.store import RunStore
from agent_kit.store.runlock import RunLock

if TYPE_CHECKING:
    from agent_kit.reporting.summary_schema import Summary

__all__ = [
    "JobHooks",
    "Progress",
    "ProgressHook",
    "RunFinisher",
    "StepBoundary",
    "TrainHook",
]


@dataclass(frozen=True)
class Progress:
    """A snapshot of a running job, handed to the progress hook after every change."""

    total: int
    done: int
    succeeded: int
    failed: int
    retried: int
    in_flight: int
    reward_mean: float | None
    elapsed: float
    rate: float
    eta: float | None
    step: int
    steps: int
    job_failures: int


ProgressHook = Callable[[Progress], None]


@dataclass(frozen=True)
class StepBoundary:
    """A step boundary of a job: ``step`` is the step about to start, or ``steps`` once the
    last one is over."""

    store: RunStore
    job_arn: str
    run_dir: Path
    step: int
    steps: int


TrainHook = Callable[[StepBoundary], Awaitable[None]]
"""``JobHooks.on_step``: awaited at every step boundary, in the job's event loop (a trainer
updates the policy there, off the loop, before the next step samples it)."""

RunFinisher = Callable[[RunStore, str, Path, "str | None"], "Summary"]
"""Called once as a job ends, before its store closes: ``(store, job_arn, run_dir, token) ->
summary``. The driver has stored its own figures (the ``run`` section) with the job first; the
finisher writes the run's outputs (summary.json, report.html) and returns the summary. The
route ``token``, if any, must not appear in what it writes
(:func:`~agent_kit.driver.job_stats.redact_summary`)."""


@dataclass(frozen=True)
class JobHooks:
    """The hooks of one job (see the module docstring); all optional."""

    progress: ProgressHook | None = None
    on_step: TrainHook | None = None
    finish: RunFinisher | None = None
    stop: asyncio.Event | None = None
    lock: RunLock | None = None
