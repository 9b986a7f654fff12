"""Build :class:`~agent_kit.store.Rollout` records from flat fields, as a test states them."""

from __future__ import annotations

from typing import Any

from agent_kit.contract import TrajectoryState
from agent_kit.store import RewardRow, Rollout, TrajectoryRow, TurnTotals
from agent_kit.store.records import INTERRUPTED_STATE

REWARDED = TrajectoryState.REWARDED.value


def rollout(
    id: str,
    *,
    step: int = 0,
    prompt_index: int = 0,
    sample_index: int = 0,
    state: str = REWARDED,
    reward: float | None = None,
    attempt: int = 0,
    turns: int = 0,
    prefill_tokens: int = 0,
    sample_tokens: int = 0,
    estimated_turns: int = 0,
    started_at: float = 0.0,
    ended_at: float = 0.0,
    reason: str | None = None,
    retry_of: str | None = None,
    agent_failure: str | None = None,
    floor_reward: bool = False,
    prompt: str = "",
) -> Rollout:
    """A rollout whose views read back the given fields.

    ``state`` is the state reports read: INTERRUPTED is stored as TIMED_OUT with a cut-short
    reason. ``agent_failure`` (``"boundary: reason"``) and ``floor_reward`` become the agent's
    recorded answer (a floor reward without a failure reads as "floor reward (no reason
    given)", as it does from a store).
    """
    stored = state
    if state == INTERRUPTED_STATE:
        stored = "TIMED_OUT"
        reason = reason or "job stopped: interrupted"
    if reward is not None and stored != REWARDED:
        raise ValueError("only a REWARDED rollout has a reward the metrics count")
    body: dict[str, Any] = {}
    if agent_failure is not None:
        boundary, _, why = agent_failure.partition(": ")
        body["failure"] = {"boundary": boundary, "reason": why}
    if floor_reward:
        body["floor_reward"] = True
    rollout = Rollout(
        trajectory=TrajectoryRow(
            id=id,
            job_arn="arn:test",
            state=stored,
            prompt=prompt,
            step=step,
            prompt_index=prompt_index,
            sample_index=sample_index,
            attempt=attempt,
            retry_of=retry_of,
            created_at=started_at,
            updated_at=ended_at,
            reason=reason,
        ),
        reward_row=None if reward is None else RewardRow(id, [reward], reward, None, None, 0.0),
        usage=TurnTotals(turns, prefill_tokens, sample_tokens, estimated_turns),
        invocation={"status": "ok", "body": body} if body else None,
    )
    assert (rollout.state, rollout.reward, rollout.floor_reward) == (state, reward, floor_reward)
    assert agent_failure is None or rollout.agent_failure == agent_failure
    return rollout
