"""Helpers for scripted auxiliary policies: answer a judge's or a simulated user's call.

strands-agents-evals' judges and user simulator answer through Strands' structured output:
the model must call one tool named after the output model — ``EvaluationOutput`` (``score``,
``test_pass``, ``reason``) for a judge, ``ActorResponse`` (``reasoning``, ``stop``,
``message``) for a simulated user. A scripted policy given to ``--aux-policy`` returns these::

    from agent_kit.emulator.aux_replies import aux_kind, judge_reply, judged_output, user_reply

    def aux(request):
        if aux_kind(request) == "judge":
            return judge_reply(0.8 if "refund" in judged_output(request) else 0.2, "…")
        return user_reply("Thanks, that solves it.", stop=True)

Each call's ``request.context["aux_kind"]`` says which it is (``judge`` | ``user``).
"""

from __future__ import annotations

import html
import re
from typing import Final

from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall

__all__ = [
    "JUDGE_TOOL",
    "USER_TOOL",
    "agent_message",
    "aux_kind",
    "judge_reply",
    "judged_input",
    "judged_output",
    "user_reply",
]

#: The structured-output tool a judge's model must call.
JUDGE_TOOL: Final = "EvaluationOutput"
#: The structured-output tool a simulated user's model must call.
USER_TOOL: Final = "ActorResponse"
_OUTPUT_RE: Final = re.compile(r"<Output>(.*?)</Output>", re.S)
_INPUT_RE: Final = re.compile(r"<Input>(.*?)</Input>", re.S)


def aux_kind(request: PolicyRequest) -> str:
    """``judge`` or ``user`` for an auxiliary call (``""`` for a policy call)."""
    return str(request.context.get("aux_kind", ""))


def _last_user_text(request: PolicyRequest) -> str:
    for message in reversed(request.messages):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def judged_output(request: PolicyRequest) -> str:
    """The output a judge is asked to score (its prompt's ``<Output>``, unescaped: the text as
    the agent wrote it), or ``""``."""
    found = _OUTPUT_RE.search(_last_user_text(request))
    return html.unescape(found.group(1)) if found else ""


def judged_input(request: PolicyRequest) -> str:
    """The conversation a judge is shown (its prompt's ``<Input>``, unescaped), or ``""``."""
    found = _INPUT_RE.search(_last_user_text(request))
    return html.unescape(found.group(1)) if found else ""


def agent_message(request: PolicyRequest) -> str:
    """What the agent last said to a simulated user (the simulator's last user message)."""
    return _last_user_text(request)


def judge_reply(score: float, reason: str, *, test_pass: bool | None = None) -> PolicyReply:
    """A judge's answer: the ``EvaluationOutput`` tool call with ``score`` and ``reason``."""
    passed = score >= 0.5 if test_pass is None else test_pass
    args = {"score": score, "test_pass": passed, "reason": reason}
    return PolicyReply(tool_calls=(ToolCall(JUDGE_TOOL, args),))


def user_reply(message: str | None, *, stop: bool = False, reasoning: str = "") -> PolicyReply:
    """A simulated user's answer: the ``ActorResponse`` tool call (``stop=True`` ends the
    conversation with the goal met; ``message`` is then optional)."""
    args = {"reasoning": reasoning or ("goal met" if stop else "reply"), "stop": stop}
    if message is not None:
        args["message"] = message
    return PolicyReply(tool_calls=(ToolCall(USER_TOOL, args),))
