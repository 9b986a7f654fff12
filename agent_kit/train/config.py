"""The settings of one ``agent-kit train`` run, named and bounded like the service's
hyper-parameters (``group_size`` 2–32, ``global_batch_size``, ``learning_rate``, ``max_steps``,
``sampling_max_tokens``, LoRA rank)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent_kit.errors import UsageError

__all__ = ["TrainConfig"]


@dataclass(frozen=True)
class TrainConfig:
    """One training run. ``batch_size`` is the service's ``global_batch_size`` (prompts per
    step), ``steps`` its ``max_steps``, ``max_tokens`` its ``sampling_max_tokens``;
    ``micro_batch`` is how many rollouts one forward/backward pass holds (gradients accumulate
    over the step's ``batch_size × group_size`` rollouts; None: the largest divisor ≤ 4)."""

    entrypoint: str
    dataset: Path
    model: str = "smollm2-135m"
    steps: int = 10
    group_size: int = 8
    batch_size: int = 4
    lora_r: int = 8
    lora_alpha: int | None = None
    learning_rate: float = 5e-5
    beta: float = 0.0
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 128
    micro_batch: int | None = None
    gradient_checkpointing: bool = False
    eval: Path | None = None
    eval_samples: int = 4
    device: str = "auto"
    seed: int = 0
    concurrency: int = 8
    rollout_timeout: float = 600.0
    out: Path = Path("runs")
    name: str | None = None
    resume: Path | None = None
    workers: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def check(self) -> TrainConfig:
        """Refuse out-of-range settings with a UsageError naming the flag; return self."""
        checks: list[tuple[bool, str]] = [
            (1 <= self.steps <= 100_000, f"--steps must be 1..100000, got {self.steps}"),
            (2 <= self.group_size <= 32, f"--group-size must be 2..32, got {self.group_size}"),
            (1 <= self.batch_size <= 128, f"--batch-size must be 1..128, got {self.batch_size}"),
            (1 <= self.lora_r <= 256, f"--lora-r must be 1..256, got {self.lora_r}"),
            (
                0 < self.learning_rate <= 1e-2,
                f"--learning-rate must be in (0, 0.01], got {self.learning_rate}",
            ),
            (0 <= self.beta <= 10, f"--beta must be 0..10, got {self.beta}"),
            (0 < self.temperature <= 2, f"--temperature must be in (0, 2], got {self.temperature}"),
            (0 < self.top_p <= 1, f"--top-p must be in (0, 1], got {self.top_p}"),
            (1 <= self.max_tokens <= 8192, f"--max-tokens must be 1..8192, got {self.max_tokens}"),
            (
                1 <= self.eval_samples <= 32,
                f"--eval-samples must be 1..32, got {self.eval_samples}",
            ),
            (1 <= self.concurrency <= 256, f"--concurrency must be 1..256, got {self.concurrency}"),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
        rollouts = self.batch_size * self.group_size
        if self.micro_batch is not None and not (
            1 <= self.micro_batch <= rollouts and rollouts % self.micro_batch == 0
        ):
            raise UsageError(
                f"--micro-batch must divide the step's {rollouts} rollouts, got {self.micro_batch}"
            )
        if self.eval is not None and not self.eval.is_file():
            raise UsageError(f"--eval file {self.eval} not found")
        return self

    @property
    def rollouts_per_step(self) -> int:
        """Rollouts of one step: ``batch_size × group_size``."""
        return self.batch_size * self.group_size

    def micro(self) -> int:
        """Rollouts per forward/backward pass (see the class docstring)."""
        if self.micro_batch is not None:
            return self.micro_batch
        n = self.rollouts_per_step
        return max(d for d in range(1, min(4, n) + 1) if n % d == 0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (written to train.json)."""
        data = asdict(self)
        return {k: str(v) if isinstance(v, Path) else v for k, v in data.items()}
