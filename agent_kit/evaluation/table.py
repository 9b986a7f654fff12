"""The grid's table: every cell with its figures, and the differences between named cells.

:func:`build_table` takes the spec and a mapping cell id → :class:`CellFigures` from any source
(local run directories, evaluation jobs' metrics): the terminal table, the ``--json`` document
(:meth:`GridTable.document`, schema :data:`TABLE_SCHEMA`), the HTML page and the MLflow export
all read a :class:`GridTable`, never a source. A cell without figures is ``pending``.

Comparisons (:func:`comparisons`): ``--compare A B`` names two cells by id (one difference), or
two policies by label (their difference at every setting); without it, the first two policies
are compared at every setting (none with one policy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent_kit.errors import UsageError
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

    @property
    def failed_cells(self) -> list[GridRow]:
        """The rows whose cell did not complete (state other than ``completed``)."""
        return [r for r in self.rows if r.figures.state != "completed"]

    def document(self) -> dict[str, Any]:
        """The table as one JSON document (schema :data:`TABLE_SCHEMA`)."""
        spec = self.spec.document()
        spec.pop("cells")
        return {
            "schema": TABLE_SCHEMA,
            "grid": spec,
            "k": self.k,
            "success_threshold": self.threshold,
            "location": self.location,
            "cells": [r.document() for r in self.rows],
            "differences": [d.document() for d in self.differences],
        }


def comparisons(spec: GridSpec, compare: Sequence[str] | None) -> list[tuple[Cell, Cell]]:
    """The pairs of cells to difference (see the module docstring); UsageError for a name that
    is neither a cell id nor a policy label, or a cell compared with itself."""
    cells = spec.cells()
    by_id = {c.id: c for c in cells}
    labels = list(spec.labels().values())
    if not compare:
        if len(labels) < 2:
            return []
        compare = labels[:2]
    a, b = compare
    if a == b:
        raise UsageError(f"--compare {a} {b}: a cell compared with itself")
    if a in by_id and b in by_id:
        return [(by_id[a], by_id[b])]
    if a in labels and b in labels:
        pairs = []
        for setting in spec.settings():
            first = [c for c in cells if c.setting == setting and c.label == a]
            second = [c for c in cells if c.setting == setting and c.label == b]
            pairs.append((first[0], second[0]))
        return pairs
    known = ", ".join([*labels, *by_id])
    raise UsageError(f"--compare {a} {b}: name two cells or two policies (known: {known})")


def build_table(
    spec: GridSpec,
    figures: Mapping[str, CellFigures],
    *,
    compare: Sequence[str] | None = None,
    k: int,
    threshold: float,
    location: str | None = None,
) -> GridTable:
    """The table of ``spec`` with the figures by cell id (a missing cell is ``pending``)."""
    rows = tuple(
        GridRow(c, figures.get(c.id) or CellFigures(state="pending")) for c in spec.cells()
    )
    by_id = {r.cell.id: r.figures for r in rows}
    diffs = tuple(
        difference(a.id, b.id, by_id[a.id], by_id[b.id], a.setting_label)
        for a, b in comparisons(spec, compare)
    )
    return GridTable(spec, rows, diffs, k, threshold, location)
