"""The session around a runner's attempts: serve the emulator, create the job, make and start
the agents, close them — written once for every runner; and the one writer of the job's row.

A :class:`Session` is one run store and one agent target under the one settings record
(:class:`~agent_kit.driver.config.RunConfig` for how the agents are reached,
:class:`~agent_kit.driver.config.JobConfig` for the job's own settings):

1. :meth:`Session.service` serves the emulator over the store
   (:func:`~agent_kit.emulator.local_service.local_service`, with the job's seed, region and
   auxiliary policy; signatures verified for the agent processes the session starts itself);
2. :meth:`Session.create_job` creates the job on it, recording a
   :func:`~agent_kit.driver.job_setup.job_record` (the one shape of what a job records about
   itself);
3. :meth:`Session.agents` makes the invoker (``make_invoker(agent_env(…), log_dir=…,
   on_event=store.add_event)``: the one place agent_kit creates one) unless the caller gave one;
4. :meth:`Session.start_agents` starts them (local processes first, the token counter warming
   beside them);
5. the caller closes the agents (``invoker.aclose()``), then the service stops;
   :meth:`Session.finish_job` writes how the job ended (its status and summary).

The job's row is written here only: every runner (``agent-kit run``/``train``'s job, ``invoke``'s
single rollout, ``replay``) builds its record with
:func:`~agent_kit.driver.job_setup.job_record` and writes the row through its session.

:func:`open_session` is all five around a block (``agent-kit invoke``'s single rollout and
``agent-kit replay``); :func:`~agent_kit.driver.job.run_job` (``agent-kit run`` and ``train``)
calls the steps itself, since its job stops in a set order (gate, outputs, service, agents).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.invokers import Invoker, agent_env, make_invoker
from agent_kit.driver.job_setup import default_workers
from agent_kit.emulator.local_service import LocalService, local_service
from agent_kit.emulator.service import PolicyBackendLike
from agent_kit.emulator.tokens import tokenizer_name
from agent_kit.errors import AgentKitError
from agent_kit.store import RunStore
from agent_kit.store.layout import RunLayout

__all__ = ["Session", "open_session"]


class Session:
    """One runner's emulator, job and agents (see the module docstring).

    ``target`` is the agent (``.py`` entrypoint, URL, AgentCore or Lambda ARN); ``job`` gives
    the seed, region, auxiliary policy and the rollouts in flight; ``config`` how the agents
    are reached (``workers``, ``rate``, ``endpoint_url``, ``agent_memory``, ``lenient_auth``;
    its ``job`` is not read). ``invoker`` is one the caller made itself (used instead of making
    one, and closed like one). Inside :meth:`service`, ``svc`` is the served emulator; after
    :meth:`create_job`, ``job_arn`` the job; after :meth:`agents`, ``invoker`` the agents.
    """

    def __init__(
        self,
        store: RunStore,
        run_dir: Path,
        target: str,
        job: JobConfig,
        config: RunConfig | None = None,
        *,
        invoker: Invoker | None = None,
    ) -> None:
        self.store, self.run_dir, self.target, self.job = store, run_dir, target, job
        self.config = config if config is not None else RunConfig()
        workers = self.config.workers
        #: Agent processes of a ``.py`` target (the record's, else one per usable core).
        self.workers = default_workers(job.concurrency) if workers is None else workers
        self.given = invoker
        self.invoker: Invoker | None = invoker
        self._svc: LocalService | None = None
        self.job_arn = ""

    @property
    def svc(self) -> LocalService:
        """The served emulator; :class:`AgentKitError` before :meth:`service` is entered."""
        if self._svc is None:
            raise AgentKitError("the session's emulator is not served yet")
        return self._svc

    def verifies(self, *, advertised: bool = False) -> bool:
        """Whether the emulator verifies signatures: only for agent processes this session
        starts (it hands them the run's keys), never an advertised (tunnelled) run, never with
        ``lenient_auth``."""
        local = self.given is None and self.target.endswith(".py")
        return local and not advertised and not self.config.lenient_auth

    @asynccontextmanager
    async def service(
        self,
        policy: str | PolicyBackendLike,
        *,
        aux_policy: str | PolicyBackendLike | None = None,
        advertised: bool = False,
        **options: Any,
    ) -> AsyncIterator[LocalService]:
        """Serve the emulator over the store for the block (see :func:`local_service`):
        ``policy`` a spec or a backend, ``aux_policy`` the auxiliary route's model (default:
        the job's), ``options`` the rest of ``local_service``'s (``gate``, ``start``,
        ``path_prefix``, ``port``, ``chaos``, ``own_policy``, …)."""
        async with local_service(
            self.store,
            policy,
            seed=self.job.seed,
            base_dir=Path.cwd(),
            region=self.job.region,
            verify_auth=self.verifies(advertised=advertised),
            aux_policy=self.job.aux_policy if aux_policy is None else aux_policy,
            settings=self.config.settings,
            **options,
        ) as svc:
            self._svc = svc
            try:
                yield svc
            finally:
                self._svc = None

    def create_job(self, name: str, record: Mapping[str, Any]) -> str:
        """Create the job on the served emulator (``record``, a
        :func:`~agent_kit.driver.job_setup.job_record`, is what it
        records about itself; a resumed job keeps its row and is running again); returns its
        ARN (also :attr:`job_arn`)."""
        self.job_arn = self.svc.emulator.create_job(name, dict(record)).arn
        self.store.update_job(self.job_arn, status="running")
        return self.job_arn

    def finish_job(self, status: str, summary: Mapping[str, Any] | None = None) -> None:
        """Write how the job ended: its ``status`` and, when given, its ``summary`` (the
        driver's figures under ``"run"``, a replay's report under ``"replay"``)."""
        self.store.update_job(
            self.job_arn, status=status, summary=None if summary is None else dict(summary)
        )

    def agents(
        self,
        endpoint: str | None = None,
        *,
        extra_env: Mapping[str, str] | None = None,
        stop_sessions: bool = True,
    ) -> Invoker:
        """The invoker that reaches the agents: the caller's, else one made for the target,
        its agent processes pointed at ``endpoint`` (default: the service's) with the run's
        keys, logging under ``RUN_DIR/logs`` and recording their events in the store."""
        if self.invoker is not None:
            return self.invoker
        svc = self.svc
        env = agent_env(endpoint or svc.endpoint, self.job.region, credentials=svc.keys.agent_env())
        env.update(self.config.extra_env or {})
        env.update(extra_env or {})
        self.invoker = make_invoker(
            self.target,
            env=env,
            workers=self.workers,
            log_dir=RunLayout(self.run_dir).logs,
            concurrency=self.job.concurrency,
            rate=self.config.rate,
            endpoint_url=self.config.endpoint_url,
            on_event=self.store.add_event,
            stop_sessions=stop_sessions,
            agent_memory=self.config.agent_memory,
            max_answer_bytes=self.config.settings.max_answer_bytes,
            max_log_bytes=self.config.settings.max_log_bytes,
        )
        return self.invoker

    async def start_agents(self) -> Invoker:
        """Start the agents (:meth:`agents` first): local processes are spawned first, and the
        token counter warms in a thread while they start, instead of blocking the emulator's
        loop on the first policy call. InvokerError when they cannot start."""
        invoker = self.agents()
        spawn = getattr(invoker, "spawn", None)
        if spawn is not None:
            await spawn()
        warm = asyncio.create_task(
            asyncio.to_thread(tokenizer_name, self.config.settings.tokenizer)
        )
        try:
            await invoker.start()
        finally:
            await warm
        return invoker

    async def close_agents(self) -> None:
        """Close the agents (a caller's invoker too: the session plays through it to the end);
        nothing when none was made."""
        if self.invoker is not None:
            await self.invoker.aclose()


@asynccontextmanager
async def open_session(
    session: Session,
    policy: str | PolicyBackendLike,
    job_name: str,
    record: Mapping[str, Any],
    **service_options: Any,
) -> AsyncIterator[Session]:
    """Serve the emulator, create the job ``job_name`` (recording ``record``), make and start
    the agents; on leaving the block (raised or not) close the agents, then stop the service.
    ``service_options`` go to :meth:`Session.service`."""
    async with session.service(policy, **service_options):
        session.create_job(job_name, record)
        try:
            await session.start_agents()
            yield session
        finally:
            await session.close_agents()
