"""A dev loop's settings, checked before anything starts, and the job each iteration plays.

The grid's job takes its sampling settings, seed, success threshold, timeouts and policy from
the baseline's recorded job when there is one, else from the defaults of ``agent-kit run``
(:class:`~agent_kit.driver.config.JobConfig`); ``--policy`` overrides the policy, which
otherwise is the baseline's, else the project's default (:func:`~agent_kit.dev.sources.
default_policy`: ``DEFAULT_POLICY`` in a ``policies.py`` beside the entrypoint), else
``agent-kit run``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent_kit.dev.sources import default_policy
from agent_kit.driver.config import GROUP_SIZE, MAX_BATCH_SIZE, JobConfig, RunConfig, resolve_spec
from agent_kit.driver.invokers.local import MAX_WORKERS
from agent_kit.errors import UsageError
from agent_kit.settings import DEFAULTS, Settings
from agent_kit.store import resolve_path

__all__ = ["DEFAULT_KEEP", "DEFAULT_OUT", "DEFAULT_PROMPTS", "DEFAULT_SAMPLES", "DevOptions"]

#: The grid's rows and samples per row, and the iterations kept, unless told otherwise.
DEFAULT_PROMPTS: Final = 4
DEFAULT_SAMPLES: Final = 2
DEFAULT_KEEP: Final = 5
#: Where the iterations' directories go.
DEFAULT_OUT: Final = Path("runs/dev")
#: The job settings the grid takes from the baseline's job, else from ``agent-kit run``'s
#: defaults (module docstring); every other setting is ``agent-kit run``'s default.
_KEPT_SETTINGS: Final = (
    "aux_policy",
    "rollout_timeout",
    "max_retries",
    "temperature",
    "top_p",
    "max_tokens",
    "success_threshold",
    "seed",
    "region",
)


@dataclass(frozen=True)
class DevOptions:
    """What ``agent-kit dev`` was asked (see the module docstring and docs/dev.md)."""

    entrypoint: Path
    dataset: Path
    policy: str | None = None
    baseline: Path | None = None
    prompts: int = DEFAULT_PROMPTS
    samples: int = DEFAULT_SAMPLES
    out: Path = DEFAULT_OUT
    keep: int = DEFAULT_KEEP
    workers: int = 1
    settings: Settings = DEFAULTS

    def check(self) -> None:
        """Refuse what cannot work (UsageError naming the option); creates ``out``."""
        if self.entrypoint.suffix != ".py" or not self.entrypoint.is_file():
            raise UsageError(f"ENTRYPOINT must be an entrypoint file (.py): {self.entrypoint}")
        if not self.dataset.is_file():
            raise UsageError(f"dataset not found: {self.dataset}")
        if not 1 <= self.prompts <= MAX_BATCH_SIZE:
            raise UsageError(f"--prompts must be 1..{MAX_BATCH_SIZE}, got {self.prompts}")
        if not GROUP_SIZE.holds(self.samples):
            raise UsageError(f"--samples must be {GROUP_SIZE.words()}, got {self.samples}")
        if self.keep < 1:
            raise UsageError(f"--keep must be ≥ 1, got {self.keep}")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise UsageError(f"--workers must be 1..{MAX_WORKERS}, got {self.workers}")
        if self.baseline is not None and not resolve_path(self.baseline).is_file():
            raise UsageError(f"--baseline {self.baseline} holds no run (no run.sqlite)")
        # The same checks as ``agent-kit run``'s: ``--out`` is created and writable.
        RunConfig(entrypoint=str(self.entrypoint), dataset=self.dataset, out=self.out).check()

    def job(self, baseline: JobConfig | None) -> JobConfig:
        """The grid's job (module docstring), ``samples`` per row, one step."""
        base = baseline if baseline is not None else JobConfig()
        policy = self.policy or (baseline.policy if baseline is not None else None)
        policy = policy or default_policy(self.entrypoint) or base.policy
        kept = {name: getattr(base, name) for name in _KEPT_SETTINGS}
        return JobConfig(policy=resolve_spec(policy), group_size=self.samples, steps=1, **kept)
