"""SIGINT and SIGTERM during a run: the first stops it gracefully, a second aborts it.

:class:`GracefulStop` takes both signals in the running event loop for as long as a job runs
(:meth:`GracefulStop.guard`):

- the first sets the stop event the job watches (``run_job(stop=...)``: no new rollout starts,
  the ones in flight get the grace period, the summary is written with status ``interrupted``)
  and calls the ``on_stop`` hook with the signal, so a caller can say what is happening;
- a second cancels the job at once (the driver still closes the store and writes the summary)
  and :meth:`~GracefulStop.guard` raises :class:`Aborted`.

Afterwards :attr:`GracefulStop.first` says which signal stopped the run, if any. A signal a
shell left ignored (a background job) stays ignored; off the main thread no handler can be set
and Ctrl-C stays a ``KeyboardInterrupt``. This module never prints: what a stop means to a user
(a message, an exit code) is the caller's.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from agent_kit.errors import Aborted

__all__ = ["STOP_SIGNALS", "GracefulStop", "StopHook", "play_stoppable"]

#: The signals that stop a run.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)

StopHook = Callable[[signal.Signals], None]
"""Called once, with the first signal, as the graceful stop begins."""

_T = TypeVar("_T")


class GracefulStop:
    """The stop of one run by SIGINT/SIGTERM (see the module docstring); one per run."""

    def __init__(self, on_stop: StopHook | None = None) -> None:
        #: Set by the first signal: the job's graceful stop (``run_job(stop=...)``).
        self.event = asyncio.Event()
        self.received: list[signal.Signals] = []
        self._on_stop = on_stop
        self._task: asyncio.Task[Any] | None = None
        self._installed: list[tuple[signal.Signals, Any]] = []

    @property
    def first(self) -> signal.Signals | None:
        """The signal that stopped the run (the first one received), or None."""
        return self.received[0] if self.received else None

    async def guard(self, job: Callable[[asyncio.Event], Awaitable[_T]]) -> _T:
        """Await ``job(stop_event)`` with the signals taken, and give them back afterwards.
        Raises :class:`Aborted` when a second signal cancelled it."""
        self._install()
        try:
            return await job(self.event)
        except asyncio.CancelledError:
            if len(self.received) > 1:
                raise Aborted(self.received[0]) from None
            raise
        finally:
            self._remove()

    def _install(self) -> None:
        """Take SIGINT and SIGTERM in the running loop, where that is possible."""
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        for signum in STOP_SIGNALS:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN:  # e.g. a shell's background job: leave it ignored
                continue
            try:
                loop.add_signal_handler(signum, self._on_signal, signum)
            except (ValueError, RuntimeError, NotImplementedError):
                continue
            self._installed.append((signum, previous))

    def _remove(self) -> None:
        """Give the signals back to the handlers they had before :meth:`_install`."""
        loop = asyncio.get_running_loop()
        for signum, previous in self._installed:
            loop.remove_signal_handler(signum)
            if previous is not None:  # None: a handler not set from Python, left as is
                signal.signal(signum, previous)
        self._installed.clear()

    def _on_signal(self, signum: signal.Signals) -> None:
        self.received.append(signum)
        if len(self.received) == 1:
            self.event.set()
            if self._on_stop is not None:
                self._on_stop(signum)
        elif len(self.received) == 2 and self._task is not None:
            self._task.cancel()


def play_stoppable(
    job: Callable[[asyncio.Event], Awaitable[_T]], on_stop: StopHook | None = None
) -> tuple[_T, signal.Signals | None]:
    """Run ``job(stop_event)`` to its end in a new event loop under a :class:`GracefulStop`
    (what ``agent-kit run`` and ``agent-kit train`` both do): the first SIGINT/SIGTERM sets the
    event and calls ``on_stop``; a second raises :class:`Aborted`. Returns the job's result and
    the signal that stopped it (None when none came)."""
    stop = GracefulStop(on_stop)
    result = asyncio.run(stop.guard(job))
    return result, stop.first
