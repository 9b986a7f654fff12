"""The load check's interpreter: ``python -m agent_kit.dev._loadcheck FILE``.

A whole program, as the agent-serving child (:mod:`agent_kit.driver._serve`) is: it imports
FILE the way an agent process does (the loader, under the file's stem, its folder first on
``sys.path``, a module-level ``app``), prints one JSON line — ``{"ok": true}`` or the
:class:`~agent_kit.dev.loadcheck.LoadError` — and exits 0 when the file loads, 2 when it does
not. :func:`agent_kit.dev.loadcheck.check_entrypoint` runs it and reads the line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from agent_kit.dev.loadcheck import LoadError, load_error
from agent_kit.emulator.loader import load_entrypoint
from agent_kit.errors import UsageError

__all__ = ["main"]


def _check(file: Path) -> LoadError | None:
    """Import ``file`` as an agent process does; the error when it fails."""
    name = file.stem if file.stem.isidentifier() else "agent_entrypoint"
    try:
        load_entrypoint(file, name=name)
    except UsageError as exc:
        return load_error(exc, file.parent, "entrypoint", file)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agent_kit.dev._loadcheck FILE``: print the verdict as one JSON line; exit 0
    when the file loads, 2 when it does not."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m agent_kit.dev._loadcheck FILE", file=sys.stderr)
        return 2
    error = _check(Path(args[0]).resolve())
    document: dict[str, Any] = {"ok": True} if error is None else {"ok": False, **asdict(error)}
    sys.stdout.flush()  # whatever the user's module printed comes first
    print("\n" + json.dumps(document), flush=True)
    return 0 if error is None else 2


if __name__ == "__main__":
    sys.exit(main())
