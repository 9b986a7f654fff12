"""The local MTRL service: the Job Runtime API, its rules, and the policies behind it.

Public policy-authoring types are re-exported here; the server and driver are reached through
the CLI (``agent-kit emulate`` / ``agent-kit run``) or :mod:`agent_kit.testing`. The re-exports
load on first use, so that a process which needs only one submodule (an agent process started
through :mod:`agent_kit.driver._serve`) does not build the policy-authoring models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall, coerce_reply

__all__ = ["PolicyReply", "PolicyRequest", "ToolCall", "coerce_reply"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from agent_kit.emulator import schemas

        value = getattr(schemas, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
