"""The dev loop's agent processes, kept alive across its iterations.

Every iteration plays a job and, with a baseline, a replay, each through the driver's session
(:class:`~agent_kit.driver.session.Session`), which closes its agents as it ends. The dev loop
hands each one :class:`KeptAgents` instead: an :class:`~agent_kit.driver.invokers.Invoker` over
one :class:`~agent_kit.driver.invokers.SubprocessInvoker` whose ``aclose`` (the end of a job or a
replay) leaves the processes running, so that only a change to the code they run pays for new
ones (:meth:`KeptAgents.restart`). :meth:`KeptAgents.shutdown` ends them with all they started
(the subprocess invoker's guarantee: their process groups, SIGTERM then SIGKILL); each also
exits by itself when the loop's process is gone (``--parent-pid``).

Each payload names the iteration's emulator (``metadata.endpoint``), so agents started for one
iteration serve the next; they run with the environment of ``agent-kit run``'s agents, without
the per-run signing keys (the emulator checks only their shape for an invoker it did not start).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from agent_kit.driver.invokers import InvokeResult, SubprocessInvoker, agent_env, make_invoker
from agent_kit.errors import InvokerError
from agent_kit.settings import DEFAULTS, Settings

__all__ = ["KeptAgents"]

#: The endpoint in the agents' environment: a fallback that no payload of the loop needs,
#: since each names its iteration's emulator.
_NO_ENDPOINT: Final = "http://127.0.0.1:9"


class KeptAgents:
    """The agent processes of one entrypoint, kept across jobs (see the module docstring).

    ``env`` is laid over the environment ``agent-kit run`` gives its agents (a baseline's
    recorded ``agent_env``); ``log_dir`` holds ``agent-<i>.log`` per worker.
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
        self._inner: SubprocessInvoker | None = None

    @property
    def running(self) -> bool:
        """True while agent processes started by :meth:`restart` are up."""
        return self._inner is not None

    @property
    def pids(self) -> list[int]:
        """The live agent processes' ids."""
        return self._inner.pids if self._inner is not None else []

    async def restart(self) -> None:
        """End the running processes (if any) and start new ones on the entrypoint's code as
        it is now. :class:`InvokerError` (with the log's tail) when they do not come up; none
        is left running then."""
        await self.shutdown()
        invoker = make_invoker(
            self.name,
            env=self.env,
            workers=self.workers,
            log_dir=self.log_dir,
            concurrency=self.concurrency,
            max_answer_bytes=self.settings.max_answer_bytes,
            max_log_bytes=self.settings.max_log_bytes,
        )
        if not isinstance(invoker, SubprocessInvoker):  # a .py entrypoint always makes one
            raise InvokerError(f"{self.name} is not an entrypoint file")
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
        """End the processes with all they started (idempotent)."""
        inner, self._inner = self._inner, None
        if inner is not None:
            await inner.aclose()
