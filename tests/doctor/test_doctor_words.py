"""The reward audit's words: each figure says what it measures and whether it is fine.

Hand-built episode views (no run, no agent): the dominance share, the length correlations and
the zero-variance counts, each checked for its meaning and its verdict.
"""

from __future__ import annotations

from typing import Any

import pytest
from fakes.rollouts import rollout

from agent_kit.doctor.hacking import dominance, length_signals
from agent_kit.doctor.invariants import EpisodeView
from agent_kit.doctor.variance import zero_variance
from agent_kit.reporting.breakdown import load_run_data
from agent_kit.store import RunStore, TrajectoryRow

ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/words"


def _view(tid: str, reward: float, *, turns: int = 3, **kw: Any) -> EpisodeView:
    """A scored episode view of a rewarded rollout."""
    base: dict[str, Any] = {"outcome": "succeeded" if reward >= 1 else "unsolved", "floor": False}
    base.update(kw)
    recorded = rollout(tid, reward=reward, turns=turns, prefill_tokens=turns * 100)
    return EpisodeView(rollout=recorded, reward=reward, **base)


def test_dominance_share_says_what_it_means_and_that_it_is_fine() -> None:
    """A largest share above 100% (another term pulls against the outcome) is explained in
    words — the share of the reward's variance, what above 100% means — with a verdict."""
    views = [
        _view(
            f"t{i}",
            1.0 * i - 0.05 * i,
            components={"outcome": 1.0 * i, "cost": -1.0 * i},
            contributions={"outcome": 1.0 * i, "cost": -0.05 * i},
            weights={"outcome": 1.0, "cost": 0.05},
        )
        for i in range(5)
    ]
    (finding,) = dominance(views)
    assert finding.severity == "info"
    title = finding.title
    assert "'outcome'" in title
    assert "105% of the reward's variance" in title
    assert "95% of the declared weight" in title
    assert "above 100%" in title  # what such a share means
    assert title.endswith("fine")


def test_length_correlations_carry_a_verdict() -> None:
    """ "reward vs turns" says which way the reward moves with length, whether the outcome
    explains it, and that it is fine; a weak correlation says it is weak."""
    explained = [
        _view(
            f"t{i}",
            2.0 - 0.1 * i,
            turns=2 + i,
            contributions={"outcome": 2.0 - 0.1 * i},
            kinds={"outcome": "outcome"},
        )
        for i in range(5)
    ]
    turns = next(f for f in length_signals(explained) if f.evidence["measure"] == "turns")
    assert turns.severity == "info"
    assert "longer episodes score lower" in turns.title
    assert "the outcome terms alone move the same way" in turns.title
    assert turns.title.endswith("fine")
    weak = [
        _view(f"w{i}", reward, turns=turns_, components={"outcome": reward}, kinds={})
        for i, (reward, turns_) in enumerate(
            [(1.0, 3), (0.0, 3), (0.0, 4), (1.0, 4), (1.0, 5), (0.0, 5)]
        )
    ]
    (first, *_) = length_signals(weak)
    assert "weak" in first.title
    assert first.title.endswith("fine")


def test_zero_variance_counts_say_what_they_count() -> None:
    """The zero-variance finding says how many groups give no gradient and that this is fine
    when few do, and names its prompt counts in full: prompts that succeeded in every rollout
    and in none."""
    with RunStore.open(":memory:") as store:
        store.create_job(ARN, "words", {"group_size": 2})
        rewards = {(0, 0): 1.0, (0, 1): 1.2, (1, 0): 0.0, (1, 1): 0.5}
        for (prompt, sample), reward in rewards.items():
            tid = f"w-p{prompt}-g{sample}"
            store.create_trajectory(
                TrajectoryRow(
                    id=tid,
                    job_arn=ARN,
                    state="OPEN",
                    prompt="p",
                    prompt_index=prompt,
                    sample_index=sample,
                )
            )
            store.set_reward(tid, [reward], None, None, state="REWARDED")
        data = load_run_data(store, ARN)
    views = [
        EpisodeView(rollout=r, reward=r.reward, outcome=data.outcome(r), floor=False)
        for r in data.records
    ]
    (finding,) = zero_variance(views, data)
    title = finding.title
    assert "0 of 2 groups (0%) have zero reward variance" in title
    assert "fine" in title
    assert "1 of 2 prompts succeeded in every rollout and 1 in none" in title
    assert "never solved)" not in title


def test_piped_findings_keep_long_check_names_whole_and_no_trailing_spaces(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``doctor reward`` piped to a file: a check name longer than the column (judge-injection,
    judge-consistency …) stands whole, a long title is not wrapped at 80 columns, and no line
    ends in spaces."""
    from agent_kit.cli.doctor import print_audit
    from agent_kit.doctor.findings import Finding
    from agent_kit.doctor.reward import RewardAudit

    monkeypatch.delenv("COLUMNS", raising=False)
    title = "an injected answer that closes the judge's sections scored " + "higher " * 12
    audit = RewardAudit(
        run_dir="runs/x",
        job_name="x",
        entrypoint=None,
        rescored=False,
        episodes=4,
        scored=4,
        findings=(Finding("a-very-long-check-name-indeed", "warn", title.strip(), hint="fix it"),),
    )
    print_audit(audit)
    out = capsys.readouterr().out
    assert "a-very-long-check-name-indeed" in out
    assert title.strip() in out.replace("\n", " ") or title.strip() in out
    assert all(line == line.rstrip() for line in out.splitlines())
    assert any(len(line) > 80 for line in out.splitlines())
