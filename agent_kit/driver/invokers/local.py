"""Invokers for agents on this machine: a running URL, or entrypoint files as subprocesses.

One idea, the agents reached over loopback HTTP: :class:`HttpInvoker` posts to an agent someone
else started; :class:`SubprocessInvoker` starts, supervises and posts to its own (one
``_Worker`` per agent process: its socket, log, memory cap and restarts)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import httpx

from agent_kit.driver.invokers.agent_log import DEFAULT_MAX_LOG_BYTES, CappedLog
from agent_kit.driver.invokers.base import (
    DEFAULT_MAX_ANSWER_BYTES,
    EventHook,
    InvokeResult,
    http_client,
    post_invocation,
)
from agent_kit.driver.invokers.process_tree import (
    end_tree,
    kill_leftovers,
    session_rss,
    wait_exit,
)
from agent_kit.errors import InvokerError, UsageError
from agent_kit.settings import env_name
from agent_kit.store.events import (
    AGENT_BROKEN_EVENT,
    AGENT_EXIT_EVENT,
    AGENT_START_EVENT,
    MEMORY_LIMIT_EVENT,
)

__all__ = [
    "MAX_WORKERS",
    "MEMORY_POLL_S",
    "HttpInvoker",
    "SubprocessInvoker",
]

_TAIL_BYTES: Final = 2000
#: Most agent processes one job starts (each is a Python interpreter with Strands loaded).
MAX_WORKERS: Final = 64
#: Seconds between two looks at an agent's memory (``max_memory``).
MEMORY_POLL_S: Final = 0.1
#: Seconds an agent's process group gets between SIGTERM and SIGKILL when the job ends.
_STOP_GRACE_S: Final = 5.0


# -- an agent already running ----------------------------------------------------------------


class HttpInvoker:
    """Invoke an agent already serving ``/invocations`` at a URL (``agentcore dev``, container)."""

    def __init__(
        self,
        url: str,
        *,
        concurrency: int = 32,
        startup_timeout: float = 10.0,
        max_answer_bytes: int | None = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        base = url.rstrip("/")
        self.max_answer_bytes = max_answer_bytes
        base = base.removesuffix("/invocations")
        self.name = base
        self.base_url = base
        self.startup_timeout = startup_timeout
        self._concurrency = concurrency
        self._http: httpx.AsyncClient | None = None

    async def start(self) -> None:
        """Check that ``GET /ping`` answers 200 before the first rollout (InvokerError if not)."""
        self._http = http_client(self._concurrency)
        deadline = time.monotonic() + self.startup_timeout
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                response = await self._http.get(f"{self.base_url}/ping", timeout=2.0)
                if response.status_code == 200:
                    return
                last = f"HTTP {response.status_code}"
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(0.1)
        raise InvokerError(f"no agent answering GET {self.base_url}/ping ({last})")

    async def invoke(
        self, payload: dict[str, Any], session_id: str, timeout: float
    ) -> InvokeResult:
        """POST the payload to ``/invocations`` with the AgentCore session header."""
        if self._http is None:
            raise InvokerError("invoker not started")
        return await post_invocation(
            self._http,
            f"{self.base_url}/invocations",
            payload,
            session_id,
            timeout,
            self.max_answer_bytes,
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None


# -- local entrypoint processes ---------------------------------------------------------------


class _Worker:
    def __init__(self, owner: SubprocessInvoker, index: int) -> None:
        self.owner = owner
        self.index = index
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = owner.log_dir / f"agent-{index}.log"
        self.log = CappedLog(self.log_path, owner.max_log_bytes)
        self.pump: asyncio.Task[None] | None = None
        self.proc: asyncio.subprocess.Process | None = None
        self.inflight = 0
        self.ready = asyncio.Event()
        self.broken: str | None = None
        self.starts = 0
        self.watch: asyncio.Task[None] | None = None
        #: Start number → why that process was killed for its memory (``max_memory``).
        self.memory_kills: dict[int, str] = {}
        self.memory_watch: asyncio.Task[None] | None = None

    def tail(self) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - _TAIL_BYTES))
                return fh.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    async def launch(self) -> None:
        """Start the process and wait until it answers ``/ping``."""
        await self.spawn()
        await self._wait_ping()

    async def spawn(self) -> None:
        """Start the process (its output pumped into the worker's log); do not wait for it."""
        self.ready.clear()
        self.starts += 1
        owner = self.owner
        await self._end_pump()
        self.log.write(f"--- agent-kit: start #{self.starts} of worker {self.index} ---\n".encode())
        standby = owner.standby and self.starts == 1  # a restart imports at once
        self.proc = await asyncio.create_subprocess_exec(
            owner.python,
            "-m",
            "agent_kit.driver._serve",
            str(owner.entrypoint),
            "--fd",
            str(self.sock.fileno()),
            "--parent-pid",
            str(os.getpid()),
            *(["--standby"] if standby else []),
            stdin=asyncio.subprocess.PIPE if standby else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**owner.env, env_name("port"): str(self.port)},
            cwd=str(owner.entrypoint.parent),
            pass_fds=(self.sock.fileno(),),
            start_new_session=True,
        )
        if self.proc.stdout is not None:
            self.pump = asyncio.create_task(self.log.pump(self.proc.stdout))
        if owner.max_memory is not None:
            if self.memory_watch is not None:
                self.memory_watch.cancel()
            self.memory_watch = asyncio.create_task(
                self._watch_memory(self.proc, self.starts, owner.max_memory)
            )
        owner.emit(
            AGENT_START_EVENT, {"worker": self.index, "pid": self.proc.pid, "start": self.starts}
        )

    async def release(self) -> None:
        """Let a standby process go on to import the entrypoint (nothing for another; once)."""
        stdin = self.proc.stdin if self.proc is not None else None
        if stdin is None or stdin.is_closing():
            return
        with contextlib.suppress(ConnectionError):  # it died: waiting for its /ping says so
            stdin.write(b"go\n")
            await stdin.drain()
        stdin.close()

    async def _watch_memory(self, proc: asyncio.subprocess.Process, start: int, cap: int) -> None:
        """Kill the process with all it started (its session) once their resident memory
        together passes ``cap`` bytes; noted for the rollouts it was serving."""
        while proc.returncode is None:
            rss = session_rss(proc.pid)
            if rss > cap:
                why = (
                    f"agent worker {self.index} was killed for going over --agent-memory "
                    f"({cap / 2**20:g} MiB)"
                )
                self.memory_kills[start] = why
                detail = {"worker": self.index, "pid": proc.pid, "rss": rss, "limit": cap}
                self.owner.emit(MEMORY_LIMIT_EVENT, detail)
                kill_leftovers(proc.pid)
                return
            await asyncio.sleep(MEMORY_POLL_S)

    async def _end_pump(self) -> None:
        """Wait for the log pump of the previous process to drain (it ends at EOF)."""
        if self.pump is not None:
            try:
                await asyncio.wait_for(self.pump, 5.0)
            except (asyncio.TimeoutError, OSError) as exc:
                self.log.write(f"--- agent-kit: log pump ended: {exc!r} ---\n".encode())
            self.pump = None
            self.log.note_dropped()

    async def _wait_ping(self) -> None:
        """Wait until the child answers ``/ping`` (or exits, or the start-up timeout passes).

        The socket listens before the child starts, so a ping connects at once and waits in
        the backlog until the child serves: it is answered the moment the child is up, and
        raced against the child's exit so a crash is reported at once too."""
        proc = self.proc
        if proc is None:
            raise InvokerError("the agent process was not started")
        owner = self.owner
        deadline = time.monotonic() + owner.startup_timeout
        exited = asyncio.ensure_future(wait_exit(proc))
        ping: asyncio.Future[httpx.Response] | None = None
        try:
            async with httpx.AsyncClient(trust_env=False) as http:
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise InvokerError(
                            f"agent {owner.entrypoint} did not answer /ping within "
                            f"{owner.startup_timeout:g} s; log tail:\n{self.tail()}"
                        )
                    ping = asyncio.ensure_future(http.get(f"{self.url}/ping", timeout=left))
                    await asyncio.wait({ping, exited}, return_when=asyncio.FIRST_COMPLETED)
                    if exited.done():
                        ping.cancel()
                        await asyncio.gather(ping, return_exceptions=True)
                        kill_leftovers(proc.pid)  # what it started must not hold its log
                        await self._end_pump()  # the child's last words are in the log first
                        raise InvokerError(
                            f"agent {owner.entrypoint} exited with code {proc.returncode} "
                            f"before answering /ping; log tail:\n{self.tail()}"
                        )
                    try:
                        if ping.result().status_code == 200:
                            self.ready.set()
                            return
                    except httpx.TransportError:
                        pass
                    # Refused, reset or not healthy yet: ask again shortly.
                    await asyncio.wait({exited}, timeout=min(0.05, max(left, 0)))
        finally:
            # Cancelled while waiting (a stop during start-up): neither task may outlive it, nor
            # the ping's error (the client closed under it) go unread.
            for task in (exited, ping):
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)

    async def supervise(self) -> None:
        """Restart the process whenever it exits while the invoker is open."""
        owner = self.owner
        failures = 0
        while not owner.closing and self.proc is not None:
            code = await wait_exit(self.proc)
            self.ready.clear()
            kill_leftovers(self.proc.pid)  # what it started dies with it, before a restart
            await self._end_pump()
            if owner.closing:
                return
            owner.restarts += 1
            owner.emit(
                AGENT_EXIT_EVENT,
                {"worker": self.index, "returncode": code, "log_tail": self.tail()[-500:]},
            )
            while not owner.closing:
                try:
                    await self.launch()
                    failures = 0
                    break
                except InvokerError as exc:
                    if self.proc is not None:  # up but not answering: it must not linger
                        await end_tree(self.proc, _STOP_GRACE_S)
                    failures += 1
                    if failures >= owner.max_restarts:
                        self.broken = str(exc)
                        owner.emit(AGENT_BROKEN_EVENT, {"worker": self.index, "error": str(exc)})
                        self.ready.set()  # wake waiters; they see `broken`
                        return
                    await asyncio.sleep(min(2.0, 0.2 * failures))

    async def stop(self) -> None:
        """End the process and everything it started (its whole session, see
        :func:`~agent_kit.driver.invokers.process_tree.end_tree`), then the log and socket."""
        proc = self.proc
        if proc is not None:
            await end_tree(proc, _STOP_GRACE_S)
        for task in (self.watch, self.memory_watch):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self._end_pump()
        self.sock.close()


class SubprocessInvoker:
    """Run an entrypoint file as ``workers`` local processes and invoke them over loopback.

    Each worker listens on its own loopback socket, created here and inherited by the child,
    so its port is fixed before the child starts and stays the same across restarts. Each
    child runs in a session (and process group) of its own, and whatever it starts is ended
    with it: when the invoker closes and before a restart (:mod:`.process_tree`). The
    child's stdout and stderr go to ``log_dir/agent-<i>.log``, capped at ``max_log_bytes`` per
    worker for the whole run (:class:`CappedLog`; ``$AGENT_KIT_MAX_LOG_BYTES`` sets it for
    ``agent-kit run``, default 50 MiB, 0 = no cap). A worker that exits is
    restarted at once (reported through ``on_event`` as ``agent_exit``/``agent_start``); the
    rollouts it was serving come back ``unreachable``. Invocations go to the least busy worker;
    an answer longer than ``max_answer_bytes`` is cut off there (``$AGENT_KIT_MAX_ANSWER_BYTES``,
    default 1 MiB, see :func:`~agent_kit.driver.invokers.base.post_invocation`). With
    ``max_memory`` (``--agent-memory``) each worker's resident memory, all it started included,
    is read from ``/proc`` every :data:`MEMORY_POLL_S` seconds; past the cap the whole session
    is killed (an ``agent_memory`` event), the worker restarted, and the rollouts it was
    serving come back with that ``limit``. With ``standby`` each worker's first process starts,
    imports agent_kit's runtime half and waits: :meth:`spawn` it ahead, and :meth:`start` lets
    it import the entrypoint as the file is then (``agent-kit dev`` keeps the next restart's
    agents warm this way); a restart of a worker imports at once.
    """

    def __init__(
        self,
        entrypoint: str | Path,
        *,
        env: Mapping[str, str] | None = None,
        workers: int = 1,
        log_dir: str | Path | None = None,
        concurrency: int = 32,
        startup_timeout: float = 60.0,
        max_restarts: int = 5,
        python: str = sys.executable,
        on_event: EventHook | None = None,
        max_log_bytes: int | None = DEFAULT_MAX_LOG_BYTES,
        max_answer_bytes: int | None = DEFAULT_MAX_ANSWER_BYTES,
        max_memory: int | None = None,
        standby: bool = False,
    ) -> None:
        path = Path(entrypoint).resolve()
        if not path.is_file():
            raise UsageError(f"entrypoint not found: {entrypoint}")
        if not 1 <= workers <= MAX_WORKERS:
            raise UsageError(f"--workers must be 1..{MAX_WORKERS}, got {workers}")
        self.entrypoint = path
        self.name = str(path)
        self.env = dict(os.environ if env is None else env)
        self.n_workers = workers
        self.log_dir = Path(log_dir) if log_dir is not None else Path.cwd()
        self.startup_timeout = startup_timeout
        self.max_restarts = max_restarts
        self.python = python
        self.on_event = on_event
        self.max_log_bytes = max_log_bytes
        self.max_answer_bytes = max_answer_bytes
        if max_memory is not None and max_memory <= 0:
            raise UsageError(f"--agent-memory must be positive, got {max_memory}")
        self.max_memory = max_memory
        self.standby = standby
        self.closing = False
        self.restarts = 0
        self._concurrency = concurrency
        self._workers: list[_Worker] = []
        self._http: httpx.AsyncClient | None = None

    def emit(self, kind: str, detail: dict[str, Any]) -> None:
        """Forward an event to ``on_event`` (errors in the hook are not the invoker's)."""
        if self.on_event is not None:
            self.on_event(kind, detail)

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        return [
            w.proc.pid for w in self._workers if w.proc is not None and w.proc.returncode is None
        ]

    @property
    def log_paths(self) -> list[Path]:
        """The log file of each worker."""
        return [w.log_path for w in self._workers]

    async def spawn(self) -> None:
        """Start every worker's process without waiting for it (idempotent): the driver calls
        this first, so the agents' cold start overlaps whatever it does before :meth:`start`."""
        if self._workers:
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._workers = [_Worker(self, i) for i in range(self.n_workers)]
        try:
            for worker in self._workers:
                await worker.spawn()
        except BaseException:
            await self.aclose()
            raise

    async def start(self) -> None:
        """Start every worker (unless :meth:`spawn` did; a standby one is let go on) and wait
        for each ``/ping``; InvokerError with the log tail if one does not come up."""
        await self.spawn()
        self._http = http_client(self._concurrency)
        try:
            await asyncio.gather(*(w.release() for w in self._workers))
            await asyncio.gather(*(w._wait_ping() for w in self._workers))
        except BaseException:
            await self.aclose()
            raise
        for worker in self._workers:
            worker.watch = asyncio.create_task(worker.supervise())

    async def invoke(
        self, payload: dict[str, Any], session_id: str, timeout: float
    ) -> InvokeResult:
        """POST to the least busy worker's ``/invocations``; a dead worker → ``unreachable``."""
        if self._http is None or not self._workers:
            raise InvokerError("invoker not started")
        worker = min(self._workers, key=lambda w: (not w.ready.is_set(), w.inflight))
        worker.inflight += 1
        start = worker.starts
        try:
            if not worker.ready.is_set():
                try:
                    await asyncio.wait_for(worker.ready.wait(), timeout)
                except asyncio.TimeoutError:
                    return InvokeResult("unreachable", error="the agent process is restarting")
            if worker.broken:
                return InvokeResult("unreachable", error=worker.broken)
            result = await post_invocation(
                self._http,
                f"{worker.url}/invocations",
                payload,
                session_id,
                timeout,
                self.max_answer_bytes,
            )
            killed = worker.memory_kills.get(start)
            if result.status == "unreachable" and killed is not None:
                return InvokeResult("unreachable", error=killed, limit=killed)
            if result.status == "unreachable":
                return InvokeResult(
                    "unreachable",
                    error=f"{result.error} (agent worker {worker.index} crashed or restarted)",
                )
            return result
        finally:
            worker.inflight -= 1

    async def aclose(self) -> None:
        """End every worker with all it started (SIGTERM to its process group, SIGKILL to what
        is left of its session after 5 s) and close the sockets."""
        self.closing = True
        await asyncio.gather(*(w.stop() for w in self._workers), return_exceptions=True)
        if self._http is not None:
            await self._http.aclose()
            self._http = None
