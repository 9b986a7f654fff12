"""The curated public surface and the runtime/tooling import boundary."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import agent_kit

PACKAGE = Path(agent_kit.__file__).parent
RUNTIME = [
    "contract",
    "errors",
    "environment",
    "reward",
    "policy",
    "_sse",
    "runtime_client",
    "app",
    "episode",
    "runner",
    "forwarder",
]
TOOLING = [
    "emulator",
    "store",
    "metrics",
    "summary",
    "pricing",
    "report",
    "replay",
    "package",
    "preflight",
    "staging",
    "code_zip",
    "deploy",
    "jobs",
    "testing",
    "cli",
    "scaffold",
    "cassette",
    "replay_policy",
    "replay_report",
    "replay_testing",
]


def test_star_import_exposes_exactly_all_sorted() -> None:
    """`from agent_kit import *` gives exactly __all__, which is sorted and fully importable."""
    assert agent_kit.__all__ == sorted(agent_kit.__all__)
    namespace: dict[str, object] = {}
    exec("from agent_kit import *", namespace)  # noqa: S102 - the behaviour under test
    exported = {k for k in namespace if not k.startswith("__")}
    assert exported == set(agent_kit.__all__)
    for name in agent_kit.__all__:
        assert getattr(agent_kit, name) is namespace[name]


def test_importing_agent_kit_is_cheap_and_side_effect_free() -> None:
    """`import agent_kit` loads no Strands, boto3 or AgentCore module."""
    code = (
        "import sys, agent_kit; "
        "heavy = [m for m in ('strands', 'boto3', 'bedrock_agentcore', 'openai') "
        "if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_runtime_half_never_imports_the_tooling_half() -> None:
    """The runtime modules (what ships in a deployed agent) import no tooling module."""
    offenders = []
    for name in RUNTIME:
        path = PACKAGE / f"{name}.py"
        if not path.exists():
            continue
        for module in _imports(path):
            parts = module.split(".")
            if parts[0] == "agent_kit" and len(parts) > 1 and parts[1] in TOOLING:
                offenders.append(f"{name}.py imports {module}")
    assert offenders == []


def test_only_the_cli_prints() -> None:
    """No library module calls print(): only the CLI and the process entry points do.

    Entry points are whole programs: the agent-serving child (`emulator/_serve.py`) and the
    Lambda handler source shipped to AWS (`templates_lambda/`).
    """
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("cli", "templates_lambda") or rel.as_posix() == "emulator/_serve.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
            ):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == []
