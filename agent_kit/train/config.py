"""The settings of one ``agent-kit train`` run: the run it plays (a
:class:`~agent_kit.driver.config.RunConfig`, whose :class:`~agent_kit.driver.config.JobConfig`
holds the service's sampling hyper-parameters: ``group_size`` 2–32, ``batch_size`` as
``global_batch_size``, ``steps`` as ``max_steps``, ``max_tokens`` as ``sampling_max_tokens``)
plus what only training has: the model, the LoRA adapter, the optimiser and the holdout."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.errors import UsageError

__all__ = ["TRAIN_JOB", "TrainConfig"]

#: The job settings ``agent-kit train`` starts from, sized for a laptop's CPU: 10 steps of 2
#: prompts × 4 rollouts, 128 tokens a turn, a whole step (8 rollouts) in flight, so the ``hf``
#: policy samples the step's turns in one batch without the rollouts in flight sharing the cores
#: so thinly that a multi-turn agent's wall-clock budget cuts them (32 in flight on 2 cores cut
#: 24 of 32 Wordle rollouts).
TRAIN_JOB: Final = JobConfig(steps=10, group_size=4, batch_size=2, max_tokens=128, concurrency=8)

#: The job fields a training run records in ``train_config.json`` (flat, beside its own).
_JOB_FIELDS: Final = (
    "name",
    "steps",
    "group_size",
    "batch_size",
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "concurrency",
    "rollout_timeout",
)
#: The run fields it records.
_RUN_FIELDS: Final = ("entrypoint", "dataset", "out", "resume", "workers")


@dataclass(frozen=True)
class TrainConfig:
    """One training run: ``run`` is the local run it plays (entrypoint, dataset, run directory,
    workers, and the job's settings); the rest is training's own. ``micro_batch`` is how many
    rollouts one forward/backward pass holds (gradients accumulate over the step's
    ``batch_size × group_size`` rollouts; None: the largest divisor ≤ 4). ``warm_start`` names
    recorded runs whose good rollouts fine-tune the adapter before GRPO
    (:mod:`~agent_kit.train.warm`), each example cut to ``max_length`` tokens (None: the model's
    context, at most 4,096); ``force`` trains even when the preflight finds nothing to
    learn (:mod:`~agent_kit.train.preflight`). ``eval`` is the holdout, played ``eval_samples``
    times per prompt by the base, the warm start, the trained adapter and, with ``eval_every``
    N, the checkpoint of every Nth step (:mod:`~agent_kit.train.evaluate`)."""

    run: RunConfig
    model: str = "smollm2-135m"
    lora_r: int = 16
    lora_alpha: int | None = None
    learning_rate: float = 5e-5
    beta: float = 0.0
    micro_batch: int | None = None
    gradient_checkpointing: bool = False
    eval: Path | None = None
    eval_samples: int = 2
    eval_every: int | None = None
    device: str = "auto"
    warm_start: tuple[Path, ...] = ()
    warm_start_min_reward: float | None = None
    warm_start_epochs: int = 1
    warm_start_lr: float = 2e-4
    max_length: int | None = None
    force: bool = False
    outcome_gate: bool = False
    dynamic_sampling: int = 0
    filter_prompts: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def job(self) -> JobConfig:
        """The job's settings (:data:`TRAIN_JOB` where the run gives none)."""
        return self.run.job or TRAIN_JOB

    def with_job(self, **changes: Any) -> TrainConfig:
        """A copy whose job settings have ``changes``."""
        return replace(self, run=replace(self.run, job=replace(self.job, **changes)))

    def check(self) -> TrainConfig:
        """Refuse out-of-range settings with a UsageError naming the flag; return self. The
        job's own bounds are :meth:`JobConfig.validated`'s; these are the ones a local
        training step adds."""
        job = self.job
        job.validated(job.batch_size or 1)
        checks: list[tuple[bool, str]] = [
            (
                1 <= (job.batch_size or 1) <= 128,
                f"--batch-size must be 1..128, got {job.batch_size}",
            ),
            (1 <= self.lora_r <= 256, f"--lora-r must be 1..256, got {self.lora_r}"),
            (
                0 < self.learning_rate <= 1e-2,
                f"--learning-rate must be in (0, 0.01], got {self.learning_rate}",
            ),
            (0 <= self.beta <= 10, f"--beta must be 0..10, got {self.beta}"),
            (0 < job.temperature <= 2, f"--temperature must be in (0, 2], got {job.temperature}"),
            (1 <= job.max_tokens <= 8192, f"--max-tokens must be 1..8192, got {job.max_tokens}"),
            (
                2 <= self.eval_samples <= 32,
                f"--eval-samples must be 2..32 (a holdout run is a group), got {self.eval_samples}",
            ),
            (1 <= job.concurrency <= 256, f"--concurrency must be 1..256, got {job.concurrency}"),
            (
                1 <= self.warm_start_epochs <= 1000,
                f"--warm-start-epochs must be 1..1000, got {self.warm_start_epochs}",
            ),
            (
                0 < self.warm_start_lr <= 0.1,
                f"--warm-start-lr must be in (0, 0.1], got {self.warm_start_lr}",
            ),
            (
                0 <= self.dynamic_sampling <= 1024,
                f"--dynamic-sampling must be 0..1024 extra prompts a step, got "
                f"{self.dynamic_sampling}",
            ),
            (
                self.filter_prompts == 0 or 2 <= self.filter_prompts <= 32,
                f"--filter-prompts must be 0 (off) or 2..32 plays a prompt, got "
                f"{self.filter_prompts}",
            ),
            (
                self.max_length is None or 32 <= self.max_length <= 131072,
                f"--max-length must be 32..131072, got {self.max_length}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
        rollouts = self.rollouts_per_step
        if self.micro_batch is not None and not (
            1 <= self.micro_batch <= rollouts and rollouts % self.micro_batch == 0
        ):
            raise UsageError(
                f"--micro-batch must divide the step's {rollouts} rollouts, got {self.micro_batch}"
            )
        if self.eval is not None and not self.eval.is_file():
            raise UsageError(f"--eval file {self.eval} not found")
        if self.eval_every is not None:
            if self.eval is None:
                raise UsageError("--eval-every needs --eval HOLDOUT (the prompts it plays)")
            if not 1 <= self.eval_every <= job.steps:
                raise UsageError(
                    f"--eval-every must be 1..{job.steps} (--steps), got {self.eval_every}"
                )
        for run in self.warm_start:
            if not run.is_dir():
                raise UsageError(f"--warm-start run directory {run} not found")
        return self

    @property
    def rollouts_per_step(self) -> int:
        """Rollouts of one step: ``batch_size × group_size``."""
        return (self.job.batch_size or 1) * self.job.group_size

    def micro(self) -> int:
        """Rollouts per forward/backward pass (see the class docstring)."""
        if self.micro_batch is not None:
            return self.micro_batch
        n = self.rollouts_per_step
        return max(d for d in range(1, min(4, n) + 1) if n % d == 0)

    def to_dict(self) -> dict[str, Any]:
        """A flat JSON-ready dict (``train_config.json``, train.json's ``settings``): the run's
        and the job's fields beside training's own."""
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "run"}
        job = asdict(self.job)
        data = {
            **{k: getattr(self.run, k) for k in _RUN_FIELDS},
            **{k: job[k] for k in _JOB_FIELDS},
            **own,
        }
        data["warm_start"] = [str(p) for p in self.warm_start]
        return {k: str(v) if isinstance(v, Path) else v for k, v in data.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any], **run_changes: Any) -> TrainConfig:
        """The inverse of :meth:`to_dict` (unknown keys ignored), with ``run_changes`` applied
        to the run (e.g. ``resume``, ``workers`` given now)."""

        def path(key: str) -> Path | None:
            value = data.get(key)
            return Path(value) if value else None

        job = replace(TRAIN_JOB, **{k: data[k] for k in _JOB_FIELDS if k in data})
        run = RunConfig(
            entrypoint=data.get("entrypoint") or None,
            dataset=path("dataset"),
            job=job,
            out=path("out") or Path("runs"),
            workers=data.get("workers"),
        )
        own = {f.name for f in fields(cls)} - {"run", "eval", "warm_start"}
        return cls(
            run=replace(run, **run_changes),
            eval=path("eval"),
            warm_start=tuple(Path(p) for p in data.get("warm_start") or ()),
            **{k: v for k, v in data.items() if k in own},
        )
