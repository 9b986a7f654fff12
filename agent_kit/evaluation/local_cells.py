"""The local source of cell figures: each cell a run through the driver, in its own directory.

The eval directory (``--out``) holds ``grid.json`` (the spec, :class:`EvalLayout`), one run
directory per cell (``OUT/<cell id>/``: ``run.sqlite``, ``summary.json``, ``report.html``,
replayable with ``agent-kit replay OUT/<cell id>``), and the table's ``table.json`` and
``eval.html``. A cell is played by :func:`agent_kit.driver.local.play_local` with a
:class:`~agent_kit.driver.config.RunConfig`: the grid's entrypoint and holdout, one step of
every prompt × ``samples``, the cell's policy and inference settings, its ``env.*`` settings in
the agent processes' environment (``RunConfig.extra_env``, recorded with the run as its
``agent_env``, so a replay or resume of the cell gives it again).

Cells run one after another: each run starts its own agent processes, since the driver gives
every run its own emulator port and AWS keys and closes its agents as it ends (sharing them
between runs would take changes deep in the driver).

Re-running the grid in the same directory (:func:`run_grid`) reads a finished cell (its
``summary.json`` says completed, rollouts_failed or failed) and does not play it again; an
interrupted one (a summary that says so, or a store without a summary: a killed run) is
resumed with ``RunConfig.resume``; a cell that could not start leaves no directory and is tried
again. A cell that fails as a whole (the agent cannot start, the policy cannot answer, the job
fails) is marked with its reason and the others still run.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Final

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.dataset import load_dataset
from agent_kit.driver.hooks import JobHooks, Progress, ProgressHook
from agent_kit.driver.local import run_local
from agent_kit.driver.stop import StopHook, play_stoppable
from agent_kit.emulator.policies import PolicyBackend
from agent_kit.errors import AgentKitError, UsageError
from agent_kit.evaluation.figures import CellFigures, CellState
from agent_kit.evaluation.grid import GRID_SCHEMA, Cell, GridSpec
from agent_kit.reporting.summary_schema import Summary, read_summary
from agent_kit.store import RunStore, load_rollouts, resolve_path
from agent_kit.store.layout import SUMMARY_FILE

__all__ = [
    "GRID_FILE",
    "PAGE_FILE",
    "TABLE_FILE",
    "EvalLayout",
    "GridRun",
    "cell_config",
    "play_cell",
    "progress_lines",
    "read_cell",
    "run_grid",
]

#: The files of an eval directory.
GRID_FILE: Final = "grid.json"
TABLE_FILE: Final = "table.json"
PAGE_FILE: Final = "eval.html"
#: The most prompts a cell plays (one step of the whole holdout).
_MAX_PROMPTS: Final = 1024
_FINISHED: Final[dict[str, CellState]] = {
    "completed": "completed",
    "rollouts_failed": "rollouts_failed",
    "failed": "failed",
}


@dataclass(frozen=True)
class EvalLayout:
    """The files of an eval directory (see the module docstring)."""

    root: Path

    @property
    def grid(self) -> Path:
        """``grid.json``: the grid's spec and cells."""
        return self.root / GRID_FILE

    @property
    def table(self) -> Path:
        """``table.json``: the table document."""
        return self.root / TABLE_FILE

    @property
    def page(self) -> Path:
        """``eval.html``: the table and its plot."""
        return self.root / PAGE_FILE

    def cell_dir(self, cell: Cell) -> Path:
        """The run directory of a cell."""
        return self.root / cell.id

    def check(self, spec: GridSpec) -> None:
        """Refuse a directory that holds another grid (another agent, holdout, samples or
        base settings): UsageError naming what differs. Creates the directory."""
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(f"--out {self.root} is not a directory")
        if self.grid.is_file():
            try:
                recorded = json.loads(self.grid.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                raise UsageError(f"{self.grid} cannot be read: use another --out") from None
            if not isinstance(recorded, dict) or recorded.get("schema") != GRID_SCHEMA:
                raise UsageError(f"{self.grid} is not an agent-kit eval grid: use another --out")
            mine = spec.identity()
            theirs = {k: recorded.get(k) for k in mine}
            differs = [k for k in mine if mine[k] != theirs[k]]
            if differs:
                raise UsageError(
                    f"--out {self.root} holds another grid ({', '.join(differs)} differ): "
                    "use another --out"
                )
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(
                f"--out {self.root} cannot be created: {exc.strerror or exc}"
            ) from None


def _cell_figures(summary: Summary, run_dir: Path, k: int, threshold: float) -> CellFigures:
    """The figures of a cell's run: from its store's rollouts (with their turns: rewards per
    prompt, tool calls, the token limit, :meth:`CellFigures.from_rollouts`), the rest from its
    summary (turns, tokens per rewarded rollout, prefill + sample cost)."""
    with RunStore.open(run_dir, readonly=True) as store:
        records = load_rollouts(store, summary.job.arn, with_turns=True)
    status = summary.job.status
    state = _FINISHED.get(status, "interrupted")
    reason = None
    if state != "completed":
        reason = (summary.run.failure_reason if summary.run is not None else None) or status
    per = summary.tokens.per_rollout
    max_tokens = summary.flat_config().get("max_tokens")
    return CellFigures.from_rollouts(
        records,
        threshold=threshold,
        k=k,
        max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        state=state,
        reason=reason,
        turns=summary.metrics.get("rollout/turns/mean"),
        prompt_tokens=per.get("prefill"),
        sample_tokens=per.get("sample"),
        cost=summary.cost.prefill + summary.cost.sample,
        currency=summary.cost.currency,
        location=str(run_dir),
    )


def read_cell(run_dir: Path, k: int, threshold: float) -> CellFigures | None:
    """The figures of the cell whose run directory is ``run_dir``; None when it holds no run
    (the cell is still to play). A run without a readable summary is ``interrupted``."""
    if not resolve_path(run_dir).exists():
        return None
    summary = read_summary(run_dir / SUMMARY_FILE)
    if summary is None:
        return CellFigures(state="interrupted", reason="no summary (the run was killed)")
    return _cell_figures(summary, run_dir, k, threshold)


def cell_config(spec: GridSpec, cell: Cell, out: Path, run: RunConfig) -> RunConfig:
    """The run of a cell: ``run``'s settings (workers, memory …) with the grid's agent and
    holdout, the base job settings, the cell's policy, inference settings and environment."""
    rows = len(load_dataset(spec.dataset))
    if rows > _MAX_PROMPTS:
        raise UsageError(
            f"the holdout has {rows} prompts; a grid cell plays at most {_MAX_PROMPTS}"
        )
    known = {f.name for f in fields(JobConfig)}
    base = {k: v for k, v in spec.base.items() if k in known}
    job = JobConfig(
        **{
            **base,
            "name": cell.id,
            "policy": cell.policy,
            "group_size": spec.samples,
            "batch_size": rows,
            "steps": 1,
            **cell.inference,
        }
    )
    return replace(
        run, entrypoint=spec.entrypoint, dataset=Path(spec.dataset), job=job, out=out,
        resume=None, extra_env=cell.env or None,
    )  # fmt: skip


@dataclass(frozen=True)
class GridRun:
    """What :func:`run_grid` did: the figures by cell id, the cells it played this time, and
    the signal that stopped it (None: every cell had its turn)."""

    figures: dict[str, CellFigures]
    played: tuple[str, ...]
    stopped_by: signal.Signals | None


Echo = Callable[[str], None]


def progress_lines(name: str, echo: Echo) -> ProgressHook:
    """A progress hook that echoes ``<name>: N/M rollouts`` each time a quarter more (or the
    last) of a cell's rollouts are done: the one progress line of a grid's cells and of a
    training run's holdout."""
    shown = [-1]

    def hook(progress: Progress) -> None:
        quarter = progress.done * 4 // max(1, progress.total)
        if progress.done and quarter > shown[0]:
            shown[0] = quarter
            echo(f"{name}: {progress.done}/{progress.total} rollouts")

    return hook


async def play_cell(
    config: RunConfig,
    name: str,
    echo: Echo,
    *,
    stop: asyncio.Event | None = None,
    policy: PolicyBackend | None = None,
) -> CellFigures | None:
    """Play one cell's run (:func:`cell_config`) through the driver, its outputs written as it
    ends; ``policy`` a backend object to play instead of the one the config names (a training
    run's live model). Returns the cell's figures when it could not run (``error``, with the
    reason), else None: its figures are read back from its run directory (:func:`read_cell`).
    The one runner of a grid's cells and a training run's holdout."""
    hooks = JobHooks(progress=progress_lines(name, echo), stop=stop)
    try:
        await run_local(config, hooks, policy=policy)
    except AgentKitError as exc:
        return CellFigures(state="error", reason=exc.message)
    return None


def _play_cell(
    config: RunConfig, cell: Cell, echo: Echo, on_stop: StopHook | None
) -> tuple[CellFigures | None, signal.Signals | None]:
    """Play one cell in its own event loop under a graceful stop; (figures when it could not
    run, the signal that stopped it)."""

    async def job(stopped: asyncio.Event) -> CellFigures | None:
        return await play_cell(config, f"  {cell.id}", echo, stop=stopped)

    return play_stoppable(job, on_stop)


def run_grid(
    spec: GridSpec,
    out: Path,
    run: RunConfig,
    *,
    k: int,
    threshold: float,
    echo: Echo,
    on_stop: StopHook | None = None,
) -> GridRun:
    """Play every cell of ``spec`` that is not finished in ``out`` (see the module docstring);
    stops after the cell a signal stopped. ``run`` carries the run settings every cell shares
    (workers, agent memory, lenient auth …). Writes ``grid.json`` first."""
    layout = EvalLayout(out)
    layout.check(spec)
    layout.grid.write_text(json.dumps(spec.document(), indent=2) + "\n", encoding="utf-8")
    figures: dict[str, CellFigures] = {}
    played: list[str] = []
    cells = spec.cells()
    for index, cell in enumerate(cells, 1):
        run_dir = layout.cell_dir(cell)
        found = read_cell(run_dir, k, threshold)
        if found is not None and found.state != "interrupted":
            echo(f"cell {index}/{len(cells)} {cell.id}: {found.state} (kept)")
            figures[cell.id] = found
            continue
        if found is None:
            config = cell_config(spec, cell, out, run)
            echo(f"cell {index}/{len(cells)} {cell.id}: {cell.setting_label}")
        else:
            config = replace(run, resume=run_dir, extra_env=cell.env or None)
            echo(f"cell {index}/{len(cells)} {cell.id}: resuming")
        failed, stopped = _play_cell(config, cell, echo, on_stop)
        played.append(cell.id)
        figures[cell.id] = failed or read_cell(run_dir, k, threshold) or _lost(cell)
        if stopped is not None:
            return GridRun(figures, tuple(played), stopped)
    return GridRun(figures, tuple(played), None)


def _lost(cell: Cell) -> CellFigures:
    return CellFigures(state="error", reason=f"the run of {cell.id} left no directory")


def base_settings(options: dict[str, Any]) -> dict[str, Any]:
    """The job settings among a command's options (named like JobConfig's fields)."""
    known = {f.name for f in fields(JobConfig)}
    return {k: v for k, v in options.items() if k in known}
