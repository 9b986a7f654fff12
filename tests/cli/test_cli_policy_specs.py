"""Relative ``scripted:`` specs: a run stores them absolute (and the directory it was started
in), so ``run --resume`` and ``doctor reward`` load the same file from any directory; an old
run's relative spec is read against its recorded directory, else one clear line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agent_kit.cli import main
from agent_kit.driver.config import JobConfig, recorded_spec, resolve_spec
from agent_kit.errors import UsageError
from agent_kit.store import RunStore

GOOD = str(Path(__file__).parents[1] / "agents" / "good_agent.py")


def _project(root: Path) -> Path:
    """A directory holding a scripted policy ``pol.py:P`` and a one-row dataset."""
    root.mkdir()
    (root / "pol.py").write_text("def P(request):\n    return 'hello'\n")
    (root / "d.jsonl").write_text(json.dumps({"prompt": json.dumps({"turns": 1})}) + "\n")
    return root


def _record(run_dir: Path, **changes: object) -> dict[str, object]:
    """The job's recorded config, with ``changes`` written into it (``None`` drops a key) and
    the job set back to running so ``--resume`` loads its policy again."""
    conn = sqlite3.connect(run_dir / "run.sqlite")
    config = json.loads(conn.execute("SELECT config FROM jobs").fetchone()[0])
    for key, value in changes.items():
        if key == "policy":
            config["job"]["policy"] = value
        elif value is None:
            config.pop(key, None)
        else:
            config[key] = value
    conn.execute("UPDATE jobs SET config = ?, status = 'running'", (json.dumps(config),))
    conn.commit()
    conn.close()
    return dict(config)


def _recorded_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    project = _project(tmp_path / "proj")
    monkeypatch.chdir(project)
    argv = ["run", GOOD, "--dataset", "d.jsonl", "--policy", "scripted:pol.py:P"]
    assert main([*argv, "--group-size", "2", "--name", "r", "--json"]) == 0
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return project / "runs" / "r"


@pytest.mark.e2e
def test_a_relative_scripted_spec_is_stored_absolute_and_resumes_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run records ``scripted:/abs/proj/pol.py:P`` and the directory it was started in;
    ``run --resume`` from another directory loads that file (exit 0)."""
    run_dir = _recorded_run(tmp_path, monkeypatch)
    with RunStore.open(run_dir, readonly=True) as store:
        (job,) = store.list_jobs()
    project = (tmp_path / "proj").resolve()
    assert job.config["job"]["policy"] == f"scripted:{project / 'pol.py'}:P"
    assert job.config["cwd"] == str(project)
    _record(run_dir)
    capsys.readouterr()
    assert main(["run", "--resume", str(run_dir), "--json"]) == 0, capsys.readouterr().err


@pytest.mark.e2e
def test_an_old_relative_spec_reads_against_the_recorded_directory_else_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run recorded before specs were stored absolute: with its directory recorded, the
    spec is read against it; without, from another directory, one line saying where to run
    from (exit 2); from the run's own directory it resumes as it always did."""
    run_dir = _recorded_run(tmp_path, monkeypatch)
    _record(run_dir, policy="scripted:pol.py:P")
    capsys.readouterr()
    assert main(["run", "--resume", str(run_dir), "--json"]) == 0, capsys.readouterr().err
    _record(run_dir, policy="scripted:pol.py:P", cwd=None)
    assert main(["run", "--resume", str(run_dir), "--json"]) == UsageError.exit_code
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "recorded the policy 'scripted:pol.py:P' relative to the directory" in err
    assert err.strip().endswith("run this command from the directory the run was started in")
    monkeypatch.chdir(tmp_path / "proj")
    assert main(["run", "--resume", str(run_dir), "--json"]) == 0, capsys.readouterr().err


def test_spec_resolution_rules(tmp_path: Path) -> None:
    """Only ``scripted:`` file parts change; absolute ones and other schemes stay as typed;
    a recorded config resolves its auxiliary policy too."""
    base = tmp_path.resolve()
    assert resolve_spec("scripted:a/p.py:P", base) == f"scripted:{base / 'a' / 'p.py'}:P"
    for spec in ("random", "random:3", "openai:http://h:1/v1#m", f"scripted:{base}/p.py:P"):
        assert resolve_spec(spec, base) == spec
    record = {"job": {"aux_policy": "scripted:j.py:J"}, "cwd": str(base)}
    config = JobConfig.from_record(record, tmp_path)
    assert config.aux_policy == f"scripted:{base / 'j.py'}:J"
    assert recorded_spec("scripted:j.py:J", record, tmp_path) == config.aux_policy
