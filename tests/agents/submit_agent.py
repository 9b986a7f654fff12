"""A RolloutApp agent a tiny model can learn from a warm start: one tool, one constant call.

The user asks the agent to call ``submit``; the tool takes no arguments and ends the episode.
The reward is 1 when it was called and 0 otherwise, so a base model that never writes a tool
call scores 0 in every rollout (every group alike: nothing for GRPO to learn), while an expert
(``submit_expert.py``) scores 1 with the same short, constant call a few epochs of supervised
fine-tuning can teach even a tiny random model.
"""

from __future__ import annotations

from typing import Any

from agent_kit import Environment, Episode, Reward, RolloutApp, tool


class Submit(Environment):
    """Call ``submit`` to finish."""

    def reset(self, task: dict[str, Any]) -> str:
        """The first user message (the same for every task)."""
        del task
        return "Call submit."

    @tool
    def submit(self) -> str:
        """Submit and finish the episode."""
        self.finish(True)
        return "ok"


def reward(env: Submit, episode: Episode) -> Reward:
    """1 when ``submit`` was called, else 0."""
    del episode
    return Reward.weighted(outcome=(1.0 if env.done else 0.0, 1.0))


app = RolloutApp(Submit, reward=reward, system_prompt="Use the tool.", max_turns=2)

if __name__ == "__main__":
    app.run()
