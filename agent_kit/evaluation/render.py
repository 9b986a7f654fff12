"""The grid's table in the terminal: a Rich table of the cells per setting, the notes the cells
call for (why a cell did not complete, rollouts that hit the token limit or were cut, a cell
that failed as a whole) and the differences, paired by prompt where they can be.

The words and number formats here are the page's too (:mod:`agent_kit.evaluation.page`):
success, pass@k and the task's shares as percentages, differences with their sign.
"""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from agent_kit.evaluation.figures import CellFigures, Difference
from agent_kit.evaluation.table import GridRow, GridTable

__all__ = [
    "cell_notes",
    "fmt_diff",
    "fmt_mean",
    "fmt_pct",
    "fmt_task",
    "pairing",
    "render_table",
    "side",
    "task_names",
    "verdict",
]


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _int(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def fmt_mean(figures: CellFigures) -> str:
    """``0.625 ± 0.088`` (``–`` without a mean, no ± without an SE)."""
    if figures.mean is None:
        return "–"
    if figures.se is None:
        return f"{figures.mean:.3f}"
    return f"{figures.mean:.3f} ± {figures.se:.3f}"


def fmt_pct(value: float | None) -> str:
    """``75%`` (``–`` for None)."""
    return "–" if value is None else f"{value:.0%}"


def fmt_diff(value: float | None) -> str:
    """A difference with its sign: ``+0.549``, ``-0.021`` (``–`` for None)."""
    return "–" if value is None else f"{value:+.3f}"


def task_names(table: GridTable) -> list[str]:
    """The names of the task's own figures any cell has, in first-seen order."""
    return list(dict.fromkeys(name for r in table.rows for name in r.figures.task))


def fmt_task(table: GridTable, name: str, value: float | None) -> str:
    """A task figure: a percentage when every cell's value of it is in 0..1, else 3 digits."""
    if value is None:
        return "–"
    shares = all(0.0 <= r.figures.task[name] <= 1.0 for r in table.rows if name in r.figures.task)
    return fmt_pct(value) if shares else f"{value:.3g}"


def pairing(d: Difference) -> str:
    """``paired, 32 prompts`` or ``unpaired`` (the cells played different prompts, or one is
    known by its mean and SE only)."""
    if d.difference is None:
        return "–"
    return f"paired, {d.prompts} prompts" if d.paired else "unpaired"


def verdict(d: Difference) -> str:
    """``yes`` / ``no`` / ``–``: whether the difference is beyond two of its SE."""
    if d.significant is None:
        return "–"
    return "yes" if d.significant else "no"


def side(table: GridTable, cell_id: str, d: Difference) -> str:
    """One side of a difference: the policy's label, with its setting when the two cells'
    settings differ (``Solver (temperature=0.7)``)."""
    try:
        cell = table.row(cell_id).cell
    except KeyError:
        return cell_id
    return cell.label if d.setting else f"{cell.label} ({cell.setting_label})"


def cell_notes(row: GridRow) -> list[str]:
    """What a cell's row cannot hold, one phrase each: why it did not complete, how many
    rollouts hit the token limit, that every rollout failed, rollouts cut early."""
    f, notes = row.figures, []
    if f.state != "completed":
        notes.append(f.state + (f": {f.reason}" if f.reason and f.reason != f.state else ""))
    if f.token_limited:
        notes.append(f"{f.token_limited} of {f.n} rollouts hit the token limit")
    notes += [text for text in (f.failure, f.cut) if text]
    return notes


def _table(title: str, headers: list[str], rows: list[list[str | Text]], left: int = 1) -> Table:
    """A table whose every column is as wide as its widest cell: on a narrow terminal it runs
    past the edge rather than squeezing a label or a number (the first ``left`` columns are
    text, the rest right-aligned)."""
    widths = [
        max([len(name), *(len(str(row[i])) for row in rows)]) for i, name in enumerate(headers)
    ]
    # the whole width, so that no console narrower than it squeezes a column: the columns, a
    # space of padding on each side of each, a separator between two, the two edges
    whole = sum(widths) + 3 * len(widths) + 1
    out = Table(
        title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, width=whole
    )
    for i, (name, width) in enumerate(zip(headers, widths, strict=True)):
        out.add_column(name, justify="left" if i < left else "right", no_wrap=True, min_width=width)
    for row in rows:
        out.add_row(*row)
    return out


def _cells(table: GridTable, setting: str) -> Table:
    """The cells of one setting (the table's title), a row each; a state column when a cell
    of the grid did not complete (its reason is a note below, never folded into the column)."""
    currency = next((r.figures.currency for r in table.rows), "USD")
    states = any(r.figures.state != "completed" for r in table.rows)
    tasks = task_names(table)
    best = table.best(setting)
    headers = ["policy", "mean ± SE", "succ", f"pass@{table.k}", *tasks, "turns", "in tok"]
    headers += ["out tok", f"cost {currency}", "n", *(["state"] if states else [])]
    rows: list[list[str | Text]] = []
    for row in (r for r in table.rows if r.cell.setting_label == setting):
        f = row.figures
        label = row.cell.label + (" (best)" if best is not None and row is best else "")
        cells: list[str | Text] = [
            label,
            fmt_mean(f),
            fmt_pct(f.success_rate),
            fmt_pct(f.pass_at_k.get(table.k)),
            *(fmt_task(table, name, f.task.get(name)) for name in tasks),
            _num(f.turns, 1),
            _int(f.prompt_tokens),
            _int(f.sample_tokens),
            "–" if f.cost is None else f"{f.cost:.4f}",
            str(f.n),
        ]
        if states:
            cells.append(Text(f.state, style="green" if f.state == "completed" else "bold red"))
        rows.append(cells)
    return _table(setting, headers, rows)


def _verdict(d: Difference) -> Text:
    words = verdict(d)
    if words == "yes":
        return Text("yes (> 2 SE)", style="bold green")
    if words == "no":
        return Text("no (within 2 SE)", style="yellow")
    return Text("–")


def _differences(table: GridTable) -> Table:
    headers = ["setting", "a", "b", "a − b", "SE", "over", "beyond 2 SE"]
    rows: list[list[str | Text]] = [
        [
            d.setting or "–",
            side(table, d.a, d),
            side(table, d.b, d),
            fmt_diff(d.difference),
            _num(d.se),
            pairing(d),
            _verdict(d),
        ]
        for d in table.differences
    ]
    return _table("differences (a − b)", headers, rows, left=3)


def render_table(table: GridTable) -> RenderableType:
    """The cells' tables, their notes, then the differences (when there are any)."""
    parts: list[RenderableType] = [Text("agent-kit eval", style="bold")]
    parts += [_cells(table, setting) for setting in table.settings()]
    notes = [(r.cell.id, note) for r in table.rows for note in cell_notes(r)]
    for ident, note in notes:
        parts.append(Text(f"{ident}: {note}", style="yellow"))
    if table.differences:
        parts.append(_differences(table))
    parts.append(
        Text(
            f"mean ± SE over prompts (SE: sd of the per-prompt means / √prompts); success and "
            f"pass@{table.k} at reward ≥ {table.threshold:g}; turns, prompt (in) and sample "
            "(out) tokens per rollout; cost of the cell; a difference of two cells that played "
            "the same prompts is paired (SE: sd of the per-prompt differences / √prompts)",
            style="dim",
        )
    )
    return Group(*parts)
