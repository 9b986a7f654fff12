"""Cassettes: the compact, versioned JSONL export of recorded episodes
(agent_kit.replay.cassette)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_kit.errors import UsageError
from agent_kit.replay.cassette import (
    CASSETTE_FORMAT,
    load_recording,
    open_recording,
    read_cassette,
    write_cassette,
)
from agent_kit.replay.recording import Recording
from agent_kit.store import RewardRow, Rollout, RunStore, TrajectoryRow, TurnRow
from agent_kit.store.records import turn_totals_of

JOB_ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/job"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add n to the counter.",
            "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
        },
    }
]


def _completion(content: str | None, call: tuple[str, str] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if call is not None:
        message["tool_calls"] = [
            {"id": call[0], "type": "function", "function": {"name": "add", "arguments": call[1]}}
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "default",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
    }


def _episode(tid: str = "job-s0-p0-g0-a0", turns: int = 3, reward: float = 0.7) -> Rollout:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": [{"type": "text", "text": "Reach 3 by calling add."}]},
    ]
    recorded = []
    for i in range(turns):
        last = i == turns - 1
        response = _completion("done" if last else None, None if last else (f"call_{i}", '{"n":1}'))
        request = {"model": "default", "temperature": 0.7, "messages": list(messages)}
        request["tools"] = TOOLS
        recorded.append(
            TurnRow(tid, i, "/v1/chat/completions", request, response, 10 + i, 3, True, 0.0)
        )
        if not last:
            messages.append(
                {
                    "role": "assistant",
                    "tool_calls": response["choices"][0]["message"]["tool_calls"],
                }
            )
            messages.append(
                {"role": "tool", "tool_call_id": f"call_{i}", "content": f"value={i + 1}"}
            )
    breakdown = {"outcome": {"value": 1.0, "weight": 1.0, "contribution": 1.0}}
    return Rollout(
        trajectory=TrajectoryRow(
            id=tid,
            job_arn=JOB_ARN,
            state="REWARDED",
            prompt='{"target": 3}',
            payload={"inferenceParams": {"temperature": 0.7, "topP": 1.0, "maxTokens": 64}},
            step=0,
            prompt_index=0,
            sample_index=int(tid[-4]) if tid[-4].isdigit() else 0,
        ),
        reward_row=RewardRow(tid, [reward], reward, None, None, 0.0),
        usage=turn_totals_of(recorded),
        invocation={"body": {"reward_breakdown": breakdown}},
        turn_rows=tuple(recorded),
    )


def _recording(tmp_path: Path, episodes: list[Rollout]) -> Recording:
    agent = tmp_path / "project" / "agent.py"
    agent.parent.mkdir(parents=True, exist_ok=True)
    agent.write_text("app = None\n")
    return Recording(
        source=tmp_path / "run",
        kind="run",
        episodes=tuple(episodes),
        entrypoint=agent,
        job_arn=JOB_ARN,
        job_name="job",
        job={"policy": "scripted:p.py:P", "temperature": 0.7},
    )


def test_roundtrip_keeps_every_request_response_and_reward(tmp_path: Path) -> None:
    """A written cassette reads back to the same turns (full requests), usage and rewards."""
    episodes = [_episode("job-s0-p0-g0-a0"), _episode("job-s0-p0-g1-a0", turns=2, reward=-0.25)]
    recording = _recording(tmp_path, episodes)
    path = write_cassette(tmp_path / "project" / "tests" / "golden.jsonl", recording)
    back = read_cassette(path)
    assert back.kind == "cassette"
    assert back.episodes == recording.episodes
    assert back.entrypoint == (tmp_path / "project" / "agent.py").resolve()
    assert back.job == recording.job
    assert back.job_name == "job"


def test_turns_store_only_what_changed(tmp_path: Path) -> None:
    """Later turns carry only new messages and no repeated request fields (compact)."""
    path = write_cassette(tmp_path / "c.jsonl", _recording(tmp_path, [_episode(turns=3)]))
    lines = path.read_text().splitlines()
    header, episode = json.loads(lines[0]), json.loads(lines[1])
    assert header["format"] == CASSETTE_FORMAT
    assert header["episodes"] == 1
    assert header["entrypoint"] == "project/agent.py"
    first, second, third = episode["turns"]
    assert first["keep"] == 0
    assert len(first["messages"]) == 2
    assert first["request"]["tools"] == TOOLS
    assert second["keep"] == 2
    assert [m["role"] for m in second["messages"]] == ["assistant", "tool"]
    assert second["request"] is None
    assert third["request"] is None


def test_entrypoint_resolves_relative_to_a_moved_cassette(tmp_path: Path) -> None:
    """The entrypoint is stored relative to the cassette, so a moved project still resolves."""
    write_cassette(tmp_path / "project" / "golden.jsonl", _recording(tmp_path, [_episode()]))
    moved = tmp_path / "elsewhere"
    (tmp_path / "project").rename(moved)
    assert read_cassette(moved / "golden.jsonl").entrypoint == (moved / "agent.py").resolve()


def _write_lines(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def _valid_lines(tmp_path: Path) -> list[Any]:
    path = write_cassette(tmp_path / "ok.jsonl", _recording(tmp_path, [_episode()]))
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_bad_json_names_the_line(tmp_path: Path) -> None:
    """A line that is not JSON is reported with its line number."""
    header, _ = _valid_lines(tmp_path)
    path = _write_lines(tmp_path / "bad.jsonl", [header, "{not json"])
    with pytest.raises(UsageError, match=r"line 2: not valid JSON"):
        read_cassette(path)


def test_unknown_format_is_refused(tmp_path: Path) -> None:
    """A header with another format version is refused, naming the version it reads."""
    header, episode = _valid_lines(tmp_path)
    path = _write_lines(
        tmp_path / "v2.jsonl", [{**header, "format": "agent_kit.cassette/2"}, episode]
    )
    with pytest.raises(UsageError, match=r"line 1: not an agent_kit cassette.*cassette/1"):
        read_cassette(path)


def test_missing_field_names_line_and_field(tmp_path: Path) -> None:
    """A schema violation names the line and the field path."""
    header, episode = _valid_lines(tmp_path)
    del episode["turns"][0]["response"]
    path = _write_lines(tmp_path / "missing.jsonl", [header, episode])
    with pytest.raises(UsageError, match=r"line 2: turns\.0\.response: Field required"):
        read_cassette(path)


def test_inconsistent_keep_is_refused(tmp_path: Path) -> None:
    """A turn keeping more messages than the previous turn had is a line error."""
    header, episode = _valid_lines(tmp_path)
    episode["turns"][1]["keep"] = 99
    path = _write_lines(tmp_path / "keep.jsonl", [header, episode])
    with pytest.raises(UsageError, match=r"line 2: turns\[1\]\.keep is 99"):
        read_cassette(path)


def test_truncated_file_is_detected(tmp_path: Path) -> None:
    """Fewer episode lines than the header announces is an error, not a silent subset."""
    path = write_cassette(
        tmp_path / "two.jsonl", _recording(tmp_path, [_episode(), _episode("job-s0-p0-g1-a0")])
    )
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")
    with pytest.raises(UsageError, match=r"announces 2 episodes but the file holds 1"):
        read_cassette(path)


def test_non_finite_reward_is_refused_on_write_and_nothing_is_left(tmp_path: Path) -> None:
    """Writing a NaN reward fails with UsageError and leaves no partial file behind."""
    bad = _episode(reward=float("nan"))
    target = tmp_path / "nan.jsonl"
    with pytest.raises(UsageError, match="cannot write cassette"):
        write_cassette(target, _recording(tmp_path, [bad]))
    assert list(tmp_path.glob("nan.jsonl*")) == []


def test_load_recording_reads_finished_trajectories_from_a_run_store(tmp_path: Path) -> None:
    """A run store yields only finished (REWARDED/FAILED) trajectories, with turns and rewards."""
    arn = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/j"
    with RunStore.open(tmp_path / "run") as store:
        store.create_job(arn, "j", {"job": {"seed": 4}, "entrypoint": "/abs/agent.py"})
        for tid, state in (("j-a", "REWARDED"), ("j-b", "TIMED_OUT"), ("j-c", "FAILED")):
            store.create_trajectory(TrajectoryRow(tid, arn, state, '{"t": 1}'))
            store.add_turn(
                TurnRow(tid, 0, "/sample", {"messages": []}, _completion("x"), 5, 1, False, 1.0)
            )
        store.set_reward("j-a", [0.5], None, None)
        store.add_event(
            "invocation", {"body": {"reward": 0.5, "reward_breakdown": {"o": {"value": 1}}}}, "j-a"
        )
    recording = load_recording(tmp_path / "run")
    assert [e.id for e in recording.episodes] == ["j-a", "j-c"]
    first = recording.episodes[0]
    assert first.rewards == (0.5,)
    assert first.reward_breakdown == {"o": {"value": 1}}
    assert recording.episodes[1].rewards is None
    assert recording.entrypoint == Path("/abs/agent.py")
    assert recording.job == {"seed": 4}
    assert [e.id for e in load_recording(tmp_path / "run", ["j-c"]).episodes] == ["j-c"]
    with pytest.raises(UsageError, match="no replayable trajectory j-b"):
        load_recording(tmp_path / "run", ["j-b"])


def test_missing_source_is_a_usage_error(tmp_path: Path) -> None:
    """A path with neither a run store nor a cassette gives a clear UsageError."""
    with pytest.raises(UsageError, match="no run store"):
        load_recording(tmp_path / "nothing")
    with pytest.raises(UsageError, match="no cassette"):
        load_recording(tmp_path / "nothing.jsonl")


def test_first_turn_without_request_fields_is_refused(tmp_path: Path) -> None:
    """A first turn with no request fields (nothing to carry over) is a line error, not a crash."""
    header, episode = _valid_lines(tmp_path)
    episode["turns"][0]["request"] = None
    path = _write_lines(tmp_path / "norequest.jsonl", [header, episode])
    with pytest.raises(UsageError, match=r"line 2: turns\[0\]\.request is missing"):
        read_cassette(path)


def test_open_recording_takes_a_path_or_a_loaded_recording(tmp_path: Path) -> None:
    """open_recording loads a cassette path and selects from an already loaded Recording alike."""
    two = _recording(tmp_path, [_episode(), _episode("job-s0-p0-g1-a0")])
    path = write_cassette(tmp_path / "two.jsonl", two)
    from_path = open_recording(path, ["job-s0-p0-g1-a0"])
    from_object = open_recording(two, limit=1)
    assert [e.id for e in from_path.episodes] == ["job-s0-p0-g1-a0"]
    assert [e.id for e in from_object.episodes] == ["job-s0-p0-g0-a0"]
    with pytest.raises(UsageError, match="no replayable trajectory nope"):
        open_recording(two, ["nope"])


def test_recording_episodes_are_the_store_records_of_finished_rollouts() -> None:
    """A recording's episodes are the store's Rollout records; finished states replay.

    (Where each name is imported from is tests/test_public_api.py's rule.)"""
    from agent_kit.replay import recording

    assert recording.Rollout is Rollout  # episodes are the store's record
    assert {"REWARDED", "FAILED"} == recording.REPLAYABLE_STATES
