"""Episode rewards: named, weighted components with a kept breakdown.

A reward function receives the finished environment and the :class:`~agent_kit.episode.Episode`
record and returns a :class:`Reward` (or a plain number). Components are split into *outcome*
terms (did the task succeed) and *strategy* terms (how it was played), so reports can show what
drove a score. Every value is checked finite; a non-finite reward never reaches the service.

**Judged components**: an LLM judge's 0–1 score as a named term of the reward. A
:class:`Judge` is a rubric over the finished episode — the conversation (user turns, the
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

:meth:`Judge.score` returns a :class:`Component` whose ``reason`` is the
judge's and whose ``judged`` flag lets ``agent-kit doctor reward`` audit it. A judge whose call
fails, or that answers nonsense (no structured answer, a score that is not a number — ``true``,
``"high"``, null — or outside 0..1 or not finite), raises :class:`~agent_kit.errors.JudgeError`:
the episode ends on the floor with reason ``judge: …`` — never a crash, never a silent 0. A
judge makes at most ``max_calls`` model calls per score (3): strands answers an invalid
structured answer with the validation error and asks again, and without a bound a judge that
never answers validly would bill calls until the rollout's timeout.

The episode's text (the conversation, the answer, the state) is untrusted: it is XML-escaped
(``&``, ``<``, ``>``) before it enters the judge's prompt, so an answer cannot close the
prompt's ``<Output>`` section and add a ``<Rubric>`` of its own.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from agent_kit.episode import Episode
from agent_kit.errors import JudgeError, RewardError, describe_exception, judges_missing

__all__ = [
    "DEFAULT_MAX_CALLS",
    "Component",
    "Judge",
    "Reward",
    "RewardKind",
    "render_conversation",
    "untrusted",
]

RewardKind = Literal["outcome", "strategy"]


def _finite(name: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise RewardError(f"reward component {name!r} is not a number: {value!r}") from None
    if not math.isfinite(number):
        raise RewardError(f"reward component {name!r} is not finite: {number!r}")
    return number


@dataclass(frozen=True)
class Component:
    """One named reward term: ``weight × value``, tagged as outcome or strategy.

    ``reason`` is why the term has its value, when someone said (an LLM judge's reason); it is
    kept in the breakdown. ``judged`` marks a term scored by an LLM judge
    (:class:`Judge`), which ``agent-kit doctor reward`` audits.
    """

    value: float
    weight: float = 1.0
    kind: RewardKind = "strategy"
    reason: str | None = None
    judged: bool = False

    @property
    def contribution(self) -> float:
        """``weight × value``: what this term adds to the total."""
        return self.weight * self.value


@dataclass(frozen=True)
class Reward:
    """The reward of one episode: total, breakdown by component, optional per-turn values.

    Guarantees: ``total`` and every component are finite floats; when ``per_turn`` is given its
    values are finite too (its length is checked against the episode's turns when reported).
    """

    total: float
    components: Mapping[str, Component] = field(default_factory=dict)
    per_turn: Sequence[float] | None = None
    floor: bool = False
    reason: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", _finite("total", self.total))
        for name, comp in self.components.items():
            _finite(name, comp.value)
            _finite(f"{name}.weight", comp.weight)
        if self.per_turn is not None:
            values = [_finite(f"per_turn[{i}]", v) for i, v in enumerate(self.per_turn)]
            if not values:
                raise RewardError("per_turn rewards must not be empty")
            if abs(math.fsum(values) - self.total) > 1e-6 * max(1.0, abs(self.total)):
                raise RewardError(
                    f"per_turn rewards sum to {math.fsum(values)!r} but the total is {self.total!r}"
                )
            object.__setattr__(self, "per_turn", values)

    @classmethod
    def weighted(
        cls,
        per_turn: Sequence[float] | None = None,
        **components: tuple[float, float] | Component | float,
    ) -> Reward:
        """Sum named ``(value, weight)`` terms; names starting with ``outcome`` are outcome terms.

        >>> Reward.weighted(outcome=(1.0, 1.0), efficiency=(-0.3, 0.1)).total
        0.97
        """
        built: dict[str, Component] = {}
        for name, spec in components.items():
            kind: RewardKind = "outcome" if name.startswith("outcome") else "strategy"
            if isinstance(spec, Component):
                built[name] = spec
            elif isinstance(spec, tuple):
                if len(spec) != 2:
                    raise RewardError(f"reward component {name!r} must be (value, weight)")
                built[name] = Component(
                    _finite(name, spec[0]), _finite(f"{name}.weight", spec[1]), kind
                )
            else:
                built[name] = Component(_finite(name, spec), 1.0, kind)
        total = math.fsum(c.contribution for c in built.values())
        return cls(total=round(total, 12), components=built, per_turn=per_turn)

    @classmethod
    def of(cls, value: float | Reward) -> Reward:
        """Coerce what a reward function returned (a number or a Reward) into a Reward."""
        if isinstance(value, Reward):
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RewardError(
                f"reward function must return a Reward or a number, got {type(value).__name__}"
            )
        return cls(total=_finite("total", value))

    @classmethod
    def floor_reward(cls, value: float, reason: str) -> Reward:
        """The configured floor, used when the episode failed on the agent's side."""
        return cls(total=_finite("floor", value), floor=True, reason=reason)

    def breakdown(self) -> dict[str, dict[str, float | str]]:
        """JSON-ready ``{name: {value, weight, contribution, kind}}``, plus ``reason`` and
        ``judged`` (true) for a term that has them."""
        out: dict[str, dict[str, float | str]] = {}
        for name, c in self.components.items():
            entry: dict[str, float | str] = {
                "value": c.value,
                "weight": c.weight,
                "contribution": c.contribution,
                "kind": c.kind,
            }
            if c.reason is not None:
                entry["reason"] = c.reason
            if c.judged:
                entry["judged"] = True
            out[name] = entry
        return out

    def wire_values(self, turns: int) -> list[float]:
        """The ``Rewards`` list for UpdateReward: per-turn when it matches ``turns``, else total."""
        if self.per_turn is not None and len(self.per_turn) == turns and turns > 0:
            return [float(v) for v in self.per_turn]
        return [self.total]


# -- judged components -----------------------------------------------------------------------------

#: Characters of one tool result shown to the judge.
_TOOL_RESULT_MAX: Final = 600
#: Model calls one score may make (the structured answer's retries included).
DEFAULT_MAX_CALLS: Final = 3


def untrusted(text: str) -> str:
    """``text`` escaped for the judge's prompt: ``&``, ``<`` and ``>`` as XML entities, so it
    cannot open or close the prompt's sections (``</Output>``, ``<Rubric>``)."""
    return html.escape(text, quote=False)


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
    ``system_prompt`` replaces strands-evals' judge prompt; ``max_calls`` bounds the model
    calls of one score (an answer that fails validation is asked again, at most this often).
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
        max_calls: int = DEFAULT_MAX_CALLS,
    ) -> None:
        if not rubric.strip():
            raise ValueError("a judge needs a rubric")
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1:
            raise ValueError(f"a judge's max_calls must be a positive integer, got {max_calls!r}")
        self.max_calls = max_calls
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
            shown = untrusted(json.dumps(self.state(env), ensure_ascii=False, default=str))
            state = [EnvironmentState(name="environment", state=shown)]
        return EvaluationData(
            input=untrusted(render_conversation(episode)),
            actual_output=untrusted(episode.final_text),
            actual_environment_state=state,
            name=episode.trajectory_id,
        )

    async def score(self, env: Any, episode: Episode) -> Component:
        """Judge the episode: a Component (value 0..1, the judge's reason, ``judged``).

        Raises :class:`~agent_kit.errors.JudgeError` when the judge's call fails or its answer
        is not a score in 0..1, or no valid answer came in ``max_calls`` calls."""
        from agent_kit.auxiliary import aux_model  # the model's client, only when judging

        try:
            evaluator = self._evaluator(aux_model("judge", name=self.name))
            outputs = await self._ask(evaluator, self._data(env, episode))
        except JudgeError:
            raise
        except ImportError as exc:
            raise JudgeError(f"{self.name}: {judges_missing(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - any failure of the judge is the judge's
            raise JudgeError(f"{self.name}: {describe_exception(exc, limit=500)}") from None
        return self._component(outputs)

    async def _ask(self, evaluator: Any, data: Any) -> list[Any]:
        """The evaluator's question on a Strands agent bounded to ``max_calls`` model calls
        (``OutputEvaluator.evaluate_async`` with a limit, and a score that must be a number)."""
        from strands import Agent

        agent = Agent(
            model=evaluator.model,
            tools=evaluator.tools,
            system_prompt=evaluator.system_prompt,
            callback_handler=None,
        )
        result = await agent.invoke_async(
            evaluator._build_prompt(data),
            structured_output_model=_strict_output(),
            limits={"turns": self.max_calls},
        )
        answer = getattr(result, "structured_output", None)
        if answer is None:
            last = _last_refusal(agent.messages)
            raise JudgeError(
                f"{self.name}: no valid answer in {self.max_calls} judge calls"
                + (f" (last: {last})" if last else "")
            )
        return [answer]

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


def _strict_output() -> type[Any]:
    """strands-evals' ``EvaluationOutput`` (same tool, same schema) whose ``score`` must be a
    number: pydantic would read ``true`` as 1.0 and ``"0.8"`` as 0.8."""
    global _STRICT
    if _STRICT is None:
        from pydantic import field_validator
        from strands_evals.types import EvaluationOutput as Base

        class EvaluationOutput(Base):  # type: ignore[misc]
            __doc__ = Base.__doc__

            @field_validator("score", mode="before")
            @classmethod
            def _a_number(cls, value: Any) -> Any:
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise ValueError(f"score must be a number from 0.0 to 1.0, not {value!r:.40}")
                return value

        _STRICT = EvaluationOutput
    return _STRICT


_STRICT: type[Any] | None = None


def _last_refusal(messages: Any) -> str:
    """The last error a tool call of the judge's got (the structured answer's validation
    error), on one line; ``""`` when there is none."""
    for message in reversed(messages if isinstance(messages, list) else []):
        for block in message.get("content") or []:
            result = block.get("toolResult") if isinstance(block, Mapping) else None
            if isinstance(result, Mapping) and result.get("status") == "error":
                text = " ".join(_text(result.get("content")))
                return " ".join(text.split())[:300]
    return ""
