"""Who answers the agent's policy calls in the emulator: backend types, wire helpers, registry.

The types and wire helpers are in :mod:`~agent_kit.emulator.policies.base`, spec loading in
:mod:`~agent_kit.emulator.policies.registry`; the built-in backends (``random``, ``scripted``,
``openai``) are modules here, and ``replay`` lives with the rest of replay
(:mod:`agent_kit.replay.policy`).
"""

from agent_kit.emulator.policies.base import (
    PolicyBackend,
    PolicyFactory,
    PolicyResult,
    Usage,
    check_policy,
    chunks_to_completion,
    completion_id_for,
    completion_to_chunks,
    reply_to_completion,
    result_for_reply,
)
from agent_kit.emulator.policies.registry import load_policy, policy_schemes, register_policy_scheme

__all__ = [
    "PolicyBackend",
    "PolicyFactory",
    "PolicyResult",
    "Usage",
    "check_policy",
    "chunks_to_completion",
    "completion_id_for",
    "completion_to_chunks",
    "load_policy",
    "policy_schemes",
    "register_policy_scheme",
    "reply_to_completion",
    "result_for_reply",
]
