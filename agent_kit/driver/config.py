"""One local run, as a value: :class:`RunConfig` (what ``agent-kit run`` parses its options into).

A run is the job's settings (:class:`~agent_kit.driver.rollouts.JobConfig`, the service's
hyper-parameters) plus where it plays: the agent, the dataset, the run directory (new or
resumed), how the agent is reached and how long a graceful stop waits. The job's settings are
composed, not copied: a resumed run has none (it plays with the ones it recorded).
:func:`agent_kit.driver.local.play_local` plays a :class:`RunConfig`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agent_kit.driver.job import DEFAULT_STOP_GRACE_S
from agent_kit.driver.rollouts import JobConfig
from agent_kit.errors import UsageError

__all__ = ["RunConfig"]


@dataclass(frozen=True)
class RunConfig:
    """Everything one local run needs, checked before anything starts.

    ``job`` is None for a resumed run (``resume`` set): it keeps the settings it recorded, and
    ``entrypoint`` / ``dataset`` default to the recorded ones. ``out`` is the parent directory of
    new run directories; ``workers`` the agent processes of a ``.py`` entrypoint (None: one per
    usable core); ``rate`` an invocations-per-second cap; ``endpoint_url`` the AWS endpoint
    override of an ARN target; ``advertise_url`` / ``emulator_port`` the tunnel of a deployed
    agent (see :mod:`agent_kit.driver.tunnel`); ``grace`` the seconds in-flight rollouts get
    after a graceful stop; ``max_floor_rate`` the largest share of finished rollouts that may
    get the agent's floor reward before the job's status is ``rollouts_failed`` (None: the
    driver's default, :data:`~agent_kit.driver.job.DEFAULT_MAX_FLOOR_RATE`). Constructing one
    with a negative ``grace`` or a ``max_floor_rate`` outside 0..1 raises
    :class:`~agent_kit.errors.UsageError`. ``lenient_auth`` stops the emulator from verifying
    the signatures of the agents the run starts (only their shape is checked).
    """

    entrypoint: str | None = None
    dataset: Path | None = None
    job: JobConfig | None = None
    out: Path = Path("runs")
    resume: Path | None = None
    workers: int | None = None
    rate: float | None = None
    endpoint_url: str | None = None
    advertise_url: str | None = None
    emulator_port: int | None = None
    grace: float = DEFAULT_STOP_GRACE_S
    max_floor_rate: float | None = None
    lenient_auth: bool = False
    #: ``--agent-memory``: bytes each local agent process may hold, all it started included.
    agent_memory: int | None = None

    def __post_init__(self) -> None:
        if self.agent_memory is not None and self.agent_memory <= 0:
            raise UsageError(f"--agent-memory must be positive, got {self.agent_memory}")
        if self.grace < 0:
            raise UsageError(f"--grace must be ≥ 0, got {self.grace:g}")
        rate = self.max_floor_rate
        if rate is not None and not 0 <= rate <= 1:
            raise UsageError(f"--max-floor-rate must be 0..1, got {rate:g}")

    def check(self) -> None:
        """Refuse option combinations that cannot work, before anything starts; for a new run,
        make sure ``out`` is a directory this process can create and write run directories in
        (creating it). Raises :class:`~agent_kit.errors.UsageError` naming the option."""
        if self.resume is None and (self.entrypoint is None or self.dataset is None):
            raise UsageError("give ENTRYPOINT and --dataset (or --resume RUN_DIR)")
        if self.advertise_url is not None and self.resume is None and not self.emulator_port:
            raise UsageError(
                "--advertise-url needs --emulator-port N: the fixed local port your tunnel "
                "forwards to (e.g. ssh -R 443:127.0.0.1:N, cloudflared --url http://127.0.0.1:N)"
            )
        if self.resume is None:
            _check_out(self.out)


def _check_out(out: Path) -> None:
    """``--out`` must be a directory this process can create and write run directories in."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out} cannot be created: {exc.strerror or exc}") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out} is not writable")
