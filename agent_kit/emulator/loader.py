"""The one loader for user files: entrypoints, scripted policies and replay targets.

:func:`load_module` imports a Python file by path the same way everywhere agent_kit runs user
code (the agent subprocess, the in-process test kit, ``scripted:`` policies, in-process replay):

- the file's folder is put at the front of ``sys.path``, so ``import helper`` beside ``agent.py``
  works under ``agent-kit run``, ``run_episode`` and ``replay --in-process`` alike;
- the module gets a unique name per resolved path (or the one the caller asks for) and is cached
  in ``sys.modules``: loading the same file twice returns the same module;
- a failed import leaves nothing behind in ``sys.modules``, so every later attempt reports the
  real error again instead of a confusing "has no attribute" on a half-built module.

Failures raise :class:`~agent_kit.errors.UsageError` whose ``__cause__`` is the user's exception.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from agent_kit.errors import UsageError

__all__ = ["load_entrypoint", "load_module", "module_name_for"]


def module_name_for(path: Path, prefix: str = "agent_kit_user") -> str:
    """A module name unique to ``path`` (its stem plus a short digest of the full path)."""
    stem = re.sub(r"\W", "_", path.stem) or "module"
    digest = hashlib.blake2b(str(path).encode(), digest_size=5).hexdigest()
    return f"{prefix}_{stem}_{digest}"


def load_module(file: str | Path, *, name: str | None = None, what: str = "file") -> ModuleType:
    """Import ``file`` (see the module docstring); ``what`` names it in error messages."""
    path = Path(file).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"{what} not found: {path}")
    module_name = name or module_name_for(path)
    cached = sys.modules.get(module_name)
    if cached is not None and getattr(cached, "__file__", None) == str(path):
        return cached
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {what} {path} (not a Python file?)")
    folder = str(path.parent)
    if folder in sys.path:
        sys.path.remove(folder)
    sys.path.insert(0, folder)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(module_name, None)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise UsageError(f"importing {what} {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def load_entrypoint(file: str | Path, *, name: str | None = None) -> Any:
    """Load an entrypoint file and return its module-level ``app`` (any ASGI callable).

    UsageError when the file is missing, fails to import, or has no callable ``app``.
    """
    module = load_module(file, name=name, what="entrypoint")
    app = getattr(module, "app", None)
    if app is None or not callable(app):
        raise UsageError(
            f"{module.__file__} has no module-level ASGI `app` (a BedrockAgentCoreApp) to serve"
        )
    return app
