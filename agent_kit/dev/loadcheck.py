"""Why a user file does not load, in one line naming its file and line.

:func:`check_entrypoint` asks a fresh interpreter (``python -m agent_kit.dev._loadcheck FILE``,
from the entrypoint's folder, in the agent processes' environment) to import the entrypoint the
way an agent process does (:func:`agent_kit.driver._serve.import_app`'s loader call: the file
under its stem, its folder first on ``sys.path``, a module-level ``app``); it prints one JSON
line, ``{"ok": true}`` or the :class:`LoadError`. The loop's own process never imports the
entrypoint, so the next save loads the new code. The dev loop asks only when the agent
processes did not come up (their start is the load), to say why in one line.

:func:`load_error` turns an exception into a :class:`LoadError`: a ``SyntaxError``'s own file
and line, else the innermost frame of its traceback in the user's folder (an app that fails its
own checks points at the line that built it), else the innermost frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import traceback
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from agent_kit.errors import UsageError

__all__ = ["CHECK_TIMEOUT_S", "LoadError", "check_entrypoint", "load_error"]

#: Seconds a load check may take before it is called a failure.
CHECK_TIMEOUT_S: Final = 120.0
_MESSAGE_LIMIT: Final = 300


@dataclass(frozen=True)
class LoadError:
    """A user file that does not load: ``what`` (``entrypoint``, ``policy``, ``dataset``), the
    error in one line, and where (``file`` and ``line`` when known)."""

    what: str
    message: str
    file: str | None = None
    line: int | None = None

    def text(self, base: Path | None = None) -> str:
        """``FILE:LINE: message`` (the file relative to ``base`` when under it)."""
        where = self.file
        if where is not None and base is not None:
            with contextlib.suppress(ValueError):
                where = str(Path(where).relative_to(base))
        if where is None:
            return self.message
        return f"{where}:{self.line}: {self.message}" if self.line else f"{where}: {self.message}"

    def document(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MESSAGE_LIMIT else line[: _MESSAGE_LIMIT - 1] + "…"


def load_error(exc: BaseException, folder: Path, what: str, file: Path | None = None) -> LoadError:
    """The :class:`LoadError` of ``exc`` raised loading ``file`` of ``folder`` (module
    docstring). A loader's :class:`UsageError` is read through to the user's exception, its
    cause; without one (no such name, no ``app``), or when no frame is the user's, the loader's
    own words name the file."""
    cause = exc.__cause__ if isinstance(exc, UsageError) else exc
    plain = LoadError(what, _one_line(str(exc)), None if file is None else str(file))
    if cause is None:
        return plain
    if isinstance(cause, SyntaxError):
        message = _one_line(f"{type(cause).__name__}: {cause.msg}")
        return LoadError(what, message, cause.filename, cause.lineno)
    folder = folder.resolve()
    mine = [f for f in traceback.extract_tb(cause.__traceback__) if _under(f.filename, folder)]
    if not mine:
        return plain
    message = _one_line(f"{type(cause).__name__}: {cause}")
    return LoadError(what, message, mine[-1].filename, mine[-1].lineno)


def _under(filename: str, folder: Path) -> bool:
    try:
        Path(filename).resolve().relative_to(folder)
    except (ValueError, OSError):
        return False
    return True


async def check_entrypoint(
    entrypoint: Path, env: Mapping[str, str], *, timeout: float = CHECK_TIMEOUT_S
) -> LoadError | None:
    """Ask a fresh interpreter whether ``entrypoint`` loads (module docstring): None when it
    does, else why not."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent_kit.dev._loadcheck",
        str(entrypoint),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(entrypoint.parent),
        env=dict(env),
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return LoadError("entrypoint", f"loading took more than {timeout:g} s", str(entrypoint))
    for line in reversed(out.decode("utf-8", "replace").splitlines()):
        try:
            document = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(document, dict) and "ok" in document:
            if document["ok"]:
                return None
            line_no = document.get("line")
            return LoadError(
                str(document.get("what") or "entrypoint"),
                str(document.get("message") or "does not load"),
                None if document.get("file") is None else str(document["file"]),
                line_no if isinstance(line_no, int) else None,
            )
    tail = err.decode("utf-8", "replace").strip().splitlines()
    message = tail[-1] if tail else f"the load check exited {proc.returncode}"
    return LoadError("entrypoint", _one_line(message), str(entrypoint))
