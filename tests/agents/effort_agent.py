"""A one-tool RolloutApp whose reward is set by its own setting, ``REASONING_EFFORT`` in its
environment (as ``agent-kit eval --grid env.REASONING_EFFORT=low,high`` gives it): 1.0 for
``high``, 0.25 for ``low``; without it the reward raises (the floor reward). The policy says a
number (``tests/agents/say_policy.py``) and the episode ends.
"""

import os

from agent_kit import Environment, Reward, RolloutApp, tool

EFFORT_REWARD = {"high": 1.0, "low": 0.25}


class Env(Environment):
    def reset(self, task):
        return "say something"

    @tool
    def say(self, n: int) -> str:
        """Say a number.

        Args:
            n: the number
        """
        self.finish()
        return "ok"


def reward(env, episode):
    return Reward.weighted(outcome=(EFFORT_REWARD[os.environ["REASONING_EFFORT"]], 1.0))


app = RolloutApp(Env, reward=reward, max_turns=4)
if __name__ == "__main__":
    app.run()
