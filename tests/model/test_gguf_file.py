"""A ``.gguf`` file cut short (a download that stopped, a copy to a full disk) is one line, exit
5, wherever a model is named: ``train --model`` and ``--policy hf:``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_kit.cli import main
from agent_kit.emulator.policies import load_policy
from agent_kit.errors import PolicyError
from agent_kit.model.gguf import check_gguf, default_model_path
from agent_kit.model.loading import parse_model_spec

AGENT = str(Path(__file__).parents[1] / "agents" / "submit_agent.py")


def _cut(tmp_path: Path, size: int) -> Path:
    path = tmp_path / f"cut-{size}.gguf"
    with default_model_path().open("rb") as f:
        path.write_bytes(f.read(size))
    return path


def test_the_packaged_model_has_a_whole_header() -> None:
    check_gguf(default_model_path())


@pytest.mark.parametrize("size", [4, 9, 40, 5000, 1 << 20])
def test_a_gguf_shorter_than_its_header_is_one_line(tmp_path: Path, size: int) -> None:
    """Cut in the version, the counts, a metadata entry or the vocabulary: a PolicyError that
    names the file and what to do, before any loader runs."""
    path = _cut(tmp_path, size)
    with pytest.raises(PolicyError) as caught:
        parse_model_spec(str(path))
    message = str(caught.value)
    assert str(path) in message
    assert "\n" not in message
    assert "download or convert it again" in message


def test_train_and_the_hf_policy_refuse_a_cut_gguf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``train --model`` exits 5 with one ``error:`` line and leaves no run directory;
    ``--policy hf:`` raises the same PolicyError."""
    path = _cut(tmp_path, 9)
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"prompt": "{}"}) + "\n", encoding="utf-8")
    argv = [
        "train", AGENT, "--dataset", str(data), "--model", str(path), "--out",
        str(tmp_path / "runs"), "--name", "t", "--batch-size", "1", "--device", "cpu",
    ]  # fmt: skip
    assert main(argv) == 5
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert str(path) in line
    assert not (tmp_path / "runs" / "t").exists()
    with pytest.raises(PolicyError, match="not a whole GGUF model file"):
        load_policy(f"hf:{path}")
