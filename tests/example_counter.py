"""The authoring example of the foundation issue, as a user writes it (one entrypoint file)."""

from agent_kit import Environment, Reward, RolloutApp, tool


class Counter(Environment):
    def reset(self, task: dict) -> str:  # task = the JSON packed in payload["prompt"]
        self.target, self.value = task["target"], 0
        return f"Reach {self.target} by calling add."  # first user message; hidden fields stay here

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
