"""Parsing one OpenAI chat-completions request body into a :class:`PolicyRequest`.

The emulator's turn path (:meth:`agent_kit.emulator.core.Emulator.turn`) validates the body the
way the service does, through :class:`~agent_kit.emulator.schemas.ChatCompletionBody` (messages
and their roles, model, tools, sampling parameters; a bad field is a
:class:`~agent_kit.errors.BodyError`, i.e. a 400 naming the field) and hands the policy a
:class:`~agent_kit.emulator.schemas.PolicyRequest` with flattened message content and a
per-turn RNG seeded deterministically from the rollout's slot.
"""

from __future__ import annotations

import random
from typing import Any

from agent_kit.contract import TEMPERATURE, TOP_P
from agent_kit.emulator.schemas import ChatCompletionBody, PolicyRequest, parse_body
from agent_kit.errors import ValidationError

__all__ = ["flatten_content", "parse_chat", "policy_request"]


def flatten_content(content: Any) -> str:
    """OpenAI message content as one string: parts' ``text`` joined by newlines; None → ``""``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            str(p["text"]) for p in content if isinstance(p, dict) and p.get("text") is not None
        ]
        return "\n".join(texts)
    raise ValidationError("message content must be a string, a list of parts or null")


def parse_chat(body: Any) -> ChatCompletionBody:
    """``body`` (parsed JSON) as a :class:`ChatCompletionBody`; BodyError on the first bad field."""
    return parse_body(ChatCompletionBody, body)


def policy_request(
    body: dict[str, Any],
    *,
    seed: int,
    trajectory_id: str,
    job_arn: str,
    turn: int,
    context: dict[str, Any],
    parsed: ChatCompletionBody | None = None,
) -> PolicyRequest:
    """The :class:`PolicyRequest` for turn ``turn`` of a trajectory, from its request ``body``.

    ``body`` is validated by :func:`parse_chat` unless ``parsed`` (its validated form) is given;
    the policy sees the messages as sent with ``content`` flattened to a string; ``rng`` is
    seeded from ``seed``, the rollout's slot (see :func:`_rng_seed`) and ``turn``.
    """
    chat = parsed if parsed is not None else parse_chat(body)
    messages = []
    for message in body["messages"]:
        flat = dict(message)
        flat["content"] = flatten_content(message.get("content"))
        messages.append(flat)
    return PolicyRequest(
        messages=tuple(messages),
        tools=tuple(chat.tools or ()),
        temperature=float(TEMPERATURE.default if chat.temperature is None else chat.temperature),
        top_p=float(TOP_P.default if chat.top_p is None else chat.top_p),
        max_tokens=chat.max_tokens,
        rng=random.Random(_rng_seed(seed, trajectory_id, context, turn)),
        trajectory_id=trajectory_id,
        job_arn=job_arn,
        turn=turn,
        raw=body,
        context=context,
    )


def _rng_seed(seed: int, trajectory_id: str, context: dict[str, Any], turn: int) -> str:
    """The per-turn RNG seed: the rollout's slot when its id names it, else the id itself.

    The driver names trajectories ``<job>-s<step>-p<prompt>-g<sample>-a<attempt>``; seeding by
    that slot rather than by the whole id makes two runs of one dataset with one seed play the
    same episodes although their job names differ. Ids minted otherwise (standalone mode) keep
    seeding by id, so their rollouts stay independent.
    """
    slot = (
        f"-s{context.get('step')}-p{context.get('prompt_index')}"
        f"-g{context.get('sample_index')}-a{context.get('attempt')}"
    )
    if trajectory_id.endswith(slot):
        return f"{seed}:{slot}:{turn}"
    return f"{seed}:{trajectory_id}:{turn}"
