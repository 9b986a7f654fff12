"""A RolloutApp agent whose reward is an outcome term plus shaping, for the signal tests.

The outcome (``Reward.weighted(outcome=…)``) is 1 when the final answer has an even number of
characters, else 0: a tiny random model's group differs in outcome about half the time. The
shaping term (weight 0.1) is the share of digits in the answer, so rollouts of the same outcome
still differ in reward: their group differs only by shaping.
"""

from __future__ import annotations

from typing import Any

from agent_kit import Environment, Episode, Reward, RolloutApp, tool


class Count(Environment):
    """Say a number; the tool echoes it back."""

    def reset(self, task: dict[str, Any]) -> str:
        """The first user message."""
        self.target = int(task["target"])
        return f"Say the number {self.target}."

    @tool
    def say(self, number: int) -> str:
        """Say a number.

        Args:
            number: the number to say.
        """
        return "heard" if number == self.target else "wrong"


def reward(env: Count, episode: Episode) -> Reward:
    """Outcome: an even-length answer; shaping: its share of digits."""
    text = episode.final_text or ""
    digits = sum(ch.isdigit() for ch in text) / len(text) if text else 0.0
    outcome = 1.0 if len(text) % 2 == 0 else 0.0
    return Reward.weighted(outcome=(outcome, 1.0), strategy=(digits, 0.1))


app = RolloutApp(Count, reward=reward, system_prompt="Answer with digits only.", max_turns=2)

if __name__ == "__main__":
    app.run()
