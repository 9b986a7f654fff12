"""What ``agent-kit run`` and ``agent-kit train`` say and exit with when a signal stops them.

The first SIGINT/SIGTERM stops a run gracefully (:mod:`agent_kit.driver.stop`): :func:`announcer`
says so on stderr (:func:`warm_announcer` during ``agent-kit train``'s warm start, where no
rollout runs yet). The run then ends with status ``interrupted`` and :func:`exit_interrupted`
exits 130 (SIGINT) or 143 (SIGTERM), as a shell reports a signal. A second signal aborts at
once: :func:`aborts_exit` turns the driver's :class:`~agent_kit.errors.Aborted` into the
same exit, after one line saying the run directory can be resumed.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final, NoReturn

import typer
from rich.console import Console

from agent_kit.driver.stop import StopHook
from agent_kit.errors import Aborted

__all__ = ["SIGNAL_EXIT", "aborts_exit", "announcer", "exit_interrupted", "warm_announcer"]

#: Exit codes of a run stopped by a signal: 128 + the signal's number, as a shell reports it.
SIGNAL_EXIT: Final = {signal.SIGINT: 130, signal.SIGTERM: 143}


def _saying(err: Console, what: str) -> StopHook:
    """A hook that prints ``SIGNAL: stopping WHAT (Ctrl-C again to abort now)`` on stderr."""

    def stopping(signum: signal.Signals) -> None:
        err.print(f"{signum.name}: stopping {what} (Ctrl-C again to abort now)", markup=False)

    return stopping


def announcer(err: Console, grace: float) -> StopHook:
    """The hook that says, on the first signal, what the graceful stop does (``grace``
    seconds for the rollouts in flight)."""
    return _saying(err, f"— no new rollouts, {grace:g}s for the ones in flight")


def warm_announcer(err: Console) -> StopHook:
    """The hook that says, on the first signal during ``agent-kit train``'s warm start, what
    stopping it does (no rollout has started yet)."""
    return _saying(err, "the warm start after its current step, keeping the run directory")


def exit_interrupted(signum: signal.Signals | None, err: Console) -> NoReturn:
    """Exit 130 (SIGINT) or 143 (SIGTERM) after a signal stopped the run."""
    code = SIGNAL_EXIT[signum] if signum is not None else SIGNAL_EXIT[signal.SIGINT]
    if code != SIGNAL_EXIT[signal.SIGINT]:  # the root command says "interrupted" for a 130
        err.print("interrupted", markup=False)
    raise typer.Exit(code)


@contextmanager
def aborts_exit(err: Console) -> Iterator[None]:
    """Turn an abort (a second signal) into one line and the signal's exit code."""
    try:
        yield
    except Aborted as exc:
        err.print("aborted: the run directory can be resumed with --resume", markup=False)
        exit_interrupted(exc.signum, err)
