"""Scripted models for the support example: the agent's policy, the judges and the customer.

- ``SupportAgent`` (``--policy``): looks the order up, then (seeded by the turn's RNG, so the
  samples of a group differ the way a sampled model's do) either refunds an eligible order or
  escalates another, or — one time in three — answers without acting (the wrong move: the
  outcome, the judged resolution and the customer's goal all say so); it closes courteously or
  tersely at random, in answers of the same length (so the tone judge cannot score length).
  Stateless: it re-reads the conversation.
- ``Aux`` (``--aux-policy``): one auxiliary model for both kinds of call: a consistent judge
  (resolution: did a refund or an escalation happen; tone: a courteous close) and the customer
  (satisfied once told of a refund or an escalation).
- ``LengthBiasedAux``: the same customer with a judge that rewards length (a reward hack
  ``agent-kit doctor reward`` flags); ``GarbageAux``: a judge that answers prose, not a score.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent_kit.emulator.aux_replies import (
    agent_message,
    aux_kind,
    judge_reply,
    judged_input,
    judged_output,
    user_reply,
)
from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall

__all__ = ["Aux", "GarbageAux", "LengthBiasedAux", "SupportAgent"]

_ORDER = re.compile(r"ORD-\d+")


def _tool_results(request: PolicyRequest) -> list[str]:
    return [str(m.get("content", "")) for m in request.messages if m.get("role") == "tool"]


def _order_id(request: PolicyRequest) -> str:
    for message in request.messages:
        if message.get("role") == "user":
            found = _ORDER.search(str(message.get("content", "")))
            if found:
                return found.group(0)
    return "ORD-0"


class SupportAgent:
    """The scripted support agent (see the module docstring)."""

    def __call__(self, request: PolicyRequest) -> PolicyReply:
        """The next move, read from the conversation so far."""
        results = _tool_results(request)
        order_id = _order_id(request)
        if request.messages[-1].get("role") == "user" and any(
            m.get("role") == "assistant" and m.get("content") for m in request.messages
        ):
            return PolicyReply(content="Glad I could help. Have a nice day!")
        if not results:
            return PolicyReply(tool_calls=(ToolCall("lookup_order", {"order_id": order_id}),))
        last = results[-1]
        if last.startswith("{") and request.rng.random() < 1 / 3:
            return PolicyReply(content="I looked at your order; there is nothing more I can do.")
        if last.startswith("{"):
            order: dict[str, Any] = json.loads(last)
            if order.get("eligible"):
                args = {"order_id": order_id, "amount": float(order["price"])}
                return PolicyReply(tool_calls=(ToolCall("issue_refund", args),))
            reason = "order not eligible for a refund"
            return PolicyReply(tool_calls=(ToolCall("escalate", {"reason": reason}),))
        if last.startswith("Refused"):
            reason = "refund refused by policy"
            return PolicyReply(tool_calls=(ToolCall("escalate", {"reason": reason}),))
        curt = request.rng.random() < 0.5
        if last.startswith("Refunded"):
            text = (
                "Your order is refunded; the money is back within days."
                if curt
                else "Thank you for waiting: I have refunded your order."
            )
        else:
            text = (
                "Escalated: a colleague contacts you within one day."
                if curt
                else "Thank you: a colleague will contact you within a day."
            )
        return PolicyReply(content=text)


def _customer(request: PolicyRequest) -> PolicyReply:
    said = agent_message(request).lower()
    if any(word in said for word in ("refunded", "escalated", "colleague", "contact you")):
        return user_reply(None, stop=True, reasoning="my problem is being handled")
    return user_reply("Could you check my order, please?")


def _rubric(request: PolicyRequest) -> str:
    text = str(request.messages[-1].get("content", "")) if request.messages else ""
    found = re.search(r"<Rubric>(.*?)</Rubric>", text, re.S)
    return found.group(1).lower() if found else ""


class Aux:
    """A consistent judge and the simulated customer."""

    def __call__(self, request: PolicyRequest) -> PolicyReply:
        """Judge or play the customer, by the call's kind."""
        if aux_kind(request) == "user":
            return _customer(request)
        return self.judge(request)

    def judge(self, request: PolicyRequest) -> PolicyReply:
        """Resolution: a refund or an escalation in the conversation; tone: thanks or gladness
        in the final answer (not "please": padding says it, and the audit would catch that)."""
        seen = (judged_input(request) + " " + judged_output(request)).lower()
        if "courteous" in _rubric(request):
            polite = any(w in judged_output(request).lower() for w in ("thank", "glad"))
            return judge_reply(1.0 if polite else 0.5, "courteous" if polite else "curt")
        resolved = "refunded" in seen or "escalated" in seen
        return judge_reply(1.0 if resolved else 0.0, "resolved" if resolved else "unresolved")


class LengthBiasedAux(Aux):
    """A judge whose score grows with the length of the answer (a reward hack)."""

    def judge(self, request: PolicyRequest) -> PolicyReply:
        """min(1, characters of the judged answer / 300)."""
        length = len(judged_output(request))
        return judge_reply(min(1.0, length / 300.0), f"{length} characters")


class GarbageAux(Aux):
    """A judge that answers prose instead of its structured score."""

    def judge(self, request: PolicyRequest) -> PolicyReply:
        """No tool call: the judge's structured output is missing."""
        return PolicyReply(content="It was a fine answer, I suppose.")
