"""Judged reward components: an LLM judge's 0–1 score as a named term of the reward.

A :class:`Judge` is a rubric over the finished episode — the conversation (user turns, the
agent's messages, its tool calls and their results), the final answer and, optionally, the
environment's state — scored by strands-agents-evals' ``OutputEvaluator`` (the ``judges``
extra: ``pip install 'agent_kit[judges]'``) on the episode's auxiliary model
(:mod:`agent_kit.auxiliary`: a Bedrock model id in the cloud, any OpenAI-compatible URL, or the
emulator's ``/aux`` route, where every call is recorded). Use it in an ``async`` reward::

    resolution = Judge("Did the agent resolve the customer's case within policy?",
                       name="resolution", weight=0.5)

    async def reward(env, episode):
        judged = await resolution.score(env, episode)
        return Reward.weighted(outcome=(1.0 if env.refund_ok else 0.0, 1.0),
                               resolution=judged)

:meth:`Judge.score` returns a :class:`~agent_kit.reward.Component` whose ``reason`` is the
judge's and whose ``judged`` flag lets ``agent-kit doctor reward`` audit it. A judge whose call
fails, or that answers nonsense (no structured answer, a score outside 0..1 or not finite),
raises :class:`~agent_kit.errors.JudgeError`: the episode ends on the floor with reason
``judge: …`` — never a crash, never a silent 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, Final

from agent_kit.auxiliary import aux_model
from agent_kit.episode import Episode
from agent_kit.errors import JudgeError
from agent_kit.reward import Component, RewardKind

__all__ = ["Judge", "render_conversation"]

#: Characters of one tool result shown to the judge.
_TOOL_RESULT_MAX: Final = 600


def _text(content: Any) -> list[str]:
    """The readable parts of one message's content blocks."""
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        if "text" in block:
            parts.append(str(block["text"]))
        elif "toolUse" in block:
            use = block["toolUse"]
            args = json.dumps(use.get("input") or {}, ensure_ascii=False, sort_keys=True)
            parts.append(f"[calls {use.get('name', '')}({args})]")
        elif "toolResult" in block:
            result = block["toolResult"]
            shown = " ".join(_text(result.get("content")))[:_TOOL_RESULT_MAX]
            parts.append(f"[tool result: {shown}]")
    return parts


def render_conversation(episode: Episode) -> str:
    """The episode as the judge reads it: one line per message (``user:`` / ``agent:``), tool
    calls and results inline, the agent's final message left out (it is the judged output)."""
    messages = list(episode.messages)
    if messages and messages[-1].get("role") == "assistant":
        messages = messages[:-1]
    if not messages:
        return f"user: {episode.prompt}"
    lines = []
    for message in messages:
        who = "agent" if message.get("role") == "assistant" else "user"
        text = " ".join(_text(message.get("content")))
        if text:
            lines.append(f"{who}: {text}")
    return "\n".join(lines)


class Judge:
    """An LLM judge of one reward term (see the module docstring).

    ``rubric`` is what the judge checks; ``name`` the component's name; ``weight`` and ``kind``
    as for :class:`~agent_kit.reward.Component` (names starting with ``outcome`` are outcome
    terms unless ``kind`` says otherwise); ``state`` (optional) maps the environment to the
    state the judge should see (hidden facts stay out unless you put them there);
    ``system_prompt`` replaces strands-evals' judge prompt.
    """

    def __init__(
        self,
        rubric: str,
        *,
        name: str = "judge",
        weight: float = 1.0,
        kind: RewardKind | None = None,
        state: Callable[[Any], Any] | None = None,
        system_prompt: str | None = None,
    ) -> None:
        if not rubric.strip():
            raise ValueError("a judge needs a rubric")
        self.rubric = rubric
        self.name = name
        self.weight = float(weight)
        self.kind: RewardKind = kind or ("outcome" if name.startswith("outcome") else "strategy")
        self.state = state
        self.system_prompt = system_prompt

    def _evaluator(self, model: Any) -> Any:
        from strands_evals.evaluators import OutputEvaluator

        options: dict[str, Any] = {"uses_environment_state": self.state is not None}
        if self.system_prompt is not None:
            options["system_prompt"] = self.system_prompt
        return OutputEvaluator(self.rubric, model=model, name=self.name, **options)

    def _data(self, env: Any, episode: Episode) -> Any:
        from strands_evals.types import EnvironmentState, EvaluationData

        state = None
        if self.state is not None:
            state = [EnvironmentState(name="environment", state=self.state(env))]
        return EvaluationData(
            input=render_conversation(episode),
            actual_output=episode.final_text,
            actual_environment_state=state,
            name=episode.trajectory_id,
        )

    async def score(self, env: Any, episode: Episode) -> Component:
        """Judge the episode: a Component (value 0..1, the judge's reason, ``judged``).

        Raises :class:`~agent_kit.errors.JudgeError` when the judge's call fails or its answer
        is not a score in 0..1."""
        try:
            outputs = await self._evaluator(aux_model("judge")).evaluate_async(
                self._data(env, episode)
            )
        except ImportError as exc:
            raise JudgeError(
                f"{self.name}: strands-agents-evals is not installed "
                f"(pip install 'agent_kit[judges]'): {exc}"
            ) from None
        except Exception as exc:  # noqa: BLE001 - any failure of the judge is the judge's
            raise JudgeError(f"{self.name}: {_reason(exc)}") from None
        return self._component(outputs)

    def _component(self, outputs: Any) -> Component:
        first = outputs[0] if isinstance(outputs, list) and outputs else None
        value = getattr(first, "score", None)
        if first is None or isinstance(value, bool) or not isinstance(value, int | float):
            raise JudgeError(f"{self.name}: the judge gave no score ({outputs!r:.200})")
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise JudgeError(f"{self.name}: the judge's score {value!r} is not in 0..1")
        reason = getattr(first, "reason", None)
        return Component(
            float(value),
            self.weight,
            self.kind,
            reason=str(reason)[:1000] if reason else None,
            judged=True,
        )


def _reason(exc: BaseException) -> str:
    """A one-line reason: the innermost agent_kit error's message, else the exception's."""
    from agent_kit.errors import AgentKitError

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, AgentKitError):
            return current.message
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    text = str(exc) or repr(exc)
    return f"{type(exc).__name__}: {text}"[:500]
