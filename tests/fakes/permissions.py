"""Run a command so that file permissions bind it, as root too.

As root, ``chmod`` does not stop writes. :func:`unprivileged` wraps a command so it starts with
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped from its capability bounding set (``prctl
(PR_CAPBSET_DROP)`` before ``exec``): a read-only directory is then read-only to it, as to any
user. For a non-root user the command is returned unchanged.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["AGENT_KIT", "run_unprivileged", "unprivileged"]

AGENT_KIT = Path(sys.executable).with_name("agent-kit")
"""The venv's ``agent-kit`` console script."""

_DROP_DAC = (
    "import ctypes, os, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "for cap in (1, 2):\n"
    "    if libc.prctl(24, cap, 0, 0, 0) != 0:\n"
    "        sys.exit(f'prctl(PR_CAPBSET_DROP, {cap}): errno {ctypes.get_errno()}')\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


def unprivileged(command: list[str]) -> list[str]:
    """``command``, started so that file permissions bind it (see the module docstring)."""
    if os.geteuid() == 0:
        return [sys.executable, "-c", _DROP_DAC, *command]
    return command


def run_unprivileged(
    argv: list[str], *, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``agent-kit ARGV…`` unprivileged; its exit code, stdout and stderr."""
    return subprocess.run(
        unprivileged([str(AGENT_KIT), *argv]),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
