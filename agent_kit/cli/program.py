"""How to start this ``agent-kit`` again from the user's shell: the prefix of every command the
CLI prints for the user to paste (the end summary's "next" block, retry hints).

The rule: when the running ``agent-kit`` is the one the shell finds on ``PATH``, the prefix is
``agent-kit``; otherwise (e.g. ``make run`` started ``.venv/bin/agent-kit`` and the venv is not
activated) it is the path the process was started from, relative to the working directory when
it lies below it (``.venv/bin/agent-kit``), else absolute. Started as ``python -m
agent_kit.cli``, the prefix says that, with the interpreter's path. In-process (a test's
``CliRunner``, an embedding program) it stays ``agent-kit``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Final

__all__ = ["SCRIPT", "program"]

#: The console script's name (``[project.scripts]`` in pyproject.toml).
SCRIPT: Final = "agent-kit"


def _shown(path: Path, cwd: Path) -> str:
    """``path`` as a shell word: relative to ``cwd`` when below it (with a slash, so the shell
    does not look it up on PATH), else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(cwd)
    except ValueError:
        return shlex.quote(str(absolute))
    text = relative.as_posix()
    return shlex.quote(text if "/" in text else f"./{text}")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def program(argv0: str | None = None, *, path: str | None = None, cwd: Path | None = None) -> str:
    """The command prefix that starts this ``agent-kit`` from the user's shell (module doc).

    ``argv0`` defaults to ``sys.argv[0]``, ``path`` to ``$PATH``, ``cwd`` to the working
    directory.
    """
    argv0 = sys.argv[0] if argv0 is None else argv0
    here = Path.cwd() if cwd is None else cwd
    started = Path(argv0)
    if started.name in (SCRIPT, f"{SCRIPT}.exe") and started.is_file():
        found = shutil.which(SCRIPT, path=path if path is not None else os.environ.get("PATH"))
        if found is not None and _same_file(Path(found), started):
            return SCRIPT
        return _shown(started, here)
    if started.name == "__main__.py" and started.parent.name == "cli" and started.is_file():
        return f"{_shown(Path(sys.executable), here)} -m agent_kit.cli"
    return SCRIPT
