"""The dev loop: an iteration at the start, then one per batch of saves, until a signal.

:func:`run_dev` runs :func:`dev_loop` in its own event loop under the driver's
:class:`~agent_kit.driver.stop.GracefulStop` (SIGINT and SIGTERM): the first signal ends the
loop — an iteration in flight is cancelled (its job records itself interrupted, as a stopped
``agent-kit run`` does) — and the agent processes are ended before it returns; a second one
aborts at once (:class:`~agent_kit.errors.Aborted`; the agent processes still end, each also
watching for its parent's exit). The outcome names the last finished verdict.

:class:`Watcher` watches the sources' folders with watchfiles (the library ``uvicorn --reload``
uses) in a task of its own, so a save made while an iteration runs is kept for the next one;
saves that come together (within watchfiles' 50 ms step, at most its 1.6 s debounce) make one
batch, and every batch waiting when an iteration ends makes one iteration. Only the watched
files count (:class:`~agent_kit.dev.sources.Sources`, scanned again after every iteration).
``--once`` runs one iteration and never imports watchfiles. While it waits for a save, the
loop starts the next restart's agent processes ahead
(:meth:`~agent_kit.dev.agents.KeptAgents.prepare`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from agent_kit.dev.options import DevOptions
from agent_kit.dev.session import DevSession
from agent_kit.dev.sources import Sources
from agent_kit.dev.verdict import Verdict
from agent_kit.driver.stop import StopHook, play_stoppable
from agent_kit.errors import AgentKitError

__all__ = ["DevOutcome", "VerdictHook", "Watcher", "dev_loop", "run_dev"]

VerdictHook = Callable[[Verdict], None]
"""Called with every verdict as it is made (the CLI prints it)."""

_T = TypeVar("_T")


class Watcher:
    """Batches of changed watched files, from watchfiles (module docstring)."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self._batches: asyncio.Queue[set[Path]] = asyncio.Queue()
        self._stop = asyncio.Event()
        self._folders: frozenset[Path] = frozenset()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Watcher:
        self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _start(self) -> None:
        self._folders = self.sources.folders
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._watch(self._folders, self._stop))

    def _accept(self, change: Any, path: str) -> bool:
        del change  # added, modified and deleted all count
        return Path(path).resolve() in self.sources.files

    async def _watch(self, folders: frozenset[Path], stop: asyncio.Event) -> None:
        import watchfiles

        async for batch in watchfiles.awatch(
            *sorted(folders),
            watch_filter=self._accept,
            stop_event=stop,
            recursive=False,
            rust_timeout=500,
        ):
            self._batches.put_nowait({Path(path) for _, path in batch})

    async def next(self) -> set[Path]:
        """The next batch of changed files, with every batch already waiting merged in;
        :class:`AgentKitError` when the watch itself ended (a watched folder removed, the
        system's watch limit reached)."""
        batch = asyncio.ensure_future(self._batches.get())
        try:
            if self._task is not None:
                await asyncio.wait({batch, self._task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended = not batch.done()  # the watch ended, or this wait was cancelled (a stop)
            if ended:
                batch.cancel()
        if ended and self._task is not None:
            error = None if self._task.cancelled() else self._task.exception()
            why = "it ended" if error is None else f"{type(error).__name__}: {error}"
            folders = ", ".join(map(str, sorted(self._folders)))
            raise AgentKitError(f"watching {folders} stopped ({why})")
        paths = await batch
        while not self._batches.empty():
            paths |= self._batches.get_nowait()
        return paths

    async def follow(self, sources: Sources) -> None:
        """Watch ``sources`` from now on (the watch moves when their folders changed)."""
        self.sources = sources
        if sources.folders != self._folders:
            await self.aclose()
            self._start()

    async def aclose(self) -> None:
        """Stop watching (watchfiles notices within its timeout)."""
        self._stop.set()
        if self._task is not None:
            task, self._task = self._task, None
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _unless_stopped(work: Awaitable[_T], stop: asyncio.Event) -> tuple[bool, _T | None]:
    """Await ``work`` unless ``stop`` is set first (then it is cancelled): (done, result)."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if task.done():
        return True, task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False, None


async def dev_loop(
    options: DevOptions, on_verdict: VerdictHook, stop: asyncio.Event, *, once: bool = False
) -> Verdict | None:
    """Iterate on start, then on every batch of saves, until ``stop`` is set (module docstring);
    ``once``: one iteration. Returns the last finished verdict (None when none finished)."""
    session = DevSession(options)
    try:
        if once:
            _, first = await _unless_stopped(session.iterate(), stop)
            if first is not None:
                on_verdict(first)
            return first
        async with Watcher(session.sources) as watcher:
            done, last = await _unless_stopped(session.iterate(), stop)
            if last is not None:
                on_verdict(last)
            while done:
                await session.agents.prepare()  # the next restart's processes, warm by then
                await watcher.follow(session.sources)
                done, paths = await _unless_stopped(watcher.next(), stop)
                changes = session.sources.changes(paths or ())
                if not done or not changes.any:
                    continue
                done, verdict = await _unless_stopped(session.iterate(changes), stop)
                if verdict is not None:
                    last = verdict
                    on_verdict(verdict)
            return last
    finally:
        await session.aclose()


@dataclass(frozen=True)
class DevOutcome:
    """How a dev loop ended: its last verdict (None when none finished) and the signal that
    stopped it (None after ``--once``)."""

    last: Verdict | None
    stopped_by: signal.Signals | None


def run_dev(
    options: DevOptions,
    on_verdict: VerdictHook,
    *,
    once: bool = False,
    on_stop: StopHook | None = None,
) -> DevOutcome:
    """Run :func:`dev_loop` in a new event loop under a graceful stop (module docstring):
    ``on_stop`` is called with the first signal; a second raises
    :class:`~agent_kit.errors.Aborted`. UsageError for a baseline that cannot be read."""

    async def loop(stop: asyncio.Event) -> Verdict | None:
        return await dev_loop(options, on_verdict, stop, once=once)

    last, signum = play_stoppable(loop, on_stop)
    return DevOutcome(last, signum)
