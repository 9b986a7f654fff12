"""A RolloutApp agent for the training tests: two turns at most, a reward any model can vary.

The reward is the fraction of the characters of the final answer that are digits, so even a
tiny random model's rollouts differ in reward (groups have variance, advantages are non-zero).
A task with ``"explode": true`` makes the reward function raise (the rollout gets the floor).
A task with ``"shaped": true`` is scored as an outcome plus shaping instead: the outcome
(``Reward.weighted(outcome=…)``) is 1 when the answer has an even number of characters, else 0
(a group differs in outcome about half the time), and the digits' share is a shaping term of
weight 0.1, so rollouts of the same outcome still differ in reward: their group differs only by
shaping.
"""

from __future__ import annotations

from typing import Any

from agent_kit import Environment, Episode, Reward, RolloutApp, tool


class Count(Environment):
    """Say a number; the tool echoes it back."""

    def reset(self, task: dict[str, Any]) -> str:
        """The first user message."""
        self.target = int(task["target"])
        self.explode = bool(task.get("explode"))
        self.shaped = bool(task.get("shaped"))
        return f"Say the number {self.target}."

    @tool
    def say(self, number: int) -> str:
        """Say a number.

        Args:
            number: the number to say.
        """
        return "heard" if number == self.target else "wrong"


def reward(env: Count, episode: Episode) -> Reward:
    """The share of digits in the final answer (or, shaped, the outcome plus that share)."""
    if env.explode:
        raise ValueError("this task's reward fails on purpose")
    text = episode.final_text or ""
    digits = sum(ch.isdigit() for ch in text) / len(text) if text else 0.0
    if env.shaped:
        even = 1.0 if len(text) % 2 == 0 else 0.0
        return Reward.weighted(outcome=(even, 1.0), strategy=(digits, 0.1))
    return Reward.weighted(outcome=(digits, 1.0))


app = RolloutApp(Count, reward=reward, system_prompt="Answer with digits only.", max_turns=2)

if __name__ == "__main__":
    app.run()
