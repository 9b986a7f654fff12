"""Policy specs → backends: ``load_policy("scripted:policies.py:Solver")``.

The built-in schemes are named by module path and imported only when a spec asks for them, so
this registry never imports its members (and a plain run never loads what replay needs). Each
built-in module offers ``from_spec(rest, *, seed, base_dir, settings)`` (``settings``: the
:class:`~agent_kit.settings.Settings` the CLI read at its door, e.g. the ``hf`` policy's batch
and the token counter). Users add or replace schemes with :func:`register_policy_scheme`.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Final

from agent_kit.emulator.policies.base import PolicyBackend, PolicyFactory
from agent_kit.errors import UsageError
from agent_kit.settings import DEFAULTS, Settings

__all__ = [
    "BUILTIN_SCHEMES",
    "POLICY_HELP",
    "load_policy",
    "policy_schemes",
    "register_policy_scheme",
]

#: The ``--policy`` option's help, one line for every CLI command that takes it.
POLICY_HELP: Final = (
    "Policy spec: random[:SEED] | scripted:FILE.py:NAME | openai:URL[#MODEL] | "
    "local[:MODEL.gguf] (a small model on the CPU, the local-llm extra) | "
    "hf[:MODEL[+ADAPTER]] (a transformers model, a trained LoRA adapter; the train extra) | "
    "replay:RUN_DIR"
)

#: Built-in scheme → module offering ``from_spec(rest, *, seed, base_dir, settings)``.
BUILTIN_SCHEMES: Final = {
    "hf": "agent_kit.emulator.policies.hf",
    "local": "agent_kit.emulator.policies.local_llm",
    "openai": "agent_kit.emulator.policies.upstream",
    "random": "agent_kit.emulator.policies.randomized",
    "replay": "agent_kit.replay.policy",
    "scripted": "agent_kit.emulator.policies.scripted",
}
_REGISTERED: dict[str, PolicyFactory] = {}
_SCHEME_NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")


def register_policy_scheme(scheme: str, factory: PolicyFactory) -> None:
    """Make ``scheme:...`` specs load through ``factory(rest, seed)`` (replaces any previous,
    built-ins included).

    ``scheme`` is lower-case letters, digits, ``_`` or ``-``, starting with a letter. The factory
    receives the text after the first ``:`` (``""`` if none) and the run seed, and should raise
    UsageError for a bad spec. Relative paths in ``rest`` are the factory's to resolve.
    """
    if not _SCHEME_NAME.match(scheme):
        raise ValueError(f"bad policy scheme name {scheme!r}")
    _REGISTERED[scheme] = factory


def policy_schemes() -> list[str]:
    """The known spec schemes, sorted."""
    return sorted({*BUILTIN_SCHEMES, *_REGISTERED})


def load_policy(
    spec: str,
    *,
    seed: int = 0,
    base_dir: Path | None = None,
    settings: Settings = DEFAULTS,
) -> PolicyBackend:
    """Build the backend a spec names; UsageError (listing the known schemes) if it can't.

    ``seed`` is the run seed (``random`` uses it unless the spec gives one); ``base_dir``
    resolves relative paths of the built-in schemes (default: the current directory);
    ``settings`` are the ``AGENT_KIT_*`` settings the built-in schemes read (default: every
    default). A registered factory is called ``factory(rest, seed)``.
    """
    scheme, _, rest = spec.strip().partition(":")
    scheme = scheme.strip().lower()
    factory = _REGISTERED.get(scheme)
    if factory is not None:
        return factory(rest, seed)
    module_name = BUILTIN_SCHEMES.get(scheme)
    if module_name is None:
        known = ", ".join(f"{s}:" for s in policy_schemes())
        raise UsageError(f"unknown policy spec {spec!r}; known schemes: {known}")
    backend: PolicyBackend = importlib.import_module(module_name).from_spec(
        rest, seed=seed, base_dir=base_dir, settings=settings
    )
    return backend
