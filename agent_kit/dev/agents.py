"""The dev loop's agent processes, kept alive across its iterations.

Every iteration plays a job and, with a baseline, a replay, each through the driver's session
(:class:`~agent_kit.driver.session.Session`), which closes its agents as it ends. The dev loop
hands each one :class:`KeptAgents` instead: an :class:`~agent_kit.driver.invokers.Invoker` over
one :class:`~agent_kit.driver.invokers.SubprocessInvoker` whose ``aclose`` (the end of a job or a
replay) leaves the processes running, so that only a change to the code they run pays for new
ones (:meth:`KeptAgents.restart`), and those are started ahead (:meth:`KeptAgents.prepare`:
processes that import agent_kit while the user edits, and the entrypoint only at the restart,
``SubprocessInvoker(standby=True)``). :meth:`KeptAgents.shutdown` ends them with all they started
(the subprocess invoker's guarantee: their process groups, SIGTERM then SIGKILL); each also
exits by itself when the loop's process is gone (``--parent-pid``).

Each payload names the iteration's emulator (``metadata.endpoint``), so agents started for one
iteration serve the next; they run with the environment of ``agent-kit run``'s agents, without
the per-run signing keys (the emulator checks only their shape for an invoker it did not start).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from agent_kit.driver.invokers import InvokeResult, SubprocessInvoker, agent_env
from agent_kit.errors import InvokerError
from agent_kit.settings import DEFAULTS, Settings

__all__ = ["KeptAgents"]

#: The endpoint in the agents' environment: a fallback that no payload of the loop needs,
#: since each names its iteration's emulator.
_NO_ENDPOINT: Final = "http://127.0.0.1:9"


class KeptAgents:
    """The agent processes of one entrypoint, kept across jobs (see the module docstring).

    ``env`` is laid over the environment ``agent-kit run`` gives its agents (a baseline's
    recorded ``agent_env``); ``log_dir/0`` and ``log_dir/1`` hold ``agent-<i>.log`` per worker,
    the running processes' in one, the prepared ones' in the other.
    """

    def __init__(
        self,
        entrypoint: Path,
        *,
        region: str,
        workers: int = 1,
        concurrency: int = 32,
        log_dir: Path,
        env: Mapping[str, str] | None = None,
        settings: Settings = DEFAULTS,
    ) -> None:
        self.entrypoint = entrypoint.resolve()
        self.name = str(self.entrypoint)
        self.env = agent_env(_NO_ENDPOINT, region)
        self.env.update(env or {})
        self.workers, self.concurrency, self.log_dir = workers, concurrency, log_dir
        self.settings = settings
        #: How many times the processes were started (the first start included).
        self.starts = 0
        self._made = 0
        self._inner: SubprocessInvoker | None = None
        self._spare: SubprocessInvoker | None = None

    @property
    def running(self) -> bool:
        """True while agent processes started by :meth:`restart` are up."""
        return self._inner is not None

    @property
    def pids(self) -> list[int]:
        """The live agent processes' ids (the spare's included)."""
        return [p for i in (self._inner, self._spare) if i is not None for p in i.pids]

    def _invoker(self, *, standby: bool) -> SubprocessInvoker:
        """New agent processes' invoker, logging into the one of two folders not in use."""
        self._made += 1
        log_dir = self.log_dir / str(self._made % 2)
        for old in log_dir.glob("agent-*.log"):
            old.unlink(missing_ok=True)
        return SubprocessInvoker(
            self.entrypoint,
            env=self.env,
            workers=self.workers,
            log_dir=log_dir,
            concurrency=self.concurrency,
            max_answer_bytes=self.settings.max_answer_bytes,
            max_log_bytes=self.settings.max_log_bytes,
            standby=standby,
        )

    async def prepare(self) -> None:
        """Start the next restart's processes ahead: up and importing agent_kit now, the
        entrypoint only at :meth:`restart` (the code as it is then)."""
        if self._spare is None:
            spare = self._invoker(standby=True)
            await spare.spawn()
            self._spare = spare

    async def restart(self) -> None:
        """End the running processes (if any) and start new ones on the entrypoint's code as
        it is now (the prepared ones when there are). :class:`InvokerError` (with the log's
        tail) when they do not come up; none is left running then."""
        invoker, self._spare = self._spare, None
        await self._end(self._inner)
        self._inner = None
        invoker = invoker or self._invoker(standby=False)
        self.starts += 1
        await invoker.start()  # closes itself when a worker does not come up
        self._inner = invoker

    async def start(self) -> None:
        """A job's start: the processes are up already (:meth:`restart`)."""
        if self._inner is None:
            raise InvokerError(f"the agents of {self.name} are not running")

    async def invoke(
        self, payload: dict[str, Any], session_id: str, timeout: float
    ) -> InvokeResult:
        """Invoke the kept processes (see :meth:`SubprocessInvoker.invoke`)."""
        if self._inner is None:
            raise InvokerError(f"the agents of {self.name} are not running")
        return await self._inner.invoke(payload, session_id, timeout)

    async def aclose(self) -> None:
        """A job's end: the processes stay up for the next iteration."""

    async def shutdown(self) -> None:
        """End the processes (the prepared ones too) with all they started (idempotent)."""
        inner, spare, self._inner, self._spare = self._inner, self._spare, None, None
        await asyncio.gather(self._end(inner), self._end(spare))

    @staticmethod
    async def _end(invoker: SubprocessInvoker | None) -> None:
        if invoker is not None:
            await invoker.aclose()
