"""The scripted expert of ``submit_agent.py``: it calls ``submit`` on its first turn."""

from __future__ import annotations

from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall


def expert(request: PolicyRequest) -> PolicyReply:
    """Call ``submit`` with no arguments; after its result, say so."""
    if any(m.get("role") == "tool" for m in request.messages):
        return PolicyReply(content="Submitted.")
    return PolicyReply(tool_calls=(ToolCall(name="submit", arguments={}),))
