"""A training run's holdout: an evaluation grid played by the training process's live model.

``train --eval HOLDOUT`` evaluates through :mod:`agent_kit.evaluation` (one runner, one mean ±
SE, one pass@k, one table): :func:`holdout_of` makes the run's
:class:`~agent_kit.evaluation.holdout.Holdout` (the base, the warm start, the checkpoints of
``--eval-every N`` and the trained adapter as the policies of one grid in ``RUN_DIR/eval/``, at
the training job's settings), and :class:`HoldoutPlayer` plays its cells at the moments the
model is in their state: the base with the adapter switched off before the first step, the
warm start after it, a checkpoint right after its step's update (between two steps: the driver
waits for the step hook), the adapter after the last step. The training job's token recorder
is off while a cell plays (a holdout's turns are not training samples).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from agent_kit.emulator import HFPolicyBackend
from agent_kit.evaluation.figures import CellFigures
from agent_kit.evaluation.holdout import Holdout, step_label
from agent_kit.store.layout import RunLayout
from agent_kit.train.config import TrainConfig
from agent_kit.train.provenance import tag_run

__all__ = ["HoldoutPlayer", "eval_steps", "holdout_of"]

Echo = Callable[[str], None]


def eval_steps(config: TrainConfig) -> list[int]:
    """The steps whose checkpoint ``--eval-every N`` evaluates: every Nth update (steps N−1,
    2N−1, …), the last step aside (it is the trained adapter's cell)."""
    every, last = config.eval_every, config.job.steps - 1
    if not every:
        return []
    return [s for s in range(config.job.steps) if (s + 1) % every == 0 and s != last]


def holdout_of(config: TrainConfig, run_dir: Path) -> Holdout | None:
    """The holdout grid of a training run (None without ``--eval``)."""
    if config.eval is None:
        return None
    return Holdout.of(
        run_dir=run_dir,
        model=config.model,
        holdout=config.eval,
        samples=config.eval_samples,
        run=config.run,
        job=config.job,
        warm=bool(config.warm_start),
        every=eval_steps(config),
    )


class HoldoutPlayer:
    """Plays a training run's holdout cells with its live ``backend`` (module docstring);
    ``after`` is called once each cell is played (the command hands memory back there)."""

    def __init__(
        self,
        holdout: Holdout,
        backend: HFPolicyBackend,
        echo: Echo,
        after: Callable[[], object] | None = None,
    ) -> None:
        self.holdout, self.backend, self.echo, self.after = holdout, backend, echo, after

    @contextlib.contextmanager
    def _unrecorded(self) -> Iterator[None]:
        recorder, self.backend.recorder = self.backend.recorder, None
        try:
            yield
        finally:
            self.backend.recorder = recorder

    async def play(self, label: str, what: str, adapter: str | None = None) -> CellFigures | None:
        """Play (or keep) a label's cell, saying ``evaluating <what> on the holdout`` and, when
        its rollouts failed as a whole, why (``warm start holdout: every rollout ended at the
        token limit …``); None when the grid has no such cell. Its rollouts are recorded as
        sampled by ``adapter`` (the ledger's name of the weights; the label by default)."""
        if not self.holdout.has(label):
            return None
        found = self.holdout.kept(label)
        if found is not None:
            return found
        self.echo(f"evaluating {what} on the holdout")
        with self._unrecorded():
            figures = await self.holdout.play(label, self.backend, self.echo, self.after)
        target = self.holdout.cell_dir(label)
        if RunLayout(target).store.is_file():
            await asyncio.to_thread(tag_run, target, adapter or label)
        if figures.failure:
            self.echo(f"{what.removeprefix('the ')} holdout: {figures.failure}")
        return figures

    async def checkpoint(self, step: int) -> None:
        """Play the checkpoint of ``step`` when ``--eval-every`` names it (the model holds that
        step's adapter now)."""
        label = step_label(step)
        if self.holdout.has(label):
            await self.play(label, f"the checkpoint of step {step}")
