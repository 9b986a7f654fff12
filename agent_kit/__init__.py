"""agent_kit: build, run locally, replay and deploy agents trained with SageMaker AI MTRL.

The public authoring API::

    from agent_kit import Environment, RolloutApp, Reward, tool

Importing agent_kit has no side effects (no servers, no network, no logging configuration).
"""

from agent_kit.environment import Environment, TextToolCall, tool
from agent_kit.episode import Episode, Failure, ToolCallRecord, TurnRecord
from agent_kit.errors import AgentKitError
from agent_kit.reward import Component, Reward

__all__ = [
    "AgentKitError",
    "Component",
    "Environment",
    "Episode",
    "Failure",
    "Reward",
    "TextToolCall",
    "ToolCallRecord",
    "TurnRecord",
    "tool",
]

__version__ = "0.1.0"
