"""The warm start's inputs, limits and failures: what is refused before the model loads, an
example longer than the limit, a run recorded by another agent, a disk that fills while the warm
adapter is saved.

Recorded runs are written straight into a run store (one rewarded rollout of one turn); the
model is the tiny random one (tests/hf_tiny.py). ``load_model`` is replaced by a function that
fails the test where the model must not load at all.
"""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent_kit.cli import main
from agent_kit.driver.config import RunConfig
from agent_kit.errors import UsageError
from agent_kit.model.loading import load_model, parse_model_spec
from agent_kit.store import RunStore
from agent_kit.store.rows import TrajectoryRow, TurnRow
from agent_kit.train import session
from agent_kit.train.checks import check_inputs, check_warm_start
from agent_kit.train.config import TrainConfig
from agent_kit.train.warm import _max_tokens
from agent_kit.train.warm_data import warm_examples

AGENT = str(Path(__file__).parents[1] / "agents" / "submit_agent.py")
ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/expert"
#: About 9,200 tokens in SmolLM2's tokenizer: a 4,600-word reply, beyond the tiny model's context.
LONG = " ".join(f"word{i % 7} and" for i in range(4600))


def _record(run: Path, *, reply: str = "done", tool: str = "", entrypoint: str = AGENT) -> Path:
    """A run directory whose store holds one job and one rewarded rollout of one turn (a tool
    result ``tool`` before the reply, when given)."""
    with RunStore.open(run) as store:
        store.create_job(ARN, "expert", {"entrypoint": entrypoint, "job": {"steps": 1}})
        store.create_trajectory(TrajectoryRow(id="t0", job_arn=ARN, state="OPEN", prompt="{}"))
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        if tool:
            call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            messages += [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c", "content": tool},
            ]
        response = {"choices": [{"message": {"role": "assistant", "content": reply}}]}
        request = {"messages": messages}
        store.add_turn(TurnRow("t0", 0, "/v1/chat/completions", request, response, 0, 0, True, 1))
        store.set_reward("t0", [1.0], None, None, state="REWARDED")
    return run


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps({"prompt": "{}"}) + "\n", encoding="utf-8")
    return path


def _argv(tmp_path: Path, *extra: str, model: str = "smollm2-135m") -> list[str]:
    return [
        "train", AGENT, "--dataset", str(_data(tmp_path)), "--out", str(tmp_path / "runs"),
        "--name", "t", "--batch-size", "1", "--group-size", "2", "--steps", "1",
        "--device", "cpu", "--model", model, *extra,
    ]  # fmt: skip


def _error_line(err: str) -> str:
    assert "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    return line


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the model fails the test: what is checked must be checked before."""

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("the model was loaded before the inputs were checked")

    monkeypatch.setattr(session, "load_model", refuse)


@pytest.mark.usefixtures("no_model")
@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("no-store", "not a run directory (no run.sqlite)"),
        ("no-job", "its store holds no job"),
        ("nan", "--warm-start-min-reward must be a finite number, got nan"),
        ("batch", "AGENT_KIT_HF_BATCH must be an integer, not 'many'"),
    ],
)
def test_warm_start_inputs_are_refused_before_the_model_loads(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
    words: str,
) -> None:
    """A directory without a store, a store without a job (was an IndexError traceback), a NaN
    minimum reward, a bad ``AGENT_KIT_HF_BATCH``: one line, exit 2, no run directory."""
    recorded = tmp_path / "expert"
    recorded.mkdir()
    if case == "no-job":
        RunStore.open(recorded).close()
    elif case in ("nan", "batch"):
        _record(recorded)
    extra = ["--warm-start", str(recorded)]
    extra += ["--warm-start-min-reward", "nan"] if case == "nan" else []
    if case == "batch":
        monkeypatch.setenv("AGENT_KIT_HF_BATCH", "many")
    assert main(_argv(tmp_path, *extra)) == 2
    line = _error_line(capsys.readouterr().err)
    assert words in line
    assert not (tmp_path / "runs" / "t").exists()


def test_a_store_without_a_job_is_a_usage_error_in_warm_examples(tmp_path: Path) -> None:
    RunStore.open(tmp_path / "empty").close()
    with pytest.raises(UsageError, match="holds no job"):
        warm_examples([tmp_path / "empty"], tokenizer=None)


def test_the_recorded_run_is_checked_once_and_its_job_handed_on(
    tiny_model: Path, tmp_path: Path
) -> None:
    """check_inputs hands on each warm-start run checked (its last job, its entrypoint); the
    examples read that job's rollouts without checking the run again, so a job recorded after
    the check is not the one learned from (a fresh check would take it, and find nothing)."""
    recorded = _record(tmp_path / "expert")
    data = tmp_path / "four.jsonl"
    data.write_text((json.dumps({"prompt": "{}"}) + "\n") * 4, encoding="utf-8")
    config = TrainConfig(run=RunConfig(entrypoint=AGENT, dataset=data), warm_start=(recorded,))
    inputs = check_inputs(config)
    (checked,) = inputs.warm_start
    assert (checked.path, checked.job.arn, checked.entrypoint) == (recorded, ARN, AGENT)
    with RunStore.open(recorded) as store:
        store.create_job(ARN + "-later", "later", {"entrypoint": AGENT})
    tokenizer = load_model(parse_model_spec(str(tiny_model)), "cpu").tokenizer
    assert len(warm_examples(inputs.warm_start, tokenizer).examples) == 1
    with pytest.raises(UsageError, match="no rewarded rollout"):
        warm_examples([recorded], tokenizer)


@pytest.mark.usefixtures("no_model")
def test_a_run_recorded_by_another_entrypoint_is_named_before_the_model_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another agent's run: a warning line naming both entrypoints, before the model loads
    (here the load is where the test stops). The same agent, or a copy of it elsewhere: none."""
    other = _record(tmp_path / "other", entrypoint="/elsewhere/billing_agent.py")
    copy = tmp_path / "moved" / "submit_agent.py"
    copy.parent.mkdir()
    copy.write_bytes(Path(AGENT).read_bytes())
    same = _record(tmp_path / "same", entrypoint=str(copy))
    with pytest.raises(AssertionError, match="model was loaded"):
        main(_argv(tmp_path, "--warm-start", str(other), "--warm-start", str(same)))
    err = capsys.readouterr().err
    warnings = [x for x in err.splitlines() if x.startswith("warning:")]
    assert len(warnings) == 1
    assert str(other) in warnings[0]
    assert "/elsewhere/billing_agent.py" in warnings[0]
    assert str(Path(AGENT).resolve()) in warnings[0]


def test_a_9k_token_reply_is_cut_to_the_context_and_a_long_prompt_skipped(
    tiny_model: Path, tmp_path: Path
) -> None:
    """A recorded 4,600-word reply (≈ 9.2k tokens) is cut to the tiny model's 4,096 positions
    with a line; a 9k-token tool result before the reply leaves no reply token: skipped with a
    line, and a warm start of nothing else says why."""
    loaded = load_model(parse_model_spec(str(tiny_model)), "cpu")
    assert len(loaded.tokenizer(LONG, add_special_tokens=False)["input_ids"]) > 9000
    limit = _max_tokens(loaded)
    assert limit == 4096
    long = _record(tmp_path / "long", reply=LONG)
    examples = warm_examples([long], loaded.tokenizer, max_tokens=limit)
    (example,) = examples.examples
    assert len(example) == 4096
    (note,) = examples.notes
    assert "cut long/t0 turn 0" in note
    assert "to 4096 tokens" in note
    assert _max_tokens(loaded, 256) == 256
    with pytest.raises(UsageError, match="longer than 4096 tokens before their first"):
        warm_examples([_record(tmp_path / "tool", tool=LONG)], loaded.tokenizer, max_tokens=limit)


@pytest.mark.parametrize("kind", ["oserror", "safetensors"])
def test_a_full_disk_while_the_warm_adapter_is_saved_is_one_line_exit_14(
    tiny_model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kind: str,
) -> None:
    """The save writes part of the adapter, then the disk is full (OSError ENOSPC, or the
    SafetensorError safetensors raises for it): one line, exit 14, and the new run leaves
    nothing (no adapter, no ``.partial``, no ``trainer/warm``, no ``run.lock``). A boundary no
    test can reach with a real disk, so the save is made to fail. The example is a 9k-token
    reply cut by ``--max-length 64``."""
    import peft
    from safetensors import SafetensorError

    def full(self: Any, folder: str, **_: Any) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "adapter_model.safetensors").write_bytes(b"\0" * 10)
        if kind == "oserror":
            raise OSError(errno.ENOSPC, "No space left on device")
        raise SafetensorError("Error while serializing: IoError(No space left on device)")

    monkeypatch.setattr(peft.PeftModel, "save_pretrained", full)
    recorded = _record(tmp_path / "expert", reply=LONG)
    extra = ["--warm-start", str(recorded), "--warm-start-epochs", "1", "--max-length", "64"]
    assert main(_argv(tmp_path, *extra, model=str(tiny_model))) == 14
    err = capsys.readouterr().err
    line = _error_line(err)
    assert "cannot save adapter" in line
    assert "run the same command again" in line
    assert "warm start: cut expert/t0 turn 0" in err
    assert not (tmp_path / "runs" / "t").exists()


def test_max_length_is_a_checked_train_setting() -> None:
    config = TrainConfig(run=RunConfig(), max_length=8)
    with pytest.raises(UsageError, match=r"--max-length must be 32\.\.131072, got 8"):
        config.check()
    recorded = TrainConfig(run=RunConfig(), max_length=64).to_dict()
    assert TrainConfig.from_dict(recorded).max_length == 64


def test_a_warm_start_leaves_its_adapter_and_no_scratch_folder(
    tiny_model: Path, tmp_path: Path
) -> None:
    """After the fine-tune: ``adapters/warm`` whole, no ``.partial`` and no ``trainer/warm``."""
    from agent_kit.store.layout import RunLayout
    from agent_kit.train.warm import prepare_warm_start

    loaded = load_model(parse_model_spec(str(tiny_model)), "cpu")
    run = tmp_path / "run"
    run.mkdir()
    config = TrainConfig(
        run=RunConfig(), warm_start=(_record(tmp_path / "rec"),), warm_start_epochs=1
    )
    adapter, _ = prepare_warm_start(config, loaded, run, lambda _: None)
    assert adapter == RunLayout(run).warm_adapter
    assert (adapter / "adapter_model.safetensors").is_file()
    assert not (RunLayout(run).trainer / "warm").exists()
    assert not adapter.with_name("warm.partial").exists()


@pytest.mark.e2e
def test_wordle_episodes_offered_to_the_echo_agent_are_named_though_both_are_agent_py(
    tmp_path: Path,
) -> None:
    """Two ``agent.py`` files are not one agent: Wordle episodes (a recorded run, its tools and
    system prompt) offered to warm-start the echo agent give a warning line saying what
    differs; offered to the Wordle agent itself, or to an edited copy of it under another name
    (the same tools and system prompt), none."""
    from helpers import play_wordle, wordle_config

    root = Path(__file__).resolve().parents[2]
    dataset = tmp_path / "one.jsonl"
    rows = (root / "examples" / "wordle" / "train.jsonl").read_text().splitlines()[:1]
    dataset.write_text(rows[0] + "\n", encoding="utf-8")
    wordle = play_wordle(dataset, tmp_path / "runs", wordle_config("w", group_size=2))
    echo = root / "examples" / "echo" / "agent.py"
    shutil.copytree(root / "examples" / "wordle", tmp_path / "moved")
    copy = tmp_path / "moved" / "wordle_agent.py"  # another name, other bytes: the same agent
    copy.write_bytes((root / "examples" / "wordle" / "agent.py").read_bytes() + b"# edited\n")

    def lines(entrypoint: Path) -> list[str]:
        run = RunConfig(entrypoint=str(entrypoint), dataset=dataset)
        return check_warm_start(TrainConfig(run=run, warm_start=(wordle,)))[1]

    (line,) = lines(echo)
    assert line.startswith(f"warning: --warm-start {wordle} was recorded with another agent")
    assert "tools" in line
    assert "system prompt" in line
    assert str(echo.resolve()) in line
    assert lines(root / "examples" / "wordle" / "agent.py") == []
    assert lines(copy) == []
