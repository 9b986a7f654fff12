"""The MLflow tracking store, as both exports use it (a run, :mod:`agent_kit.export.mlflow`;
an evaluation grid, :mod:`agent_kit.evaluation.mlflow`): MLflow imported quietly, the store's
URI, the one experiment lookup, and MLflow's errors as one usage line.

MLflow is an optional dependency (the ``mlflow`` extra: mlflow-skinny, sqlalchemy, alembic):
:func:`require_mlflow` imports it, or raises a :class:`UsageError` naming the extra. Two
warnings MLflow 3.17 raises from its own code are silenced around the calls
(:func:`mlflow_quiet`, so an export works under ``-W error``): SQLAlchemy 2.1's deprecation of
the ``noload`` loader strategy (MLflow's store models use it) and MLflow's "Any type hint is
inferred as AnyType" UserWarning (raised while MLflow imports its own response schemas).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Final

from agent_kit.errors import UsageError

if TYPE_CHECKING:
    from mlflow import MlflowClient

__all__ = [
    "DEFAULT_EXPERIMENT",
    "MLFLOW_DB",
    "MLFLOW_EXTRA_HINT",
    "default_tracking_uri",
    "ensure_experiment",
    "mlflow_error",
    "mlflow_quiet",
    "require_mlflow",
    "writable_tracking_uri",
]

#: The experiment local runs go to when none is named.
DEFAULT_EXPERIMENT: Final = "agent-kit"
#: File name of the default SQLite tracking store, in the run directory's parent.
MLFLOW_DB: Final = "mlflow.db"
#: What to install when MLflow is missing.
MLFLOW_EXTRA_HINT: Final = "pip install 'agent_kit[mlflow]'"
#: Known warnings MLflow's own code raises (see the module docstring), silenced around it.
_MLFLOW_WARNINGS: Final = (
    (r"The ``noload`` loader strategy is deprecated", DeprecationWarning),
    (r"(\x1b\[[0-9;]*m)?Any type hint is inferred as AnyType", UserWarning),
)
#: Loggers whose INFO lines (database creation and migration) would clutter the CLI.
_QUIET_LOGGERS: Final = ("mlflow", "alembic")


@contextlib.contextmanager
def mlflow_quiet() -> Iterator[None]:
    """Silence MLflow's known warnings and its INFO logging for the duration."""
    levels = {name: logging.getLogger(name).level for name in _QUIET_LOGGERS}
    with warnings.catch_warnings():
        for message, category in _MLFLOW_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=category)
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        try:
            yield
        finally:
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)


def require_mlflow() -> ModuleType:
    """Import and return ``mlflow``, or raise :class:`UsageError` naming the extra to install.

    Needs the SQL store too (sqlalchemy, alembic), which the ``mlflow`` extra brings.
    """
    try:
        with mlflow_quiet():
            import mlflow
            import mlflow.store.tracking.sqlalchemy_store  # needs sqlalchemy
            import mlflow.types.responses  # raises its AnyType warning once, here
    except ImportError as exc:
        raise UsageError(
            f"MLflow export needs the mlflow extra ({exc.name or 'mlflow'} is not installed): "
            f"{MLFLOW_EXTRA_HINT}"
        ) from exc
    return mlflow


def default_tracking_uri(run_dir: str | Path) -> str:
    """``sqlite:///<absolute parent of run_dir>/mlflow.db``: one store for sibling runs."""
    return f"sqlite:///{Path(run_dir).resolve().parent / MLFLOW_DB}"


def _sqlite_path(uri: str) -> Path | None:
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///") :])
    return None


def writable_tracking_uri(given: str | None, run_dir: Path) -> str:
    """The tracking URI to write to (``given``, else :func:`default_tracking_uri`); a usage
    error when it names an SQLite file in a folder that does not exist."""
    uri = given or default_tracking_uri(run_dir)
    db = _sqlite_path(uri)
    if db is not None and not db.parent.is_dir():
        raise UsageError(f"the tracking store's folder does not exist: {db.parent}")
    return uri


def ensure_experiment(client: MlflowClient, name: str, uri: str) -> str:
    """The id of the experiment ``name`` in the store at ``uri``: restored when it was
    deleted, created when there is none (its artifacts beside an SQLite store, in
    ``mlartifacts/``)."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        if found.lifecycle_stage == "deleted":
            client.restore_experiment(found.experiment_id)
        return str(found.experiment_id)
    db = _sqlite_path(uri)
    location = (db.parent / "mlartifacts").as_uri() if db is not None else None
    return str(client.create_experiment(name, artifact_location=location))


def mlflow_error(uri: str, exc: Exception) -> UsageError:
    """MLflow's error (an ``MlflowException``) as one usage line naming the store."""
    message = getattr(exc, "message", exc)
    return UsageError(f"MLflow ({uri}): {' '.join(str(message).split())}")
