"""The curated public surface (the import boundary and layout: tests/test_layout.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import agent_kit

PACKAGE = Path(agent_kit.__file__).parent


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


def test_only_the_cli_prints() -> None:
    """No library module calls print(): only the CLI and the process entry points do.

    Entry points are whole programs: the agent-serving child (`driver/_serve.py`) and the
    Lambda handler source shipped to AWS (`deploy/lambda_template/`).
    """
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if (
            rel.parts[0] == "cli"
            or rel.as_posix().startswith("deploy/lambda_template/")
            or rel.as_posix() == "driver/_serve.py"
        ):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
            ):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == []
