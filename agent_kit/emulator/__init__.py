"""The local MTRL service: Job Runtime API, policies, job driver and invokers.

Public policy-authoring types are re-exported here; the server and driver are reached through
the CLI (``agent-kit emulate`` / ``agent-kit run``) or :mod:`agent_kit.testing`.
"""

from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall, coerce_reply

__all__ = ["PolicyReply", "PolicyRequest", "ToolCall", "coerce_reply"]
