"""The grid's table: every cell with its figures, and the differences between named cells.

:func:`build_table` takes the spec and a mapping cell id → :class:`CellFigures` from any source
(local run directories, evaluation jobs' metrics): the terminal table, the ``--json`` document
(:meth:`GridTable.document`, schema :data:`TABLE_SCHEMA`), the HTML page and the MLflow export
all read a :class:`GridTable`, never a source. A cell without figures is ``pending``.

Comparisons (:func:`comparisons`), each a difference paired by prompt where the two cells
played the same prompts (:func:`~agent_kit.evaluation.figures.difference`): ``--compare A B``
names two cells by id (one difference), or two policies by label (their difference at every
setting); ``pairs`` names pairs of policies (a checkpoint grid: every checkpoint − the base; a
training run's holdout: warm − base, trained − warm, trained − base). Without either, the first
two policies are compared at every setting, and every policy's other settings against its first
setting (a one-policy grid with an ``env.`` axis compares its settings).

A grid whose policies are a training run's checkpoints (:mod:`~agent_kit.evaluation.
checkpoints`) has a curve per setting: the holdout reward against the step, and its best step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent_kit.errors import UsageError
from agent_kit.evaluation.checkpoints import checkpoint_step
from agent_kit.evaluation.figures import CellFigures, Difference, difference
from agent_kit.evaluation.grid import Cell, GridSpec

__all__ = ["TABLE_SCHEMA", "GridRow", "GridTable", "build_table", "comparisons"]

#: The ``schema`` tag of the table document (``--json``, ``table.json``).
TABLE_SCHEMA: Final = "agent_kit.eval_table/1"


@dataclass(frozen=True)
class GridRow:
    """One cell and its figures."""

    cell: Cell
    figures: CellFigures

    def document(self) -> dict[str, Any]:
        """The cell's spec and figures as one JSON object."""
        return {**self.cell.document(), "figures": self.figures.document()}


@dataclass(frozen=True)
class GridTable:
    """The table of a grid: its spec, a row per cell (in the spec's order), the differences,
    the k of pass@k and the success threshold the figures used."""

    spec: GridSpec
    rows: tuple[GridRow, ...]
    differences: tuple[Difference, ...]
    k: int
    threshold: float
    #: Where the table's files are (the eval directory), when it has one.
    location: str | None = None

    def row(self, cell_id: str) -> GridRow:
        """The row of a cell by id (KeyError when there is none)."""
        for row in self.rows:
            if row.cell.id == cell_id:
                return row
        raise KeyError(cell_id)

    def settings(self) -> list[str]:
        """The settings' labels, in the grid's order (one group of the plot each)."""
        return list(dict.fromkeys(r.cell.setting_label for r in self.rows))

    def curve(self, setting: str) -> list[tuple[int, GridRow]]:
        """The checkpoint cells of one setting with a mean, as (step, row) by step (empty when
        no policy is a checkpoint)."""
        found = [
            (step, r)
            for r in self.rows
            if r.cell.setting_label == setting
            and r.figures.mean is not None
            and (step := checkpoint_step(r.cell.policy)) is not None
        ]
        return sorted(found, key=lambda item: item[0])

    def best(self, setting: str) -> GridRow | None:
        """The checkpoint of one setting with the highest mean reward (the earliest on a tie),
        None without checkpoints."""
        curve = self.curve(setting)
        if not curve:
            return None
        return max(curve, key=lambda item: (item[1].figures.mean or 0.0, -item[0]))[1]

    @property
    def failed_cells(self) -> list[GridRow]:
        """The rows whose cell did not complete (state other than ``completed``)."""
        return [r for r in self.rows if r.figures.state != "completed"]

    def document(self) -> dict[str, Any]:
        """The table as one JSON document (schema :data:`TABLE_SCHEMA`)."""
        spec = self.spec.document()
        spec.pop("cells")
        best = {s: b.cell.id for s in self.settings() if (b := self.best(s)) is not None}
        return {
            "schema": TABLE_SCHEMA,
            "grid": spec,
            "k": self.k,
            "success_threshold": self.threshold,
            "location": self.location,
            "cells": [r.document() for r in self.rows],
            "differences": [d.document() for d in self.differences],
            "best": best,
        }


def _at_every_setting(
    spec: GridSpec, cells: Sequence[Cell], pairs: Sequence[tuple[str, str]]
) -> list[tuple[Cell, Cell]]:
    """For each policy pair (a, b) by label, a's cell minus b's at every setting."""
    by_key = {(c.label, c.setting): c for c in cells}
    return [
        (by_key[a, setting], by_key[b, setting])
        for setting in spec.settings()
        for a, b in pairs
        if (a, setting) in by_key and (b, setting) in by_key
    ]


def _across_settings(spec: GridSpec, cells: Sequence[Cell]) -> list[tuple[Cell, Cell]]:
    """Every policy's cell at each other setting minus its cell at the first setting."""
    settings = spec.settings()
    by_key = {(c.label, c.setting): c for c in cells}
    return [
        (by_key[label, setting], by_key[label, settings[0]])
        for label in spec.labels().values()
        for setting in settings[1:]
    ]


def comparisons(
    spec: GridSpec,
    compare: Sequence[str] | None,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> list[tuple[Cell, Cell]]:
    """The pairs of cells to difference (see the module docstring); UsageError for a name that
    is neither a cell id nor a policy label, or a cell compared with itself."""
    cells = spec.cells()
    by_id = {c.id: c for c in cells}
    labels = list(spec.labels().values())
    if not compare:
        if pairs is not None:
            return _at_every_setting(spec, cells, pairs)
        found = _at_every_setting(spec, cells, [(labels[0], labels[1])] if len(labels) > 1 else [])
        return found + _across_settings(spec, cells)
    a, b = compare
    if a == b:
        raise UsageError(f"--compare {a} {b}: a cell compared with itself")
    if a in by_id and b in by_id:
        return [(by_id[a], by_id[b])]
    if a in labels and b in labels:
        return _at_every_setting(spec, cells, [(a, b)])
    known = ", ".join([*labels, *by_id])
    raise UsageError(f"--compare {a} {b}: name two cells or two policies (known: {known})")


def build_table(
    spec: GridSpec,
    figures: Mapping[str, CellFigures],
    *,
    compare: Sequence[str] | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    k: int,
    threshold: float,
    location: str | None = None,
) -> GridTable:
    """The table of ``spec`` with the figures by cell id (a missing cell is ``pending``);
    ``compare`` and ``pairs`` as for :func:`comparisons`."""
    rows = tuple(
        GridRow(c, figures.get(c.id) or CellFigures(state="pending")) for c in spec.cells()
    )
    by_id = {r.cell.id: r.figures for r in rows}
    diffs = tuple(
        difference(
            a.id, b.id, by_id[a.id], by_id[b.id], a.setting_label if a.setting == b.setting else ""
        )
        for a, b in comparisons(spec, compare, pairs)
    )
    return GridTable(spec, rows, diffs, k, threshold, location)
