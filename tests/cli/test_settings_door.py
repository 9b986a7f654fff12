"""The CLI's door: the root command reads the ``AGENT_KIT_*`` variables once, before any command,
and the commands hand them down (docs/settings.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_kit.cli import main

AGENTS = Path(__file__).parents[1] / "agents"
BIG = str(AGENTS / "big_answer_agent.py")


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("AGENT_KIT_HF_BATCH", "many", "AGENT_KIT_HF_BATCH must be an integer, not 'many'"),
        ("AGENT_KIT_MAX_LOG_BYTES", "-5", "AGENT_KIT_MAX_LOG_BYTES must be at least 0, not -5"),
        ("AGENT_KIT_MALLOC", "tcmalloc", "AGENT_KIT_MALLOC must be one of bounded, glibc"),
    ],
)
def test_a_bad_variable_is_one_error_line_and_exit_2(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    value: str,
    words: str,
) -> None:
    """Any command (here ``report``, which uses none of them) refuses a malformed CLI variable
    before it runs: one ``error:`` line naming it, exit 2."""
    monkeypatch.setenv(name, value)
    assert main(["report", str(tmp_path)]) == 2
    lines = _error_lines(capsys.readouterr().err)
    assert len(lines) == 1
    assert lines[0].startswith("error: ")
    assert words in lines[0]


def test_the_agents_variables_are_not_the_clis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed variable only the agent reads (``AGENT_KIT_PORT``) does not stop the CLI: the
    command runs and fails for its own reason."""
    monkeypatch.setenv("AGENT_KIT_PORT", "eighty")
    code = main(["report", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert code != 0
    assert "AGENT_KIT_PORT" not in err
    assert "nowhere" in err


@pytest.mark.e2e
def test_the_settings_reach_the_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``AGENT_KIT_MAX_ANSWER_BYTES`` read at the door caps what ``run`` reads of each agent
    answer: the agent's 1 MB answers go over 4096 bytes and the run names that cap."""
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": json.dumps({"big": 1})}) + "\n")
    monkeypatch.setenv("AGENT_KIT_MAX_ANSWER_BYTES", "4096")
    argv = ["run", BIG, "--dataset", str(data), "--group-size", "2", "--out", str(tmp_path)]
    assert main([*argv, "--name", "capped", "--max-retries", "0", "--json"]) == 0
    out = capsys.readouterr().out
    assert "answer exceeded the limit of 4096 bytes (AGENT_KIT_MAX_ANSWER_BYTES)" in out
