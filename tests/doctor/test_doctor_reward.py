"""``agent-kit doctor reward``: planted reward faults are found, with evidence, on real runs.

Two small real runs of examples/wordle (the driver, agent subprocesses, the emulator), made once
for the module: ``Solver`` at temperature 0.7 (healthy: wins in varied numbers of guesses) and
``Solver`` at temperature 0 (every member of a group plays the same game: zero variance). The
other faults are planted in entrypoints written to a temporary folder and applied by re-scoring
the healthy run in process (``--entrypoint``): a sign bug that ranks slow wins above fast ones,
and a brevity reward without an outcome term (the short-episode hack). The last tests check the
pure checks on hand-built episode views.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakes.rollouts import rollout
from helpers import WORDLE_AGENT, holdout, play_wordle, wordle_agent_source, wordle_config

from agent_kit.cli import main
from agent_kit.doctor.findings import EXIT_FINDINGS, Finding
from agent_kit.doctor.hacking import dominance, length_signals, recovered_calls
from agent_kit.doctor.invariants import EpisodeView, Ordering, check_orderings, parse_orderings
from agent_kit.doctor.reward import RewardAudit, audit_reward
from agent_kit.errors import UsageError
from agent_kit.store import INVOCATION_EVENT
from agent_kit.store.events import ROLLOUT_DONE_EVENT
from agent_kit.store.runlock import RunLock

pytestmark = pytest.mark.e2e

INVERTED_AGENT = wordle_agent_source(
    "Wordle with a sign bug: the outcome term is subtracted.",
    """
from agent_kit import Reward
from agent_kit.app import RolloutApp


def inverted_reward(env, episode=None):
    good = wordle.wordle_reward(env, episode)
    return Reward.weighted(
        **{
            name: (c.value, -c.weight if name == "outcome" else c.weight)
            for name, c in good.components.items()
        }
    )


REWARD_ORDERINGS = wordle.REWARD_ORDERINGS
app = RolloutApp(wordle.WordleEnv, reward=inverted_reward, system_prompt=wordle.SYSTEM_PROMPT,
                 max_turns=wordle.MAX_TURNS, floor_reward=-1.5)
""",
)

BREVITY_AGENT = wordle_agent_source(
    "Wordle scored for brevity only: short episodes score high, solved or not.",
    """
from agent_kit import Reward
from agent_kit.app import RolloutApp


def brevity_reward(env, episode=None):
    turns = max(1, episode.turns if episode is not None else 1)
    return Reward.weighted(brevity=(1.0 / turns, 3.0))


app = RolloutApp(wordle.WordleEnv, reward=brevity_reward, system_prompt=wordle.SYSTEM_PROMPT,
                 max_turns=wordle.MAX_TURNS, floor_reward=-1.5)
""",
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run directories (healthy, flat) and the planted entrypoints (inverted, brevity)."""
    base = tmp_path_factory.mktemp("doctor-reward")
    dataset = holdout(base / "three.jsonl", 3)
    inverted = base / "inverted_agent.py"
    inverted.write_text(INVERTED_AGENT, encoding="utf-8")
    brevity = base / "brevity_agent.py"
    brevity.write_text(BREVITY_AGENT, encoding="utf-8")
    out = base / "runs"
    return {
        "healthy": play_wordle(dataset, out, wordle_config("healthy", concurrency=12)),
        "flat": play_wordle(dataset, out, wordle_config("flat", temperature=0.0, concurrency=12)),
        "inverted": inverted,
        "brevity": brevity,
    }


def _one(audit: RewardAudit, check: str, severity: str | None = None) -> list[Finding]:
    return [
        f
        for f in audit.findings
        if f.check == check and (severity is None or f.severity == severity)
    ]


def test_healthy_solver_run_has_no_error(runs: dict[str, Path]) -> None:
    """A Solver run of examples/wordle: orderings hold on every pair, no error finding."""
    audit = audit_reward(runs["healthy"])
    assert audit.ok, [f.title for f in audit.findings if f.severity == "error"]
    (ordering,) = _one(audit, "ordering")
    assert ordering.severity == "info"
    assert ordering.evidence["violations"] == 0
    assert ordering.evidence["pairs"] > 0
    assert audit.entrypoint == str(WORDLE_AGENT)
    assert not _one(audit, "hacking", "error")
    assert not _one(audit, "zero-variance", "error")


def test_rescoring_with_the_unchanged_reward_changes_nothing(runs: dict[str, Path]) -> None:
    """Re-scoring with the run's own entrypoint reproduces every reward and uses game results."""
    audit = audit_reward(runs["healthy"], entrypoint=WORDLE_AGENT)
    (rescore,) = _one(audit, "rescore")
    assert rescore.evidence["rescored"] == 12
    assert rescore.evidence["changed"] == 0
    assert audit.rescored
    assert audit.ok


def test_inverted_ordering_is_an_error_with_the_violating_pair(runs: dict[str, Path]) -> None:
    """A sign bug on the outcome term breaks 'fast win > slow win': found, with both ids."""
    audit = audit_reward(runs["healthy"], entrypoint=runs["inverted"])
    (ordering,) = _one(audit, "ordering", "error")
    evidence = ordering.evidence
    assert evidence["violations"] > 0
    worst = evidence["worst_pair"]
    assert worst["better"]["reward"] <= worst["worse"]["reward"]
    assert list(ordering.trajectory_ids) == [
        worst["better"]["trajectory_id"],
        worst["worse"]["trajectory_id"],
    ]
    assert all(tid.startswith("healthy-") for tid in ordering.trajectory_ids)
    (rescore,) = _one(audit, "rescore")
    assert rescore.evidence["changed"] == 12
    assert not audit.ok


def test_policy_making_all_groups_equal_is_a_zero_variance_error(runs: dict[str, Path]) -> None:
    """Solver at temperature 0 plays one game per prompt: every group is flat, no gradient."""
    audit = audit_reward(runs["flat"])
    (finding,) = _one(audit, "zero-variance")
    assert finding.severity == "error"
    evidence = finding.evidence
    assert evidence["groups"] == 3
    assert evidence["zero_variance_groups"] == 3
    assert evidence["share"] == 1.0
    assert evidence["group_size"] == 4
    assert evidence["always_solved_prompts"] == 3
    assert evidence["expected_all_equal_success_at_group_size"] == 1.0
    assert len(evidence["prompts"]) == 3
    assert "raise the temperature from 0.0" in finding.hint
    assert len(finding.trajectory_ids) == 3


def test_short_episode_hack_is_found(runs: dict[str, Path]) -> None:
    """A brevity reward with no outcome term: high rewards without an outcome, reward ~ turns."""
    audit = audit_reward(runs["healthy"], entrypoint=runs["brevity"])
    (unearned,) = _one(audit, "hacking", "error")
    assert unearned.evidence["without_outcome"] > 0
    assert all(e["reward"] >= 1.0 for e in unearned.evidence["examples"])
    assert all(e["turns"] <= 3 for e in unearned.evidence["examples"])
    length = [f for f in _one(audit, "hacking", "warn") if f.evidence.get("measure") == "turns"]
    assert len(length) == 1
    assert length[0].evidence["r_reward"] < -0.5
    assert length[0].evidence["r_outcome"] is None
    assert "shorter episodes score higher" in length[0].title


def test_budget_projection_is_an_error_above_the_budget(runs: dict[str, Path]) -> None:
    """The projected cost of the planned steps is compared with --budget."""
    cheap = audit_reward(runs["healthy"], steps=10, budget=1e6)
    (info,) = _one(cheap, "projection")
    assert info.severity == "info"
    assert info.evidence["steps"] == 10
    dear = audit_reward(runs["healthy"], steps=10, budget=1e-6)
    (error,) = _one(dear, "projection", "error")
    assert error.evidence["cost"] == info.evidence["cost"] > 1e-6
    assert error.evidence["slots"] == 10 * 3 * 4


def test_cli_json_and_exit_codes(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI exits 0 on the healthy run (JSON on stdout) and 13 on a planted error."""
    assert main(["doctor", "reward", str(runs["healthy"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "agent_kit.doctor.reward/1"
    assert data["counts"]["error"] == 0
    assert {f["check"] for f in data["findings"]} >= {"ordering", "zero-variance", "projection"}
    assert main(["doctor", "reward", str(runs["flat"])]) == EXIT_FINDINGS
    out = capsys.readouterr().out
    assert "zero-variance" in out
    assert main(["doctor", "reward", str(runs["healthy"]), "--budget", "-1"]) == 2
    assert main(["doctor", "reward", str(runs["healthy"].parent / "nope")]) == 2
    assert "run directory not found" in capsys.readouterr().err


def test_live_run_is_audited_on_its_finished_rollouts(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run still being played, caught with a rollout rewarded before the driver stored the
    agent's answer, is audited on its finished rollouts only and said to be live (no false
    ordering violation, exit 0)."""
    live = tmp_path / "live"
    shutil.copytree(runs["healthy"], live)
    conn = sqlite3.connect(live / "run.sqlite")
    try:
        (tid,) = conn.execute(
            "SELECT t.id FROM trajectories t JOIN rewards r ON r.trajectory_id = t.id "
            "WHERE t.state = 'REWARDED' ORDER BY r.total DESC LIMIT 1"
        ).fetchone()
        with conn:  # the window between UpdateReward and the driver's record of the answer
            conn.execute(
                "DELETE FROM events WHERE trajectory_id = ? AND kind IN (?, ?)",
                (tid, INVOCATION_EVENT, ROLLOUT_DONE_EVENT),
            )
    finally:
        conn.close()
    with RunLock.acquire(live):  # the driver's lock: the run is being played
        assert main(["doctor", "reward", str(live), "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert main(["doctor", "reward", str(live)]) == 0
        out = capsys.readouterr().out
    assert data["live"] is True
    assert data["in_flight"] == 1
    assert data["scored"] == 11
    (ordering,) = [f for f in data["findings"] if f["check"] == "ordering"]
    assert ordering["evidence"]["violations"] == 0
    assert tid not in json.dumps(data)
    assert f"live run: pid {os.getpid()} is still playing it" in " ".join(out.split())
    assert "1 in flight left out" in " ".join(out.split())
    assert audit_reward(runs["healthy"]).live is None


# -- the pure checks on hand-built views --------------------------------------------------------


def _view(tid: str, reward: float, turns: int = 3, **kw: Any) -> EpisodeView:
    answer = {k: kw.pop(k) for k in ("tool_calls", "recovered_tool_calls") if k in kw}
    base: dict[str, Any] = {
        "outcome": "succeeded" if reward >= 1 else "unsolved",
        "floor": False,
    }
    base.update(kw)
    recorded = rollout(tid, reward=reward, turns=turns, prefill_tokens=turns * 100)
    if answer:
        recorded = replace(recorded, invocation={"status": "ok", "body": answer})
    view = EpisodeView(rollout=recorded, reward=reward, **base)
    assert (view.recorded_reward, view.tokens) == (reward, turns * 100)
    return view


def test_ordering_counts_every_violating_pair() -> None:
    """Pairs and violations are counted over all better × worse pairs, ties included."""
    views = [_view("a", 2.0), _view("b", 1.0), _view("c", 1.0), _view("d", 3.0)]
    ordering = Ordering(
        "a,b > c,d",
        better=lambda v: v.trajectory_id in "ab",
        worse=lambda v: v.trajectory_id in "cd",
    )
    (finding,) = check_orderings(views, [ordering])
    assert finding.severity == "error"
    # a>c ok, a<d bad, b=c bad (tie), b<d bad
    assert (finding.evidence["pairs"], finding.evidence["violations"]) == (4, 3)
    assert finding.evidence["worst_pair"]["better"]["trajectory_id"] == "b"
    assert finding.evidence["worst_pair"]["worse"]["trajectory_id"] == "d"


def test_ordering_predicate_error_is_a_finding() -> None:
    """A predicate that raises is reported with the episode, never a crash."""
    (finding,) = check_orderings([_view("a", 1.0)], parse_orderings([("bad", lambda v: v.x)]))
    assert finding.severity == "error"
    assert "AttributeError" in finding.title
    assert finding.trajectory_ids == ("a",)


def test_bad_orderings_declaration_is_a_usage_error() -> None:
    """REWARD_ORDERINGS entries must be (name, better, worse) or (name, rank)."""
    with pytest.raises(UsageError, match=r"REWARD_ORDERINGS\[0\]"):
        parse_orderings([("only a name",)])


def test_recovered_calls_rewarded_like_real_ones_is_a_warning() -> None:
    """Text tool calls that no component responds to are flagged; a penalty term clears it."""
    plain = [
        _view(f"t{i}", 1.0 + i / 10, recovered_tool_calls=i % 2, components={"outcome": 1.0})
        for i in range(6)
    ]
    (warn,) = recovered_calls(plain)
    assert warn.severity == "warn"
    assert warn.evidence["with_recovered_calls"] == 3
    penalized = [
        _view(
            f"t{i}",
            1.0,
            recovered_tool_calls=i % 2,
            components={"outcome": 1.0, "text_call": -5.0 * (i % 2)},
        )
        for i in range(6)
    ]
    (info,) = recovered_calls(penalized)
    assert info.severity == "info"
    assert "'text_call' penalizes them" in info.title


def test_dominating_component_against_its_weight_is_a_warning() -> None:
    """A 0.1-weight term that makes nearly all of the spread is flagged."""
    views = [
        _view(
            f"t{i}",
            1.0 + 5.0 * i,
            components={"outcome": 1.0, "style": 50.0 * i},
            contributions={"outcome": 1.0, "style": 5.0 * i},
            weights={"outcome": 1.0, "style": 0.1},
        )
        for i in range(5)
    ]
    findings = dominance(views)
    assert [f.severity for f in findings] == ["warn"]
    assert "'style'" in findings[0].title
    assert findings[0].evidence["variance_share"]["style"] == pytest.approx(1.0)


def test_length_correlation_explained_by_the_outcome_is_not_flagged() -> None:
    """Fast wins scoring higher (the outcome itself follows turns) is information, not a hack."""
    views = [
        _view(
            f"t{i}",
            2.0 - 0.1 * i,
            turns=2 + i,
            contributions={"outcome": 2.0 - 0.1 * i},
            kinds={"outcome": "outcome"},
            tool_calls=2 + i,
        )
        for i in range(5)
    ]
    assert {f.severity for f in length_signals(views)} == {"info"}
