"""One-line hints for what only the agent can fix, found in the run's store.

:func:`connection_hint`: the emulator records a ``policy_connection`` event when a
trajectory's policy call comes on another TCP connection than its previous call
(agent_kit.emulator.core). An agent that reuses one HTTP client per episode opens about one
connection per episode; one that builds a new client per call (Strands ``OpenAIModel`` with
``client_args``, as the AWS samples write it) opens one per call, and pays for a new client and
TLS context each time (the ``foreign_agent`` rows of bench/results.md show what it costs).
Strands' ``OpenAIModel`` with ``stream=True`` also stops reading a stream at its finish chunk
without closing it, so even a shared client cannot reuse that connection for the next call.

:func:`extra_hint`: an agent-side failure that is a missing optional dependency of agent_kit
(``No module named 'strands_evals'``: a judge or a simulated user without the ``judges`` extra)
names the install line once, however many rollouts failed of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Final

from agent_kit.errors import JUDGES_EXTRA
from agent_kit.store import Rollout, RunStore
from agent_kit.store.events import CONNECTION_EVENT

__all__ = ["NEW_CONNECTION_SHARE", "connection_hint", "connection_stats", "extra_hint"]

#: Above this share of policy calls on a new connection, the hint fires.
NEW_CONNECTION_SHARE: Final = 0.5


def connection_stats(store: RunStore, records: Sequence[Rollout]) -> tuple[int, int]:
    """(policy calls on a new connection, policy calls) over rollouts with two or more turns."""
    many = {r.id: r.turns for r in records if r.turns >= 2}
    if not many:
        return 0, 0
    opened = Counter(
        e.trajectory_id for e in store.list_events(kind=CONNECTION_EVENT) if e.trajectory_id in many
    )
    return sum(opened.values()), sum(many.values())


def connection_hint(store: RunStore, records: Sequence[Rollout]) -> str | None:
    """The hint line when most policy calls of multi-turn rollouts opened a new connection."""
    opened, calls = connection_stats(store, records)
    if calls == 0 or opened / calls <= NEW_CONNECTION_SHARE:
        return None
    return (
        f"{opened} of {calls} policy calls opened a new connection: the agent builds a new "
        "OpenAI client per call (OpenAIModel(client_args=…)) or leaves streamed answers "
        "unclosed; reuse one client per episode and read streams to the end (docs/policy-client.md)"
    )


#: A module an agent's failure may miss → what installs it (agent_kit's extras).
_EXTRA_OF: Final = {"strands_evals": ("strands-agents-evals", JUDGES_EXTRA)}


def extra_hint(records: Sequence[Rollout]) -> str | None:
    """The hint line when agent-side failures are a missing extra of agent_kit (the first
    found), with how many rollouts failed of it; None otherwise."""
    for module, (package, install) in _EXTRA_OF.items():
        hit = sum(
            1
            for r in records
            if r.agent_failure
            and (f"No module named '{module}" in r.agent_failure or install in r.agent_failure)
        )
        if hit:
            return (
                f"{hit} rollout{'' if hit == 1 else 's'} failed because {package} is not "
                f"installed where the agent runs: {install}"
            )
    return None
