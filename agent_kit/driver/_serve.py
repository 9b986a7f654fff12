"""Serve an entrypoint file's ``app`` with uvicorn: ``python -m agent_kit.driver._serve FILE``.

The subprocess invoker starts agents this way instead of ``python FILE`` so that *any*
``BedrockAgentCoreApp`` (``RolloutApp``, a plain ``BedrockAgentCoreApp``, one written with the
official ``sagemaker_rft_handler`` decorator) listens where the invoker wants, without relying on
what the file's ``if __name__ == "__main__"`` block does: the file is imported under its own
module name (so that block does not run), its module-level ``app`` is looked up, and uvicorn
serves it on ``--fd N`` (an already listening socket inherited from the parent, so the port is
known before the child starts and survives restarts) or on ``--host/--port``.

``--standby`` imports agent_kit's runtime half (and what a first episode imports) first, then
waits for a line on stdin before it imports the file: a process started ahead of time, warm
when the file's code is final (``SubprocessInvoker(standby=True)``); stdin closed without a line
is a clean exit.

Exit codes: 0 after a clean shutdown, 2 when the file cannot be imported or has no ``app``.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from agent_kit.emulator.loader import load_entrypoint
from agent_kit.emulator.serving import PromptExitServer
from agent_kit.errors import UsageError

__all__ = ["import_app", "main"]


def import_app(file: str | Path) -> Any:
    """Import ``file`` under its stem as module name and return its module-level ``app``.

    Raises ``SystemExit(2)`` with a one-line message on stderr when that is impossible (the
    user's own traceback first, when their file raised on import).
    """
    path = Path(file).resolve()
    name = path.stem if path.stem.isidentifier() else "agent_entrypoint"
    try:
        return load_entrypoint(path, name=name)
    except UsageError as exc:
        if exc.__cause__ is not None:
            traceback.print_exception(exc.__cause__)
        _die(str(exc))


def _watch_parent(parent_pid: int) -> None:
    """Exit when the parent (the job driver) is gone, e.g. after a ``kill -9`` of it."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="agent-kit-parent-watch", daemon=True).start()


def _preload() -> None:
    """Import, ahead of the entrypoint, what importing it and playing its first episode load:
    agent_kit's runtime half, and the OpenAI client's resources (the client imports them on its
    first call, a second or more of an agent's first episode)."""
    import openai.resources  # noqa: F401

    import agent_kit.app  # noqa: F401


def _die(message: str) -> NoReturn:
    print(f"agent-kit: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, import the entrypoint and serve it until SIGTERM/SIGINT."""
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m agent_kit.driver._serve")
    parser.add_argument("file")
    parser.add_argument("--fd", type=int, default=None, help="inherited listening socket")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when it dies")
    parser.add_argument("--standby", action="store_true", help="import FILE on a line on stdin")
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        _watch_parent(args.parent_pid)
    if args.standby:
        _preload()
        if not sys.stdin.readline():
            return 0
    app = import_app(args.file)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
        timeout_keep_alive=75,
        # On SIGTERM, give in-flight rollouts a moment, then stop: a hung handler must not
        # hold the process (the driver has already timed those rollouts out).
        timeout_graceful_shutdown=1,
    )
    server = PromptExitServer(config)  # SIGTERM starts the shutdown at once, not at a tick
    if args.fd is not None:
        sock = socket.socket(fileno=args.fd)
        server.run(sockets=[sock])
    else:
        server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
