"""The Environment base class: task state and tools for one rollout.

Subclass it, implement :meth:`Environment.reset`, and decorate methods with :func:`tool`
(Strands' decorator, re-exported). agent_kit builds a **fresh instance per rollout**, so
instance attributes are the episode's state and nothing leaks between concurrent rollouts.

A tool may call :meth:`Environment.finish` to end the episode: the agent loop then stops right
after the current tool batch, without spending another policy call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from strands import tool

if TYPE_CHECKING:
    from agent_kit.episode import Episode

__all__ = ["Environment", "TextToolCall", "tool"]


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

        Override it for a conversation (see :class:`agent_kit.simulated_user.SimulatedUser`):
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
