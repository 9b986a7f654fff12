"""Public test kit: test your own agent the way agent_kit's suite tests it.

In-process, no sockets — play one episode with a scripted policy::

    from agent_kit.testing import run_episode
    result = run_episode("agent.py", {"target": 3}, policy=MyPolicy())
    assert result["reward"] == 1.0

Against the real emulator on loopback — any agent (a ``RolloutApp``, a plain
``BedrockAgentCoreApp``, one written with ``sagemaker.train.rft``) can be pointed at it::

    from agent_kit.testing import run_emulator
    with run_emulator("scripted:policies.py:Solver") as emu:
        payload = emu.mint('{"answer": "crane"}')     # a rollout payload naming emu.url
        ...                                           # POST it to your agent, then:
        assert emu.store.trajectory(payload["metadata"]["rolloutId"]).state == "REWARDED"

Recorded runs become regression tests with :func:`record` / :func:`recorded_run` and
:func:`assert_replays` (see :mod:`agent_kit.replay.helpers`). :func:`reset_shared_state` clears
the process-wide AWS session and token provider between tests (credentials a test sets in the
environment then never leak into the next).

The pytest plugin (:mod:`agent_kit.testing.pytest_plugin`) offers these as fixtures.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kit.driver.inprocess import (
    ScriptedModel,
    ScriptedPolicy,
    load_app,
    run_episode,
    scripted_model_factory,
)
from agent_kit.settings import DEFAULTS, Settings

if TYPE_CHECKING:
    from agent_kit.emulator.core import Emulator
    from agent_kit.replay.helpers import assert_replays, record, recorded_run
    from agent_kit.store import RunStore

__all__ = [
    "LocalEmulator",
    "ScriptedModel",
    "ScriptedPolicy",
    "assert_replays",
    "load_app",
    "record",
    "recorded_run",
    "reset_shared_state",
    "run_emulator",
    "run_episode",
    "scripted_model_factory",
]

_REPLAY_NAMES = ("assert_replays", "record", "recorded_run")


def __getattr__(name: str) -> Any:
    """Record/replay helpers live in :mod:`agent_kit.replay.helpers` (loaded on first use)."""
    if name in _REPLAY_NAMES:
        from agent_kit.replay import helpers

        return getattr(helpers, name)
    raise AttributeError(f"module 'agent_kit.testing' has no attribute {name!r}")


def reset_shared_state() -> None:
    """Forget the process-wide botocore session, its cached clients and the default token
    provider, so the next policy call or report starts from the environment as it is now."""
    from agent_kit import policy_client, runtime_client

    runtime_client.reset_shared_session()
    policy_client.reset_default_token_provider()


@dataclass
class LocalEmulator:
    """An emulator served on loopback by :func:`run_emulator`.

    ``url`` is the Job Runtime endpoint agents are given, ``emulator`` the service object,
    ``store`` its run store (every trajectory, turn and reward), ``job_arn`` the job's ARN.
    """

    url: str
    emulator: Emulator
    store: RunStore
    job_arn: str

    def mint(self, prompt: str = '{"prompt": "hi"}') -> dict[str, Any]:
        """Open a trajectory of the job; return the rollout payload (metadata names ``url``)."""
        trajectory = self.emulator.open_trajectory(self.job_arn, prompt)
        payload: dict[str, Any] = self.emulator.rollout_payload(trajectory, self.url)
        return payload


@contextmanager
def _on_loop_thread(service: AbstractAsyncContextManager[Any], close: Any) -> Iterator[Any]:
    """Enter the async context ``service`` on an event loop of its own thread, for a
    synchronous caller (or one inside a running loop); on exit leave it, then await ``close()``
    (if given) on that loop, re-raising its failure here."""
    import asyncio
    import threading

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="agent-kit-emulator", daemon=True)
    thread.start()

    def run(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    try:
        value = run(service.__aenter__())
        try:
            yield value
        finally:
            try:
                run(service.__aexit__(None, None, None))
            finally:
                if close is not None:
                    run(close())
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


@contextmanager
def run_emulator(
    policy: Any = "random",
    *,
    run_dir: str | Path | None = None,
    job_name: str = "test-job",
    seed: int = 0,
    settings: Settings = DEFAULTS,
    **emulator_options: Any,
) -> Iterator[LocalEmulator]:
    """Run the emulator (Job Runtime API + OpenAI-compatible policy route) on 127.0.0.1.

    ``policy`` is a spec (``"random"``, ``"scripted:policies.py:Solver"``, …, built with
    ``settings``: the ``AGENT_KIT_*`` settings, every default unless given) or a backend
    object; the store lives in ``run_dir`` (a temporary folder, removed afterwards, if None).
    ``emulator_options`` go to :class:`~agent_kit.emulator.core.Emulator`. The service
    (:func:`~agent_kit.emulator.local_service.local_service`) runs on an event loop of its own
    thread, so this works from synchronous and asynchronous code alike. Everything is closed
    when the block exits; a backend that fails to close raises then.
    """
    from agent_kit.emulator.local_service import local_service
    from agent_kit.emulator.policies import load_policy
    from agent_kit.store import RunStore

    with ExitStack() as stack:
        if run_dir is None:
            run_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="agent-kit-"))
        backend = (
            load_policy(policy, seed=seed, settings=settings) if isinstance(policy, str) else policy
        )
        store = RunStore.open(run_dir)
        stack.callback(store.close)
        service = local_service(store, backend, seed=seed, own_policy=False, **emulator_options)
        svc = stack.enter_context(_on_loop_thread(service, getattr(backend, "aclose", None)))
        job = svc.emulator.create_job(job_name, {"purpose": "agent_kit.testing.run_emulator"})
        yield LocalEmulator(svc.endpoint, svc.emulator, store, job.arn)
