"""The local MTRL service: the Job Runtime API, its rules, and the policies behind it.

Public policy-authoring types are re-exported here (with the policy backend protocol and the
``hf`` backend that samples a loaded model, what ``agent-kit train`` plays its rollouts with);
the server and driver are reached through the CLI (``agent-kit emulate`` / ``agent-kit run``)
or :mod:`agent_kit.testing`. The re-exports load on first use, so that a process which needs
only one submodule (an agent process started through :mod:`agent_kit.driver._serve`) does not
build the policy-authoring models (nor import torch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_kit import lazy_face

if TYPE_CHECKING:
    from agent_kit.emulator.policies.base import PolicyBackend
    from agent_kit.emulator.policies.hf import HFPolicyBackend
    from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall, coerce_reply

#: Public name → the module that defines it.
_HOMES = {
    "HFPolicyBackend": "agent_kit.emulator.policies.hf",
    "PolicyBackend": "agent_kit.emulator.policies.base",
    "PolicyReply": "agent_kit.emulator.schemas",
    "PolicyRequest": "agent_kit.emulator.schemas",
    "ToolCall": "agent_kit.emulator.schemas",
    "coerce_reply": "agent_kit.emulator.schemas",
}

__all__ = [
    "HFPolicyBackend",
    "PolicyBackend",
    "PolicyReply",
    "PolicyRequest",
    "ToolCall",
    "coerce_reply",
]


__getattr__ = lazy_face(__name__, _HOMES)
