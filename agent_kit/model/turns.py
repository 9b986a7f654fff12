"""The tokens of one sampled turn, exactly as sampled: what the ``hf`` policy records and what
training (:mod:`agent_kit.train.samples`) reads back. Plain data: no torch needed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TurnTokens"]


@dataclass(frozen=True)
class TurnTokens:
    """The tokens of one turn, exactly as sampled: what a trainer reads.

    ``logprobs[i]`` is the log-probability of ``completion_ids[i]`` under the sampling
    temperature (before top-p), given ``prompt_ids`` and the completion before it.
    """

    trajectory_id: str
    turn: int
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (stored as an event of the run)."""
        return {
            "turn": self.turn,
            "prompt_ids": list(self.prompt_ids),
            "completion_ids": list(self.completion_ids),
            "logprobs": list(self.logprobs),
        }

    @classmethod
    def from_dict(cls, trajectory_id: str, data: dict[str, Any]) -> TurnTokens:
        """The inverse of :meth:`to_dict`."""
        return cls(
            trajectory_id,
            int(data["turn"]),
            tuple(int(i) for i in data["prompt_ids"]),
            tuple(int(i) for i in data["completion_ids"]),
            tuple(float(x) for x in data["logprobs"]),
        )
