"""The layout is the design: runtime half at the top of agent_kit/, tooling in subpackages.

The boundary is an allow-list with one definition (``agent_kit.deploy.staging.runtime_modules``:
every module directly in the package folder): a deployed entrypoint's import closure must stay
inside it, and packaging ships exactly it. The import graph has no cycle, and no room imports
a room above it.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import agent_kit
from agent_kit.deploy.staging import (
    PACKAGE_DIR,
    copy_agent_kit,
    runtime_closure,
    runtime_modules,
)

PACKAGE = Path(agent_kit.__file__).parent

#: Rooms from the ground up; a room may import only rooms on its own floor or below.
FLOORS = [
    {"runtime"},
    {"store"},
    {"model"},
    {"emulator"},
    {"reporting", "deploy", "scaffold"},
    {"driver"},
    {"replay", "export", "train", "evaluation"},
    {"testing", "doctor"},
    {"dev"},
    {"cli"},
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _graph() -> dict[str, set[str]]:
    """agent_kit module → agent_kit modules it imports (anywhere in the file, lazy ones too)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def _room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or (PACKAGE / f"{parts[1]}.py").is_file():
        return "runtime"
    return parts[1]


#: The runtime half's size (docs/internals.md): modules directly in agent_kit/, __init__ aside.
MAX_TOP_LEVEL_MODULES = 16


def test_runtime_half_is_the_top_level_files() -> None:
    """The runtime set is exactly the package folder's own modules (at most 16 beside
    ``__init__``), and holds the named ones."""
    top = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert runtime_modules() == top
    assert len(top) - 1 <= MAX_TOP_LEVEL_MODULES, top
    assert PACKAGE.resolve() == PACKAGE_DIR
    named = {"app", "contract", "errors", "policy_client", "runtime_client"}
    assert named | {"episode_loop", "transport"} <= set(runtime_modules())


def test_app_import_closure_stays_in_the_runtime_half() -> None:
    """Importing agent_kit.app (what a deployed agent does) loads only runtime-half modules."""
    code = (
        "import json, sys, agent_kit.app, agent_kit.forwarder; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('agent_kit'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    allowed = {"agent_kit", *(f"agent_kit.{m}" for m in runtime_modules() if m != "__init__")}
    assert loaded - allowed == set()
    assert "agent_kit.app" in loaded


def test_static_runtime_closure_stays_in_the_runtime_half() -> None:
    """Every module the runtime roots import, lazily or not, is a runtime-half module."""
    assert set(runtime_closure()) <= set(runtime_modules())


def test_packaged_copy_is_the_runtime_half_and_self_contained(tmp_path: Path) -> None:
    """Staging ships exactly the runtime set, and the copy's own imports resolve inside it."""
    copied = copy_agent_kit(tmp_path)
    shipped = {Path(c).stem for c in copied if c.endswith(".py")}
    assert shipped == set(runtime_modules())
    assert set(runtime_closure(tmp_path / "agent_kit")) <= shipped


def test_no_import_cycles() -> None:
    """The agent_kit import graph (lazy imports included) is acyclic, file by file."""
    graph = _graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    # A package's __init__ re-exporting its own submodules is its face, not a cycle.
    real = [c for c in cycles if not all(m.startswith(c[0] + ".") or m == c[0] for m in c[1:])]
    assert real == []


def test_rooms_never_import_upward() -> None:
    """No room imports a room on a higher floor (the driver never imports reporting, …)."""
    floor = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}
    offenders = []
    for module, targets in _graph().items():
        here = _room(module)
        for target in targets:
            there = _room(target)
            if here in floor and there in floor and floor[there] > floor[here]:
                offenders.append(f"{module} -> {target}")
    assert offenders == []


def test_every_room_is_on_a_floor() -> None:
    """Every subpackage is placed in FLOORS (a new room must be given its floor)."""
    rooms = {_room(m) for m in _graph()} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()
    }
    placed = set().union(*FLOORS)
    assert rooms - placed == set()


def test_no_project_file_is_git_ignored() -> None:
    """Every file of the package, tests, examples and templates reaches a clean clone: a
    too-wide ignore pattern (``runs/`` once hid ``agent_kit/runs/``) fails here, not in CI."""
    root = PACKAGE.parent
    if not (root / ".git").exists():
        return  # an unpacked sdist: there is no ignore file to be wrong about
    files = [
        str(p.relative_to(root))
        for folder in ("agent_kit", "tests", "examples", "templates", "bench", "docs")
        for p in (root / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        input="\n".join(files),
        capture_output=True,
        text=True,
        cwd=root,
        check=False,
    )
    assert done.stdout.split() == [], "ignored by .gitignore but part of the project"


#: Size limits of the code (docs/internals.md): a module past them holds more than one idea.
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def test_no_module_over_500_lines_and_no_function_over_80() -> None:
    """Every module of agent_kit is at most 500 lines and every function under 80 (from its
    ``def`` line to its last line)."""
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(PACKAGE.parent)
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert not too_long, too_long
