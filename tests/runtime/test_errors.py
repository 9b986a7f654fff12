"""The one exception tree: every public exception of agent_kit is in errors.py and its docstring."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import agent_kit
from agent_kit import errors
from agent_kit.errors import AgentKitError

PACKAGE = Path(agent_kit.__file__).parent
#: Shipped alone as the forwarder Lambda's code: it may import nothing of agent_kit.
OUTSIDE_THE_PACKAGE = PACKAGE / "deploy" / "lambda_template"
_TREE_LINE = re.compile(r"^    (?P<indent>(?:[│ ]   )*)(?:[├└]── )?(?P<name>[A-Z]\w+)\s")


def _exception_classes() -> dict[str, list[str]]:
    """Every exception class defined in agent_kit (by its bases, to a fixpoint): name → files."""
    known = {
        n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)
    }
    classes: list[tuple[str, list[str], str]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if OUTSIDE_THE_PACKAGE in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                classes.append((node.name, bases, str(path.relative_to(PACKAGE))))
    found: dict[str, list[str]] = {}
    grew = True
    while grew:
        grew = False
        for name, bases, where in classes:
            if where not in found.get(name, []) and any(b in known for b in bases):
                known.add(name)
                found.setdefault(name, []).append(where)
                grew = True
    return found


def _tree() -> dict[str, str | None]:
    """The docstring's tree: class name → its parent's name (None for the root)."""
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        match = _TREE_LINE.match(line)
        if match is None or not (line.startswith("    AgentKitError") or "── " in line):
            continue
        depth = 0 if "── " not in line else len(match["indent"]) // 4 + 1
        del stack[depth:]
        parents[match["name"]] = stack[-1] if stack else None
        stack.append(match["name"])
    return parents


def test_every_public_exception_is_defined_in_errors_py() -> None:
    """No public exception class is defined outside errors.py (private helpers may be)."""
    outside = {
        name: where
        for name, where in _exception_classes().items()
        if not name.startswith("_") and where != ["errors.py"]
    }
    assert outside == {}


def test_every_exception_in_errors_py_is_in_the_tree_and_derives_from_agent_kit_error() -> None:
    """Each exception class of errors.py derives from AgentKitError, is in ``__all__``, and the
    docstring's tree draws it under its real parent."""
    defined = {
        name: value
        for name, value in vars(errors).items()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == errors.__name__
    }
    tree = _tree()
    assert set(defined) == set(tree)
    assert set(defined) <= set(errors.__all__)
    for name, cls in defined.items():
        assert issubclass(cls, AgentKitError), name
        parent = tree[name]
        if parent is not None:
            assert cls.__bases__[0] is defined[parent], name
    assert set(_exception_classes()) >= set(defined)


def test_simulated_user_error_is_still_a_runtime_error() -> None:
    """SimulatedUserError joined the tree (an environment failure) and stays a RuntimeError."""
    exc = errors.SimulatedUserError("simulated user: no message")
    assert isinstance(exc, RuntimeError)
    assert isinstance(exc, errors.EnvironmentFailure)
    assert exc.exit_code == 6
    assert str(exc) == "simulated user: no message"
