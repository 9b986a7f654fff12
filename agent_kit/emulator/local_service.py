"""The one way to bring up the local service: policy → :class:`~agent_kit.emulator.core.Emulator`
→ :func:`~agent_kit.emulator.server.create_app` →
:class:`~agent_kit.emulator.serving.EmbeddedServer` on 127.0.0.1 → the endpoint agents are given.

The job driver, ``agent-kit invoke``'s single rollout, the replay runner, the test kit and
``agent-kit emulate`` (on its ``--host``, until Ctrl-C) all serve the emulator this way::

    async with local_service(store, "random", seed=0) as svc:
        job_arn = svc.emulator.create_job("demo", {}).arn
        ...  # agents reach svc.endpoint

Guarantees: the port is bound before the context is entered (``svc.url`` is known then; a fixed
``port`` that cannot be bound is a :class:`~agent_kit.errors.UsageError`); on exit the server
stops (releasing the port) *before* the policy is closed, and a failure to close the policy is
logged, never raised over the caller's own outcome. The store stays the caller's to close.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kit.emulator.core import Emulator
from agent_kit.emulator.run_keys import RunKeys
from agent_kit.emulator.service import PolicyBackendLike
from agent_kit.emulator.serving import EmbeddedServer
from agent_kit.settings import DEFAULTS, Settings

if TYPE_CHECKING:
    from agent_kit.emulator.gate import RequestGate
    from agent_kit.store import RunStore

__all__ = ["LocalService", "local_service"]

logger = logging.getLogger("agent_kit.emulator")


class LocalService:
    """The emulator served on loopback inside the running event loop (see :func:`local_service`).

    ``url`` is ``http://127.0.0.1:<port>`` (or the ``host`` it was given); ``endpoint`` is
    where agents are sent (``url``, plus ``/<path_prefix>`` when the routes are mounted under
    one); ``gate`` is the app's
    :class:`~agent_kit.emulator.server.RequestGate`, if it has one; ``keys`` are the run's
    :class:`~agent_kit.emulator.run_keys.RunKeys` (give :meth:`RunKeys.agent_env` to the
    agents the run starts).
    """

    def __init__(
        self,
        emulator: Emulator,
        app: Any,
        server: EmbeddedServer,
        prefix: str | None,
        gate: Any,
        keys: RunKeys,
    ) -> None:
        self.emulator = emulator
        self.keys = keys
        self.app = app
        self.server = server
        self.gate: RequestGate | None = gate
        self.url = server.url
        self.endpoint = f"{self.url}/{prefix.strip('/')}" if prefix else self.url

    async def start(self) -> str:
        """Start serving; return :attr:`endpoint` once the server accepts connections."""
        await self.server.start()
        return self.endpoint

    async def serve_forever(self) -> None:
        """Serve until the server stops; cancelling the waiter (Ctrl-C under ``asyncio.run``)
        returns through the block's exit, which stops the server gracefully."""
        await self.server.wait()

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Stop serving (waiting up to ``timeout_s`` for the requests in flight) and release the
        port (idempotent: a second call only closes the already closed socket)."""
        await self.server.stop(timeout_s)


@asynccontextmanager
async def local_service(
    store: RunStore,
    policy: str | PolicyBackendLike,
    *,
    seed: int | None = None,
    base_dir: Path | None = None,
    secret: str | None = None,
    path_prefix: str | None = None,
    trainer_key: str | None = None,
    port: int = 0,
    host: str = "127.0.0.1",
    gate: bool = False,
    start: bool = True,
    own_policy: bool = True,
    verify_auth: bool = False,
    aux_policy: str | PolicyBackendLike | None = None,
    settings: Settings = DEFAULTS,
    **emulator_options: Any,
) -> AsyncIterator[LocalService]:
    """Serve an emulator over ``store`` on 127.0.0.1 for the ``async with`` block.

    ``policy`` is a spec (loaded with ``seed``, ``base_dir`` and ``settings``, the
    ``AGENT_KIT_*`` settings the CLI read) or a backend object;
    ``seed`` and ``emulator_options`` (``region``, ``chaos``, ``lenient``, …) go to
    :class:`Emulator`. ``secret``, ``path_prefix`` and ``trainer_key`` go to ``create_app``;
    ``gate=True`` puts a :class:`~agent_kit.emulator.server.RequestGate` in front of the app
    (:attr:`LocalService.gate`).
    ``port`` 0 is ephemeral; ``host`` is loopback unless the caller (``agent-kit emulate
    --allow-remote``, which requires a secret) names another address. With ``start=False``
    the server is bound but only serves after ``await svc.start()`` (a caller with work
    between learning the URL and serving). With ``own_policy=False`` the policy is left open
    for the caller to close. Every service gets
    fresh :class:`~agent_kit.emulator.run_keys.RunKeys` (:attr:`LocalService.keys`; with a
    ``secret``, its access key id is the secret, so a signed request carries it): rollout
    tokens are always checked against them; with ``verify_auth=True`` SigV4 signatures and
    ``sagemaker-api-key-…`` bearers must also be made with their AWS keys (else only their
    shape is checked). ``aux_policy`` (a spec or a backend, closed with the service when it is
    a spec or ``own_policy``) answers the auxiliary route (judge and simulated-user calls).
    """
    from agent_kit.emulator.gate import RequestGate
    from agent_kit.emulator.server import create_app

    if isinstance(policy, str):
        from agent_kit.emulator.policies import load_policy

        policy = load_policy(policy, seed=seed or 0, base_dir=base_dir, settings=settings)
    own_aux = own_policy or isinstance(aux_policy, str)
    if isinstance(aux_policy, str):
        from agent_kit.emulator.policies import load_policy

        aux_policy = load_policy(aux_policy, seed=seed or 0, base_dir=base_dir, settings=settings)
    try:
        emulator = Emulator(store, policy, seed=seed, aux_policy=aux_policy, **emulator_options)
        door = RequestGate() if gate else None
        keys = RunKeys.generate(access_key_id=secret)
        app = create_app(
            emulator,
            auth="verify" if verify_auth else "sigv4-or-bearer",
            keys=keys,
            secret=secret,
            path_prefix=path_prefix,
            gate=door,
            trainer_key=trainer_key,
        )
        server = EmbeddedServer(app, port=port, host=host)
        service = LocalService(emulator, app, server, path_prefix, door, keys)
        try:
            if start:
                await service.start()
            yield service
        finally:
            await service.stop()
    finally:
        if own_policy:
            await _close_policy(policy)
        if own_aux and aux_policy is not None:
            await _close_policy(aux_policy)


async def _close_policy(policy: PolicyBackendLike) -> None:
    """Close a policy backend; a failure is logged at debug, never raised."""
    try:
        await policy.aclose()
    except Exception as exc:  # noqa: BLE001 - closing must not mask the caller's own outcome
        name = getattr(policy, "name", type(policy).__name__)
        logger.debug("closing the policy %s failed: %s: %s", name, type(exc).__name__, exc)
