"""``agent-kit replay``: re-run recorded episodes and report what changed; export cassettes.

- ``agent-kit replay RUN_DIR|CASSETTE [--entrypoint F] [--trajectory ID …] [--limit N] [--json]
  [--continue-on-divergence] [--fork-at K --policy SPEC] [--in-process] [--out DIR]``
  (short for ``agent-kit replay run …``): a summary table, the first diffs, and the JSON report
  (``--json``: the report JSON as the last stdout line). Exit code 0 only when every episode is
  identical (a fork: none diverged before K or failed); otherwise
  :class:`~agent_kit.errors.ReplayMismatch` (exit 10) after the report is printed.
- ``agent-kit replay export RUN_DIR --out cassette.jsonl [--trajectory ID …] [--limit N]``.

``replay`` is a command group whose default subcommand is ``run``: a first argument that is
not a subcommand name (``export``, ``run``) or ``--help`` is taken as ``run``'s RUN_DIR.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent_kit.cli.process import tune_process
from agent_kit.cli.run_options import WorkersOption, door_settings
from agent_kit.driver.config import JobConfig
from agent_kit.errors import RunStoreError
from agent_kit.replay.cassette import load_recording, write_cassette
from agent_kit.replay.divergence import DEFAULT_IGNORED_FIELDS, Normalization
from agent_kit.replay.engine import replay_run
from agent_kit.replay.inprocess import replay_in_process
from agent_kit.replay.verdicts import ReplayReport, describe
from agent_kit.reporting.words import plural
from agent_kit.store.layout import REPLAY_REPORT_FILE, RUN_FILE

__all__ = ["register"]

#: The one settings record's defaults, which ``replay``'s options default to.
_DEFAULTS: Final = JobConfig()

_STYLE = {
    "identical": "green",
    "diverged": "bold red",
    "reward_changed": "yellow",
    "forked": "cyan",
    "error": "bold red",
}


class _DefaultRunGroup(typer.core.TyperGroup):
    """A group that treats ``replay RUN_DIR …`` as ``replay run RUN_DIR …``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


def _table(report: ReplayReport) -> Table:
    table = Table(title=f"agent-kit replay ({report.mode})", title_justify="left")
    table.add_column("trajectory", overflow="fold")
    table.add_column("status")
    table.add_column("turns", justify="right")
    table.add_column("reward", justify="right")
    table.add_column("detail", overflow="fold")
    for e in report.episodes:
        reward = "–" if e.old_reward is None else f"{e.old_reward:.6g}"
        if e.new_reward != e.old_reward:
            reward += " → " + ("–" if e.new_reward is None else f"{e.new_reward:.6g}")
        turns = str(e.recorded_turns)
        if e.replayed_turns != e.recorded_turns:
            turns += f" → {e.replayed_turns}"
        detail = "" if e.status == "identical" else describe(e)
        table.add_row(
            e.trajectory_id, Text(e.status, style=_STYLE.get(e.status, "")), turns, reward, detail
        )
    return table


def _normalization(
    ignore: list[str] | None, strict: bool, ignore_whitespace: bool
) -> Normalization | None:
    if not (ignore or strict or ignore_whitespace):
        return None
    base = Normalization.strict() if strict else Normalization()
    fields = base.ignore | frozenset(ignore or ())
    return Normalization(
        ignore=fields,
        only=base.only,
        tool_call_ids=base.tool_call_ids,
        flatten_content=base.flatten_content,
        whitespace=ignore_whitespace,
    )


# The ``replay run`` options whose declarations take several lines (a plain comment: it
# describes the four aliases below, not only the first).
_Source = Annotated[
    Path, typer.Argument(help=f"Recorded run directory ({RUN_FILE}) or cassette (.jsonl).")
]
_Entrypoint = Annotated[
    str | None,
    typer.Option(help="Agent to replay through (default: the one the run recorded)."),
]
_InProcess = Annotated[
    bool,
    typer.Option(
        help="Replay inside this process (RolloutApp entrypoints; fastest; compares "
        "messages and tools only; no run directory)."
    ),
]
_Ignore = Annotated[
    list[str] | None,
    typer.Option(
        help="Also ignore this top-level request field (repeatable; always ignored: "
        f"{', '.join(sorted(DEFAULT_IGNORED_FIELDS))})."
    ),
]


def replay(
    ctx: typer.Context,
    run_dir: _Source,
    entrypoint: _Entrypoint = None,
    trajectory: Annotated[
        list[str] | None, typer.Option(help="Replay only this trajectory id (repeatable).")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Replay at most N episodes.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the JSON report as the last stdout line.")
    ] = False,
    continue_on_divergence: Annotated[
        bool,
        typer.Option(help="Keep serving recorded responses after a divergence."),
    ] = False,
    fork_at: Annotated[
        int | None,
        typer.Option(help="Replay turns < K from the recording, then continue with --policy."),
    ] = None,
    policy: Annotated[
        str | None, typer.Option(help="Live policy spec of a fork (with --fork-at).")
    ] = None,
    in_process: _InProcess = False,
    ignore: _Ignore = None,
    strict: Annotated[
        bool, typer.Option(help="Compare requests exactly (no field ignored, ids kept).")
    ] = False,
    ignore_whitespace: Annotated[
        bool, typer.Option(help="Treat runs of whitespace in message contents as equal.")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(help="Parent directory of the new run (default: beside the source run)."),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Name of the new run directory.")] = None,
    concurrency: Annotated[
        int, typer.Option(help="Episodes in flight at most.")
    ] = _DEFAULTS.concurrency,
    workers: WorkersOption = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds allowed per episode.")
    ] = _DEFAULTS.rollout_timeout,
    diffs: Annotated[int, typer.Option(help="Request diffs to print (0: none).")] = 3,
) -> None:
    """Re-run recorded episodes through the entrypoint and report any change (exit 10 if any)."""
    norm = _normalization(ignore, strict, ignore_whitespace)
    if in_process:
        if fork_at is not None or policy is not None:
            raise typer.BadParameter("--in-process cannot fork (use the default mode)")
        report = replay_in_process(
            run_dir, entrypoint, trajectories=trajectory, limit=limit, normalization=norm
        )
    else:
        tune_process(policies=[policy] if policy is not None else [])  # a fork's live policy
        with _unwritable_out():
            report = asyncio.run(
                replay_run(
                    run_dir,
                    entrypoint=entrypoint,
                    trajectories=trajectory,
                    limit=limit,
                    continue_on_divergence=continue_on_divergence,
                    normalization=norm,
                    fork_at=fork_at,
                    policy=policy,
                    out_dir=out,
                    name=name,
                    job=JobConfig(concurrency=concurrency, rollout_timeout=timeout),
                    workers=workers,
                    settings=door_settings(ctx),
                )
            )
    _print(report, as_json=as_json, diffs=diffs)
    report.raise_for_mismatch()


@contextlib.contextmanager
def _unwritable_out() -> Iterator[None]:
    """A replay run that cannot be written is a RunStoreError saying where, and to give
    ``--out`` (the recorded run is only read)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            raise
        where = Path(str(exc.filename))
        raise RunStoreError(
            f"cannot write the replay run under {where.parent}: {exc.strerror} "
            f"({where.name}); the recorded run is only read: give --out DIR "
            "somewhere writable"
        ) from None


def _print(report: ReplayReport, *, as_json: bool, diffs: int) -> None:
    if as_json:
        typer.echo(json.dumps(report.to_dict(), ensure_ascii=False, default=str))
        return
    console = Console(highlight=False, soft_wrap=True)
    console.print(_table(report))
    shown = 0
    for e in report.episodes:
        if e.diff and shown < diffs:
            shown += 1
            console.print(Text(f"{e.trajectory_id}: {describe(e)}", style="bold"))
            for line in e.diff.splitlines():
                style = "red" if line.startswith("-") else "green" if line.startswith("+") else ""
                console.print(Text(line, style=style))
    counts = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in report.counts.items() if v)
    console.print(
        Text(
            f"{plural(len(report.episodes), 'episode')}: {counts} "
            f"({report.episodes_per_s:.1f} episodes/s)",
            style="bold green" if report.ok else "bold red",
        )
    )
    if report.run_dir is not None:
        console.print(
            Text(f"replay run: {report.run_dir} (report: {REPLAY_REPORT_FILE})", style="dim")
        )


def export(
    run_dir: Annotated[Path, typer.Argument(help="Recorded run directory (or a cassette).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Cassette file to write (.jsonl).")],
    trajectory: Annotated[
        list[str] | None, typer.Option(help="Export only this trajectory id (repeatable).")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Export at most N episodes.")] = None,
) -> None:
    """Write selected episodes as a compact, versioned cassette (a replay source for tests)."""
    recording = load_recording(run_dir, trajectory, limit)
    path = write_cassette(out, recording)
    size = path.stat().st_size
    Console(highlight=False, soft_wrap=True).print(
        f"wrote {plural(len(recording.episodes), 'episode')} to {path} ({size / 1024:.1f} KiB)",
        markup=False,
    )


replay_app = typer.Typer(
    cls=_DefaultRunGroup,
    help="Replay recorded episodes (`agent-kit replay RUN_DIR` = `agent-kit replay run RUN_DIR`) "
    "or export them as a cassette.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
replay_app.command("run")(replay)
replay_app.command("export")(export)


def register(app: typer.Typer) -> None:
    """Add the ``replay`` group (default subcommand ``run``, plus ``export``) to the CLI."""
    app.add_typer(replay_app, name="replay")
