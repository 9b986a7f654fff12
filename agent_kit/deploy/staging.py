"""Staging an entrypoint's sources for packaging (tooling half).

What goes into the output directory besides the generated files:

- the entrypoint's directory (code and data files, minus caches, virtualenvs, tests, secrets);
- the runtime half of agent_kit, copied as source: :func:`runtime_modules`, which is *defined*
  by the layout — every module directly in the ``agent_kit/`` folder is runtime, every
  subpackage is tooling. :func:`runtime_closure` follows the runtime roots' imports by AST
  (nothing is imported here); a test holds it inside :func:`runtime_modules`;
- the requirement lines: the runtime dependencies pinned to this environment
  (:func:`pinned_requirements`) merged with the entrypoint's own ``requirements.txt``.

The output directory itself is prepared here too: it is emptied only if it is empty or holds
the marker this module writes. Used by :func:`agent_kit.deploy.package.package`.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from agent_kit.errors import DeployError, UsageError

__all__ = [
    "PACKAGE_DIR",
    "RUNTIME_REQUIREMENTS",
    "RUNTIME_ROOTS",
    "copy_agent_kit",
    "copy_sources",
    "merge_requirements",
    "pinned_requirements",
    "prepare_out",
    "runtime_closure",
    "runtime_modules",
    "user_requirements",
]

#: Where agent_kit's modules live (the package folder this module is installed in).
PACKAGE_DIR: Final = Path(__file__).resolve().parents[1]
#: The modules a deployed entrypoint starts from (the rest of the runtime half is what they use).
RUNTIME_ROOTS: Final = ("__init__", "app", "forwarder")


def runtime_modules(pkg_dir: Path | None = None) -> list[str]:
    """The runtime half: every module directly in the agent_kit folder (never a subpackage).

    This is the one definition of the boundary: packaging ships exactly these, and the import
    closure of a deployed entrypoint must stay inside them.
    """
    root = pkg_dir or PACKAGE_DIR
    return sorted(path.stem for path in root.glob("*.py"))


#: Distributions the runtime half needs, pinned to this environment's versions on packaging.
RUNTIME_REQUIREMENTS: Final = (
    "bedrock-agentcore",
    "boto3",
    "httpx",
    "openai",
    "pydantic",
    "starlette",
    "strands-agents",
    "uvicorn",
)
_SKIP_DIRS: Final = frozenset(
    {
        "__pycache__",
        ".venv",
        "venv",
        "env",
        ".git",
        "build",
        "dist",
        "node_modules",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".hypothesis",
        ".tox",
        "tests",
        "runs",
        ".bedrock_agentcore",
        ".idea",
        ".vscode",
    }
)
_SKIP_FILES: Final = frozenset(
    {".env", ".bedrock_agentcore.yaml", ".dockerignore", "Dockerfile", ".DS_Store", ".gitignore"}
)
_SKIP_SUFFIXES: Final = (".pyc", ".pyo", ".so", ".log", ".swp", ".zip", ".whl", ".egg-info")
#: An AgentCore CLI project's config folder at the root of the sources: never staged (the
#: output directory gets its own).
_CLI_CONFIG_DIR: Final = "agentcore"
_AGENT_KIT_NAMES: Final = frozenset({"agent_kit", "agent-kit"})
#: Marks an output directory as ours: only such a directory is ever emptied and rewritten.
_MARKER: Final = ".agent-kit-package"


def _skip(path: Path) -> bool:
    name = path.name
    if path.is_dir():
        return name in _SKIP_DIRS or name.endswith(".egg-info") or name in _AGENT_KIT_NAMES
    return name in _SKIP_FILES or name.endswith(_SKIP_SUFFIXES)


def copy_sources(src_dir: Path, out_dir: Path, exclude: Path) -> list[str]:
    """Copy the entrypoint's directory (code + data files) into ``out_dir``; return rel paths.

    Skipped: caches, virtualenvs, tests, build output, secrets (``.env``), archives and wheels,
    and an AgentCore CLI project's ``agentcore/`` folder at the root."""
    copied: list[str] = []
    for root, dirs, files in os.walk(src_dir):
        root_path = Path(root)
        dirs[:] = sorted(
            d
            for d in dirs
            if not _skip(root_path / d)
            and (root_path / d).resolve() != exclude
            and not (root_path == src_dir and d == _CLI_CONFIG_DIR)
        )
        for fname in sorted(files):
            path = root_path / fname
            if _skip(path) or path.is_symlink():
                continue
            rel = path.relative_to(src_dir)
            dest = out_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
            copied.append(rel.as_posix())
    return copied


def _agent_kit_imports(path: Path, root: Path = PACKAGE_DIR) -> set[str]:
    """agent_kit modules a source file imports (anywhere in the file), relative to the package:
    ``from agent_kit.emulator import core`` gives ``emulator`` and ``emulator.core``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != "agent_kit" or len(parts) < 2:
                continue
            for end in range(2, len(parts) + 1):
                rel = ".".join(parts[1:end])
                candidate = root / Path(*parts[1:end])
                if candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file():
                    found.add(rel)
    return found


def runtime_closure(pkg_dir: Path | None = None) -> list[str]:
    """Every agent_kit module the :data:`RUNTIME_ROOTS` import, transitively, as dotted names
    relative to the package (``"app"``, ``"emulator.core"``); found by AST, nothing imported."""
    root = pkg_dir or PACKAGE_DIR
    todo = list(RUNTIME_ROOTS)
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        rel = Path(*module.split("."))
        path = root / rel.with_suffix(".py")
        if not path.is_file():
            path = root / rel / "__init__.py"
            if not path.is_file():
                continue
        todo.extend(_agent_kit_imports(path, root) - seen)
    return sorted(seen)


def copy_agent_kit(out_dir: Path) -> list[str]:
    """Copy the runtime half of agent_kit (:func:`runtime_modules`) as source into
    ``out_dir/agent_kit``; return the copied paths relative to ``out_dir``."""
    dest = out_dir / "agent_kit"
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for module in runtime_modules():
        shutil.copy2(PACKAGE_DIR / f"{module}.py", dest / f"{module}.py")
        copied.append(f"agent_kit/{module}.py")
    typed = PACKAGE_DIR / "py.typed"
    if typed.is_file():
        shutil.copy2(typed, dest / "py.typed")
        copied.append("agent_kit/py.typed")
    return copied


def pinned_requirements(names: Sequence[str] = RUNTIME_REQUIREMENTS) -> list[str]:
    """``name==version`` for each installed distribution (``DeployError`` if one is missing)."""
    pins = []
    for name in names:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            raise DeployError(f"runtime dependency {name} is not installed here") from None
        pins.append(f"{name}=={version}")
    return pins


def user_requirements(src_dir: Path) -> list[str]:
    """Lines of the entrypoint's own requirements.txt, minus agent_kit (not on PyPI)."""
    path = src_dir / "requirements.txt"
    if not path.is_file():
        return []
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith(("-e", "--editable", ".", "/", "file:")):
            continue  # local paths do not exist inside the runtime
        dist = re.split(r"[\s<>=!~;\[@]", line, maxsplit=1)[0].lower().replace("_", "-")
        if dist in {"agent-kit"}:
            continue
        lines.append(line)
    return lines


def merge_requirements(base: Sequence[str], extra: Sequence[str]) -> list[str]:
    """``base`` followed by the lines of ``extra`` whose distribution ``base`` does not name."""

    def key(line: str) -> str:
        return re.split(r"[\s<>=!~;\[@]", line, maxsplit=1)[0].lower().replace("_", "-")

    seen = {key(line) for line in base}
    return [*base, *(line for line in extra if key(line) not in seen)]


def prepare_out(out: Path, source_dir: Path, keep: Sequence[str] = ()) -> None:
    """Empty (or create) the output directory and mark it as ours; refuse a directory that
    holds the sources, is not a directory, or is non-empty without the marker. Entries named
    in ``keep`` survive the emptying (an AgentCore CLI project's ``agentcore/`` folder, which
    holds its deployment targets and deployed state)."""
    if out == source_dir or source_dir.is_relative_to(out):
        raise UsageError(f"--out {out} would overwrite the entrypoint's own directory")
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"--out {out} exists and is not a directory")
        ours = (out / _MARKER).is_file()
        if any(out.iterdir()) and not ours:
            raise UsageError(f"--out {out} is not empty and was not written by agent-kit package")
        for child in out.iterdir():
            if child.name in keep:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    out.mkdir(parents=True, exist_ok=True)
    (out / _MARKER).write_text("written by agent-kit package; safe to delete\n", encoding="utf-8")
