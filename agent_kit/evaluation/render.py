"""The grid's table in the terminal: a Rich table of the cells and one of the differences."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from agent_kit.evaluation.figures import CellFigures, Difference
from agent_kit.evaluation.table import GridTable

__all__ = ["fmt_mean", "render_table"]


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


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _cells(table: GridTable, setting: str) -> Table:
    """The cells of one setting (the table's title), a row each; a state column when a cell
    of the grid did not complete."""
    currency = next((r.figures.currency for r in table.rows), "USD")
    states = any(r.figures.state != "completed" for r in table.rows)
    out = Table(title=setting, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD)
    out.add_column("policy", min_width=8, overflow="fold")
    for name in ("mean ± SE", "succ", f"pass@{table.k}", "turns", "in tok", "out tok"):
        out.add_column(name, justify="right", no_wrap=True)
    out.add_column(f"cost {currency}", justify="right", no_wrap=True)
    out.add_column("n", justify="right", no_wrap=True)
    if states:
        out.add_column("state", min_width=12, overflow="fold")
    for row in (r for r in table.rows if r.cell.setting_label == setting):
        f = row.figures
        cells: list[str | Text] = [
            row.cell.label,
            fmt_mean(f),
            _pct(f.success_rate),
            _pct(f.pass_at_k.get(table.k)),
            _num(f.turns, 1),
            _int(f.prompt_tokens),
            _int(f.sample_tokens),
            "–" if f.cost is None else f"{f.cost:.4f}",
            str(f.n),
        ]
        if states:
            state = Text(f.state, style="green" if f.state == "completed" else "bold red")
            if f.reason:
                state.append(f": {f.reason}", style="")
            cells.append(state)
        out.add_row(*cells)
    return out


def _verdict(d: Difference) -> Text:
    if d.significant is None:
        return Text("–")
    if d.significant:
        return Text("yes (> 2 SE)", style="bold green")
    return Text("no (within 2 SE)", style="yellow")


def _differences(table: GridTable) -> Table:
    labels = {r.cell.id: r.cell.label for r in table.rows}
    out = Table(title="differences (a − b)", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("setting", "a", "b", "a − b", "SE", "beyond 2 SE"):
        out.add_column(name, overflow="fold")
    for d in table.differences:
        out.add_row(
            d.setting,
            labels.get(d.a, d.a),
            labels.get(d.b, d.b),
            "–" if d.difference is None else f"{d.difference:+.3f}",
            _num(d.se),
            _verdict(d),
        )
    return out


def render_table(table: GridTable) -> RenderableType:
    """The cells' table, then the differences (when there are any)."""
    parts: list[RenderableType] = [Text("agent-kit eval", style="bold")]
    parts += [_cells(table, setting) for setting in table.settings()]
    if table.differences:
        parts.append(_differences(table))
    parts.append(
        Text(
            f"mean ± SE over prompts (SE: sd of the per-prompt means / √prompts); success and "
            f"pass@{table.k} at reward ≥ {table.threshold:g}; turns, prompt (in) and sample "
            "(out) tokens per rollout; cost of the cell",
            style="dim",
        )
    )
    return Group(*parts)
