"""`agent-kit eval --mlflow` finds its earlier export by the eval directory's path, whatever
characters the path holds (a quote of either kind): exporting again replaces it.

A local MLflow store (SQLite) in the test's directory; the table is built from figures given
here, no agent runs (e2e: MLflow starts a process as it opens a store).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import mlflow_client

from agent_kit.evaluation.figures import CellFigures
from agent_kit.evaluation.grid import grid_spec
from agent_kit.evaluation.mlflow import export_grid
from agent_kit.evaluation.table import build_table

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("name", ["it's eval", 'say "eval"', """it's "both\""""])
def test_an_export_of_a_path_with_quotes_replaces_the_earlier_one(
    tmp_path: Path, name: str, mlflow_store: Callable[[Path], str]
) -> None:
    """Two exports of an eval directory whose path holds quotes: the second replaces the
    first (one parent run and its children remain)."""
    spec = grid_spec("agent.py", "d.jsonl", ["random", "random:1"], [], 2, {})
    figures = {c.id: CellFigures("completed", mean=0.5, se=0.1, n=4) for c in spec.cells()}
    table = build_table(spec, figures, k=2, threshold=1.0)
    out = tmp_path / name
    out.mkdir()
    uri = mlflow_store(tmp_path / "mlflow.db")
    first = export_grid(table, out, tracking_uri=uri)
    second = export_grid(table, out, tracking_uri=uri)
    assert (first.replaced, second.replaced) == (0, 3)
    with mlflow_client(uri) as client:
        runs = client.search_runs([second.experiment_id])
    assert {r.info.run_id for r in runs} == {second.parent_run_id, *second.children.values()}
