"""Preflight checks of one AgentCore entrypoint file before packaging (tooling half).

Two stages, both raising :class:`~agent_kit.errors.DeployError` or
:class:`~agent_kit.errors.UsageError` with a readable message:

- :func:`preflight`: static checks (the runtime name is valid; the file parses, binds a
  module-level ``app`` and calls ``app.run()`` under ``if __name__ == "__main__":``);
- :func:`check_import`: after staging, the staged entrypoint is imported in a fresh interpreter
  to prove the sources and the copied runtime half of agent_kit are complete.

Used by :func:`agent_kit.deploy.package.package`; :data:`RUNTIME_NAME_PATTERN` is also used by
:mod:`agent_kit.deploy.agentcore`.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Final

from agent_kit.errors import DeployError, UsageError

__all__ = [
    "IMPORT_TIMEOUT_S",
    "RUNTIME_NAME_PATTERN",
    "check_import",
    "default_name",
    "preflight",
]

#: AgentCore runtime names (CreateAgentRuntime ``agentRuntimeName``): no hyphens.
RUNTIME_NAME_PATTERN: Final = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]{0,47}$")
IMPORT_TIMEOUT_S: Final = 120.0


def default_name(entrypoint: Path) -> str:
    """A valid runtime name derived from the entrypoint's directory (or file) name."""
    base = entrypoint.resolve().parent.name
    if base in {"", ".", "src", "app"}:
        base = entrypoint.stem
    name = re.sub(r"[^a-zA-Z0-9_]", "_", base).strip("_")
    if not name or not name[0].isalpha():
        name = f"agent_{name}".rstrip("_")
    return name[:48]


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    parts = [test.left, *test.comparators]
    names = {p.id for p in parts if isinstance(p, ast.Name)}
    consts = {p.value for p in parts if isinstance(p, ast.Constant)}
    return names == {"__name__"} and consts == {"__main__"} and isinstance(test.ops[0], ast.Eq)


def _calls_app_run(node: ast.stmt) -> bool:
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr == "run"
            and isinstance(sub.func.value, ast.Name)
            and sub.func.value.id == "app"
        ):
            return True
    return False


def preflight(entrypoint: Path, name: str) -> None:
    """Static checks: the file parses, binds module variable ``app``, calls ``app.run()`` under
    ``if __name__ == "__main__":``, and ``name`` is a valid AgentCore runtime name."""
    if not RUNTIME_NAME_PATTERN.match(name):
        raise UsageError(
            f"invalid runtime name {name!r}: AgentCore runtime names match "
            "[a-zA-Z][a-zA-Z0-9_]{0,47} (letters, digits, underscores; no hyphens)"
        )
    if not entrypoint.is_file() or entrypoint.suffix != ".py":
        raise UsageError(f"entrypoint {entrypoint} is not a .py file")
    source = entrypoint.read_text(encoding="utf-8")
    try:
        tree = ast.parse(source, filename=str(entrypoint))
    except SyntaxError as exc:
        raise DeployError(f"{entrypoint}:{exc.lineno}: syntax error: {exc.msg}") from None
    binds_app = False
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "app" for t in targets):
            binds_app = True
    if not binds_app:
        raise DeployError(
            f"{entrypoint}: no module-level variable named `app`; AgentCore (and `agentcore dev`) "
            "import the entrypoint and serve `app`, e.g. `app = RolloutApp(...)`"
        )
    guards = [n for n in tree.body if _is_main_guard(n)]
    if not any(_calls_app_run(g) for g in guards):
        raise DeployError(
            f'{entrypoint}: missing `if __name__ == "__main__": app.run()`; the AgentCore '
            "container and direct code deploy start the server by running the file"
        )


def check_import(source_dir: Path, module: str, *, timeout: float = IMPORT_TIMEOUT_S) -> str:
    """Import the staged entrypoint in a fresh interpreter; return the type name of ``app``."""
    code = (
        "import importlib, sys\n"
        "mod = importlib.import_module(sys.argv[1])\n"
        "app = getattr(mod, 'app', None)\n"
        "if app is None or not callable(getattr(app, 'run', None)):\n"
        "    sys.exit('module variable `app` is missing or has no run()')\n"
        "kit = sys.modules.get('agent_kit')\n"
        "if kit is not None and not kit.__file__.startswith(sys.argv[2]):\n"
        "    sys.exit('agent_kit was imported from ' + kit.__file__ + ', not the package')\n"
        "print(type(app).__module__ + '.' + type(app).__qualname__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(source_dir)
    env.setdefault("AWS_DEFAULT_REGION", "us-west-2")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, module, str(source_dir.resolve()) + os.sep],
            cwd=source_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DeployError(
            f"importing {module} took longer than {timeout:.0f} s; does it start work at import "
            "time? Move it under `if __name__ == '__main__':` or into the entrypoint"
        ) from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise DeployError(f"the packaged entrypoint does not import cleanly:\n{tail}")
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
