"""``agent-kit package``: preflight, code zip (Linux ARM64 wheels), container, Lambda forwarder.

The zip tests resolve real aarch64 wheels with uv from PyPI (the only network these tests use),
with a deliberately small requirement set (pydantic) and a shared uv cache in a temp dir.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import warnings
import zipfile
from pathlib import Path

import pytest

from agent_kit.cli import main
from agent_kit.deploy.package import agentcore_config, dockerfile_text, package
from agent_kit.deploy.preflight import preflight
from agent_kit.deploy.staging import runtime_modules
from agent_kit.errors import DeployError, UsageError

REPO = Path(__file__).resolve().parents[2]
WORDLE = REPO / "examples" / "wordle" / "agent.py"
PYDANTIC = f"pydantic=={importlib.metadata.version('pydantic')}"

AGENT = """\
from bedrock_agentcore.runtime import BedrockAgentCoreApp

import helper

app = BedrockAgentCoreApp()


@app.entrypoint
def handle(payload):
    return {"reward": helper.score(payload.get("prompt", ""))}


if __name__ == "__main__":
    app.run()
"""


@pytest.fixture(scope="module")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uv download cache for every zip test of this module."""
    return tmp_path_factory.mktemp("uv-cache")


def make_agent(root: Path, source: str = AGENT) -> Path:
    """Write a small agent project (entrypoint, helper module, data, junk) under ``root``."""
    project = root / "my_agent"
    (project / "words").mkdir(parents=True)
    (project / "__pycache__").mkdir()
    (project / ".venv" / "lib").mkdir(parents=True)
    (project / "agent.py").write_text(source)
    (project / "helper.py").write_text("def score(prompt):\n    return float(bool(prompt))\n")
    (project / "words" / "answers.txt").write_text("riser\ncrane\n")
    (project / "requirements.txt").write_text("agent_kit\n-e ../..\n")
    (project / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
    (project / "__pycache__" / "agent.cpython-311.pyc").write_bytes(b"\0")
    (project / ".venv" / "lib" / "junk.py").write_text("x = 1\n")
    return project / "agent.py"


def wheel_tags(zf: zipfile.ZipFile) -> dict[str, list[str]]:
    """``{dist-info dir: [Tag lines]}`` of every WHEEL file in the zip."""
    tags = {}
    for name in zf.namelist():
        if name.endswith(".dist-info/WHEEL"):
            text = zf.read(name).decode()
            tags[name.split("/")[0]] = re.findall(r"^Tag: (.+)$", text, re.M)
    return tags


def check_arm64_zip(zip_path: Path) -> zipfile.ZipFile:
    """Assert every binary and wheel in the zip targets Linux aarch64 (or is pure Python)."""
    zf = zipfile.ZipFile(zip_path)
    names = zf.namelist()
    so_files = [n for n in names if n.endswith(".so") or ".so." in n]
    assert so_files, "expected compiled extensions (pydantic_core)"
    assert all("aarch64" in n for n in so_files), so_files
    assert not [n for n in names if "x86_64" in n or "amd64" in n]
    tags = wheel_tags(zf)
    assert tags
    for dist, lines in tags.items():
        assert lines, dist
        for tag in lines:
            assert tag.endswith("-any") or "aarch64" in tag, (dist, tag)
    return zf


def load_toolkit_config(path: Path) -> object:
    """Load a .bedrock_agentcore.yaml with the starter toolkit's own loader.

    The (deprecated) toolkit emits its own pydantic deprecation warnings on import; they are
    silenced here only, since the suite turns warnings into errors.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from bedrock_agentcore_starter_toolkit.utils.runtime.config import load_config

        return load_config(path, autofill_missing_aws=False)


def test_preflight_rejects_missing_app(tmp_path: Path) -> None:
    """An entrypoint without a module-level ``app`` is refused with a message naming ``app``."""
    entry = make_agent(tmp_path, AGENT.replace("app = BedrockAgentCoreApp()", "server = 1"))
    with pytest.raises(DeployError, match="module-level variable named `app`"):
        preflight(entry, "my_agent")


def test_preflight_rejects_missing_main_guard(tmp_path: Path) -> None:
    """``app.run()`` outside ``if __name__ == "__main__":`` is refused."""
    source = AGENT.replace('if __name__ == "__main__":\n    app.run()\n', "app.run()\n")
    entry = make_agent(tmp_path, source)
    with pytest.raises(DeployError, match='if __name__ == "__main__"'):
        preflight(entry, "my_agent")


def test_preflight_accepts_reversed_guard(tmp_path: Path) -> None:
    """``if "__main__" == __name__:`` counts as the main guard."""
    source = AGENT.replace('__name__ == "__main__"', '"__main__" == __name__')
    preflight(make_agent(tmp_path, source), "my_agent")


@pytest.mark.parametrize("name", ["my-agent", "9lives", "", "a" * 49])
def test_preflight_rejects_bad_runtime_names(tmp_path: Path, name: str) -> None:
    """Names outside ``[a-zA-Z][a-zA-Z0-9_]{0,47}`` are usage errors that cite the pattern."""
    with pytest.raises(UsageError, match=r"\[a-zA-Z\]\[a-zA-Z0-9_\]"):
        preflight(make_agent(tmp_path), name)


def test_preflight_reports_syntax_errors_with_line(tmp_path: Path) -> None:
    """A syntax error is a DeployError with file and line, not a traceback."""
    entry = make_agent(tmp_path, AGENT + "\ndef broken(:\n")
    with pytest.raises(DeployError, match=r"agent.py:\d+: syntax error"):
        preflight(entry, "my_agent")


def test_cli_package_import_failure_exits_11(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entrypoint that fails at import time is refused by the subprocess import check."""
    entry = make_agent(tmp_path, "import not_a_module_anywhere\n" + AGENT)
    code = main(["package", str(entry), "--target", "container", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 11
    assert "does not import cleanly" in err
    assert "not_a_module_anywhere" in err


def test_cli_package_bad_name_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--name`` with a hyphen exits 2 before anything is written."""
    entry = make_agent(tmp_path)
    out = tmp_path / "out"
    code = main(["package", str(entry), "--name", "my-agent", "--out", str(out)])
    assert code == 2
    assert "no hyphens" in capsys.readouterr().err
    assert not (out / ".bedrock_agentcore.yaml").exists()


def test_zip_target_contains_sources_data_and_arm64_wheels_only(
    tmp_path: Path, uv_cache: Path
) -> None:
    """The code zip holds the entrypoint, its modules and data, agent_kit, and aarch64 wheels."""
    entry = make_agent(tmp_path)
    result = package(
        entry,
        target="zip",
        out_dir=tmp_path / "build",
        requirements=[PYDANTIC],
        uv_cache_dir=uv_cache,
    )
    assert result.artifact == tmp_path / "build" / "dist" / "deployment.zip"
    assert 0 < result.zip_bytes < 250 * 2**20
    zf = check_arm64_zip(result.artifact)
    names = set(zf.namelist())
    assert {"agent.py", "helper.py", "words/answers.txt", "agent_kit/__init__.py"} <= names
    assert "agent_kit/app.py" in names
    shipped = {n.removeprefix("agent_kit/") for n in names if n.startswith("agent_kit/")}
    assert shipped == {f"{m}.py" for m in runtime_modules()} | {"py.typed"} & shipped
    assert not [n for n in names if n.endswith((".pyc", ".env")) or ".venv/" in n or n == ".env"]
    assert any(n.startswith("pydantic_core/") for n in names)
    # the requirements drop the local agent_kit lines and keep the pinned runtime set
    assert result.requirements == (PYDANTIC,)
    # every packaged source compiles, and the zip's copies equal the staged files
    for rel in result.files:
        assert rel in names
        if rel.endswith(".py"):
            compile(zf.read(rel), rel, "exec")
    assert zf.read("agent.py") == entry.read_bytes()
    config = load_toolkit_config(tmp_path / "build" / ".bedrock_agentcore.yaml")
    agent = config.get_agent_config()  # type: ignore[attr-defined]
    assert agent.name == "my_agent"
    assert agent.deployment_type == "direct_code_deploy"
    assert agent.runtime_type == "PYTHON_3_11"
    assert agent.platform == "linux/arm64"
    assert Path(agent.entrypoint) == tmp_path / "build" / "agent.py"
    assert Path(agent.entrypoint).is_file()


def test_container_target_writes_nonroot_arm64_dockerfile(tmp_path: Path) -> None:
    """The Dockerfile is ARM64, non-root, port 8080, DOCKER_CONTAINER=1, runs the module."""
    entry = make_agent(tmp_path)
    result = package(entry, target="container", out_dir=tmp_path / "c", region="eu-west-1")
    out = tmp_path / "c"
    lines = [ln.strip() for ln in (out / "Dockerfile").read_text().splitlines() if ln.strip()]
    instructions = [ln for ln in lines if not ln.startswith("#")]
    assert instructions[0].startswith("FROM --platform=linux/arm64 ")
    users = [i for i, ln in enumerate(instructions) if ln.startswith("USER ")]
    cmd = next(i for i, ln in enumerate(instructions) if ln.startswith("CMD "))
    assert users
    assert users[-1] < cmd
    assert instructions[users[-1]].split()[1] not in {"root", "0"}
    assert "EXPOSE 8080" in instructions
    assert any("DOCKER_CONTAINER=1" in ln and "AWS_REGION=eu-west-1" in ln for ln in instructions)
    assert instructions[cmd] == 'CMD ["python", "-m", "agent"]'
    pins = [ln for ln in (out / "requirements.txt").read_text().splitlines() if "==" in ln]
    for pin in pins:
        dist, version = pin.split("==")
        assert importlib.metadata.version(dist) == version
    assert {p.split("==")[0] for p in pins} >= {"bedrock-agentcore", "strands-agents", "boto3"}
    assert ".env" in (out / ".dockerignore").read_text().splitlines()
    assert not (out / ".env").exists()
    assert (out / "words" / "answers.txt").read_text() == "riser\ncrane\n"
    config = load_toolkit_config(out / ".bedrock_agentcore.yaml")
    agent = config.get_agent_config()  # type: ignore[attr-defined]
    assert agent.deployment_type == "container"
    assert agent.aws.region == "eu-west-1"
    assert result.artifact == out / "Dockerfile"


def test_dockerfile_text_runs_given_module() -> None:
    """The CMD runs the entrypoint module by name."""
    assert 'CMD ["python", "-m", "my_entry"]' in dockerfile_text("my_entry")


def test_lambda_forwarder_target_is_stdlib_only(tmp_path: Path) -> None:
    """The forwarder zip holds one stdlib-only handler module that compiles."""
    result = package(make_agent(tmp_path), target="lambda-forwarder", out_dir=tmp_path / "f")
    assert result.artifact is not None
    zf = zipfile.ZipFile(result.artifact)
    assert zf.namelist() == ["lambda_function.py"]
    source = zf.read("lambda_function.py").decode()
    tree = ast.parse(source)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names)
    assert any(isinstance(n, ast.FunctionDef) and n.name == "handler" for n in tree.body)


def test_out_dir_not_written_by_us_is_refused(tmp_path: Path) -> None:
    """A non-empty output directory that agent-kit did not write is never wiped."""
    out = tmp_path / "precious"
    out.mkdir()
    (out / "thesis.tex").write_text("keep me")
    with pytest.raises(UsageError, match="not written by agent-kit"):
        package(make_agent(tmp_path), target="container", out_dir=out)
    assert (out / "thesis.tex").read_text() == "keep me"


def test_wordle_example_packages_as_zip_and_container(tmp_path: Path, uv_cache: Path) -> None:
    """The Wordle example packages unchanged: word lists included, import-checked, ARM64 zip."""
    assert WORDLE.is_file()
    zipped = package(
        WORDLE,
        target="zip",
        out_dir=tmp_path / "wz",
        requirements=[PYDANTIC],
        uv_cache_dir=uv_cache,
    )
    assert zipped.name == "wordle"
    assert zipped.artifact is not None
    zf = check_arm64_zip(zipped.artifact)
    names = set(zf.namelist())
    assert {"agent.py", "words/answers.txt", "words/allowed.txt", "agent_kit/app.py"} <= names
    container = package(WORDLE, target="container", out_dir=tmp_path / "wc")
    assert (container.out_dir / "Dockerfile").is_file()
    assert (container.out_dir / "words" / "answers.txt").is_file()
    load_toolkit_config(container.out_dir / ".bedrock_agentcore.yaml")


def test_yaml_has_every_field_the_toolkit_writes(tmp_path: Path) -> None:
    """Our .bedrock_agentcore.yaml has exactly the fields the toolkit's own schema dumps."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from bedrock_agentcore_starter_toolkit.utils.runtime.schema import (
            BedrockAgentCoreConfigSchema,
        )

    def keys(value: object, prefix: str = "") -> set[str]:
        if not isinstance(value, dict):
            return set()
        out = set()
        for key, sub in value.items():
            path = f"{prefix}.{key}" if prefix and prefix != "agents" else str(key)
            out |= {path} | keys(sub, path if prefix != "agents" else "agent")
        return out

    ours = agentcore_config("my_agent", tmp_path / "agent.py", deployment_type="direct_code_deploy")
    dumped = BedrockAgentCoreConfigSchema.model_validate(ours).model_dump(
        exclude={"is_agentcore_create_with_iac"}
    )
    assert keys(ours) == keys(dumped)
    assert dumped["agents"]["my_agent"]["platform"] == "linux/arm64"


def test_repackaging_replaces_only_our_own_output(tmp_path: Path) -> None:
    """A second package run into the same directory replaces it; a look-alike dir is refused."""
    entry = make_agent(tmp_path)
    out = tmp_path / "again"
    package(entry, target="container", out_dir=out)
    (out / "stale.txt").write_text("old")
    package(entry, target="container", out_dir=out)
    assert not (out / "stale.txt").exists()
    assert (out / "Dockerfile").is_file()
    lookalike = tmp_path / "project"
    (lookalike / "dist").mkdir(parents=True)
    (lookalike / ".bedrock_agentcore.yaml").write_text("agents: {}\n")
    with pytest.raises(UsageError, match="not written by agent-kit"):
        package(entry, target="container", out_dir=lookalike)
    assert (lookalike / ".bedrock_agentcore.yaml").is_file()
