"""An agent worker's log file, capped: what a local agent process prints goes to
``logs/agent-<worker>.log`` in the run directory, up to ``AGENT_KIT_MAX_LOG_BYTES`` over the
whole run (all its restarts; the setting is read at the CLI's door and handed down).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Final

from agent_kit.settings import DEFAULTS, env_name

__all__ = ["DEFAULT_MAX_LOG_BYTES", "MAX_LOG_ENV", "CappedLog"]

#: Default cap of one agent worker's log file over the whole run (all its restarts).
DEFAULT_MAX_LOG_BYTES: Final = DEFAULTS.max_log_bytes
#: The variable that sets the cap (bytes; 0 = no cap), named where a log is cut.
MAX_LOG_ENV: Final = env_name("max_log_bytes")
_CHUNK: Final = 1 << 16


class CappedLog:
    """An agent worker's log file that stops growing at ``cap`` bytes.

    The child writes into a pipe; :meth:`pump` copies it into the file until the cap, writes one
    marker line where the output was cut, and keeps draining (so the child never blocks on a
    full pipe) while counting what it dropped; :meth:`close` notes that count. ``cap=None``
    keeps everything.
    """

    def __init__(self, path: Path, cap: int | None) -> None:
        self.path = path
        self.cap = cap
        self.written = path.stat().st_size if path.exists() else 0
        self.dropped = 0
        #: Set when the file could not be written (a full disk): later output is dropped.
        self.failed = False

    def write(self, data: bytes) -> None:
        """Append ``data`` within the cap (the first write past it adds the cut marker)."""
        if self.cap is not None and self.written + len(data) > self.cap:
            room = max(0, self.cap - self.written)
            kept, lost = data[:room], data[room:]
            if self.dropped == 0 and lost:
                kept += (
                    f"\n--- agent-kit: log cut here at {self.cap} bytes ({MAX_LOG_ENV}); "
                    "further output of this worker is dropped ---\n"
                ).encode()
            self.dropped += len(lost)
            data = kept
        if data and not self.failed:
            try:
                with self.path.open("ab") as fh:
                    fh.write(data)
            except OSError:  # a full disk: drain the pipe all the same, keep nothing more
                self.failed = True
            else:
                self.written += len(data)
        if self.failed:
            self.dropped += len(data)

    async def pump(self, stream: asyncio.StreamReader) -> None:
        """Copy ``stream`` into the file until EOF."""
        while chunk := await stream.read(_CHUNK):
            self.write(chunk)

    def note_dropped(self) -> None:
        """Record how much was dropped since the cut (called when a process ends)."""
        if self.dropped and not self.failed:
            with contextlib.suppress(OSError), self.path.open("ab") as fh:
                fh.write(f"--- agent-kit: {self.dropped} bytes dropped so far ---\n".encode())
