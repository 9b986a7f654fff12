"""The Environment base class: task state and tools for one rollout.

Subclass it, implement :meth:`Environment.reset`, and decorate methods with :func:`tool`
(Strands' decorator, re-exported). agent_kit builds a **fresh instance per rollout**, so
instance attributes are the episode's state and nothing leaks between concurrent rollouts.

A tool may call :meth:`Environment.finish` to end the episode: the agent loop then stops right
after the current tool batch, without spending another policy call.

**The task's own figures**: :meth:`Environment.metrics` returns what the task counts beside the
reward (Wordle: ``solved``, ``valid_guess_rate``), read once the episode is scored and recorded
with the rollout (the answer's ``metrics``); ``agent-kit eval`` and ``train --eval`` report
each one's mean over prompts as a column of the table (docs/eval.md).

**Simulated users**: a :class:`SimulatedUser` is an environment whose user turns come from
strands-evals' ActorSimulator. It plays a conversation: its ``reset`` calls
:meth:`SimulatedUser.start_user` with a persona, a goal and the user's opening message (all from
the dataset row), and after every agent turn the simulator answers as that user until it says
the goal is met, the user-turn budget (``max_user_turns``) ends, or the environment finishes.
``goal_met`` (the simulator stopped because the goal was reached) and ``user_turns`` are there
for the reward; the episode's stop reason then reads ``user_goal_met`` (or
``user_turns_exhausted``), not the policy's ``end_turn``.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final

from strands import tool

from agent_kit.errors import SimulatedUserError, describe_exception, judges_missing

if TYPE_CHECKING:
    from agent_kit.episode import Episode

__all__ = ["Environment", "SimulatedUser", "TextToolCall", "tool"]


@dataclass(frozen=True)
class TextToolCall:
    """A tool call the policy wrote as plain text (see ``Environment.parse_text_tool_calls``)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    source: str = ""


class Environment:
    """Base class for a task environment (tools + state + limits), one instance per rollout.

    Class attributes configure limits; ``None`` means "use the app's setting":

    - ``max_turns``: policy calls allowed in one episode.
    - ``max_tool_calls``: tool executions allowed; further calls are refused with an error result.
    """

    max_turns: ClassVar[int | None] = None
    max_tool_calls: ClassVar[int | None] = None

    def __init__(self) -> None:
        self._done = False
        self._result: Any = None
        self._episode: Episode | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def reset(self, task: dict[str, Any]) -> str:
        """Start the episode for ``task`` (the JSON in ``payload.prompt``); return the user message.

        Hidden task fields (answers, ids) stay on ``self``; only the returned text reaches the
        policy. Raise ``KeyError``/``ValueError`` for a task this environment cannot play: the
        rollout is then rejected as a bad payload (HTTP 400).
        """
        raise NotImplementedError(f"{type(self).__name__}.reset(task) is not implemented")

    def finish(self, result: Any = None) -> None:
        """Mark the episode finished; the agent stops after the current tool batch."""
        self._done = True
        self._result = result

    @property
    def done(self) -> bool:
        """True once :meth:`finish` was called."""
        return self._done

    @property
    def result(self) -> Any:
        """What was passed to :meth:`finish` (``None`` until then)."""
        return self._result

    def metrics(self) -> Mapping[str, float]:
        """The task's own figures of the finished episode, by name (e.g. ``{"solved": 1.0}``;
        a share in 0..1 is shown as a percentage). Read once after the reward; a bool counts
        as 0/1, a value that is not a finite number is left out, and one that raises leaves
        the episode without figures. Default: none."""
        return {}

    @property
    def episode(self) -> Episode:
        """The episode record so far (turns, tool calls, usage); available after reset."""
        if self._episode is None:
            raise RuntimeError("the episode is only available while a rollout runs")
        return self._episode

    def _attach(self, episode: Episode) -> None:
        self._episode = episode

    # -- tools -----------------------------------------------------------------------------
    def tools(self) -> list[Any]:
        """The ``@tool`` methods of this instance, bound to it (what the Strands agent gets)."""
        found: list[Any] = []
        seen: set[str] = set()
        for klass in type(self).__mro__:
            for name, value in vars(klass).items():
                if name in seen or not _is_strands_tool(value):
                    continue
                seen.add(name)
                found.append(getattr(self, name))
        return found

    def tool_names(self) -> list[str]:
        """Names of the tools the policy sees."""
        return [_tool_name(t) for t in self.tools()]

    async def next_user_message(self, agent_text: str) -> str | None:
        """The user's next message after the agent ended its turn with ``agent_text``, or
        None to end the episode (the default: one user message, then the agent plays alone).

        Override it for a conversation (see :class:`SimulatedUser`):
        each message returned is sent as the next user turn, so the episode goes on until this
        returns None, the environment finishes, or a limit is reached. User messages are
        environment text: in ``agent-kit train`` they are never trained (env_mask 0). Raising
        ends the episode as an ``environment`` failure (floor reward).
        """
        del agent_text
        return None

    def parse_text_tool_calls(self, text: str) -> Sequence[TextToolCall]:
        """Recover tool calls the policy wrote as plain text instead of a tool call.

        The default recovers nothing. Override it (see the Wordle example) to turn text such as
        ``guess_word("crane")`` into a call; recovered calls are executed and flagged
        ``recovered=True`` in the episode record so the reward can penalise them.
        """
        del text
        return ()


def _is_strands_tool(value: object) -> bool:
    return hasattr(value, "tool_spec") and hasattr(value, "tool_name")


def _tool_name(bound: Any) -> str:
    name = getattr(bound, "tool_name", None)
    return str(name) if name else str(getattr(bound, "__name__", "tool"))


# -- simulated users -------------------------------------------------------------------------------

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
        ``opening``; returns ``opening`` (the first user message). Raises
        :class:`~agent_kit.errors.SimulatedUserError` naming ``pip install 'agent_kit[judges]'``
        when strands-agents-evals is not installed."""
        from strands import Agent

        try:
            from strands_evals.simulation.prompt_templates.actor_system_prompt import (
                DEFAULT_USER_SIMULATOR_PROMPT_TEMPLATE,
            )
            from strands_evals.types.simulation import ActorProfile
        except ImportError as exc:
            raise SimulatedUserError(f"simulated user: {judges_missing(exc)}") from None

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
        from agent_kit.auxiliary import aux_model  # the model's client, only for a conversation

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
