"""Simulated users: an environment whose user turns come from strands-evals' ActorSimulator.

A :class:`SimulatedUser` environment plays a conversation: its :meth:`~SimulatedUser.reset`
calls :meth:`SimulatedUser.start_user` with a persona, a goal and the user's opening message
(all from the dataset row), and after every agent turn the simulator answers as that user until
it says the goal is met, the user-turn budget (``max_user_turns``) ends, or the environment
finishes. ``goal_met`` (the simulator stopped because the goal was reached) and
``user_turns`` are there for the reward; the episode's stop reason then reads
``user_goal_met`` (or ``user_turns_exhausted``), not the policy's ``end_turn``.

The simulator is strands-agents-evals' ``ActorSimulator`` (the ``judges`` extra) on the
episode's auxiliary model (:mod:`agent_kit.auxiliary`: the emulator's ``/aux`` route locally,
where each user turn is a recorded auxiliary call; a Bedrock model id in the cloud). Three
things make it fit an RL episode:

- its greeting (chosen with the global ``random``) is chosen from the opening message instead,
  so an episode is the same every time its recorded answers are;
- it answers through its structured output (``ActorResponse``: ``message``, ``stop``) only,
  bounded to ``user_call_limit`` model calls per user turn: the stock goal-completion tool
  (which calls Strands' default Bedrock model directly, around the auxiliary route) is not
  offered, so a simulator cannot loop on it;
- it runs on the episode's event loop (``invoke_async``), never in a thread of its own.

User messages are environment text: the policy reads them, ``agent-kit train`` never trains
them (env_mask 0). A simulator that fails or answers without a message ends the episode as an
``environment`` failure whose reason starts with ``simulated user:`` (floor reward).
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar, Final

from agent_kit.auxiliary import aux_model
from agent_kit.environment import Environment
from agent_kit.errors import SimulatedUserError, describe_exception

__all__ = ["SimulatedUser"]

_GREETINGS: Final = (
    "hi! how can I help you today?",
    "hello! what can I assist you with?",
    "hi there! how may I help you?",
    "good day! what can I do for you?",
    "hello! what would you like to know?",
)


def _greeting(opening: str) -> str:
    """A greeting chosen by the opening message (deterministic, unlike the library's)."""
    digest = hashlib.sha256(opening.encode()).digest()
    return _GREETINGS[digest[0] % len(_GREETINGS)]


class SimulatedUser(Environment):
    """An :class:`~agent_kit.environment.Environment` whose user is an ActorSimulator.

    Call :meth:`start_user` from ``reset`` and return its result as the first user message.
    """

    #: User turns (simulator answers) at most; the conversation ends after the last one.
    max_user_turns: ClassVar[int] = 6
    #: Model calls one user turn may make (its structured answer included).
    user_call_limit: ClassVar[int] = 3

    def __init__(self) -> None:
        super().__init__()
        self._actor: Any = None
        self.goal_met = False
        self.user_turns = 0
        self.user_stop_reason: str | None = None

    def start_user(
        self,
        *,
        persona: dict[str, Any],
        goal: str,
        opening: str,
        context: str = "",
    ) -> str:
        """Set up the simulated user (traits, background context, goal) who opens with
        ``opening``; returns ``opening`` (the first user message). Raises ImportError when
        strands-agents-evals is not installed."""
        from strands import Agent
        from strands_evals.simulation.prompt_templates.actor_system_prompt import (
            DEFAULT_USER_SIMULATOR_PROMPT_TEMPLATE,
        )
        from strands_evals.types.simulation import ActorProfile

        profile = ActorProfile(traits=dict(persona), context=context, actor_goal=goal)
        prompt = DEFAULT_USER_SIMULATOR_PROMPT_TEMPLATE.format(actor_profile=profile.model_dump())
        history: list[Any] = [
            {"role": "user", "content": [{"text": _greeting(opening)}]},
            {"role": "assistant", "content": [{"text": opening.strip()}]},
        ]
        self._actor = _Actor(prompt, history, Agent)
        return opening

    async def next_user_message(self, agent_text: str) -> str | None:
        """The simulated user's answer to the agent, or None when the conversation is over."""
        if self._actor is None or self.done or self.user_stop_reason is not None:
            return None
        if self.user_turns >= self.max_user_turns:
            self.user_stop_reason = "max_turns"
            self._mark_stop("user_turns_exhausted")
            return None
        from strands_evals.types.simulation import ActorResponse

        try:
            answer = await self._actor.act(agent_text, ActorResponse, self.user_call_limit)
        except Exception as exc:  # noqa: BLE001 - reported as the environment's failure
            raise SimulatedUserError(
                f"simulated user: {describe_exception(exc, limit=500)}"
            ) from None
        self.user_turns += 1
        if getattr(answer, "stop", False):
            self.goal_met = True
            self.user_stop_reason = "goal_completed"
            self._mark_stop("user_goal_met")
            return None
        message = getattr(answer, "message", None)
        if not isinstance(message, str) or not message.strip():
            raise SimulatedUserError("simulated user: the simulator answered without a message")
        return message

    def _mark_stop(self, reason: str) -> None:
        """The episode's stop reason when the simulated user ends the conversation
        (``user_goal_met``, ``user_turns_exhausted``), not the policy's ``end_turn``."""
        if self._episode is not None:
            self._episode.stop_reason = reason


class _Actor:
    """The simulator's agent: the library's prompt and history, the auxiliary model, no tools."""

    def __init__(self, system_prompt: str, history: list[Any], agent_class: Any) -> None:
        self.agent = agent_class(
            system_prompt=system_prompt,
            messages=history,
            tools=[],
            model=aux_model("user"),
            callback_handler=None,
        )

    async def act(self, agent_text: str, output_model: Any, limit: int) -> Any:
        """One user turn: the structured answer to the agent's message."""
        result = await self.agent.invoke_async(
            agent_text.strip() or "(no answer)",
            structured_output_model=output_model,
            limits={"turns": limit},
        )
        answer = getattr(result, "structured_output", None)
        if answer is None:
            raise SimulatedUserError("the simulator gave no structured answer")
        return answer
