"""The foundation issue's RolloutApp example, as an entrypoint file the driver starts.

Imports from the defining modules so it does not depend on the package's re-exports.
"""

from agent_kit.app import RolloutApp
from agent_kit.environment import Environment, tool
from agent_kit.reward import Reward


class Counter(Environment):
    def reset(self, task: dict) -> str:
        self.target, self.value = task["target"], 0
        return f"Reach {self.target} by calling add."

    @tool
    def add(self, n: int) -> str:
        """Add n to the counter.

        Args:
            n: amount to add
        """
        self.value += n
        if self.value >= self.target:
            self.finish()
        return f"value={self.value}"


def reward(env: Counter, episode) -> Reward:
    return Reward.weighted(
        outcome=(float(env.value == env.target), 1.0), efficiency=(-episode.turns / 10, 0.1)
    )


app = RolloutApp(Counter, reward=reward, system_prompt="You are a careful agent.", max_turns=8)
if __name__ == "__main__":
    app.run()
