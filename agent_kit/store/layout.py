"""The run directory's layout: every file and folder name a run directory holds, in one place.

A run directory (``runs/<job name>/``) is written by the driver (the store and the agents'
logs), the reporting half (summary and report), replay (its report) and ``agent-kit train``
(its settings, summary and adapters); everyone finds those files through :class:`RunLayout`,
so a name is spelled once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "ADAPTERS_DIR",
    "COMPARISON_FILE",
    "EVAL_DIR",
    "FILTER_DIR",
    "LOCK_FILE",
    "LOGS_DIR",
    "PREFLIGHT_DIR",
    "REFILL_DIR",
    "REPLAY_REPORT_FILE",
    "REPORT_FILE",
    "RUN_FILE",
    "SUMMARY_FILE",
    "TRAINER_DIR",
    "TRAIN_CONFIG_FILE",
    "TRAIN_HTML",
    "TRAIN_JSON",
    "TRAIN_PROMPTS_FILE",
    "WARM_ADAPTER",
    "RunLayout",
]

#: The run store (SQLite, WAL).
RUN_FILE: Final = "run.sqlite"
#: The lock a live driver holds on the run directory (:mod:`agent_kit.store.runlock`).
LOCK_FILE: Final = "run.lock"
#: The agent processes' logs, one file per worker.
LOGS_DIR: Final = "logs"
#: The run's summary document (:mod:`agent_kit.reporting.summary_schema`).
SUMMARY_FILE: Final = "summary.json"
#: The self-contained HTML report.
REPORT_FILE: Final = "report.html"
#: The comparison page ``agent-kit report RUN_A --compare RUN_B`` writes into RUN_B.
COMPARISON_FILE: Final = "compare.html"
#: A replay run's verdicts (``agent-kit replay``).
REPLAY_REPORT_FILE: Final = "replay_report.json"
#: A training run's settings, written when it starts and read back by ``--resume``.
TRAIN_CONFIG_FILE: Final = "train_config.json"
#: A training run's summary document and its page (``agent-kit train``).
TRAIN_JSON: Final = "train.json"
TRAIN_HTML: Final = "train.html"
#: A training run's LoRA adapters, one folder per saved step (``adapters/step-NNNN``).
ADAPTERS_DIR: Final = "adapters"
#: A training run's warm-start adapter, inside ``adapters/`` (``adapters/warm``).
WARM_ADAPTER: Final = "warm"
#: A training run's preflight probe step, a run directory of its own (``preflight/``).
PREFLIGHT_DIR: Final = "preflight"
#: A training run's holdout evaluations, one run directory each (``eval/base``, ``eval/adapter``).
EVAL_DIR: Final = "eval"
#: The trainer's own working folder (TRL's ``output_dir``).
TRAINER_DIR: Final = "trainer"
#: A training run's dynamic-sampling rounds, one run directory each (``refill/step-NNNN-rK``).
REFILL_DIR: Final = "refill"
#: A training run's prompt filter (``--filter-prompts``): the run that played every train prompt
#: (``filter/``) and the prompts kept, which the training job plays (``train_prompts.jsonl``).
FILTER_DIR: Final = "filter"
TRAIN_PROMPTS_FILE: Final = "train_prompts.jsonl"


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run directory (nothing is created or checked)."""

    root: Path

    @property
    def store(self) -> Path:
        """``run.sqlite``."""
        return self.root / RUN_FILE

    @property
    def lock(self) -> Path:
        """``run.lock``."""
        return self.root / LOCK_FILE

    @property
    def logs(self) -> Path:
        """``logs/``."""
        return self.root / LOGS_DIR

    @property
    def summary(self) -> Path:
        """``summary.json``."""
        return self.root / SUMMARY_FILE

    @property
    def report(self) -> Path:
        """``report.html``."""
        return self.root / REPORT_FILE

    @property
    def comparison(self) -> Path:
        """``compare.html``."""
        return self.root / COMPARISON_FILE

    @property
    def replay_report(self) -> Path:
        """``replay_report.json``."""
        return self.root / REPLAY_REPORT_FILE

    @property
    def train_config(self) -> Path:
        """``train_config.json``."""
        return self.root / TRAIN_CONFIG_FILE

    @property
    def train_json(self) -> Path:
        """``train.json``."""
        return self.root / TRAIN_JSON

    @property
    def train_html(self) -> Path:
        """``train.html``."""
        return self.root / TRAIN_HTML

    @property
    def adapters(self) -> Path:
        """``adapters/``."""
        return self.root / ADAPTERS_DIR

    def step_adapter(self, step: int) -> Path:
        """``adapters/step-NNNN``: the adapter saved after ``step`` (0-based)."""
        return self.adapters / f"step-{step:04d}"

    @property
    def warm_adapter(self) -> Path:
        """``adapters/warm``."""
        return self.root / ADAPTERS_DIR / WARM_ADAPTER

    @property
    def preflight(self) -> Path:
        """``preflight/``."""
        return self.root / PREFLIGHT_DIR

    @property
    def evals(self) -> Path:
        """``eval/``."""
        return self.root / EVAL_DIR

    @property
    def trainer(self) -> Path:
        """``trainer/``."""
        return self.root / TRAINER_DIR

    @property
    def refills(self) -> Path:
        """``refill/``."""
        return self.root / REFILL_DIR

    def refill(self, step: int, round_: int) -> Path:
        """``refill/step-NNNN-rK``: dynamic sampling's round ``round_`` (1-based) of ``step``."""
        return self.refills / f"step-{step:04d}-r{round_}"

    def refill_prompts(self, step: int, round_: int) -> Path:
        """``refill/step-NNNN-rK.jsonl``: the fresh prompts that round plays."""
        return self.refills / f"step-{step:04d}-r{round_}.jsonl"

    @property
    def prompt_filter(self) -> Path:
        """``filter/``."""
        return self.root / FILTER_DIR

    @property
    def train_prompts(self) -> Path:
        """``train_prompts.jsonl``."""
        return self.root / TRAIN_PROMPTS_FILE

    def is_training(self) -> bool:
        """Whether this is an ``agent-kit train`` run (it holds ``train_config.json``): only
        ``agent-kit train --resume`` continues it, training the steps left."""
        return self.train_config.is_file()

    def resume_command(self, program: str = "agent-kit") -> str:
        """The command that continues this run: ``train --resume`` for a training run, else
        ``run --resume``."""
        command = "train" if self.is_training() else "run"
        return f"{program} {command} --resume {self.root}"
