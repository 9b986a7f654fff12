"""A training run's holdout as an evaluation grid (``agent-kit train --eval``, docs/train.md).

The base model, the warm start, the checkpoints of ``--eval-every`` and the trained adapter are
the policies of one grid on the holdout (:class:`Holdout`): ``hf:MODEL``,
``hf:MODEL+RUN_DIR/adapters/warm``, ``hf:MODEL+RUN_DIR/adapters/step-NNNN``, labelled ``base``,
``warm``, ``step-NNNN`` and ``adapter`` (the last step's). Its directory is ``RUN_DIR/eval/``
(``grid.json``, a run directory per cell: ``eval/base/``, ``eval/adapter/`` …, ``table.json``,
``eval.html``). Each cell is played through the grid's one runner
(:func:`~agent_kit.evaluation.local_cells.play_cell`) at the training job's settings
(temperature, max tokens, success threshold, concurrency), ``samples`` times per prompt, by the
training process's live model (the trainer's adapter switched off for the base, as it stands
after the warm start or a step for the others), and read back with the grid's figures
(:func:`~agent_kit.evaluation.local_cells.read_cell`): one mean ± SE, one pass@k, one table.
Its differences are paired by prompt: warm − base, trained − warm, trained − base
(:data:`agent_kit.reporting.train_view.HOLDOUT_PAIRS`) and every checkpoint − base.

A finished cell is kept (a resumed run does not play it again); an unfinished one is played
again while the model is in its state (the base, the warm start before the first step, the last
saved checkpoint of a resumed run).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.emulator.policies import PolicyBackend
from agent_kit.errors import AgentKitError
from agent_kit.evaluation.checkpoints import BASE_LABEL, WARM_LABEL
from agent_kit.evaluation.figures import CellFigures
from agent_kit.evaluation.grid import Cell, GridSpec
from agent_kit.evaluation.local_cells import EvalLayout, cell_config, play_cell, read_cell
from agent_kit.evaluation.page import render_page
from agent_kit.evaluation.table import GridTable, build_table
from agent_kit.reporting.train_view import HOLDOUT_PAIRS
from agent_kit.store.layout import RunLayout

__all__ = ["ADAPTER_LABEL", "Holdout", "cell_document", "step_label"]

#: The trained adapter's label (the last step's adapter).
ADAPTER_LABEL: Final = "adapter"
#: The states of a finished cell (kept by a resumed run).
_FINISHED: Final = ("completed", "rollouts_failed", "failed")
#: Job settings a cell sets itself (the rest of the training job's are the grid's base).
_CELL_OWN: Final = ("name", "policy", "group_size", "batch_size", "steps")


def step_label(step: int) -> str:
    """The label of the checkpoint saved after ``step``: ``step-0003``."""
    return f"step-{step:04d}"


@dataclass(frozen=True)
class Holdout:
    """The holdout grid of one training run (module docstring): its spec, directory, the run
    settings its cells share and the success threshold; :meth:`of` builds it."""

    spec: GridSpec
    out: Path
    run: RunConfig
    threshold: float

    @classmethod
    def of(
        cls,
        *,
        run_dir: Path,
        model: str,
        holdout: Path,
        samples: int,
        run: RunConfig,
        job: JobConfig,
        warm: bool,
        every: Sequence[int] = (),
    ) -> Holdout:
        """The holdout of the run in ``run_dir`` training ``model`` with ``job``'s settings
        (``run`` its run settings: the entrypoint, workers …): the base, the warm start when
        ``warm``, the checkpoints of the steps ``every`` (but the last) and the trained adapter
        (the last step's, ``job.steps − 1``)."""
        layout, base = RunLayout(run_dir), f"hf:{model}"
        last = max(0, job.steps - 1)
        names = {base: BASE_LABEL}
        if warm:
            names[f"{base}+{layout.warm_adapter}"] = WARM_LABEL
        for step in sorted(set(every) - {last}):
            names[f"{base}+{layout.step_adapter(step)}"] = step_label(step)
        names[f"{base}+{layout.step_adapter(last)}"] = ADAPTER_LABEL
        shared = {k: v for k, v in asdict(job).items() if k not in _CELL_OWN}
        spec = GridSpec(
            entrypoint=str(run.entrypoint),
            dataset=str(holdout),
            policies=tuple(names),
            samples=samples,
            base=json.loads(json.dumps(shared, default=str)),
            names=names,
        )
        return cls(spec, layout.evals, run, job.success_threshold)

    def cell(self, label: str) -> Cell:
        """The cell of a label (KeyError for one the grid has not)."""
        for cell in self.spec.cells():
            if cell.label == label:
                return cell
        raise KeyError(label)

    def has(self, label: str) -> bool:
        """Whether the grid has a cell of ``label``."""
        return label in self.spec.labels().values()

    def cell_dir(self, label: str) -> Path:
        """The run directory of a label's cell."""
        return EvalLayout(self.out).cell_dir(self.cell(label))

    def _figures(self, label: str) -> CellFigures | None:
        """The figures of a label's cell (None: it holds no run)."""
        return read_cell(self.cell_dir(label), self.spec.samples, self.threshold)

    def kept(self, label: str) -> CellFigures | None:
        """A finished cell's figures (completed, rollouts_failed or failed, as the grid keeps
        them: not played again), else None; a cell left unfinished is removed, to be played
        again."""
        target = self.cell_dir(label)
        try:
            found = self._figures(label) if target.exists() else None
        except (AgentKitError, OSError, ValueError):
            found = None  # an unreadable one is played again
        if found is not None and found.state in _FINISHED:
            return found
        if target.exists():
            shutil.rmtree(target)
        return None

    async def play(
        self,
        label: str,
        backend: PolicyBackend,
        echo: Callable[[str], None],
        after: Callable[[], object] | None = None,
    ) -> CellFigures:
        """The figures of a label's cell: kept when finished, else played now by ``backend``
        (the live model as the caller set it for this label) and read back; ``echo`` gets its
        progress; ``after`` is called once it is played."""
        found = self.kept(label)
        if found is not None:
            return found
        self._prepare()
        cell = self.cell(label)
        config = cell_config(self.spec, cell, self.out, self.run)
        failed = await play_cell(config, f"holdout {label}", echo, policy=backend)
        if after is not None:
            after()  # the sampler's caches, before the next phase
        return failed or self._figures(label) or CellFigures(state="error", reason="no run")

    def table(self, figures: Mapping[str, CellFigures] | None = None) -> GridTable:
        """The holdout's table: every cell's figures (``figures`` by label, else read from its
        directory), the differences of :data:`HOLDOUT_PAIRS` and every checkpoint − base."""
        labels = self.spec.labels().values()
        given = dict(figures or {})
        found: dict[str, CellFigures] = {}
        for label in labels:
            value = given.get(label) or self._figures(label)
            if value is not None:
                found[self.cell(label).id] = value
        pairs = [p for p in HOLDOUT_PAIRS if p[0] in labels and p[1] in labels]
        pairs += [(label, BASE_LABEL) for label in labels if label.startswith("step-")]
        return build_table(
            self.spec,
            found,
            pairs=pairs,
            k=self.spec.samples,
            threshold=self.threshold,
            location=str(self.out),
        )

    def _prepare(self) -> EvalLayout:
        """The holdout's directory, checked and created, its ``grid.json`` written."""
        layout = EvalLayout(self.out)
        layout.check(self.spec)
        layout.grid.write_text(json.dumps(self.spec.document(), indent=2) + "\n", "utf-8")
        return layout

    def write(self, table: GridTable, groups: str = "") -> tuple[Path, Path]:
        """Write the table's ``table.json`` and ``eval.html`` (with the group view's markup
        ``groups``) into the holdout's directory, beside its ``grid.json``."""
        layout = self._prepare()
        layout.table.write_text(json.dumps(table.document(), indent=2) + "\n", "utf-8")
        layout.page.write_text(render_page(table, groups), encoding="utf-8")
        return layout.table, layout.page


def cell_document(label: str, figures: CellFigures) -> dict[str, Any]:
    """A holdout cell's figures as a training run records them (its ``train_eval`` event, a
    row of ``train.json``'s ``eval``): the label beside the figures' document."""
    return {"label": label, **figures.document()}
