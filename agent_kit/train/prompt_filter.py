"""Prompts that can teach (``--filter-prompts K``): before GRPO, every train prompt is played K
times with the policy as training starts, and training keeps the prompts it solves sometimes.

A prompt the policy always solves, or never does, gives a group whose outcomes are all alike:
little or nothing to learn (rLLM's ``dataset from-eval`` keeps ``0 < mean < 1``; NeMo Gym's
``gym eval profile``). The filter run is an ordinary local job, ``RUN_DIR/filter`` (every prompt
× K, one step when the dataset holds at most 128 prompts), and a prompt is kept when some but not
all of its K rollouts reached the job's success threshold. The kept prompts, in dataset order,
are written to ``RUN_DIR/train_prompts.jsonl``, which the training job plays (and its
``--resume`` plays again). Fewer kept prompts than ``--batch-size`` stop the run before GRPO with
one line (:class:`~agent_kit.errors.NothingToLearn`, exit 2) unless ``--force``, which trains on
every prompt. **The service does not filter**: it plays the dataset it is given; the filter is
a rehearsal of choosing that dataset.
"""

from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from agent_kit.driver.dataset import Dataset, load_dataset
from agent_kit.driver.hooks import JobHooks
from agent_kit.driver.local import run_local
from agent_kit.emulator import PolicyBackend
from agent_kit.errors import NothingToLearn
from agent_kit.evaluation.local_cells import progress_lines
from agent_kit.reporting.metrics import build_groups
from agent_kit.store import RunStore, load_rollouts
from agent_kit.store.layout import FILTER_DIR, RunLayout
from agent_kit.train.config import TrainConfig

__all__ = ["PromptFilter", "filter_prompts", "kept_prompts"]

#: The most prompts one step of the filter job plays (the job's batch bound).
_BATCH: int = 128


@dataclass(frozen=True)
class PromptFilter:
    """What the filter found: the ``prompts`` played ``plays`` times each, how many the policy
    solved ``always`` and ``never``, and the indices it ``kept`` (solved sometimes)."""

    prompts: int
    plays: int
    always: int
    never: int
    kept: tuple[int, ...]

    def line(self) -> str:
        """One line for the terminal."""
        return (
            f"prompt filter: {len(self.kept)} of {self.prompts} prompts solved sometimes "
            f"({self.plays} plays each; {self.always} always, {self.never} never)"
        )

    def to_dict(self) -> dict[str, Any]:
        """train.json's ``prompt_filter``."""
        return {**asdict(self), "kept": len(self.kept)}


def kept_prompts(successes: dict[int, list[bool]], plays: int) -> PromptFilter:
    """The filter's verdict from each prompt's successes (its rollouts', in any order)."""
    always = never = 0
    kept: list[int] = []
    for index in sorted(successes):
        wins = sum(successes[index])
        if wins == len(successes[index]):
            always += 1
        elif wins == 0:
            never += 1
        else:
            kept.append(index)
    return PromptFilter(len(successes), plays, always, never, tuple(kept))


def _successes(run_dir: Path, threshold: float) -> dict[int, list[bool]]:
    """Each prompt's slots, successful or not (a lost slot is a failure)."""
    found: dict[int, list[bool]] = defaultdict(list)
    with RunStore.open(run_dir, readonly=True) as store:
        job = store.list_jobs()[-1]
        groups = build_groups(load_rollouts(store, job.arn))
    for group in groups:
        found[group.prompt_index] += [r >= threshold for r in group.rewards]
        found[group.prompt_index] += [False] * group.lost
    return found


async def filter_prompts(
    config: TrainConfig,
    backend: PolicyBackend,
    run_dir: Path,
    data: Dataset,
    echo: Callable[[str], None],
) -> tuple[Dataset, dict[str, Any]]:
    """Play the filter (see the module docstring) and return the dataset to train on and the
    filter's figures; a run that already wrote its kept prompts reads them back."""
    layout = RunLayout(run_dir)
    if layout.train_prompts.is_file():
        return load_dataset(layout.train_prompts), {"reused": True}
    if layout.prompt_filter.is_dir():
        shutil.rmtree(layout.prompt_filter)
    steps = math.ceil(len(data) / _BATCH)
    job = replace(
        config.job,
        name=FILTER_DIR,
        policy=backend.name,
        group_size=config.filter_prompts,
        batch_size=math.ceil(len(data) / steps),
        steps=steps,
    )
    run = replace(config.run, job=job, out=run_dir, resume=None)
    echo(f"prompt filter: every one of the {len(data)} train prompts × {config.filter_prompts}")
    await run_local(run, JobHooks(progress=progress_lines("prompt filter", echo)), policy=backend)
    verdict = kept_prompts(
        _successes(layout.prompt_filter, config.job.success_threshold), config.filter_prompts
    )
    echo(verdict.line())
    batch = config.job.batch_size or 1
    if len(verdict.kept) < batch:
        if not config.force:
            raise NothingToLearn(
                f"{verdict.line()}: fewer than --batch-size {batch}; try easier prompts (e.g. "
                "a dataset of positions closer to the goal), a better warm start, or a "
                "--filter-prompts with more plays; --force trains on every prompt"
            )
        echo("prompt filter: --force, training on every prompt")
        return data, {**verdict.to_dict(), "forced": True}
    rows = "".join(json.dumps({"prompt": data[i]}) + "\n" for i in verdict.kept)
    layout.train_prompts.write_text(rows, encoding="utf-8")
    return load_dataset(layout.train_prompts), verdict.to_dict()
