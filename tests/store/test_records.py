"""The rollout record: one job's rollouts read from the store, and the views they answer."""

from __future__ import annotations

from pathlib import Path

from agent_kit.store import RunStore, TrajectoryRow, TurnRow, TurnTotals, load_rollouts
from agent_kit.store.records import INTERRUPTED_STATE, turn_totals_of

ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/records"
OTHER = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/other"


def _turn(tid: str, idx: int, estimated: bool = False) -> TurnRow:
    return TurnRow(tid, idx, "/sample", {"i": idx}, {"ok": idx}, 10 + idx, 2, estimated, 1.0)


def _populate(store: RunStore) -> None:
    store.create_job(ARN, "records", {})
    store.create_job(OTHER, "other", {})
    params = {"inferenceParams": {"temperature": 0.5}}
    rows = [
        TrajectoryRow("a", ARN, "OPEN", '{"id": "p0"}', payload=params, step=1, sample_index=1),
        TrajectoryRow("b", ARN, "OPEN", "p1", prompt_index=1, attempt=1, retry_of="z"),
        TrajectoryRow("c", ARN, "OPEN", "p2", prompt_index=2),
        TrajectoryRow("x", OTHER, "OPEN", "elsewhere"),
    ]
    for row in rows:
        store.create_trajectory(row)
    for tid, n in (("a", 3), ("b", 1), ("x", 2)):
        for i in range(n):
            store.add_turn(_turn(tid, i, estimated=i == 0))
    store.set_reward("a", [0.5, 0.25], None, None, state="REWARDED")
    store.set_reward("b", [1.0], None, None)  # a reward that came after a failure
    store.set_state("b", "FAILED", "The agent signaled that the trajectory failed")
    store.set_state("c", "TIMED_OUT", "job stopped: interrupted")
    store.set_reward("x", [2.0], None, None, state="REWARDED")
    answer = {"reward_breakdown": {"o": {"value": 1}}, "floor_reward": True}
    store.add_event("invocation", {"status": "ok", "body": answer}, "a")
    store.add_event("invocation", {"status": "error", "error": "HTTP 500 boom"}, "b")


def test_rollouts_read_each_table_once_and_answer_their_views(tmp_path: Path) -> None:
    """load_rollouts reads a job's rollouts in four queries; the views read back the rows."""
    with RunStore.open(tmp_path / "run") as store:
        _populate(store)
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        a, b, c = load_rollouts(store, ARN)
        store._conn.set_trace_callback(None)
    assert len(statements) == 4
    assert [r.id for r in (a, b, c)] == ["a", "b", "c"]
    assert (a.slot, a.group_key, a.attempt, a.prompt) == ((1, 0, 1), (1, 0), 0, '{"id": "p0"}')
    assert (a.state, a.reward, a.rewards, a.rewarded) == ("REWARDED", 0.75, (0.5, 0.25), True)
    assert (a.turns, a.prefill_tokens, a.sample_tokens, a.tokens, a.estimated_turns) == (
        3,
        33,
        6,
        39,
        1,
    )
    assert a.inference_params == {"temperature": 0.5}
    assert a.reward_breakdown == {"o": {"value": 1}}
    assert (a.agent_failure, a.floor_reward) == ("floor reward (no reason given)", True)
    assert a.turn_rows == ()
    assert a.duration_s == max(0.0, a.trajectory.updated_at - a.trajectory.created_at)
    assert (b.state, b.reward, b.reward_total, b.rewarded) == ("FAILED", None, 1.0, False)
    assert (b.retry_of, b.reason) == ("z", "The agent signaled that the trajectory failed")
    assert (b.agent_failure, b.floor_reward, b.body) == ("agent: HTTP 500 boom", False, None)
    assert (c.state, c.trajectory.state) == (INTERRUPTED_STATE, "TIMED_OUT")
    assert (c.usage, c.reward_row, c.invocation, c.inference_params) == (
        TurnTotals(),
        None,
        None,
        None,
    )


def test_rollouts_with_turns_carry_their_turn_rows(tmp_path: Path) -> None:
    """with_turns fills turn_rows in order, with usage their sums; states filter rollouts."""
    with RunStore.open(tmp_path / "run") as store:
        _populate(store)
        plain = {r.id: r for r in load_rollouts(store, ARN)}
        full = load_rollouts(store, ARN, states=("REWARDED", "FAILED"), with_turns=True)
        assert [r.id for r in full] == ["a", "b"]
        for rollout in full:
            assert list(rollout.turn_rows) == store.list_turns(rollout.id)
            assert rollout.usage == plain[rollout.id].usage == turn_totals_of(rollout.turn_rows)
        assert store.job_turns(ARN, states=("TIMED_OUT",)) == {}
        assert sorted(store.job_turns(ARN)) == ["a", "b"]
        assert sorted(store.job_rewards(ARN)) == ["a", "b"]
        assert store.job_rewards(OTHER)["x"].rewards == [2.0]
        assert store.job_rewards(ARN) == {t: store.get_reward(t) for t in ("a", "b")}
        assert store.job_rewards("arn:none") == {}
