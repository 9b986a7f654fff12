"""An agent process and everything it started, as one unit to end (Linux ``/proc``).

Each agent worker is started in a session of its own (``start_new_session=True``): its pid is
its session id and its process group id, and every process it forks stays in both unless it
calls ``setsid``/``setpgid`` itself. :func:`end_tree` ends that whole unit:

1. it notes the worker's descendants first (``/proc/<pid>/task/*/children``, recursively), so a
   grandchild that left the group with ``setsid`` is still found while its parent lives;
2. SIGTERM to the process group, then waits for the worker itself up to a grace;
3. SIGSTOP, then SIGKILL, to the group, to every process still in the worker's session and
   their descendants, and to the noted descendants (what handled SIGTERM and stayed, or never
   got it): stopped first, so that nothing forks away between the search and the kill.

:func:`kill_leftovers` is step 3 alone, for a worker that already exited (before it is
restarted, so its orphans do not pile up). Where ``/proc`` is missing only the group is
signalled. A pid recycled by an unrelated process between the note and the kill is the one
race left; the window is the grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Final

__all__ = [
    "descendants",
    "end_tree",
    "kill_leftovers",
    "parse_memory",
    "session_members",
    "session_rss",
    "wait_exit",
]

_PROC: Final = Path("/proc")
_UNITS: Final = ("", "K", "M", "G", "T")
_SIZE_RE: Final = re.compile(r"^(?P<number>\d+(\.\d+)?)\s*(?P<unit>[kKmMgGtT](i?[bB])?|[bB])?$")
#: Seconds between looks at a process whose exit is not signalled otherwise.
_POLL_S: Final = 0.01
#: Rounds of "find and stop" before the kill (each round finds only what forked meanwhile).
_MAX_PASSES: Final = 8


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (children, their children, …), from ``/proc``."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        tasks = _PROC / str(parent) / "task"
        with contextlib.suppress(OSError):
            for task in tasks.iterdir():
                with contextlib.suppress(OSError, ValueError):
                    for child in map(int, (task / "children").read_text().split()):
                        if child not in found:
                            found.add(child)
                            todo.append(child)
    return found


def session_members(sid: int) -> set[int]:
    """Live (not zombie) processes whose session id is ``sid``, from ``/proc``."""
    members: set[int] = set()
    with contextlib.suppress(OSError):
        for entry in _PROC.iterdir():
            if not entry.name.isdigit():
                continue
            fields = _stat_fields(int(entry.name))
            # fields: state ppid pgrp session …
            if fields is not None and fields[0] != "Z" and fields[3] == str(sid):
                members.add(int(entry.name))
    return members


def session_rss(sid: int) -> int:
    """Resident memory, in bytes, of every live process in session ``sid`` together."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in session_members(sid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int((_PROC / str(pid) / "statm").read_text().split()[1]) * page
    return total


def parse_memory(text: str) -> int:
    """Bytes from a memory size: a number with an optional K, M, G or T suffix (powers of
    1024; ``KiB``/``MB``-style spellings too), e.g. ``512M``; ValueError if malformed or ≤ 0."""
    match = _SIZE_RE.match(text.strip())
    if match is None:
        raise ValueError(f"not a memory size: {text!r} (e.g. 512M, 2G)")
    unit = (match["unit"] or "").upper()[:1].replace("B", "")
    value = float(match["number"]) * 1024 ** _UNITS.index(unit)
    if value < 1:
        raise ValueError(f"a memory size must be positive, got {text!r}")
    return int(value)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _signal_each(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def kill_leftovers(leader: int, noted: Iterable[int] = ()) -> None:
    """SIGKILL what is left of the session and group led by ``leader`` (which has exited or
    is to die now), the descendants of what is left (a child that left for a session of its
    own), and the ``noted`` descendants.

    Everything found is stopped (SIGSTOP) first and the search repeated until it finds nothing
    new, so a process cannot fork or leave the session between the search and the kill."""
    stopped: set[int] = set()
    for _ in range(_MAX_PASSES):
        found = session_members(leader) | set(noted)
        for pid in set(found):
            found |= descendants(pid)
        new = found - stopped
        if not new:
            break
        _signal_group(leader, signal.SIGSTOP)
        _signal_each(new, signal.SIGSTOP)
        stopped |= new
    _signal_group(leader, signal.SIGKILL)
    _signal_each(stopped, signal.SIGKILL)


async def wait_exit(proc: asyncio.subprocess.Process) -> int:
    """The exit code of ``proc`` as soon as it exits.

    Unlike ``proc.wait()``, this does not also wait for every holder of the process's output
    pipe to close it (Python 3.11's asyncio does, so a child that outlives the worker would
    hold it off indefinitely). A pidfd tells the exit where the kernel has them; the child
    watcher then sets the return code within moments.
    """
    if proc.returncode is not None:
        return proc.returncode
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        exited: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not exited.done():
                exited.set_result(None)

        loop.add_reader(fd, readable)
        try:
            await exited
        finally:
            loop.remove_reader(fd)
            os.close(fd)
    # The child watcher reaps it from its own thread and sets the code: nothing to await.
    while proc.returncode is None:  # noqa: ASYNC110 - see the line above
        await asyncio.sleep(_POLL_S)
    return proc.returncode


async def end_tree(proc: asyncio.subprocess.Process, grace: float) -> None:
    """End the worker ``proc`` (a session leader) and all it started: SIGTERM to its group,
    ``grace`` seconds for the worker to exit, then SIGKILL to everything left (see the module
    docstring). Returns once the worker is reaped and its output pipe closed, or after a
    second ``grace`` when something out of reach still holds that pipe."""
    noted = descendants(proc.pid)
    if proc.returncode is None:
        _signal_group(proc.pid, signal.SIGTERM)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(wait_exit(proc), grace)
    kill_leftovers(proc.pid, noted)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(proc.wait(), grace)
