"""agent_kit: build, run locally, replay and deploy agents trained with SageMaker AI MTRL.

The public authoring API::

    from agent_kit import Environment, RolloutApp, Reward, tool

with :class:`Judge` (a reward component graded by a model) and :class:`SimulatedUser` (the user
side of a conversation, played by a model) for agents that need them.

Importing agent_kit has no side effects (no servers, no network, no logging configuration) and
is cheap: the names below are loaded on first use, so the CLI does not pay for Strands,
bedrock-agentcore or boto3 until a command needs them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_kit.app import RolloutApp
    from agent_kit.environment import Environment, SimulatedUser, TextToolCall, tool
    from agent_kit.episode import Episode, Failure, ToolCallRecord, TurnRecord
    from agent_kit.errors import AgentKitError
    from agent_kit.policy_client import PolicyConfig, TokenProvider
    from agent_kit.reward import Component, Judge, Reward

__all__ = [
    "AgentKitError",
    "Component",
    "Environment",
    "Episode",
    "Failure",
    "Judge",
    "PolicyConfig",
    "Reward",
    "RolloutApp",
    "SimulatedUser",
    "TextToolCall",
    "TokenProvider",
    "ToolCallRecord",
    "TurnRecord",
    "tool",
]

__version__ = "0.4.0"

_HOME = {
    "AgentKitError": "agent_kit.errors",
    "Component": "agent_kit.reward",
    "Environment": "agent_kit.environment",
    "Episode": "agent_kit.episode",
    "Failure": "agent_kit.episode",
    "Judge": "agent_kit.reward",
    "PolicyConfig": "agent_kit.policy_client",
    "Reward": "agent_kit.reward",
    "RolloutApp": "agent_kit.app",
    "SimulatedUser": "agent_kit.environment",
    "TextToolCall": "agent_kit.environment",
    "TokenProvider": "agent_kit.policy_client",
    "ToolCallRecord": "agent_kit.episode",
    "TurnRecord": "agent_kit.episode",
    "tool": "agent_kit.environment",
}


def lazy_face(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of a package face whose names load on first use (PEP 562):
    ``homes`` maps each public name to the module defining it (a full name, or one relative to
    ``package``); the value is kept in the face once loaded, and an unknown name is an
    AttributeError. Every lazy face of agent_kit (this one, ``emulator``, ``model``,
    ``replay``) is one."""

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = home if home.startswith(f"{__name__}.") else f"{package}.{home}"
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return load


__getattr__ = lazy_face(__name__, _HOME)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
