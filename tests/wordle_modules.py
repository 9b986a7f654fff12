"""The Wordle example's modules, imported by path once for all Wordle tests.

``examples/wordle`` is not a package (its files deploy as one flat directory), so tests load
``simulate.py`` by file path; it in turn loads ``agent.py`` and ``policies.py``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

WORDLE = Path(__file__).resolve().parents[1] / "examples" / "wordle"


def load(stem: str) -> ModuleType:
    """Import ``examples/wordle/<stem>.py`` once (cached in ``sys.modules``) and return it."""
    name = f"wordle_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, WORDLE / f"{stem}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


sim = load("simulate")
agent = sim.agent_module()
policies = sim.policies_module()
