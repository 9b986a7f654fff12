"""Echo: a task SmolLM2-135M can learn on a CPU (the ``agent-kit train`` example).

The user names a word; the policy must call ``submit`` with exactly that word. Reward: 1 for
the exact word through the tool, 0.5 for the exact word in a plain answer, 0 otherwise. The base
model often answers in prose or mangles the call, so groups have reward variance from the first
step and GRPO has something to push on. Wordle stays the worked example for real models.

    agent-kit train examples/echo/agent.py --dataset examples/echo/train.jsonl \\
        --eval examples/echo/holdout.jsonl --steps 20 --group-size 4 --batch-size 4
"""

from __future__ import annotations

from typing import Any

from agent_kit import Environment, Episode, Reward, RolloutApp, tool


class Echo(Environment):
    """Submit the word the user names."""

    def reset(self, task: dict[str, Any]) -> str:
        """The user's request."""
        self.word = str(task["word"])
        self.submitted: str | None = None
        return f"Call the submit tool with the word {self.word}."

    @tool
    def submit(self, word: str) -> str:
        """Submit the word.

        Args:
            word: the word, exactly as the user wrote it.
        """
        self.submitted = word.strip()
        self.finish("submitted")
        return "received"


def reward(env: Echo, episode: Episode) -> Reward:
    """1 for the exact word submitted, 0.5 for the exact word in plain text, else 0."""
    if env.submitted == env.word:
        score = 1.0
    elif env.submitted is None and env.word in (episode.final_text or "").split():
        score = 0.5
    else:
        score = 0.0
    return Reward.weighted(outcome=(score, 1.0))


app = RolloutApp(
    Echo, reward=reward, system_prompt="You call tools to answer.", max_turns=2, floor_reward=0.0
)

if __name__ == "__main__":
    app.run()
