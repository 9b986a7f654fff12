"""The end summary of a run on the terminal (Rich renderables) and as one line of JSON.

Built from the :class:`~agent_kit.reporting.summary_schema.Summary` only; nothing here prints
(``agent_kit.cli`` prints what :func:`render_terminal` returns). :func:`num` is the one rounding
rule of every figure shown.
"""

from __future__ import annotations

import io
import json
import math
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from rich.columns import Columns
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.constrain import Constrain
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from agent_kit.reporting.chaos import OUTCOMES
from agent_kit.reporting.summary_schema import Summary
from agent_kit.reporting.words import first_line, plural
from agent_kit.store.events import LIMIT_REASON
from agent_kit.store.layout import RunLayout
from agent_kit.store.run_figures import ROLLOUTS_FAILED

__all__ = ["num", "print_rendered", "render_json", "render_terminal"]

#: Width of the label column of the headline's lines ("  rollouts  ").
_LABEL_WIDTH: Final = 12
#: Entrypoint file names that say nothing of the agent: its folder names it instead.
_GENERIC_STEMS: Final = frozenset({"agent", "app", "main", "entrypoint", "__main__"})
#: The one-line meaning of the ``eval/*`` metrics shown for a training run.
_EVAL_NOTE: Final = (
    "eval/* are the figures an evaluation job reports, computed here over this run's rollouts: "
    "succeeded at reward ≥ {threshold}, failed_rollouts the rest of the finished (unsolved + "
    "lost), pass@k over each group's samples"
)
#: Below this magnitude a float is rounding noise (an advantage mean of 7e-19) and shows as 0.
_NOISE: Final = 1e-12
#: The ``rollout/reward/*`` statistics of the headline's reward line, in its order.
_REWARD_STATS: Final = ("mean", "std", "min", "max")
#: Metric groups in the order the end summary lists them (others follow, sorted).
_GROUP_ORDER: Final = (
    "rollout/reward",
    "rollout/turns",
    "rollout/tokens",
    "rollout/advantage",
    "eval/reward",
    "timing_s",
)


def num(value: Any) -> str:
    """The terminal's one rounding rule: integers (and integral floats) exact with thousands
    separators, other numbers to 3 significant digits, exact zero and float noise (|x| < 1e-12)
    as ``0``, ``–`` for a missing value."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, int | float):
        return str(value)
    x = float(value)
    if not math.isfinite(x):
        return str(x)
    if abs(x) < _NOISE:
        return "0"
    if x.is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    rounded = float(f"{x:.3g}")
    if abs(rounded) >= 1000:
        return f"{rounded:,.0f}"
    return f"{x:.3g}"


def _id(text: str, style: str = "") -> Text:
    """An identifier (ARN, path, command): never wrapped or folded, so it can be copied."""
    return Text(text, style=style, no_wrap=True, overflow="ignore")


def _line(label: str, *parts: Text | str) -> Table:
    """One labelled line: the label in its column, the text wrapped at word boundaries for the
    console's width, continuation lines under the text (never broken mid-word)."""
    value = Text()
    for part in parts:
        value.append(part if isinstance(part, Text) else Text(part))
    grid = Table.grid()
    grid.add_column(width=_LABEL_WIDTH, no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(Text(f"  {label}", style="bold"), value)
    return grid


def _agent_name(summary: Summary) -> str:
    """The agent a run played, as a person calls it: the entrypoint file's stem (its folder's
    name for a generic ``agent.py``/``app.py``/``main.py``), the last part of a URL or ARN, else
    the job's name."""
    entrypoint = summary.config.get("entrypoint")
    if isinstance(entrypoint, str) and entrypoint:
        if entrypoint.endswith(".py"):
            path = Path(entrypoint)
            generic = path.stem in _GENERIC_STEMS and path.parent.name
            return path.parent.name if generic else path.stem
        tail = entrypoint.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        if tail:
            return tail
    return summary.job.name


def _metric_groups(metrics: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Metrics grouped as the service names them: ``rollout/reward/*``, ``eval/reward/*``,
    ``timing_s/*`` … (a group is the name without its last part), in :data:`_GROUP_ORDER`."""
    groups: dict[str, list[tuple[str, Any]]] = {}
    for name, value in metrics.items():
        group = name.rsplit("/", 1)[0] if "/" in name else name
        groups.setdefault(group, []).append((name, value))
    known = [g for g in _GROUP_ORDER if g in groups]
    rest = sorted(g for g in groups if g not in _GROUP_ORDER)
    return [(g, groups[g]) for g in (*known, *rest)]


def _retries(n: int) -> str:
    return f"{num(n)} retr{'y' if n == 1 else 'ies'}"


def _what_ran(summary: Summary, run_dir: Path | None) -> str:
    """What the run's steps were: an ``agent-kit train`` run (its run directory holds
    train_config.json) trained; an ``agent-kit run`` of a training job only played its steps'
    rollouts (the emulator updates no weights); an evaluation job evaluated."""
    steps = len(summary.steps)
    if summary.job.mode == "evaluation":
        return f"evaluation, {plural(steps, 'step')} of rollouts"
    if run_dir is not None and RunLayout(run_dir).is_training():
        return f"training, {plural(steps, 'step')}"
    return f"{plural(steps, 'step')} of rollouts, no training"


def _floors(summary: Summary) -> str:
    """`` (N with the floor reward)`` when rewarded rollouts got the agent's floor reward (a
    failure on its side, not the reward function's score), else nothing."""
    floors = min(summary.floor_rewards, summary.counts.rewarded)
    return f" ({num(floors)} with the floor reward)" if floors else ""


def _headline(summary: Summary, run_dir: Path | None = None) -> list[RenderableType]:
    job, counts, metrics = summary.job, summary.counts, summary.metrics
    timing, cost = summary.timing, summary.cost
    threshold = summary.settings.success_threshold
    title = Text()
    title.append(f"agent-kit run {job.name}", style="bold")
    title.append(f"  {job.status}", style=_STATUS_STYLE.get(job.status, "bold"))
    title.append(f"  ({_what_ran(summary, run_dir)})")
    rewarded, lost, pending = counts.rewarded, counts.lost, counts.pending
    succeeded = metrics.get("eval/reward/succeeded_rollouts")
    finished = rewarded + lost
    lines: list[RenderableType] = [title, _id(f"  {'job':<10}{job.arn}")]
    lines.append(
        _line(
            "rollouts",
            f"{num(rewarded)} / {num(counts.slots)} rewarded{_floors(summary)} · {num(lost)} lost "
            f"(no reward) · {num(pending)} pending · {_retries(counts.retries)}",
        )
    )
    if succeeded is not None and finished:
        unsolved = max(0, rewarded - int(succeeded))
        lines.append(
            _line(
                "success",
                f"{num(100 * succeeded / finished)}% at reward ≥ {num(threshold)}: "
                f"{num(succeeded)} succeeded, {num(unsolved)} unsolved",
            )
        )
    mean, std, low, high = (metrics.get(f"rollout/reward/{stat}") for stat in _REWARD_STATS)
    reward = f"{num(mean)} ± sd {num(std)} (min {num(low)}, max {num(high)})"
    lines.append(_line("reward", reward))
    lines.append(
        _line(
            "speed",
            f"{num(timing.rollouts_per_s)} rollouts/s · wall {num(timing.wall_s)} s · "
            + plural(num(counts.turns), "turn"),
        )
    )
    est = ", estimated token usage" if summary.tokens.estimated else ""
    lines.append(
        _line(
            "cost",
            f"≈ {num(cost.total)} {cost.currency} for {_agent_name(summary)} · "
            f"{plural(num(summary.tokens.total), 'token')}{est} · {cost.label}",
        )
    )
    aux = summary.auxiliary
    if aux is not None:
        kinds = ", ".join(f"{k} {num(v.calls)}" for k, v in aux.by_kind.items())
        lines.append(
            _line(
                "auxiliary",
                f"≈ {num(aux.cost)} {aux.currency} · {plural(num(aux.calls), 'call')} ({kinds}) · "
                f"{plural(num(aux.total_tokens), 'token')} · {aux.label}",
            )
        )
    return lines


_STATUS_STYLE: Final = {
    "completed": "bold green",
    "failed": "bold red",
    ROLLOUTS_FAILED: "bold red",
    "interrupted": "bold yellow",
    "stopped": "bold yellow",
}


def _problems(summary: Summary) -> list[RenderableType]:
    """One line for the failed rollouts by reason, one for the agent-side failures."""
    lines: list[RenderableType] = []
    reason = summary.run.failure_reason if summary.run is not None else None
    if summary.job.status in ("failed", ROLLOUTS_FAILED) and reason:
        lines.append(_line("failure", Text(first_line(str(reason)), style="red")))
    if summary.job.status == "interrupted":
        pending = summary.counts.pending
        lines.append(
            _line(
                "stopped",
                Text(
                    "interrupted (Ctrl-C or SIGTERM): "
                    f"{plural(num(pending), 'slot')} not played or "
                    "cut short; --resume plays them",
                    style="yellow",
                ),
            )
        )
    if summary.failures:
        parts = "; ".join(f"{first_line(item.reason)} ×{item.count}" for item in summary.failures)
        lines.append(_line("failed", Text(f"rollouts without a reward: {parts}", style="red")))
    if summary.agent_failures:
        floors = summary.floor_rewards
        parts = "; ".join(f"{first_line(f.reason)} ×{f.count}" for f in summary.agent_failures)
        lines.append(
            _line(
                "agent",
                Text(
                    f"agent-side failures ({num(floors)} floor reward"
                    f"{'' if floors == 1 else 's'}): {parts}",
                    style="red",
                ),
            )
        )
    for hint in summary.hints:
        lines.append(_line("hint", Text(str(hint), style="yellow")))
    return lines


def _chaos_block(summary: Summary) -> list[RenderableType]:
    """Per injected fault: calls and rollouts it hit, and how those rollouts ended."""
    chaos = summary.chaos
    if chaos is None:
        return []
    fate = "the job failed" if chaos.job_failed else "the job survived"
    title = Text("chaos", style="bold")
    title.append(f"  {fate}")
    head: list[RenderableType] = [title, _id(f"  {'spec':<10}{chaos.spec or '(none)'}")]
    if not chaos.faults:
        return [*head, Text("  no fault was injected at these rates", style="dim")]
    table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False)
    table.add_column("  fault", no_wrap=True)
    for name in ("calls", "rollouts", *OUTCOMES):
        table.add_column(name, justify="right", no_wrap=True)
    for row in chaos.faults:
        outcomes = row.outcomes
        table.add_row(
            f"  {row.fault}",
            num(row.calls),
            num(row.rollouts),
            *(num(outcomes.get(name, 0)) for name in OUTCOMES),
        )
    return [*head, table]


def _metrics_block(summary: Summary) -> list[RenderableType]:
    """The metrics, one block per service group, full names (as the service spells them) in
    as many columns as the width allows."""
    groups = _metric_groups(summary.metrics)
    width = max((len(name) for _, group in groups for name, _ in group), default=0) + 10
    parts: list[RenderableType] = [Text("MTRL metrics", style="bold")]
    for group, members in groups:
        cells = []
        for name, value in members:
            cell = Text("  " + name.ljust(width - 10), no_wrap=True, overflow="ignore")
            cell.append(num(value).rjust(8))
            cells.append(cell)
        columns = Columns(cells, width=width, padding=(0, 1))
        parts.append(_AtMostWhenPiped(columns, _METRIC_COLUMNS_WIDTH))
        if group.startswith("eval/") and summary.job.mode == "training":
            note = _EVAL_NOTE.format(threshold=num(summary.settings.success_threshold))
            parts.append(Padding(Text(note, style="dim"), (0, 0, 0, 2)))
    return parts


def _row_command(summary: Summary, prompt_index: int | None, program: str) -> str | None:
    """``agent-kit invoke`` of one dataset row of this run, when the summary names the agent
    entrypoint, the dataset and the row."""
    entrypoint, dataset = summary.config.get("entrypoint"), summary.config.get("dataset")
    if prompt_index is None or not isinstance(entrypoint, str) or not isinstance(dataset, str):
        return None
    return (
        f"{program} invoke {shlex.quote(entrypoint)} --dataset {shlex.quote(dataset)} "
        f"--row {prompt_index}"
    )


def _row_to_play(summary: Summary) -> tuple[str, int | None]:
    """What to look at on one row: the first job failure, else the first rollout that ended on
    a limit; ("", None) when neither."""
    failures = summary.run.job_failures if summary.run is not None else None
    for note in failures or ():
        if note.prompt_index is not None:
            why = first_line(note.reason or "job failure").split(" (", 1)[0]
            return f"play the row that failed the job alone ({why}):", note.prompt_index
    for brief in summary.failed:
        if (brief.reason or "").startswith(f"{LIMIT_REASON}:"):
            return "watch a rollout that ran into a limit, alone:", brief.prompt_index
    return "", None


def _next_block(summary: Summary, run_dir: Path | None, program: str) -> list[Text]:
    if run_dir is None:
        return []
    where = str(run_dir)
    lines = [Text("next", style="bold")]

    def step(what: str, command: str) -> None:
        lines.append(Text(f"  {what}", style="dim"))
        lines.append(_id(f"    {command}"))

    report = RunLayout(run_dir).report
    if report.exists():
        step("open the report:", report.resolve().as_uri())
    what, prompt_index = _row_to_play(summary)
    row_command = _row_command(summary, prompt_index, program)
    if row_command is not None:
        step(what, row_command)
    if summary.lowest:
        worst = summary.lowest[0]
        what = f"read the lowest-scoring rollout turn by turn (reward {num(worst.reward)})"
        if report.exists():  # the report keeps the transcripts of the lowest-scoring rollouts
            step(f"{what}:", f"{report.resolve().as_uri()}#tx-{worst.id}")
        else:
            step(f"{what}, in the report it writes:", f"{program} report {where} --html")
    if summary.counts.rewarded:  # a reward audit needs rewards to look at
        step("audit the reward function:", f"{program} doctor reward {where}")
        step(
            "plan the real job (the service's default shape; the projection's rule):",
            f"{program} job plan {where}",
        )
    status = summary.job.status
    if status in ("interrupted", "stopped") or (status == "running" and summary.counts.pending):
        step("play the remaining slots:", RunLayout(run_dir).resume_command(program))
    return lines


def render_terminal(
    summary: Summary, run_dir: Path | None = None, *, program: str = "agent-kit"
) -> RenderableType:
    """The end summary of a run, from its summary: a headline (what its steps were: rollouts
    only, training — a run directory of ``agent-kit train`` — or evaluation; rollouts
    rewarded of the slots, success rate at the threshold, reward mean ± sd, rate, wall time,
    cost estimate), the failed rollouts and agent-side failures by reason, hints, the chaos
    table of a ``--chaos`` run (per fault: rollouts hit and how they ended), the MTRL metrics
    grouped as the service names them, the projection, and — given the run's directory — what
    to do next (the report's ``file://`` link, ``agent-kit invoke`` of the row that failed the
    job or ran into a limit, the lowest-scoring rollout's transcript in the report, the reward audit
    when a rollout was rewarded, the resume command of an unfinished run). Those commands start
    with ``program``: the CLI passes the one that runs as pasted in the user's shell
    (:func:`agent_kit.cli.program.program`, e.g. ``.venv/bin/agent-kit`` off PATH).

    Words: a rollout *failed* when it got no reward (the job's meaning); a rewarded episode
    below the success threshold is *unsolved*. Metric names stay as the service spells them
    (its ``eval/reward/failed_rollouts`` counts the unsolved ones). Numbers follow :func:`num`.
    Identifiers (the job ARN, paths, commands) are never wrapped: print with ``crop=False`` so
    one longer than the width is not cut either.
    """
    parts: list[RenderableType] = [*_headline(summary, run_dir), *_problems(summary)]
    chaos = _chaos_block(summary)
    if chaos:
        parts += [Text(""), *chaos]
    parts += [Text(""), *_metrics_block(summary)]
    if summary.projection is not None:
        parts += [Text(""), Text("projection: " + summary.projection.text)]
    next_lines = _next_block(summary, run_dir, program)
    if next_lines:
        parts += [Text(""), *next_lines]
    return Group(*parts)


def render_json(summary: Summary) -> str:
    """The summary as one line of strict JSON (no NaN), keys in ``summary.json``'s order."""
    return json.dumps(
        summary.document(), separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


#: The width output is laid out at when it goes to no terminal (a pipe, a file) and COLUMNS is
#: unset: wide enough that no line is wrapped or cut (the metric columns keep to
#: :data:`_METRIC_COLUMNS_WIDTH` there).
PIPED_WIDTH: Final = 1000
#: Where the output is no terminal, the metric columns fill at most this width (on a terminal,
#: the terminal's).
_METRIC_COLUMNS_WIDTH: Final = 100


class _AtMostWhenPiped:
    """``renderable`` as is on a terminal; elsewhere constrained to ``width`` columns."""

    def __init__(self, renderable: RenderableType, width: int) -> None:
        self.renderable, self.width = renderable, width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.renderable if console.is_terminal else Constrain(self.renderable, self.width)


def print_rendered(console: Console, renderable: RenderableType) -> None:
    """Print ``renderable`` on ``console``: on a terminal as Rich lays it out for its width,
    never cropped; to a pipe or a file at ``COLUMNS`` (else :data:`PIPED_WIDTH`) columns, so no
    line is wrapped at 80 or cut, without colour and without trailing spaces."""
    if console.is_terminal:
        console.print(renderable, soft_wrap=False, crop=False)
        return
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH
    wide = Console(
        file=io.StringIO(), width=width, color_system=None, highlight=False, soft_wrap=False
    )
    with wide.capture() as captured:
        wide.print(renderable, soft_wrap=False, crop=False)
    lines = [line.rstrip() for line in captured.get().splitlines()]
    console.file.write("\n".join(lines) + "\n")
    console.file.flush()
