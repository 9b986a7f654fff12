"""The curated public surface (the import boundary and layout: tests/test_layout.py)."""

from __future__ import annotations

import ast
import functools
import importlib
import subprocess
import sys
from collections.abc import Iterator
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

    Entry points are whole programs: the agent-serving child (`driver/_serve.py`), the dev
    loop's load check (`dev/_loadcheck.py`) and the Lambda handler source shipped to AWS
    (`deploy/lambda_template/`).
    """
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if (
            rel.parts[0] == "cli"
            or rel.as_posix().startswith("deploy/lambda_template/")
            or rel.as_posix() in ("driver/_serve.py", "dev/_loadcheck.py")
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


# --- One face per room: a module exports what it defines; importers use the home or the face.

REPO = PACKAGE.parent

#: Names a module may export without defining them, with the reason (at most 10 in all).
REEXPORTS_ALLOWED: dict[tuple[str, str], str] = {
    ("agent_kit.environment", "tool"): "Strands' @tool, the authoring API's documented decorator",
}


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_of(p): p for p in PACKAGE.rglob("*.py")}


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The module's own statements, those under a top-level ``if``/``try`` included."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _top_level(block)
            for handler in node.handlers:
                yield from _top_level(handler.body)


def _assigned(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _assigned(element)


@functools.cache
def _defines(module: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """(names the module defines, its ``__all__``)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    defined: set[str] = set()
    exported: list[str] = []
    for node in _top_level(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                defined.update(_assigned(target))
                if isinstance(target, ast.Name) and target.id == "__all__":
                    assert isinstance(node.value, ast.List | ast.Tuple), module
                    exported = [ast.literal_eval(e) for e in node.value.elts]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            defined.update(_assigned(node.target))
    return frozenset(defined), tuple(exported)


def _faces(module: str, name: str) -> bool:
    """Whether ``from module import name`` finds ``name`` where it belongs."""
    if f"{module}.{name}" in MODULES:  # a submodule
        return True
    defined, exported = _defines(module)
    if name in defined or (module, name) in REEXPORTS_ALLOWED:
        return True
    return MODULES[module].name == "__init__.py" and name in exported


def _agent_kit_imports(roots: list[Path]) -> Iterator[tuple[str, int, str, str]]:
    """(file, line, module, name) of every ``from agent_kit… import name`` under ``roots``."""
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except SyntaxError:  # a cookiecutter template's source
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in MODULES:
                    for alias in node.names:
                        rel = path.relative_to(REPO).as_posix()
                        yield rel, node.lineno, node.module, alias.name


def test_a_module_exports_only_what_it_defines() -> None:
    """Every ``__all__`` outside a package's face names things its module defines."""
    assert len(REEXPORTS_ALLOWED) <= 10
    offenders = []
    for module, path in sorted(MODULES.items()):
        if path.name == "__init__.py":
            continue
        defined, exported = _defines(module)
        offenders += [
            f"{module}: {name}"
            for name in exported
            if name not in defined and (module, name) not in REEXPORTS_ALLOWED
        ]
    assert offenders == []


def test_importers_use_the_defining_module_or_the_face() -> None:
    """``from agent_kit.X import Y`` names the module that defines Y, a face (a package's
    ``__init__``) exporting it, or a submodule Y of X: in the package, tests, bench, examples."""
    roots = [PACKAGE, REPO / "tests", REPO / "bench", REPO / "examples", REPO / "templates"]
    offenders = [
        f"{file}:{line}: from {module} import {name}"
        for file, line, module, name in _agent_kit_imports([r for r in roots if r.is_dir()])
        if not _faces(module, name)
    ]
    assert offenders == []


def test_no_private_name_is_imported_across_modules() -> None:
    """No agent_kit module imports another's ``_private`` name (dunders aside)."""
    offenders = [
        f"{file}:{line}: from {module} import {name}"
        for file, line, module, name in _agent_kit_imports([PACKAGE])
        if name.startswith("_") and not name.startswith("__")
    ]
    assert offenders == []


def test_every_face_name_is_importable_and_lazy_ones_name_their_home() -> None:
    """Each package face's ``__all__`` imports; a lazy face's ``_HOME``/``_HOMES`` entry names
    the module that defines the name. The package's face lists ``Judge`` and ``SimulatedUser``."""
    assert {"Judge", "SimulatedUser"} <= set(agent_kit.__all__)
    assert sorted(agent_kit._HOME) == agent_kit.__all__
    for face, path in sorted(MODULES.items()):
        if path.name != "__init__.py":
            continue
        module = importlib.import_module(face)
        homes: dict[str, str] = getattr(module, "_HOMES", getattr(module, "_HOME", {}))
        for name in getattr(module, "__all__", ()):
            assert getattr(module, name) is not None, f"{face}.{name}"
            if name in homes:
                home = homes[name] if homes[name] in MODULES else f"{face}.{homes[name]}"
                assert _faces(home, name), f"{face}.{name} -> {home}"


# --- No private attribute read across modules: ``x._name`` stays in the module defining it.

#: Private attributes a module may reach on another module's objects, with the reason.
PRIVATE_ATTRIBUTES_ALLOWED: dict[tuple[str, str], str] = {
    ("agent_kit.episode_loop", "_attach"): (
        "the episode loop's hook into the Environment base class, private so that an author's "
        "subclass never meets it in its own API"
    ),
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _own(target: ast.expr) -> bool:
    """Whether ``target`` is ``self``/``cls`` (an attribute the class sets on itself)."""
    return isinstance(target, ast.Name) and target.id in ("self", "cls")


def _defined_names(tree: ast.Module) -> Iterator[str]:
    """What a module defines: its and its classes' ``def``/``class`` and assigned names, and
    the attributes its classes set on ``self``/``cls`` (never a function's local)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _own(node.value):
            yield node.attr
    scopes = [tree.body, *(c.body for c in ast.walk(tree) if isinstance(c, ast.ClassDef))]
    for body in scopes:
        for node in _top_level(body):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield node.name
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    yield from _assigned(target)
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                yield from _assigned(node.target)


@functools.cache
def _private_definitions() -> dict[str, frozenset[str]]:
    """Private name → the agent_kit modules defining it (:func:`_defined_names`)."""
    found: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        for name in _defined_names(ast.parse(path.read_text(encoding="utf-8"))):
            if _private(name):
                found.setdefault(name, set()).add(module)
    return {name: frozenset(modules) for name, modules in found.items()}


def _private_reaches(tree: ast.Module) -> Iterator[tuple[int, ast.expr, str]]:
    """(line, object, name) of every ``obj._name`` and ``getattr(obj, "_name")`` (set-,
    has-, delattr too) in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            yield node.lineno, node.value, node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            yield node.lineno, node.args[0], node.args[1].value


def test_no_private_attribute_is_read_across_modules() -> None:
    """No agent_kit module reaches ``obj._name`` (or ``getattr(obj, "_name")``) where ``_name``
    is defined by another agent_kit module and not by itself, unless ``obj`` is ``self``,
    ``cls``, ``super()`` or a class of its own (dunders, and other libraries' privates, are out of
    this rule; the allowed cases are listed above with a reason each)."""
    definitions = _private_definitions()
    offenders = []
    allowed: set[tuple[str, str]] = set()
    for module, path in sorted(MODULES.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        for line, target, name in _private_reaches(tree):
            if _own(target) or (isinstance(target, ast.Name) and target.id in classes):
                continue
            if isinstance(target, ast.Call) and ast.unparse(target.func) == "super":
                continue
            defined_in = definitions.get(name, frozenset())
            if module in defined_in or not defined_in:
                continue
            if (module, name) in PRIVATE_ATTRIBUTES_ALLOWED:
                allowed.add((module, name))
            else:
                offenders.append(f"{module}:{line}: {ast.unparse(target)}.{name}")
    assert offenders == []
    assert allowed == set(PRIVATE_ATTRIBUTES_ALLOWED), "an allowed case that no longer occurs"
