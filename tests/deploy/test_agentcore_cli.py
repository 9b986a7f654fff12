"""The real npm AgentCore CLI (``@aws/agentcore`` 0.30.0) on agent_kit's projects, offline.

``make test`` installs the CLI from tests/agentcore_cli/package-lock.json into
.venv/agentcore-cli (``AGENT_KIT_AGENTCORE_CLI_DIR`` names another folder). Its dependency
``@aws/agent-inspector`` is not on the npm registry; an empty local stub stands in for it: it is
the web inspector UI of ``agentcore dev``, which ``validate``, ``package`` and ``dev --logs`` do
not use. ``agentcore package`` runs this environment's uv (put first on PATH) against PyPI for
the Linux ARM64 wheels; ``AGENT_KIT_UV_CACHE_DIR`` keeps uv's download cache between runs.
``agentcore deploy`` needs AWS and the CLI's CDK package (not on this registry), so it is not run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import agent_kit
from agent_kit.cli import main
from agent_kit.deploy.agentcore_cli import (
    PROJECT_NAME_PATTERN,
    PYTHON_RUNTIMES,
    python_runtime,
    runtime_entry,
    write_project,
)
from agent_kit.deploy.code_zip import _find_uv
from agent_kit.deploy.preflight import RUNTIME_NAME_PATTERN
from agent_kit.deploy.staging import runtime_modules
from agent_kit.scaffold import project as scaffold
from agent_kit.store import RunStore

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
WORDLE = ROOT / "examples" / "wordle"
AGENT_KIT = str(Path(sys.executable).parent / "agent-kit")
#: ``e_machine`` of an ELF file built for 64-bit ARM.
ELF_AARCH64 = 183


def _cli_dir() -> Path:
    """The folder whose node_modules hold the CLI: ``AGENT_KIT_AGENTCORE_CLI_DIR`` or, by
    default, where ``make test`` installs it (.venv/agentcore-cli)."""
    path = Path(os.environ.get("AGENT_KIT_AGENTCORE_CLI_DIR") or ROOT / ".venv" / "agentcore-cli")
    assert shutil.which("node") is not None, "the AgentCore CLI needs Node.js (node on PATH)"
    assert (path / "node_modules" / ".bin" / "agentcore").is_file(), (
        f"no AgentCore CLI in {path}: `make test` installs it from "
        "tests/agentcore_cli/package-lock.json, or set AGENT_KIT_AGENTCORE_CLI_DIR"
    )
    return path


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    """The ``agentcore`` executable and the environment to run it in (uv first on PATH)."""
    exe = str(_cli_dir() / "node_modules" / ".bin" / "agentcore")
    bin_dir = tmp_path_factory.mktemp("uv-bin")
    (bin_dir / "uv").symlink_to(_find_uv())
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["AGENTCORE_TELEMETRY_DISABLED"] = "1"
    cache = os.environ.get("AGENT_KIT_UV_CACHE_DIR")
    env["UV_CACHE_DIR"] = cache or str(tmp_path_factory.mktemp("uv-cache"))
    return exe, env


def agentcore(cli: tuple[str, dict[str, str]], *args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI; return the finished process (output captured)."""
    exe, env = cli
    return subprocess.run(
        [exe, *args], env=env, capture_output=True, text=True, timeout=600, check=False
    )


def validate_and_package(cli: tuple[str, dict[str, str]], project: Path, name: str) -> Path:
    """``agentcore validate`` and ``agentcore package`` succeed; return the runtime's zip."""
    done = agentcore(cli, "validate", "-d", str(project))
    assert (done.returncode, done.stdout.strip()) == (0, "Valid"), done.stdout + done.stderr
    done = agentcore(cli, "package", "-d", str(project))
    assert done.returncode == 0, done.stdout + done.stderr
    zip_path = project / "agentcore" / f"{name}.zip"
    assert zip_path.is_file(), done.stdout
    return zip_path


def assert_deployable_zip(zip_path: Path) -> set[str]:
    """The zip holds the entrypoint, exactly the runtime half of agent_kit, no tooling, and
    shared libraries for Linux ARM64 only (ELF machine AArch64); return its names."""
    with zipfile.ZipFile(zip_path) as zf:
        names = set(zf.namelist())
        libraries = [n for n in names if n.endswith(".so") or ".so." in n]
        machines = {n: int.from_bytes(zf.read(n)[18:20], "little") for n in libraries}
    assert "agent.py" in names
    kit = {Path(n).stem for n in names if n.startswith("agent_kit/") and n.endswith(".py")}
    assert kit == set(runtime_modules())
    assert libraries
    assert {n: m for n, m in machines.items() if m != ELF_AARCH64} == {}
    assert "pydantic_core/__init__.py" in names
    assert not [n for n in names if n.startswith(("agentcore/", ".venv/"))]
    return names


@pytest.fixture(scope="module")
def wordle_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/wordle packaged with ``agent-kit package --target agentcore``."""
    out = tmp_path_factory.mktemp("wordle-cli") / "wordle"
    code = main(["package", str(WORDLE / "agent.py"), "--target", "agentcore", "--out", str(out)])
    assert code == 0
    return out


def cli_types() -> dict[str, dict[str, str]]:
    """The CLI's TypeScript types of agentcore.json (the text ``agentcore create`` writes to
    ``agentcore/.llm-context/agentcore.ts``, read from the installed CLI): interface name →
    field (``?`` marks optional ones) → the rest of its line."""
    bundle = (_cli_dir() / "node_modules/@aws/agentcore/dist/cli/index.mjs").read_text()
    types: dict[str, dict[str, str]] = {}
    for name in ("AgentCoreProjectSpec", "AgentEnvSpec"):
        body = re.search(rf"\ninterface {name} {{\n(.*?)\n}}\n", bundle, re.S)
        assert body, name
        fields = re.findall(r"^  (\$?\w+\??): (.*)$", body.group(1), re.M)
        types[name] = dict(fields)
    return types


def test_written_fields_follow_the_cli_types(tmp_path: Path) -> None:
    """Every field agent_kit writes is one the CLI's types declare, every required field is
    written, and the name rules and Python runtimes are the types' own."""
    types = cli_types()
    spec = json.loads(write_project(tmp_path, runtime_entry("my_agent", "agent.py")).read_text())
    for name, written in (("AgentCoreProjectSpec", spec), ("AgentEnvSpec", spec["runtimes"][0])):
        declared = {field.rstrip("?") for field in types[name]}
        required = {field for field in types[name] if not field.endswith("?")}
        assert set(written) <= declared, (name, set(written) - declared)
        assert required <= set(written), (name, required - set(written))
    assert f"@regex {PROJECT_NAME_PATTERN.pattern}" in types["AgentCoreProjectSpec"]["name"]
    assert f"@regex {RUNTIME_NAME_PATTERN.pattern}" in types["AgentEnvSpec"]["name"]
    bundle = (_cli_dir() / "node_modules/@aws/agentcore/dist/cli/index.mjs").read_text()
    offered = " | ".join(f"'{python_runtime(v)}'" for v in PYTHON_RUNTIMES)
    assert f"type PythonRuntime = {offered};" in bundle


def test_generated_project_passes_agentcore_package(
    tmp_path: Path, cli: tuple[str, dict[str, str]]
) -> None:
    """A project from ``agent-kit new`` passes ``agentcore validate`` and ``agentcore package``
    as generated; agent_kit reaches the zip from the project's runtime wheel."""
    project = scaffold.create_project(project_name="Ticket Triage", output_dir=tmp_path).path
    names = assert_deployable_zip(validate_and_package(cli, project, "ticket_triage"))
    assert f"agent_kit-{agent_kit.__version__}.dist-info/METADATA" in names
    assert "data/train.jsonl" in names


def test_wordle_package_target_agentcore_passes_agentcore_package(
    wordle_project: Path, cli: tuple[str, dict[str, str]]
) -> None:
    """examples/wordle through ``agent-kit package --target agentcore`` passes ``agentcore
    validate`` and ``agentcore package``; its word lists ship, agent_kit ships as source."""
    names = assert_deployable_zip(validate_and_package(cli, wordle_project, "wordle"))
    assert {"words/answers.txt", "words/allowed.txt"} & names
    assert not [n for n in names if n.endswith(".dist-info/METADATA") and "agent_kit" in n]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def dev_server(wordle_project: Path, cli: tuple[str, dict[str, str]]) -> Iterator[str]:
    """``agentcore dev --logs`` serving the packaged Wordle agent; yields its base URL.

    The CLI serves a Python runtime with ``<code location>/.venv/bin/uvicorn`` and only creates
    that venv (``uv venv`` + ``uv sync``, from PyPI) when it is missing; here ``.venv/bin`` links
    this environment's ``uvicorn`` and ``python``, so dev starts offline. The dummy AWS keys let
    the agent sign its calls to the emulator (which does not verify them).
    """
    venv_bin = wordle_project / ".venv" / "bin"
    venv_bin.mkdir(parents=True, exist_ok=True)
    for tool in ("uvicorn", "python"):
        if not (venv_bin / tool).exists():
            (venv_bin / tool).symlink_to(Path(sys.executable).parent / tool)
    exe, env = cli
    env = {**env, "AWS_ACCESS_KEY_ID": "agent-kit-dev", "AWS_SECRET_ACCESS_KEY": "agent-kit-dev"}
    env.update(AWS_REGION="us-west-2", AWS_DEFAULT_REGION="us-west-2")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    port = _free_port()
    log = (wordle_project.parent / "dev.log").open("w")
    proc = subprocess.Popen(
        [exe, "dev", "--logs", "--no-traces", "-p", str(port)],
        cwd=wordle_project,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (wordle_project.parent / "dev.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "agentcore dev did not answer /ping in time"
            try:
                if httpx.get(f"{url}/ping", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)  # polling the dev server's port, with a deadline
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


def test_agentcore_dev_serves_wordle_to_agent_kit_run(dev_server: str, tmp_path: Path) -> None:
    """``agent-kit run URL`` plays Wordle rollouts against ``agentcore dev`` (the packaged
    agent with its vendored agent_kit) and every rollout is rewarded."""
    dataset = tmp_path / "holdout-3.jsonl"
    rows = (WORDLE / "holdout.jsonl").read_text().splitlines()[:3]
    dataset.write_text("\n".join(rows) + "\n")
    out = tmp_path / "runs"
    cmd = [
        AGENT_KIT, "run", dev_server, "--dataset", str(dataset),
        "--policy", f"scripted:{WORDLE / 'policies.py'}:Solver", "--group-size", "2",
        "--json", "--out", str(out), "--name", "agentcore-dev",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["run"]["rewarded"] == 6
    (store_path,) = out.glob("*/run.sqlite")
    with RunStore.open(store_path, readonly=True) as store:
        trajectories = store.list_trajectories()
        assert len(trajectories) == 6
        assert {t.state for t in trajectories} == {"REWARDED"}
        assert all(store.get_reward(t.id) is not None for t in trajectories)
