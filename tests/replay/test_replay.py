"""Record and replay: the replay backend, divergence reports, forks, the CLI and the test kit.

Unit tests drive :class:`ReplayBackend` with hand-built recordings. The e2e tests record real
runs once per module (real emulator on loopback, real agent subprocesses): the Counter example
(``tests/example_counter.py``) with the :class:`Adder` policy below, and the Wordle example
with its ``Solver`` at temperature 0.7 (13 prompts × 4 = 52 episodes), then replay them through
the original and through edited copies of the entrypoints.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent_kit.cli import main
from agent_kit.driver.config import RunConfig
from agent_kit.emulator.policies import PolicyResult, Usage, load_policy
from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall
from agent_kit.errors import ReplayDivergenceError
from agent_kit.replay.cassette import load_recording
from agent_kit.replay.divergence import Normalization, request_diff
from agent_kit.replay.engine import replay_run
from agent_kit.replay.helpers import assert_replays, record, recorded_run
from agent_kit.replay.policy import ReplayBackend
from agent_kit.replay.recording import Recording
from agent_kit.replay.verdicts import ReplayReport, compare_rewards, judge
from agent_kit.store import RewardRow, Rollout, RunStore, TrajectoryRow, TurnRow
from agent_kit.store.records import turn_totals_of

ROOT = Path(__file__).resolve().parents[2]
COUNTER = Path(__file__).resolve().parents[1] / "example_counter.py"
WORDLE = ROOT / "examples" / "wordle"
ADDER = f"scripted:{Path(__file__).resolve()}:Adder"
SOLVER = f"scripted:{WORDLE / 'policies.py'}:Solver"


class Adder:
    """Counter policy: add 1 or 2 (seeded by the request's rng) until the target is reached."""

    def __call__(self, request: PolicyRequest) -> PolicyReply | str:
        """One move, read from the conversation (target in the user message, value in tools)."""
        match = re.search(r"Reach (\d+)", str(request.messages[1]["content"]))
        target = int(match.group(1)) if match else 3
        results = request.tool_results()
        value = int(results[-1].split("=")[1]) if results else 0
        if value >= target:
            return "done"
        n = 1 if request.temperature == 0 else request.rng.choice([1, 2])
        return PolicyReply(tool_calls=(ToolCall("add", {"n": n}),))


# -- unit: normalisation, diffs, the backend ---------------------------------------------------

TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


def _request_body(tool_text: str = "value=1", call_id: str = "call_a") -> dict[str, Any]:
    return {
        "model": "default",
        "stream": False,
        "temperature": 0.5,
        "tools": TOOLS,
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "Reach 3 by calling add."}]},
            {
                "role": "assistant",
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "add"}}],
            },
            {"role": "tool", "tool_call_id": call_id, "content": tool_text},
        ],
    }


def _completion(text: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{text}",
        "object": "chat.completion",
        "created": 7,
        "model": "default",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13},
    }


def _rollout(
    tid: str,
    prompt: str,
    sample: int,
    turns: tuple[TurnRow, ...],
    rewards: list[float],
    invocation: dict[str, Any] | None = None,
) -> Rollout:
    """A REWARDED rollout of step 0, prompt 0 with these turns and rewards."""
    return Rollout(
        trajectory=TrajectoryRow(tid, "arn:rec", "REWARDED", prompt, sample_index=sample),
        reward_row=RewardRow(tid, rewards, sum(rewards), None, None, 0.0),
        usage=turn_totals_of(turns),
        invocation=invocation,
        turn_rows=turns,
    )


def _recording(n_turns: int = 2, prompt: str = '{"target": 3}') -> Recording:
    episodes = []
    for g in range(2):
        tid = f"rec-s0-p0-g{g}-a0"
        turns = tuple(
            TurnRow(
                tid,
                i,
                "/v1/chat/completions",
                _request_body(f"value={i}"),
                _completion(f"g{g}t{i}"),
                11 + i,
                2,
                False,
                0.0,
            )
            for i in range(n_turns)
        )
        episodes.append(_rollout(tid, prompt, g, turns, [0.5]))
    return Recording(Path("rec"), "run", tuple(episodes))


def _policy_request(
    body: dict[str, Any], turn: int, tid: str = "new-1", **context: Any
) -> PolicyRequest:
    return PolicyRequest(
        messages=tuple(body["messages"]),
        tools=tuple(body.get("tools", ())),
        temperature=0.5,
        top_p=1.0,
        max_tokens=None,
        rng=random.Random(0),
        trajectory_id=tid,
        job_arn="arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/x",
        turn=turn,
        raw=body,
        context=context,
    )


def test_normalization_canonicalises_ids_and_flattens_content() -> None:
    """Tool-call ids and text-part lists do not count as differences by default."""
    norm = Normalization()
    a = _request_body(call_id="call_a")
    b = _request_body(call_id="tooluse_XYZ")
    b["messages"][1]["content"] = "Reach 3 by calling add."
    b["stream"] = True
    b["stream_options"] = {"include_usage": True}
    assert norm.view(a) == norm.view(b)
    assert Normalization.strict().view(a) != Normalization.strict().view(b)


def test_normalization_whitespace_and_extra_ignored_fields() -> None:
    """Whitespace counts unless asked; sampling parameters count unless ignored."""
    a, b = _request_body("value=1\n"), _request_body("value=1 ")
    assert Normalization().view(a) != Normalization().view(b)
    assert Normalization(whitespace=True).view(a) == Normalization(whitespace=True).view(b)
    c = {**_request_body(), "temperature": 0.9}
    assert Normalization().view(_request_body()) != Normalization().view(c)
    ignore_t = Normalization(ignore=Normalization().ignore | {"temperature"})
    assert ignore_t.view(_request_body()) == ignore_t.view(c)


def test_request_diff_shows_the_changed_content_line() -> None:
    """The diff renders message contents line by line, so the changed line stands out."""
    norm = Normalization()
    diff = request_diff(
        norm.view(_request_body("Guess 1\nFeedback: A gray")),
        norm.view(_request_body("Guess 1\nFeedback:  A gray")),
    )
    assert "-  | Feedback: A gray" in diff
    assert "+  | Feedback:  A gray" in diff
    assert "Guess 1" in diff


async def test_backend_serves_recorded_response_and_usage() -> None:
    """A matching request gets the recorded completion verbatim and the recorded usage."""
    backend = ReplayBackend(_recording())
    body = _request_body("value=1")
    result = await backend.complete(_policy_request(body, 1, replay_of="rec-s0-p0-g1-a0"))
    assert result.response == _completion("g1t1")
    assert result.usage == Usage(12, 2, False)
    assert backend.divergences == {}


async def test_backend_stops_a_diverging_episode_with_a_diff() -> None:
    """A different request raises a 400 naming the turn and field, and is logged once."""
    seen: list[Any] = []
    backend = ReplayBackend(_recording(), on_divergence=seen.append)
    body = _request_body("value=CHANGED")
    with pytest.raises(ReplayDivergenceError, match=r"diverged at turn 1: messages\[3\]\.content"):
        await backend.complete(_policy_request(body, 1, replay_of="rec-s0-p0-g0-a0"))
    divergence = backend.divergences["new-1"]
    assert (divergence.turn, divergence.original_id) == (1, "rec-s0-p0-g0-a0")
    assert "+  | value=CHANGED" in divergence.diff
    assert seen == [divergence]


async def test_backend_continue_on_divergence_keeps_serving() -> None:
    """With continue_on_divergence the recorded response is served and the divergence kept."""
    backend = ReplayBackend(_recording(), continue_on_divergence=True)
    request = _policy_request(_request_body("other"), 0, replay_of="rec-s0-p0-g0-a0")
    result = await backend.complete(request)
    assert result.response == _completion("g0t0")
    assert backend.divergences["new-1"].turn == 0


async def test_backend_turn_beyond_the_recording_always_stops() -> None:
    """An extra turn is a divergence even when continuing (nothing recorded to serve)."""
    backend = ReplayBackend(_recording(n_turns=1), continue_on_divergence=True)
    with pytest.raises(ReplayDivergenceError, match="beyond the recording"):
        await backend.complete(_policy_request(_request_body(), 1, replay_of="rec-s0-p0-g0-a0"))


class _Live:
    """A live backend stand-in that answers every turn with 'live'."""

    name = "live"

    def __init__(self) -> None:
        self.turns: list[int] = []
        self.closed = False

    async def complete(self, request: PolicyRequest) -> PolicyResult:
        """Answer 'live' and remember the turn."""
        self.turns.append(request.turn)
        return PolicyResult(_completion("live"), Usage(1, 1, True))

    async def aclose(self) -> None:
        """Remember being closed."""
        self.closed = True


async def test_fork_replays_turns_before_k_then_goes_live() -> None:
    """fork_at=1: turn 0 from the recording, turn 1 onwards from the live policy."""
    live = _Live()
    backend = ReplayBackend(_recording(), fork_at=1, live=live)
    first = await backend.complete(
        _policy_request(_request_body("value=0"), 0, replay_of="rec-s0-p0-g0-a0")
    )
    later = await backend.complete(
        _policy_request(_request_body("new"), 1, replay_of="rec-s0-p0-g0-a0")
    )
    assert first.response == _completion("g0t0")
    assert later.response == _completion("live")
    assert live.turns == [1]
    await backend.aclose()
    assert live.closed


async def test_standalone_lookup_by_prompt_and_sample_index() -> None:
    """Without replay_of, the episode with the same prompt and the id's sample index is used."""
    backend = ReplayBackend(_recording())
    request = _policy_request(
        _request_body("value=0"), 0, tid="other-job-s0-p0-g1-a0", prompt='{"target": 3}'
    )
    assert (await backend.complete(request)).response == _completion("g1t0")
    unknown = _policy_request(_request_body(), 0, tid="x", prompt='{"target": 99}')
    with pytest.raises(ReplayDivergenceError, match="No recorded episode has the prompt"):
        await backend.complete(unknown)


def test_compare_rewards_gives_per_component_deltas() -> None:
    """Rewards compare bit for bit; components report old, new and delta of the contribution."""
    old = {
        "outcome": {"value": 1.0, "weight": 1.0, "contribution": 1.0},
        "s": {"value": 0.5, "weight": 0.1, "contribution": 0.05},
    }
    new = {"outcome": dict(old["outcome"]), "s": {"value": 0.5, "weight": 0.2, "contribution": 0.1}}
    episode = _rollout("t", "p", 0, (), [1.05], {"body": {"reward_breakdown": old}})
    changed, components = compare_rewards(episode, [1.1], new)
    assert changed
    assert components["outcome"]["changed"] is False
    assert components["s"]["delta"] == pytest.approx(0.05)
    assert components["s"]["weight"] == {"old": 0.1, "new": 0.2}
    assert compare_rewards(episode, [1.05], old)[0] is False
    assert compare_rewards(episode, [math.nextafter(1.05, 2.0)], None)[0] is True


def test_fewer_turns_than_recorded_is_a_divergence() -> None:
    """An agent that stops early diverges at the first missing turn."""
    episode = _recording(n_turns=3).episodes[0]
    verdict = judge(
        episode,
        "r",
        divergence=None,
        replayed_turns=2,
        new_rewards=[0.5],
        new_breakdown=None,
        error=None,
        fork_at=None,
    )
    assert (verdict.status, verdict.turn) == ("diverged", 2)


def test_replay_policy_spec_loads_a_cassette_subset(tmp_path: Path) -> None:
    """``replay:CASSETTE#id`` builds a ReplayBackend holding only that trajectory."""
    from agent_kit.replay.cassette import write_cassette

    path = write_cassette(tmp_path / "c.jsonl", _recording())
    backend = load_policy(f"replay:{path}#rec-s0-p0-g1-a0")
    assert isinstance(backend, ReplayBackend)
    assert [e.id for e in backend.recording.episodes] == ["rec-s0-p0-g1-a0"]


# -- e2e: the Counter example --------------------------------------------------------------------

counter_run = recorded_run(
    COUNTER,
    [{"target": 3}, {"target": 4}, {"target": 5}],
    policy=ADDER,
    group_size=2,
    temperature=1.0,
    seed=11,
)


@pytest.fixture(scope="module")
def counter_replay(counter_run: Path) -> ReplayReport:
    """The Counter recording replayed once through the unchanged entrypoint."""
    return asyncio.run(replay_run(counter_run, out_dir=counter_run.parent / "replays"))


def _edited(tmp_path: Path, source: Path, old: str, new: str) -> Path:
    text = source.read_text()
    assert old in text
    target = tmp_path / source.name
    target.write_text(text.replace(old, new))
    return target


def _cli_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, dict[str, Any]]:
    code = main(args)
    captured = capsys.readouterr()
    out = captured.out.strip().splitlines()
    assert out, f"no JSON report (exit {code}): {captured.err[-2000:]}"
    return code, json.loads(out[-1])


def test_counter_replay_is_identical_and_linked(
    counter_run: Path, counter_replay: ReplayReport
) -> None:
    """Every recorded Counter episode replays identically into a new run linked to the original."""
    recording = load_recording(counter_run)
    assert len(recording.episodes) == 6
    assert counter_replay.ok
    assert counter_replay.counts["identical"] == 6
    old = {e.id: e.rewards for e in recording.episodes}
    assert counter_replay.run_dir is not None
    run_dir = Path(counter_replay.run_dir)
    with RunStore.open(run_dir, readonly=True) as store:
        job = store.list_jobs()[0]
        assert job.config["replay_of"]["source"] == str(counter_run.resolve())
        rows = store.list_trajectories()
        assert sorted(r.replay_of for r in rows if r.replay_of) == sorted(old)
        for row in rows:
            reward = store.get_reward(row.id)
            assert reward is not None
            assert tuple(reward.rewards) == old[row.replay_of]
        bodies = store.list_events(kind="invocation")
        assert len(bodies) == 6
        assert all("reward_breakdown" in e.detail["body"] for e in bodies)
    report = json.loads((run_dir / "replay_report.json").read_text())
    assert report["ok"] is True
    assert report["counts"]["identical"] == 6


def test_counter_reward_weight_change_reports_component_deltas(
    counter_replay: ReplayReport, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A changed reward weight → reward_changed per component, no divergence, exit 10."""
    edited = _edited(tmp_path, COUNTER, "-episode.turns / 10, 0.1", "-episode.turns / 10, 0.2")
    assert counter_replay.run_dir is not None
    code, report = _cli_json(
        capsys,
        ["replay", counter_replay.run_dir, "--entrypoint", str(edited), "--in-process", "--json"],
    )
    assert code == 10
    assert report["counts"]["diverged"] == 0
    assert report["counts"]["reward_changed"] == 6
    for episode in report["episodes"]:
        efficiency = episode["components"]["efficiency"]
        assert efficiency["weight"] == {"old": 0.1, "new": 0.2}
        assert efficiency["delta"] == pytest.approx(efficiency["old"])
        assert episode["components"]["outcome"]["changed"] is False
        assert episode["new_reward"] - episode["old_reward"] == pytest.approx(efficiency["delta"])


def test_counter_tool_text_change_diverges_after_the_first_call(
    counter_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Changed tool feedback → divergence at turn 1 with a diff, recorded in the store; exit 10."""
    edited = _edited(tmp_path, COUNTER, 'f"value={self.value}"', 'f"value = {self.value}"')
    code, report = _cli_json(
        capsys,
        ["replay", str(counter_run), "--entrypoint", str(edited), "--json", "--out", str(tmp_path)],
    )
    assert code == 10
    assert report["counts"]["diverged"] == 6
    for episode in report["episodes"]:
        assert episode["turn"] == 1
        assert episode["where"] == "messages[3].content differs"
        assert "+  | value = " in episode["diff"]
    with RunStore.open(report["run_dir"], readonly=True) as store:
        events = store.list_events(kind="replay_divergence")
        assert sorted(e.detail["replay_of"] for e in events) == sorted(
            e["trajectory_id"] for e in report["episodes"]
        )


def test_counter_continue_on_divergence_plays_every_turn(counter_run: Path, tmp_path: Path) -> None:
    """With continue_on_divergence a diverging episode still plays all its recorded turns."""
    edited = _edited(tmp_path, COUNTER, 'f"value={self.value}"', 'f"value: {self.value}"')
    report = asyncio.run(
        replay_run(counter_run, entrypoint=edited, continue_on_divergence=True, out_dir=tmp_path)
    )
    assert not report.ok
    for episode in report.episodes:
        assert episode.status == "diverged"
        assert episode.turn == 1
        assert episode.replayed_turns == episode.recorded_turns


def test_counter_cassette_export_replays_without_the_store(
    counter_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`replay export` writes a cassette that replays identically with the store gone."""
    cassette = tmp_path / "tests" / "counter.cassette.jsonl"
    copy = tmp_path / "run-copy"
    shutil.copytree(counter_run, copy)
    assert main(["replay", "export", str(copy), "--out", str(cassette)]) == 0
    assert "wrote 6 episodes" in capsys.readouterr().out
    shutil.rmtree(copy)
    code, report = _cli_json(
        capsys, ["replay", str(cassette), "--entrypoint", str(COUNTER), "--in-process", "--json"]
    )
    assert code == 0
    assert report["counts"]["identical"] == 6


def test_standalone_replay_policy_reproduces_a_run(counter_run: Path, tmp_path: Path) -> None:
    """`agent-kit run --policy replay:RUN_DIR` on the same prompts reproduces every reward."""
    from agent_kit.driver.config import JobConfig
    from agent_kit.driver.local import run_local

    recording = load_recording(counter_run)
    dataset = next(counter_run.parent.glob("*.prompts.jsonl"))
    config = JobConfig(name="again", policy=f"replay:{counter_run}", group_size=2, temperature=1.0)
    result = asyncio.run(
        run_local(RunConfig(entrypoint=str(COUNTER), dataset=dataset, job=config, out=tmp_path))
    )
    assert result.status == "completed"
    with RunStore.open(result.run_dir, readonly=True) as store:
        got = {
            (r.prompt_index, r.sample_index): store.get_reward(r.id)
            for r in store.list_trajectories()
        }
    for episode in recording.episodes:
        reward = got[(episode.prompt_index, episode.sample_index)]
        assert reward is not None
        assert tuple(reward.rewards) == episode.rewards


def test_assert_replays_passes_and_fails_readably(counter_run: Path, tmp_path: Path) -> None:
    """assert_replays returns the report when identical, else raises with the diff text."""
    assert assert_replays(counter_run, in_process=True).counts["identical"] == 6
    edited = _edited(tmp_path, COUNTER, 'f"value={self.value}"', 'f"value is {self.value}"')
    with pytest.raises(AssertionError, match=r"diverged at turn 1: messages\[3\]\.content") as info:
        assert_replays(counter_run, edited, in_process=True)
    assert "+  | value is" in str(info.value)


# -- e2e: the Wordle example (acceptance) ----------------------------------------------------------


@pytest.fixture(scope="module")
def wordle_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recorded Wordle run: 13 prompts × 4 rollouts of Solver at temperature 0.7."""
    out = tmp_path_factory.mktemp("wordle")
    rows = (WORDLE / "train.jsonl").read_text().splitlines()[:13]
    prompts = [json.loads(r)["prompt"] for r in rows]
    return record(
        WORDLE / "agent.py",
        prompts,
        policy=SOLVER,
        out_dir=out,
        name="wordle",
        group_size=4,
        temperature=0.7,
        seed=5,
        concurrency=16,
    )


@pytest.fixture(scope="module")
def wordle_replay(wordle_run: Path) -> ReplayReport:
    """The Wordle recording replayed through the unchanged entrypoint (two agent processes)."""
    return asyncio.run(replay_run(wordle_run, workers=2, out_dir=wordle_run.parent / "replays"))


def _wordle_copy(tmp_path: Path, old: str, new: str) -> Path:
    target = tmp_path / "wordle"
    target.mkdir()
    (target / "words").symlink_to(WORDLE / "words")
    return _edited(target, WORDLE / "agent.py", old, new)


def test_wordle_replay_is_identical_bit_for_bit(
    wordle_run: Path, wordle_replay: ReplayReport
) -> None:
    """≥ 50 recorded Wordle episodes replay 100% identical with the same rewards bit for bit."""
    recording = load_recording(wordle_run)
    assert len(recording.episodes) == 52
    assert wordle_replay.counts["identical"] == 52
    assert wordle_replay.ok
    by_id = recording.by_id()
    for episode in wordle_replay.episodes:
        assert episode.new_reward == by_id[episode.trajectory_id].reward_total
    assert len({e.reward_total for e in recording.episodes}) > 1  # temperature > 0 varies play


def test_wordle_reward_weight_change_is_reported_per_component(
    wordle_run: Path,
    wordle_replay: ReplayReport,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A changed weight → 'reward changed' (strategy delta, outcome unchanged), no divergence."""
    edited = _wordle_copy(tmp_path, "WEIGHT_SOLVED = 0.04", "WEIGHT_SOLVED = 0.05")
    code, direct = _cli_json(
        capsys, ["replay", str(wordle_run), "--entrypoint", str(edited), "--in-process", "--json"]
    )
    assert code == 10
    assert direct["counts"]["diverged"] == 0
    assert direct["counts"]["reward_changed"] > 0
    assert wordle_replay.run_dir is not None
    code, report = _cli_json(
        capsys,
        ["replay", wordle_replay.run_dir, "--entrypoint", str(edited), "--in-process", "--json"],
    )
    assert code == 10
    assert report["counts"]["diverged"] == 0
    changed = [e for e in report["episodes"] if e["status"] == "reward_changed"]
    assert [e["trajectory_id"] for e in changed] == [
        e["trajectory_id"] for e in report["episodes"] if e["old_reward"] >= 1.0
    ]
    for episode in changed:
        assert episode["components"]["outcome"]["changed"] is False
        strategy = episode["components"]["strategy"]
        assert strategy["weight"] == {"old": 0.04, "new": 0.05}
        assert episode["new_reward"] - episode["old_reward"] == pytest.approx(strategy["delta"])


def test_wordle_feedback_text_change_diverges_at_turn_1(
    wordle_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Changed tool feedback → every episode diverges at the turn after its first guess; exit 10."""
    edited = _wordle_copy(tmp_path, '"Feedback: " + ', '"Feedback -> " + ')
    code, report = _cli_json(
        capsys,
        [
            "replay",
            str(wordle_run),
            "--entrypoint",
            str(edited),
            "--json",
            "--out",
            str(tmp_path),
            "--workers",
            "2",
        ],
    )
    assert code == 10
    turns = {e.id: len(e.turn_rows) for e in load_recording(wordle_run).episodes}
    assert report["counts"]["diverged"] == sum(n > 1 for n in turns.values()) > 40
    for episode in report["episodes"]:
        if turns[episode["trajectory_id"]] == 1:  # solved by the first guess: nothing to diverge
            assert episode["status"] == "identical"
            continue
        assert episode["turn"] == 1
        assert "Feedback -> " in episode["diff"]


def test_wordle_fork_at_turn_2_onto_solver_is_a_linked_run(
    wordle_run: Path, tmp_path: Path
) -> None:
    """Fork at turn 2 onto Solver: a new run linked to the original, first 2 turns replayed."""
    recording = load_recording(wordle_run)
    long = [e.id for e in recording.episodes if len(e.turn_rows) > 2][:6]
    report = asyncio.run(
        replay_run(wordle_run, trajectories=long, fork_at=2, policy=SOLVER, out_dir=tmp_path)
    )
    assert report.ok
    assert report.counts["forked"] == len(long)
    assert report.run_dir is not None
    by_id = recording.by_id()
    with RunStore.open(report.run_dir, readonly=True) as store:
        forked = store.list_jobs()[0].config["forked_from"]
        assert forked["source"] == str(wordle_run.resolve())
        assert (forked["fork_at"], forked["policy"]) == (2, SOLVER)
        for row in store.list_trajectories():
            assert row.replay_of in long
            assert row.state == "REWARDED"
            turns = store.list_turns(row.id)
            original = by_id[row.replay_of].turn_rows
            assert [t.response for t in turns[:2]] == [t.response for t in original[:2]]
            assert len(turns) > 2


def test_cli_replay_group_routes_run_dir_and_subcommands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`replay PATH` means `replay run PATH`; `replay export` is a subcommand; errors exit 2."""
    assert main(["replay", "--help"]) == 0
    assert "export" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "agent_kit.cassette/1", "created_at": "x", "episodes": 1}\n{oops\n')
    assert main(["replay", str(bad), "--in-process"]) == 2
    assert "line 2: not valid JSON" in capsys.readouterr().err
    assert main(["replay", "run", str(bad), "--in-process"]) == 2
    assert "line 2" in capsys.readouterr().err
    assert main(["replay", "export", str(tmp_path / "missing"), "--out", str(bad)]) == 2
    assert "no run store" in capsys.readouterr().err


class _BrokenLive(_Live):
    """A live backend stand-in whose close fails."""

    async def aclose(self) -> None:
        """Fail to close."""
        raise RuntimeError("close failed")


async def test_a_failing_backend_close_is_logged_at_debug_with_the_job(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Closing a replay backend that raises does not raise; a debug record names the job."""
    from agent_kit.replay.engine import _close_backend

    backend = ReplayBackend(_recording(), fork_at=1, live=_BrokenLive())
    with caplog.at_level(logging.DEBUG, logger="agent_kit.replay"):
        await _close_backend(backend, "replay-job-7")
    (record_,) = [r for r in caplog.records if r.name == "agent_kit.replay"]
    assert record_.levelno == logging.DEBUG
    assert "replay-job-7" in record_.getMessage()
    assert record_.exc_info is not None


def test_the_replay_face_exports_the_python_api() -> None:
    """replay_run and replay_in_process (and the report types) come from the replay face."""
    import agent_kit.replay as face
    from agent_kit.replay import engine, inprocess, verdicts

    assert face.replay_run is engine.replay_run
    assert face.replay_in_process is inprocess.replay_in_process
    assert face.ReplayReport is verdicts.ReplayReport
    assert "replay_in_process" not in engine.__all__
