"""Echo: a task SmolLM2-135M can learn on a CPU (the ``agent-kit train`` example).

The user names a word and asks for it back, alone. The reward is graded so that a group of
samples from the base model differs (GRPO needs that): 1 for a reply that is exactly the word,
0.5 for the word within a short reply (at most five words), 0.25 for the word somewhere in a
longer one, 0 otherwise; a reply cut at the token limit is the floor (0). The base model mostly
wraps the word in chatter or rambles past the limit, so the room to learn is brevity and
exactness, which a 135M model picks up in minutes of GRPO on a CPU. One policy turn, no tools:
a step of 16 rollouts samples a few hundred tokens. Wordle stays the worked example for real
models.

    agent-kit train examples/echo/agent.py --dataset examples/echo/train.jsonl \\
        --eval examples/echo/holdout.jsonl --steps 20 --group-size 4 --batch-size 4 \\
        --max-tokens 24 --temperature 0.7
"""

from __future__ import annotations

import re
from typing import Any

from agent_kit import Environment, Episode, Reward, RolloutApp

_WORDS = re.compile(r"[A-Za-z']+")


class Echo(Environment):
    """Say the word the user names, and nothing else."""

    def reset(self, task: dict[str, Any]) -> str:
        """The user's request."""
        self.word = str(task["word"]).lower()
        return f"Repeat after me: {self.word}"


def reward(env: Echo, episode: Episode) -> Reward:
    """0.6 when the reply holds the word, 0.4 when it is one word: 1 for exactly the word."""
    words = [w.lower() for w in _WORDS.findall(episode.final_text or "")]
    return Reward.weighted(
        outcome=(float(env.word in words), 0.6), brevity=(float(len(words) == 1), 0.4)
    )


app = RolloutApp(
    Echo, reward=reward, system_prompt="You answer briefly.", max_turns=1, floor_reward=0.0
)

if __name__ == "__main__":
    app.run()
