"""Project files for the npm AgentCore CLI, in process: agentcore.json, names, the runtime wheel.

The CLI itself runs in tests/deploy/test_agentcore_cli.py; these tests pin what agent_kit
writes: the ``AgentCoreProjectSpec`` fields and rules of the CLI's own types
(``agentcore/.llm-context/agentcore.ts`` of ``@aws/agentcore`` 0.30.0), the update rules of
``write_project`` and the contents of the runtime-half wheel.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path

import pytest
import tomllib
from helpers import MINIMAL_AGENT as AGENT

import agent_kit
from agent_kit.cli import main
from agent_kit.deploy.agentcore_cli import (
    PROJECT_NAME_PATTERN,
    build_runtime_wheel,
    project_name,
    python_runtime,
    runtime_entry,
    runtime_wheel_name,
    write_project,
)
from agent_kit.deploy.package import package
from agent_kit.deploy.staging import runtime_modules
from agent_kit.errors import DeployError, UsageError

#: Arrays AgentCoreProjectSpec requires (the CLI's types mark them without ``?``).
REQUIRED = {
    "runtimes",
    "memories",
    "knowledgeBases",
    "credentials",
    "evaluators",
    "onlineEvalConfigs",
    "agentCoreGateways",
    "policyEngines",
    "configBundles",
    "abTests",
    "harnesses",
}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ticket_triage", "tickettriage"),
        ("wordle", "wordle"),
        ("a_" * 30, "a" * 23),
        ("_9", "agent9"),
    ],
)
def test_project_name_follows_the_cli_rule(name: str, expected: str) -> None:
    """Project names drop underscores and hyphens, start with a letter and keep 23 characters."""
    assert project_name(name) == expected
    assert PROJECT_NAME_PATTERN.match(expected)


def test_python_runtime_names_and_refusals() -> None:
    """3.10..3.14 map to PYTHON_3_10..PYTHON_3_14; another version is a usage error."""
    assert python_runtime("3.11") == "PYTHON_3_11"
    assert python_runtime("3.14") == "PYTHON_3_14"
    with pytest.raises(UsageError, match=r"Python 3\.9 is not an AgentCore runtime"):
        python_runtime("3.9")


def test_runtime_entry_refuses_a_hyphenated_name() -> None:
    """A runtime name outside [a-zA-Z][a-zA-Z0-9_]{0,47} is refused with the pattern."""
    with pytest.raises(UsageError, match=r"\[a-zA-Z\]\[a-zA-Z0-9_\]"):
        runtime_entry("my-agent", "agent.py")


def test_write_project_creates_a_complete_spec(tmp_path: Path) -> None:
    """A new project holds every required array, the runtime, and an empty targets list."""
    path = write_project(tmp_path, runtime_entry("ticket_triage", "agent.py", python="3.12"))
    spec = json.loads(path.read_text())
    assert path == tmp_path / "agentcore" / "agentcore.json"
    assert set(spec) >= REQUIRED
    assert (spec["name"], spec["version"], spec["managedBy"]) == ("tickettriage", 1, "CDK")
    assert spec["runtimes"] == [
        {
            "name": "ticket_triage",
            "build": "CodeZip",
            "entrypoint": "agent.py",
            "codeLocation": "./",
            "runtimeVersion": "PYTHON_3_12",
            "networkMode": "PUBLIC",
            "protocol": "HTTP",
        }
    ]
    assert json.loads((tmp_path / "agentcore" / "aws-targets.json").read_text()) == []


def test_write_project_updates_only_its_runtime(tmp_path: Path) -> None:
    """An existing project keeps other runtimes, other resources, the user's fields of this
    runtime and the deployment targets; this runtime's own fields are replaced."""
    config = tmp_path / "agentcore"
    config.mkdir()
    other = {"name": "other", "build": "Container", "entrypoint": "main.py", "codeLocation": "x/"}
    mine = {"name": "wordle", "build": "Container", "entrypoint": "old.py", "codeLocation": "y/"}
    mine["envVars"] = [{"name": "LOG_LEVEL", "value": "debug"}]
    spec = {"name": "Mine", "version": 1, "managedBy": "CDK", "runtimes": [other, mine]}
    spec["memories"] = [{"name": "m"}]
    (config / "agentcore.json").write_text(json.dumps(spec))
    (config / "aws-targets.json").write_text('[{"name": "default"}]')
    write_project(tmp_path, runtime_entry("wordle", "agent.py"))
    updated = json.loads((config / "agentcore.json").read_text())
    assert updated["name"] == "Mine"
    assert updated["memories"] == [{"name": "m"}]
    assert updated["runtimes"][0] == other
    assert updated["runtimes"][1]["envVars"] == [{"name": "LOG_LEVEL", "value": "debug"}]
    assert updated["runtimes"][1]["build"] == "CodeZip"
    assert updated["runtimes"][1]["entrypoint"] == "agent.py"
    assert (config / "aws-targets.json").read_text() == '[{"name": "default"}]'


def test_write_project_refuses_a_file_that_is_not_a_project(tmp_path: Path) -> None:
    """An agentcore.json that is not a JSON object with a runtimes list is a clear error."""
    (tmp_path / "agentcore").mkdir()
    (tmp_path / "agentcore" / "agentcore.json").write_text('{"runtimes": 3}')
    with pytest.raises(DeployError, match="not an AgentCore project"):
        write_project(tmp_path, runtime_entry("wordle", "agent.py"))
    (tmp_path / "agentcore" / "agentcore.json").write_text("{broken")
    with pytest.raises(DeployError, match="cannot read"):
        write_project(tmp_path, runtime_entry("wordle", "agent.py"))


def test_runtime_wheel_holds_exactly_the_runtime_half(tmp_path: Path) -> None:
    """The wheel holds the runtime modules and valid dist-info (RECORD hashes match, pinned
    Requires-Dist), and the same sources give the same bytes."""
    path = build_runtime_wheel(tmp_path / "a", ["pydantic==2.0", "uvicorn==0.50"])
    assert (
        path.name == runtime_wheel_name() == f"agent_kit-{agent_kit.__version__}-py3-none-any.whl"
    )
    info = f"agent_kit-{agent_kit.__version__}.dist-info"
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        modules = {n[len("agent_kit/") : -3] for n in names if n.endswith(".py")}
        assert modules == set(runtime_modules())
        assert names - {f"agent_kit/{m}.py" for m in modules} == {
            "agent_kit/py.typed",
            f"{info}/METADATA",
            f"{info}/WHEEL",
            f"{info}/RECORD",
        }
        metadata = zf.read(f"{info}/METADATA").decode()
        assert "Requires-Dist: pydantic==2.0\nRequires-Dist: uvicorn==0.50\n" in metadata
        assert "Tag: py3-none-any" in zf.read(f"{info}/WHEEL").decode()
        for line in zf.read(f"{info}/RECORD").decode().splitlines():
            arcname, digest, size = line.split(",")
            if arcname.endswith("RECORD"):
                continue
            data = zf.read(arcname)
            raw = base64.urlsafe_b64decode(digest.removeprefix("sha256=") + "==")
            assert (raw, int(size)) == (hashlib.sha256(data).digest(), len(data)), arcname
    again = build_runtime_wheel(tmp_path / "b", ["pydantic==2.0", "uvicorn==0.50"])
    assert again.read_bytes() == path.read_bytes()


def test_target_agentcore_writes_a_cli_project_and_keeps_its_folder(tmp_path: Path) -> None:
    """``package(target="agentcore")`` writes pyproject.toml and the runtime's entry; a second
    run replaces the staged sources but keeps agentcore/ (targets, deployed state, CDK app)."""
    src = tmp_path / "src" / "my_agent"
    src.mkdir(parents=True)
    (src / "agent.py").write_text(AGENT)
    (src / "requirements.txt").write_text("requests>=2\n")
    out = tmp_path / "out"
    result = package(src / "agent.py", target="agentcore", out_dir=out, import_check=False)
    assert result.artifact == out / "agentcore" / "agentcore.json"
    pyproject = tomllib.loads((out / "pyproject.toml").read_text())
    assert pyproject["project"]["dependencies"] == list(result.requirements)
    assert "requests>=2" in result.requirements
    assert (out / "agent_kit" / "app.py").is_file()
    assert (out / ".bedrock_agentcore.yaml").is_file()  # for `agentcore import`
    (runtime,) = json.loads(result.artifact.read_text())["runtimes"]
    assert (runtime["name"], runtime["entrypoint"], runtime["codeLocation"]) == (
        "my_agent",
        "agent.py",
        "./",
    )
    (out / "agentcore" / "aws-targets.json").write_text('[{"name": "default"}]')
    (out / "agentcore" / "cdk").mkdir()
    (src / "agent.py").rename(src / "main.py")
    package(src / "main.py", target="agentcore", out_dir=out, name="my_agent", import_check=False)
    assert not (out / "agent.py").exists()
    assert (out / "agentcore" / "cdk").is_dir()
    assert (out / "agentcore" / "aws-targets.json").read_text() == '[{"name": "default"}]'
    (runtime,) = json.loads(result.artifact.read_text())["runtimes"]
    assert runtime["entrypoint"] == "main.py"


def test_cli_package_unknown_target_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown --target exits 2 with one line naming every target, agentcore included."""
    (tmp_path / "agent.py").write_text(AGENT)
    code = main(["package", str(tmp_path / "agent.py"), "--target", "wheel"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [
        "error: unknown target 'wheel': choose zip, container, lambda-forwarder, agentcore"
    ]
