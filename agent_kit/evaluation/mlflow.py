"""The grid in MLflow: one parent run, a child run per cell (``agent-kit eval … --mlflow``).

The parent run (name ``eval <grid>``) has the grid as params (entrypoint, dataset, samples,
policies, axes), the differences as metrics (``difference/<a>/<b>``, ``difference_se/…``:
paired by prompt where the cells played the same prompts) and the table's ``table.json`` and
``eval.html`` as artifacts. Each child (tag ``mlflow.parentRunId``) has its cell's settings as
params (``policy``, ``cell``, one per axis) and its figures as metrics (``reward_mean``,
``reward_se``, ``success_rate``, ``pass_at_k``, ``turns``, ``prompt_tokens``,
``sample_tokens``, ``cost``, ``n``, ``tool_call_rate``, ``token_limited``, ``task/<name>``),
its state as a tag, and its run's ``summary.json`` when it has one. Re-exporting the same eval
directory replaces the earlier parent and children (tag ``agent_kit.eval_key``: the directory's
absolute path).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent_kit.evaluation.table import GridTable
from agent_kit.export.tracking import (
    DEFAULT_EXPERIMENT,
    MLFLOW_DB,
    ensure_experiment,
    mlflow_error,
    mlflow_quiet,
    require_mlflow,
)
from agent_kit.store.layout import SUMMARY_FILE

__all__ = ["GridExport", "default_grid_uri", "export_grid"]

_KEY_TAG: Final = "agent_kit.eval_key"


@dataclass(frozen=True)
class GridExport:
    """What :func:`export_grid` wrote: the parent run, a child run id per cell id."""

    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    children: dict[str, str]
    replaced: int


def default_grid_uri(out: Path) -> str:
    """``sqlite:///<eval directory>/mlflow.db``: where the cells' own exports go too."""
    return f"sqlite:///{out.resolve() / MLFLOW_DB}"


def _metrics(client: Any, run_id: str, values: dict[str, float | int | None]) -> None:
    for name, value in values.items():
        if value is not None:
            client.log_metric(run_id, name, float(value))


def _child(
    client: Any, experiment_id: str, parent: str, key: str, table: GridTable, row: Any
) -> str:
    f = row.figures
    run = client.create_run(
        experiment_id,
        run_name=row.cell.id,
        tags={"mlflow.parentRunId": parent, _KEY_TAG: key, "agent_kit.cell_state": f.state},
    )
    run_id = str(run.info.run_id)
    params = {"cell": row.cell.id, "policy": row.cell.policy, "setting": row.cell.setting_label}
    params.update({name: str(value) for name, value in row.cell.setting})
    for name, value in params.items():
        client.log_param(run_id, name, value[:6000])
    _metrics(
        client,
        run_id,
        {
            "reward_mean": f.mean,
            "reward_se": f.se,
            "success_rate": f.success_rate,
            f"pass_at_{table.k}": f.pass_at_k.get(table.k),
            "turns": f.turns,
            "prompt_tokens": f.prompt_tokens,
            "sample_tokens": f.sample_tokens,
            "cost": f.cost,
            "n": f.n,
            "tool_call_rate": f.tool_call_rate,
            "token_limited": f.token_limited,
            **{f"task/{name}": value for name, value in f.task.items()},
        },
    )
    summary = Path(f.location) / SUMMARY_FILE if f.location else None
    if summary is not None and summary.is_file():
        client.log_artifact(run_id, str(summary))
    status = "FINISHED" if f.state == "completed" else "FAILED"
    client.set_terminated(run_id, status=status)
    return run_id


def _exported(client: Any, experiment_id: str, key: str) -> list[Any]:
    """The runs of an earlier export of the eval directory ``key``. MLflow's filter strings
    have no escape for a quote, so the key is matched with LIKE, each quote (and backslash, an
    escape character on some stores) a one-character wildcard, and the matches are kept only
    where the tag is the key itself."""
    pattern = "".join("_" if ch in "'\\" else ch for ch in key)
    found = client.search_runs([experiment_id], filter_string=f"tags.`{_KEY_TAG}` LIKE '{pattern}'")
    return [run for run in found if run.data.tags.get(_KEY_TAG) == key]


def export_grid(
    table: GridTable,
    out: Path,
    *,
    tracking_uri: str | None = None,
    experiment: str | None = None,
    files: tuple[Path, ...] = (),
) -> GridExport:
    """Log ``table`` (the grid in eval directory ``out``) as a parent run with a child per
    cell (see the module docstring); ``files`` are logged as the parent's artifacts."""
    mlflow = require_mlflow()
    uri = tracking_uri or default_grid_uri(out)
    key = str(out.resolve())
    spec = table.spec
    try:
        with mlflow_quiet():
            client = mlflow.MlflowClient(uri)
            experiment_id = ensure_experiment(client, experiment or DEFAULT_EXPERIMENT, uri)
            old = _exported(client, experiment_id, key)
            parent = client.create_run(
                experiment_id, run_name=f"eval {Path(spec.entrypoint).stem}", tags={_KEY_TAG: key}
            )
            parent_id = str(parent.info.run_id)
            params = {
                "entrypoint": spec.entrypoint,
                "dataset": spec.dataset,
                "samples": str(spec.samples),
                "policies": ", ".join(spec.policies),
                **{f"axis.{a.name}": ",".join(map(str, a.values)) for a in spec.axes},
            }
            for name, value in params.items():
                client.log_param(parent_id, name, value[:6000])
            children = {
                row.cell.id: _child(client, experiment_id, parent_id, key, table, row)
                for row in table.rows
            }
            for d in table.differences:
                _metrics(
                    client,
                    parent_id,
                    {f"difference/{d.a}/{d.b}": d.difference, f"difference_se/{d.a}/{d.b}": d.se},
                )
            for path in files:
                client.log_artifact(parent_id, str(path))
            client.set_terminated(parent_id, status="FINISHED")
            for run in old:
                client.delete_run(run.info.run_id)
    except mlflow.exceptions.MlflowException as exc:
        raise mlflow_error(uri, exc) from exc
    return GridExport(uri, experiment_id, parent_id, children, len(old))
