"""The live display of ``agent-kit run`` on a terminal: :class:`LiveProgress`.

One ``rich.progress`` row (step, bar, rollouts done of total, rate and ETA as the driver
measures them) and a line of counts below it, fed by the driver's progress hook
(:data:`~agent_kit.driver.job.ProgressHook`). ``run`` shows it only when stdout is a terminal
and ``--json`` is not given.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
from rich.progress import Progress as RichProgress
from rich.text import Text

from agent_kit.driver.hooks import Progress
from agent_kit.reporting.terminal import num

__all__ = ["LiveProgress"]


def _fmt_seconds(value: float | None) -> str:
    if value is None:
        return "–"
    value = max(0.0, value)
    if value < 60:
        return f"{value:.0f}s"
    minutes, seconds = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class LiveProgress(RichProgress):
    """The live display of a job: a ``rich.progress`` row (step, bar, rollouts done of total,
    rate and ETA as the driver measures them) and a line of counts below it."""

    def __init__(self, console: Console) -> None:
        self.counts = Text("")  # read by get_renderables, which Progress calls as it is built
        super().__init__(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=30),
            MofNCompleteColumn(),
            TextColumn("rollouts"),
            TextColumn("{task.fields[speed]}"),
            console=console,
            refresh_per_second=4,
        )
        self._task = self.add_task("starting the emulator and the agent…", total=None, speed="")

    def show(self, p: Progress) -> None:
        """The driver's progress hook: show one snapshot."""
        counts = Text(
            f"rewarded {p.succeeded}  failed {p.failed}  retried {p.retried}  "
            f"in flight {p.in_flight}  reward mean {num(p.reward_mean)}"
        )
        if p.job_failures:
            counts.append(f"  job failures: {p.job_failures}", style="bold red")
        self.counts = counts
        self.update(
            self._task,
            description=f"step {p.step + 1}/{p.steps}",
            total=p.total,
            completed=p.done,
            speed=f"{p.rate:.2f}/s  ETA {_fmt_seconds(p.eta)}",
        )

    def get_renderables(self) -> Iterable[RenderableType]:
        """The task row, then the counts line (once the first snapshot came)."""
        yield from super().get_renderables()
        if self.counts:
            yield self.counts
