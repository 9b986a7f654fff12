"""Which transcripts the report tags "lowest reward": the really low ones, whatever the run's
size, never one at the run's highest reward."""

from __future__ import annotations

from agent_kit.reporting.breakdown import RunData
from agent_kit.reporting.transcripts import LOWEST, select_transcripts
from agent_kit.store import JobRow, RewardRow, Rollout, TrajectoryRow

ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/tags"


def _rollout(index: int, reward: float) -> Rollout:
    tid = f"t{index:04d}"
    row = TrajectoryRow(tid, ARN, "REWARDED", "{}", prompt_index=index // 4, sample_index=index % 4)
    return Rollout(trajectory=row, reward_row=RewardRow(tid, [reward], reward, None, None, 0.0))


def _tagged(rewards: list[float], threshold: float = 1.0) -> dict[str, list[float]]:
    job = JobRow(ARN, "tags", 0.0, {}, "completed", None)
    records = tuple(_rollout(i, r) for i, r in enumerate(rewards))
    data = RunData(job=job, records=records, groups=(), job_failures=(), threshold=threshold)
    out: dict[str, list[float]] = {}
    for chosen in select_transcripts(data):
        out.setdefault(chosen.why, []).append(float(chosen.record.reward or 0.0))
    return out


def test_a_small_run_tags_its_bottom_decile_below_the_maximum() -> None:
    """12 rollouts (two at the maximum): the bottom decile (2) is tagged, not 10 of 12."""
    rewards = [0.2, 2.25, 1.5, 0.9, 1.8, 2.25, 1.2, 1.6, 1.7, 1.9, 2.0, 1.1]
    tagged = _tagged(rewards)
    assert tagged["lowest reward"] == [0.2, 0.9]
    assert 2.25 not in tagged["lowest reward"]
    assert sum(len(v) for v in tagged.values()) == len(rewards)  # the rest are still shown


def test_a_run_where_every_rollout_scored_alike_tags_none() -> None:
    """No rollout is "lowest" when all share the maximum."""
    assert "lowest reward" not in _tagged([1.0] * 12)


def test_a_large_run_tags_at_most_lowest_and_keeps_the_unsolved_on_the_page() -> None:
    """1,000 rollouts: at most LOWEST tagged; the ones below the success threshold the
    failures section links to are on the page too."""
    rewards = [i / 1000 for i in range(1000)]
    tagged = _tagged(rewards)
    assert len(tagged["lowest reward"]) == LOWEST
    assert tagged["lowest reward"] == sorted(rewards)[:LOWEST]
    mid = _tagged([0.0, 0.5, 0.6, 0.7, 0.8, 0.9] + [2.0] * 44)  # 50 rollouts: a decile of 5
    assert mid["lowest reward"] == [0.0, 0.5, 0.6, 0.7, 0.8]
    assert mid["below the success threshold"] == [0.9]


def test_the_per_group_plots_labels_are_thinned_apart() -> None:
    """At 32 groups (and at 120) the shown group labels stand at least LABEL_GAP_PX apart;
    a few groups keep every label."""
    import itertools
    import re

    from agent_kit.reporting import svg

    for count in (4, 32, 120):
        groups = [(f"{i // 8}:{i % 8}", [0.0, float(i % 3)], False) for i in range(count)]
        page = svg.strip(groups, title="t")
        xs = [float(x) for x in re.findall(r'<text x="([0-9.]+)" y="[0-9.]+" font-size="9"', page)]
        assert xs, page
        assert all(b - a >= svg.LABEL_GAP_PX - 0.05 for a, b in itertools.pairwise(xs))
        if count == 4:
            assert len(xs) == 4
