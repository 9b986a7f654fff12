"""Parsing one OpenAI chat-completions request body into a :class:`PolicyRequest`.

The emulator's turn path (:meth:`agent_kit.emulator.core.Emulator.turn`) validates the body the
way the service does (messages, tools, sampling parameters; a bad field is a
:class:`~agent_kit.errors.ValidationError`, i.e. a 400) and hands the policy a
:class:`~agent_kit.emulator.schemas.PolicyRequest` with flattened message content and a
per-turn RNG seeded deterministically from the rollout's slot.
"""

from __future__ import annotations

import random
from typing import Any

from agent_kit.emulator.schemas import PolicyRequest
from agent_kit.errors import ValidationError

__all__ = ["flatten_content", "policy_request"]


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


def _number(body: dict[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{key} must be a number")
    if not lo <= value <= hi:
        raise ValidationError(f"{key} must be between {lo} and {hi}")
    return float(value)


def _messages(body: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ValidationError("messages must be a non-empty list of message objects")
    out = []
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ValidationError(f"messages[{i}] must be an object with a string role")
        flat = dict(message)
        flat["content"] = flatten_content(message.get("content"))
        calls = message.get("tool_calls")
        if calls is not None and not (
            isinstance(calls, list) and all(isinstance(c, dict) for c in calls)
        ):
            raise ValidationError(f"messages[{i}].tool_calls must be a list of objects")
        out.append(flat)
    return tuple(out)


def _tools(body: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    raw = body.get("tools")
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise ValidationError("tools must be a list of tool objects")
    return tuple(raw)


def _max_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("max_tokens", body.get("max_completion_tokens"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValidationError("max_tokens must be a positive integer")
    return value


def policy_request(
    body: dict[str, Any],
    *,
    seed: int,
    trajectory_id: str,
    job_arn: str,
    turn: int,
    context: dict[str, Any],
) -> PolicyRequest:
    """The :class:`PolicyRequest` for turn ``turn`` of a trajectory, from its request ``body``.

    Validates ``messages``, ``tools``, ``temperature`` (0–2), ``top_p`` (0–1) and ``max_tokens``
    (or ``max_completion_tokens``) in that order, raising ValidationError on the first bad one;
    ``rng`` is seeded from ``seed``, the rollout's slot (see :func:`_rng_seed`) and ``turn``.
    """
    return PolicyRequest(
        messages=_messages(body),
        tools=_tools(body),
        temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
        top_p=_number(body, "top_p", 1.0, 0.0, 1.0),
        max_tokens=_max_tokens(body),
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
