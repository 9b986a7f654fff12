"""One owner per run directory: the lock a driver holds while it writes a run.

``RUN_DIR/run.lock`` is locked with ``flock`` (an exclusive, non-blocking advisory lock the
kernel drops when the holder's process dies, ``kill -9`` included, so a stale lock never needs
cleaning up: the next driver simply takes it). While held, the file names its holder — pid,
host, start time and command line — so a second ``agent-kit run``/``--resume`` on a live run is
refused with one line saying who holds it and how to stop it, before anything is written.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from agent_kit.errors import RunInUse, RunStoreError
from agent_kit.store.layout import RunLayout

__all__ = ["RunLock", "live_holder"]


class RunLock:
    """The exclusive lock on a run directory (see the module docstring).

    ``RunLock.acquire(run_dir)`` returns the held lock or raises :class:`RunInUse`;
    :meth:`release` (or leaving a ``with`` block) lets it go.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, run_dir: Path) -> RunLock:
        """Take the lock of ``run_dir`` (created if needed); RunInUse when a live driver has it,
        RunStoreError when the directory or its lock file cannot be created or opened."""
        path = RunLayout(run_dir).lock
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise RunStoreError(
                f"run directory {run_dir} cannot be written: {exc.strerror or exc}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RunInUse(_in_use_message(run_dir, holder)) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(_holder()).encode() + b"\n")
        os.fsync(fd)
        return cls(path, fd)

    def release(self) -> None:
        """Let the lock go (idempotent); the file stays, naming nobody."""
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def live_holder(run_dir: Path) -> dict[str, Any] | None:
    """Who holds the lock of ``run_dir`` now (pid, host, start time, command; ``{}`` when the
    file names nobody), or None when no live process does. Takes nothing and writes nothing:
    a reader asks this to tell a run still being played from a finished or dead one."""
    try:
        fd = os.open(RunLayout(run_dir).lock, os.O_RDONLY)
    except OSError:
        return None  # no lock file: no driver ever held it here
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _holder() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:300],
    }


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 4096) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _in_use_message(run_dir: Path, holder: dict[str, Any]) -> str:
    pid = holder.get("pid")
    if pid is None:
        return f"run directory {run_dir} is in use by another agent-kit process"
    return (
        f"run directory {run_dir} is in use by pid {pid} on {holder.get('host', '?')} since "
        f"{holder.get('started_at', '?')} ({holder.get('command', '?')}); wait for it, or stop "
        f"it with `kill -INT {pid}` and then resume"
    )
