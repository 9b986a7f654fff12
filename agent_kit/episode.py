"""One episode: the record a reward function and reports see.

(The episode *runner* — payload → environment → agent turns → reward → report — is added to this
module by the foundation work; the record types below are the stable part other modules use.)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["Episode", "Failure", "FailureBoundary", "ToolCallRecord", "TurnRecord"]

FailureBoundary = Literal["payload", "policy", "environment", "reward", "judge", "runtime", "limit"]


@dataclass(frozen=True)
class Failure:
    """Where and why an episode failed on the agent's side (it still reports a floor reward).

    ``where`` is the place in the user's code that raised, when known: the last frames of the
    traceback outside agent_kit and installed libraries, as ``file.py:LINE in function``
    (innermost last, at most 3 frames and 300 characters; file names only, never values).
    """

    boundary: FailureBoundary
    reason: str
    where: str | None = None


@dataclass
class ToolCallRecord:
    """One tool execution: its input, its output text, and whether it was recovered from text."""

    turn: int
    name: str
    input: dict[str, Any]
    output: str
    status: Literal["success", "error"] = "success"
    recovered: bool = False


@dataclass
class TurnRecord:
    """One policy call (one *turn* in the service's accounting)."""

    index: int
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    stop_reason: str = ""
    text: str = ""
    tool_calls: list[str] = field(default_factory=list)


@dataclass
class Episode:
    """Everything that happened in one rollout, as the reward function and the reports see it."""

    task: dict[str, Any]
    prompt: str
    trajectory_id: str | None = None
    turn_log: list[TurnRecord] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    stop_reason: str = ""
    final_text: str = ""
    failure: Failure | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def turns(self) -> int:
        """Policy calls made so far."""
        return len(self.turn_log)

    @property
    def recovered_calls(self) -> list[ToolCallRecord]:
        """Tool calls that were recovered from plain text (candidates for a format penalty)."""
        return [c for c in self.tool_calls if c.recovered]

    @property
    def usage(self) -> dict[str, int]:
        """Token totals over all turns: ``input_tokens``, ``output_tokens``, ``total_tokens``."""
        inp = sum(t.input_tokens for t in self.turn_log)
        out = sum(t.output_tokens for t in self.turn_log)
        return {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record (without the raw message history)."""
        data = asdict(self)
        data.pop("messages", None)
        data["turns"] = self.turns
        data["usage"] = self.usage
        return data
