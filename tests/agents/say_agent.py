"""A one-tool RolloutApp: the policy says a number and the episode ends.

The reward acts on the task: ``"bad": "nan"`` answers a NaN outcome, any other true ``"bad"``
raises (the floor reward); otherwise the outcome is 1.0, or, where the task names a ``target``,
whether the number said is it. ``tests/agents/say_policy.py`` is the policy that plays it.
"""

import math

from agent_kit import Environment, Reward, RolloutApp, tool


class Env(Environment):
    def reset(self, task):
        self.task = task
        self.said = None
        return "say something"

    @tool
    def say(self, n: int) -> str:
        """Say a number.

        Args:
            n: the number
        """
        self.said = n
        self.finish()
        return "ok"


def reward(env, episode):
    bad = env.task.get("bad")
    if bad == "nan":
        return Reward.weighted(outcome=(math.nan, 1.0))
    if bad:
        raise ValueError("the reward function broke on purpose")
    return Reward.weighted(outcome=(float(env.task.get("target", env.said) == env.said), 1.0))


app = RolloutApp(Env, reward=reward, max_turns=4)
if __name__ == "__main__":
    app.run()
