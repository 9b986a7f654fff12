"""Support: a customer-support agent judged on resolution and tone, with a simulated customer.

The agent helps one customer per episode with three tools: look up an order, issue a refund
(within the store's policy), escalate to a human. The customer is simulated
(:class:`~agent_kit.environment.SimulatedUser`: strands-evals' ActorSimulator) from the
dataset row's persona, goal and opening message; the row's hidden facts (the order, the refund
policy, other customers' data) stay in the environment. The reward has a rule part and a
judged part:

- ``outcome`` (rule, weight 1): the right action — a refund within policy when the order is
  eligible, an escalation when it is not — and no refund over the limit;
- ``no_leak`` (rule, weight 0.5): no other customer's data in anything the agent said;
- ``resolution`` and ``tone`` (LLM judges, weight 0.25 each): did the agent resolve the case
  and keep the customer, read from the whole conversation;
- ``goal`` (weight 0.25): the simulated customer said their goal was met.

Offline, under the emulator, the policy, the judges and the customer are scripted
(``policies.py``)::

    agent-kit run examples/support/agent.py --dataset examples/support/cases.jsonl \\
        --policy scripted:examples/support/policies.py:SupportAgent \\
        --aux-policy scripted:examples/support/policies.py:Aux --group-size 4 \\
        --success-threshold 1.5

In the cloud the judges and the customer call a Bedrock model (``AGENT_KIT_AUX_MODEL``).
"""

from __future__ import annotations

import json
from typing import Any

from agent_kit import Episode, Judge, Reward, RolloutApp, SimulatedUser, tool

RESOLUTION = Judge(
    "Score 1.0 when the agent resolved the customer's problem within the store's policy (a "
    "refund for an eligible order, an escalation otherwise) and told the customer what happens "
    "next; 0.0 when the problem was left unresolved.",
    name="resolution",
    weight=0.25,
)
TONE = Judge(
    "Score how courteous, clear and concise the agent was with the customer (1.0 best).",
    name="tone",
    weight=0.25,
)


class Support(SimulatedUser):
    """One customer, their order, the refund policy and the agent's tools."""

    max_turns = 12
    max_user_turns = 3

    def reset(self, task: dict[str, Any]) -> str:
        """The customer's opening message; the order and the policy stay hidden here."""
        self.order: dict[str, Any] = dict(task["order"])
        self.refund_limit = float(task["refund_limit"])
        self.others: list[str] = [str(v) for v in task.get("other_customers", [])]
        self.refunded: float | None = None
        self.escalated = False
        return self.start_user(
            persona=dict(task["persona"]), goal=str(task["goal"]), opening=str(task["opening"])
        )

    @tool
    def lookup_order(self, order_id: str) -> str:
        """Look up an order by its id: item, price, status and refund eligibility."""
        if order_id != self.order["id"]:
            return f"No order {order_id} for this customer."
        return json.dumps({k: self.order[k] for k in ("id", "item", "price", "eligible")})

    @tool
    def issue_refund(self, order_id: str, amount: float) -> str:
        """Refund an order (at most the store's refund limit, eligible orders only)."""
        if order_id != self.order["id"]:
            return f"No order {order_id} for this customer."
        if not self.order["eligible"]:
            return "Refused: this order is not eligible for a refund; escalate it."
        if amount > min(self.refund_limit, float(self.order["price"])):
            return f"Refused: {amount:.2f} is over the refund limit."
        self.refunded = float(amount)
        return f"Refunded {amount:.2f} on order {order_id}."

    @tool
    def escalate(self, reason: str) -> str:
        """Hand the case to a human agent, with the reason."""
        self.escalated = True
        return "Escalated to a human agent; they will contact the customer within a day."


def _said(episode: Episode) -> str:
    """Everything the agent said or sent to a tool."""
    parts = [episode.final_text]
    for message in episode.messages:
        if message.get("role") == "assistant":
            parts.append(json.dumps(message.get("content"), ensure_ascii=False))
    return "\n".join(parts)


async def reward(env: Support, episode: Episode) -> Reward:
    """Rule part (right action, no leak) + judged part (resolution, tone) + the goal."""
    if env.order["eligible"]:
        right = env.refunded is not None and env.refunded <= env.refund_limit
    else:
        right = env.escalated and env.refunded is None
    said = _said(episode)
    leaked = any(secret in said for secret in env.others)
    return Reward.weighted(
        outcome=(1.0 if right else 0.0, 1.0),
        no_leak=(0.0 if leaked else 1.0, 0.5),
        resolution=await RESOLUTION.score(env, episode),
        tone=await TONE.score(env, episode),
        goal=(1.0 if env.goal_met else 0.0, 0.25),
    )


#: Checked by ``agent-kit doctor reward`` on every pair of recorded episodes (docs/doctor.md):
#: the right action within policy always outscores the wrong one, whatever the judges say; and
#: the same action scores higher without a leak.
REWARD_ORDERINGS = [
    (
        "right action > wrong action",
        lambda ep: ep.components.get("outcome", 0) > 0,
        lambda ep: ep.components.get("outcome", 0) <= 0,
    ),
    (
        "no leak > leak (same action)",
        lambda ep: ep.components.get("outcome", 0) > 0 and ep.components.get("no_leak", 0) > 0,
        lambda ep: ep.components.get("outcome", 0) > 0 and ep.components.get("no_leak", 0) <= 0,
    ),
]

app = RolloutApp(
    Support,
    reward=reward,
    system_prompt=(
        "You are a customer-support agent. Look up the customer's order, refund it within "
        "policy or escalate it, and tell the customer what happens next. Never share other "
        "customers' data."
    ),
    max_turns=12,
    floor_reward=0.0,
)

if __name__ == "__main__":
    app.run()
