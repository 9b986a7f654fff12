"""{{ cookiecutter.project_name }}: {{ cookiecutter.agent_description }}

This one file is the whole AgentCore entrypoint that SageMaker AI multi-turn RL trains against:

- ``{{ cookiecutter.environment_class }}``: the task state and the tool the policy may call
  (a fresh instance per rollout);
- ``reward``: scores a finished episode (an outcome term and a strategy term);
- ``app``: a ``RolloutApp`` (a BedrockAgentCoreApp) that speaks the MTRL contract.

The example task works out of the box: find a hidden whole number in a range, with a
``{{ cookiecutter.tool_name }}`` tool that answers "higher", "lower" or "correct".
Replace it with your task where the ``TODO`` markers say.

Run it locally against the emulator::

    agent-kit run agent.py --dataset data/train.jsonl --policy scripted:policies.py:binary_search
"""

from __future__ import annotations

from typing import Any

from agent_kit import Environment, Episode, Reward, RolloutApp, tool

# TODO: describe your agent's job to the policy model.
SYSTEM_PROMPT = (
    "{{ cookiecutter.agent_description }} "
    "Call the {{ cookiecutter.tool_name }} tool once per turn and use its feedback to narrow "
    "the range. Stop when the tool says you are correct or out of guesses."
)

MAX_TURNS = {{ cookiecutter.max_turns }}
"""Policy calls allowed per episode (each call is one *turn* in the service's accounting)."""

EFFICIENCY_WEIGHT = 0.2
"""Weight of the strategy term: how many guesses a solved episode saved."""


class {{ cookiecutter.environment_class }}(Environment):
    """Find the hidden number: one instance per rollout, so attributes are the episode's state."""

    # TODO: replace the number-guessing task with yours. ``task`` is one dataset row's JSON
    # object (see data/train.jsonl); its hidden fields must never appear in the returned text.
    def reset(self, task: dict[str, Any]) -> str:
        """Start an episode; return the first user message (without the hidden number)."""
        self.low = int(task["low"])
        self.high = int(task["high"])
        self.secret = int(task["secret"])  # hidden: only the tool and the reward read it
        self.max_guesses = int(task.get("max_guesses", 7))
        if not self.low <= self.secret <= self.high or self.max_guesses < 1:
            raise ValueError(f"task {task.get('id', '?')} is inconsistent")
        self.guesses: list[int] = []
        self.solved = False
        return (
            f"I am thinking of a whole number between {self.low} and {self.high}. "
            f"Find it with at most {self.max_guesses} calls to {{ cookiecutter.tool_name }}."
        )

    # TODO: replace this tool with your task's tools (add more methods decorated with @tool).
    # The docstring and type hints become the tool's description and JSON schema.
    @tool
    def {{ cookiecutter.tool_name }}(self, number: int) -> str:
        """Guess the hidden number; the answer says whether it is higher, lower or correct.

        Args:
            number: the number to try, a whole number inside the range.
        """
        if self.done:
            return "The game is over."
        self.guesses.append(number)
        left = self.max_guesses - len(self.guesses)
        if number == self.secret:
            self.solved = True
            self.finish("solved")  # ends the episode without another policy call
            return f"correct: the number is {number}."
        hint = "higher" if self.secret > number else "lower"
        if left == 0:
            self.finish("out of guesses")
            return f"{hint}: the number is {hint} than {number}. No guesses left: game over."
        return f"{hint}: the number is {hint} than {number}. {left} guesses left."


# TODO: score your task. Components whose names start with "outcome" are outcome terms (did the
# task succeed); the others are strategy terms (how it was played). The episode record
# (episode.turns, episode.tool_calls, episode.recovered_calls, episode.usage) is there too.
def reward(env: {{ cookiecutter.environment_class }}, episode: Episode) -> Reward:
    """1 for finding the number, plus up to EFFICIENCY_WEIGHT for the guesses it saved."""
    del episode  # this task scores from the environment's state alone
    solved = 1.0 if env.solved else 0.0
    saved = (env.max_guesses - len(env.guesses)) / env.max_guesses if env.solved else 0.0
    return Reward.weighted(outcome=(solved, 1.0), efficiency=(saved, EFFICIENCY_WEIGHT))


def reward_rank(ep: Any) -> tuple[int, float]:
    """Lower is better: solved with more guesses saved first, then unsolved."""
    if ep.components.get("outcome", 0.0) >= 1.0:
        return (0, -ep.components.get("efficiency", 0.0))
    return (1, 0.0)


# TODO: keep this in step with the reward. `agent-kit doctor reward RUN_DIR` checks each
# ordering on every pair of recorded episodes (a lower rank must score strictly higher).
REWARD_ORDERINGS = [("solved fast > solved slow > unsolved", reward_rank)]


app = RolloutApp(
    {{ cookiecutter.environment_class }},
    reward=reward,
    system_prompt=SYSTEM_PROMPT,
    max_turns=MAX_TURNS,
)

if __name__ == "__main__":
    app.run()
