"""The local source of cell figures: each cell a run through the driver, in its own directory.

The eval directory (``--out``) holds ``grid.json`` (the spec, :class:`EvalLayout`), one run
directory per cell (``OUT/<cell id>/``: ``run.sqlite``, ``summary.json``, ``report.html``,
replayable with ``agent-kit replay OUT/<cell id>``), and the table's ``table.json`` and
``eval.html``. A cell is played by :func:`play_cell` (the driver's ``run_local``) with a
:class:`~agent_kit.driver.config.RunConfig`: the grid's entrypoint and holdout, one step of
every prompt × ``samples``, the cell's policy and inference settings, its ``env.*`` settings in
the agent processes' environment (``RunConfig.extra_env``, recorded with the run as its
``agent_env``, so a replay or resume of the cell gives it again).

Cells run one after another: each run starts its own agent processes, since the driver gives
every run its own emulator port and AWS keys and closes its agents as it ends (sharing them
between runs would take changes deep in the driver).

Before any cell plays, every cell's settings and scripted policies are checked
(:func:`check_cells`) and every cell's folder is read (:func:`survey`): a folder holding a run
that is not its cell's (another policy, agent, holdout, samples or setting) is refused, never
kept nor played over; ``grid.json`` is written once the grid is accepted. Re-running the grid
in the same directory (:func:`run_grid`) reads a finished cell (its ``summary.json`` says
completed, rollouts_failed or failed) and does not play it again; an interrupted one (a summary
that says so, or a store without a summary: a killed run) is resumed with
``RunConfig.resume``; a cell whose folder holds no run (no store, or a store created with no
run in it) is played. A cell that fails as a whole (the agent cannot start, the policy cannot
answer, the job fails) is marked with its reason and the others still run. Every file of the
eval directory is written whole or not at all (:func:`write_file`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import signal
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Final

from agent_kit.driver.config import JobConfig, RunConfig, recorded_agent_env
from agent_kit.driver.dataset import Dataset, load_dataset
from agent_kit.driver.hooks import JobHooks, Progress, ProgressHook
from agent_kit.driver.job_setup import dataset_digest
from agent_kit.driver.local import run_local
from agent_kit.driver.stop import StopHook, play_stoppable
from agent_kit.emulator.policies import PolicyBackend
from agent_kit.emulator.policies.registry import load_policy
from agent_kit.errors import AgentKitError, RunStoreError, UsageError
from agent_kit.evaluation.figures import CellFigures, CellState
from agent_kit.evaluation.grid import GRID_SCHEMA, Cell, GridSpec
from agent_kit.reporting.summary_schema import Summary, read_summary
from agent_kit.settings import DEFAULTS, Settings
from agent_kit.store import JobRow, RunStore, load_rollouts, resolve_path
from agent_kit.store.layout import SUMMARY_FILE

__all__ = [
    "CELL_FIELDS",
    "GRID_FILE",
    "PAGE_FILE",
    "TABLE_FILE",
    "EvalLayout",
    "GridRun",
    "Held",
    "base_settings",
    "cell_config",
    "check_cells",
    "play_cell",
    "progress_lines",
    "read_cell",
    "run_grid",
    "survey",
    "write_file",
]

#: The files of an eval directory.
GRID_FILE: Final = "grid.json"
TABLE_FILE: Final = "table.json"
PAGE_FILE: Final = "eval.html"
#: The most prompts a cell plays (one step of the whole holdout).
_MAX_PROMPTS: Final = 1024
#: The job settings a cell sets itself (never a shared setting of the grid).
CELL_FIELDS: Final = frozenset({"name", "policy", "group_size", "batch_size", "steps"})
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
            if isinstance(theirs["base"], dict):  # an earlier grid.json listed the policies there
                theirs["base"] = {k: v for k, v in theirs["base"].items() if k not in CELL_FIELDS}
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


def _holdout(spec: GridSpec) -> Dataset:
    """The grid's holdout; UsageError when a cell cannot play it in one step."""
    data = load_dataset(spec.dataset)
    if len(data) > _MAX_PROMPTS:
        raise UsageError(
            f"the holdout has {len(data)} prompts; a grid cell plays at most {_MAX_PROMPTS}"
        )
    return data


def _cell_job(spec: GridSpec, cell: Cell, rows: int) -> JobConfig:
    """The job settings of a cell: the base ones, its policy and shape, its inference ones."""
    known = {f.name for f in fields(JobConfig)}
    base = {k: v for k, v in spec.base.items() if k in known}
    return JobConfig(
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


@dataclass(frozen=True)
class Held:
    """What a cell's folder holds (:func:`survey`): a run of this cell (``job``, its store's
    last job), no run (``job`` None: the cell is played; ``empty`` says why when a store is
    there, created but holding no run), or a store that cannot be read (``damaged``: the cell is
    an error, its folder left as it is)."""

    job: JobRow | None = None
    empty: str | None = None
    damaged: str | None = None


def _held(run_dir: Path) -> Held:
    file = resolve_path(run_dir)
    if not file.is_file():
        return Held()
    if file.stat().st_size == 0:
        return Held(empty="its run store is empty (0 bytes)")
    try:
        with RunStore.open(run_dir, readonly=True) as store:
            jobs = store.list_jobs()
    except RunStoreError as exc:
        if "holds no run" in exc.message:  # a store created, nothing written in it
            return Held(empty="its run store holds no run")
        return Held(damaged=exc.message)
    if not jobs:
        return Held(empty="its run store holds no job")
    return Held(job=jobs[-1])


#: A difference's words (a JobConfig field or a recorded detail → what the user calls it).
_WORDS: Final = {"group_size": "samples", "batch_size": "holdout size", "name": "job name"}


def _differences(
    spec: GridSpec, cell: Cell, data: Dataset, run_dir: Path, job: JobRow
) -> list[str]:
    """What a run recorded that the cell would not (its job settings, agent, holdout,
    ``env.`` settings), in words; empty when the run is the cell's."""
    record = job.config
    expected = _cell_job(spec, cell, len(data)).validated(len(data)).to_dict()
    try:
        recorded = JobConfig.from_record(record, run_dir).to_dict()
    except UsageError:
        recorded = {}
    differ = [_WORDS.get(k, k) for k, v in expected.items() if recorded.get(k) != v]
    agent = spec.entrypoint
    if agent.endswith(".py"):
        agent = str(Path(agent).resolve())
    if record.get("entrypoint") != agent:
        differ.append("entrypoint")
    if record.get("dataset_sha256") != dataset_digest(data):
        differ.append("holdout")
    if recorded_agent_env(record) != cell.env:
        differ.append("env. settings")
    return differ


def survey(layout: EvalLayout, spec: GridSpec) -> dict[str, Held]:
    """What every cell's folder holds (cell id → :class:`Held`), before any cell plays.
    A folder holding a run that is not its cell's (another policy, agent, holdout, samples,
    setting: a run named like the cell) is refused: UsageError naming the folder and what
    differs (it is neither kept as the cell nor played over)."""
    data = _holdout(spec)
    out: dict[str, Held] = {}
    for cell in spec.cells():
        run_dir = layout.cell_dir(cell)
        held = _held(run_dir)
        if held.job is not None:
            differ = _differences(spec, cell, data, run_dir, held.job)
            if differ:
                raise UsageError(
                    f"{run_dir} holds a run that is not the cell {cell.id} (its "
                    f"{', '.join(differ)} differ): move it out of --out {layout.root} or use "
                    "another --out"
                )
        out[cell.id] = held
    return out


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temporary file renamed over it);
    RunStoreError naming the file when it cannot be written (a full disk): what was there
    stays."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise RunStoreError(
            f"cannot write {path}: {exc.strerror or exc} (the cells' runs are kept; make room "
            "and run the same command again)"
        ) from None


def cell_config(spec: GridSpec, cell: Cell, out: Path, run: RunConfig) -> RunConfig:
    """The run of a cell: ``run``'s settings (workers, memory …) with the grid's agent and
    holdout, the base job settings, the cell's policy, inference settings and environment."""
    job = _cell_job(spec, cell, len(_holdout(spec)))
    return replace(
        run, entrypoint=spec.entrypoint, dataset=Path(spec.dataset), job=job, out=out,
        resume=None, extra_env=cell.env or None,
    )  # fmt: skip


def check_cells(spec: GridSpec, settings: Settings = DEFAULTS) -> int:
    """Refuse, before any cell plays (and before a plan), what would fail every cell as a
    whole: a holdout over one step of a cell, a shared or cell setting out of its range (the
    job's own check, :meth:`JobConfig.validated`, where the ranges are declared), a setting
    that is no finite number, a scripted policy that does not load. Returns the holdout's
    prompts; UsageError naming the setting or the policy."""
    rows = len(_holdout(spec))
    for cell in spec.cells():
        _cell_job(spec, cell, rows).validated(rows)
    for name, value in spec.base.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"--{name.replace('_', '-')} must be a finite number, got {value}")
    for policy in spec.policies:
        if policy.strip().partition(":")[0].strip().lower() == "scripted":
            load_policy(policy, settings=settings)  # a missing NAME is said now, not at its cell
    return rows


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
    (workers, agent memory, lenient auth …). Everything is checked first (:func:`check_cells`,
    the directory, what each cell's folder holds: :func:`survey`); ``grid.json`` is written
    once the grid is accepted."""
    layout = EvalLayout(out)
    check_cells(spec, run.settings)
    layout.check(spec)
    found = survey(layout, spec)
    write_file(layout.grid, json.dumps(spec.document(), indent=2, allow_nan=False) + "\n")
    figures: dict[str, CellFigures] = {}
    played: list[str] = []
    cells = spec.cells()
    for index, cell in enumerate(cells, 1):
        run_dir, held = layout.cell_dir(cell), found[cell.id]
        head = f"cell {index}/{len(cells)} {cell.id}"
        if held.damaged is not None:
            echo(f"{head}: error ({held.damaged})")
            figures[cell.id] = CellFigures(
                state="error", reason=held.damaged, location=str(run_dir)
            )
            continue
        kept = read_cell(run_dir, k, threshold) if held.job is not None else None
        if kept is not None and kept.state != "interrupted":
            echo(f"{head}: {kept.state} (kept)")
            figures[cell.id] = kept
            continue
        if kept is None:
            config = cell_config(spec, cell, out, run)
            again = f" ({held.empty}: played again)" if held.empty else ""
            echo(f"{head}: {cell.setting_label}{again}")
        else:
            config = replace(run, resume=run_dir, extra_env=cell.env or None)
            echo(f"{head}: resuming")
        failed, stopped = _play_cell(config, cell, echo, on_stop)
        played.append(cell.id)
        figures[cell.id] = failed or read_cell(run_dir, k, threshold) or _lost(cell)
        if stopped is not None:
            return GridRun(figures, tuple(played), stopped)
    return GridRun(figures, tuple(played), None)


def _lost(cell: Cell) -> CellFigures:
    return CellFigures(state="error", reason=f"the run of {cell.id} left no directory")


def base_settings(options: dict[str, Any]) -> dict[str, Any]:
    """The job settings every cell shares among a command's options (named like JobConfig's
    fields), less those each cell sets itself (:data:`CELL_FIELDS`: its policy, name and
    shape), so a re-run may add a policy."""
    known = {f.name for f in fields(JobConfig)} - CELL_FIELDS
    return {k: v for k, v in options.items() if k in known}
