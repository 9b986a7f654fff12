"""Every extra installs what its feature imports (pyproject.toml's optional dependencies).

What a feature imports is read from agent_kit's own source (every import of a third-party
module, lazy ones included, by an AST scan); what an extra installs is its requirements and
their declared dependencies, read from the installed distributions' metadata
(``importlib.metadata``), with the base dependencies beside them. A subprocess imports the
modules a feature needs with every other installed distribution hidden (its files not found,
its metadata absent), as in a fresh environment holding agent_kit and that extra alone: a
library that imports an undeclared dependency there (mlflow-skinny's ``mlflow.types`` needs
numpy, which it does not declare) fails the test, while its optional imports (a ``try: import
pandas``) find nothing, as they would.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
from functools import cache
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any, Final

import pytest
import tomllib
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PROJECT: Final = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS: Final = sorted(e for e in PROJECT["optional-dependencies"] if e != "dev")
#: Third-party modules agent_kit imports that no extra installs, and why.
OUTSIDE_EXTRAS: Final = {
    "pytest": "the test kit's pytest plugin runs inside the user's pytest",
    "moto": "the rl-toolkit contract's local S3, from the dev extra (the error says so)",
    "tiktoken": "an optional token counter, used when the user installed it",
}

#: Run in a fresh interpreter: argv[1] the allowed distributions (JSON), then the modules.
PROBE: Final = r"""
import importlib, importlib.machinery, importlib.metadata as md, json, os, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
allowed = set(json.loads(sys.argv[1]))
hidden, kept = set(), set()
for dist in md.distributions():
    into = kept if norm(dist.metadata["Name"] or "") in allowed else hidden
    into.update(os.path.normpath(dist.locate_file(f)) for f in dist.files or ())
hidden -= kept
Path = importlib.machinery.PathFinder

class Hide:
    def find_spec(self, fullname, path=None, target=None):
        spec = Path.find_spec(fullname, path, target)
        if spec is not None and spec.origin and os.path.normpath(spec.origin) in hidden:
            return None
        return spec

    def find_distributions(self, *args, **kwargs):
        for dist in Path.find_distributions(*args, **kwargs):
            if norm(dist.metadata["Name"] or "") in allowed:
                yield dist

    def invalidate_caches(self):
        Path.invalidate_caches()

sys.meta_path = [Hide() if f is Path else f for f in sys.meta_path]
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
    except ImportError as exc:
        print(json.dumps({"module": name, "missing": exc.name, "error": str(exc)[:300]}))
        sys.exit(1)
print(json.dumps({"ok": True}))
"""


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(requirements: list[str]) -> frozenset[str]:
    """The distributions ``requirements`` install: themselves and their declared dependencies
    (markers evaluated, extras followed; ``agent_kit[x]`` read from pyproject.toml)."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    stack = [Requirement(r) for r in requirements]
    while stack:
        req = stack.pop()
        if _norm(req.name) == "agent-kit":
            wanted = (PROJECT["optional-dependencies"][e] for e in req.extras)
            stack += [Requirement(r) for group in wanted for r in group]
            continue
        key = (_norm(req.name), tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen.add(key)
        try:
            declared = md.requires(req.name) or []
        except md.PackageNotFoundError:
            continue
        envs = [{"extra": e} for e in (req.extras or {""})]
        for text in declared:
            dep = Requirement(text)
            if dep.marker is None or any(dep.marker.evaluate(env) for env in envs):
                stack.append(dep)
    return frozenset(name for name, _ in seen)


@cache
def _base() -> frozenset[str]:
    return _closure(PROJECT["dependencies"])


@cache
def _extra(extra: str) -> frozenset[str]:
    return _closure(PROJECT["optional-dependencies"][extra])


@cache
def _imports() -> frozenset[str]:
    """Every third-party module agent_kit imports (dotted, lazy imports included)."""
    found: set[str] = set()
    for path in (ROOT / "agent_kit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
    top = {"agent_kit", "__future__", *sys.stdlib_module_names}
    return frozenset(m for m in found if m.split(".")[0] not in top)


@cache
def _owners(module: str) -> frozenset[str]:
    """The distributions whose files hold ``module`` (found without running its packages'
    code, namespace packages aside; a module not installed has none)."""
    parts, path, spec = module.split("."), None, None
    for i in range(len(parts)):
        spec = PathFinder.find_spec(".".join(parts[: i + 1]), path)
        if spec is None:
            return frozenset()
        if spec.origin is None:  # a namespace package (no code): its path needs it imported
            importlib.import_module(".".join(parts[: i + 1]))
        path = spec.submodule_search_locations
    candidates = _top_level().get(parts[0], [])
    origin = os.path.normpath(spec.origin) if spec is not None and spec.origin else None
    owners = {_norm(d) for d in candidates if origin in _files(d)}
    return frozenset(owners or {_norm(d) for d in candidates})


@cache
def _top_level() -> dict[str, list[str]]:
    return dict(md.packages_distributions())


@cache
def _files(name: str) -> frozenset[str]:
    """The paths of a distribution's files, as an import finds them."""
    dist = md.distribution(name)
    return frozenset(os.path.normpath(dist.locate_file(f)) for f in dist.files or ())


def test_every_third_party_import_is_installed_by_the_base_or_an_extra() -> None:
    """Each third-party module agent_kit imports comes with its base dependencies or with one of
    its extras (else it is a named exception: the user's pytest, the dev extra, an optional
    counter)."""
    provided = _base().union(*(_extra(e) for e in EXTRAS))
    stray = {
        m: sorted(owners)
        for m in sorted(_imports())
        if (owners := _owners(m))
        and not owners & provided
        and m.split(".")[0] not in OUTSIDE_EXTRAS
    }
    assert stray == {}


def _feature_modules(extra: str) -> list[str]:
    """The modules agent_kit imports that ``extra`` (not the base) installs."""
    mine, base = _extra(extra), _base()
    return sorted(m for m in _imports() if (o := _owners(m)) and o & mine and not o & base)


@pytest.mark.e2e
@pytest.mark.parametrize("extra", EXTRAS)
def test_an_extra_alone_imports_everything_its_feature_imports(extra: str) -> None:
    """With only agent_kit's base dependencies and ``extra`` visible (every other installed
    distribution hidden), every module of the feature imports: nothing it needs is missing
    from the extra (mlflow-skinny needs numpy, which the mlflow extra must list)."""
    modules = _feature_modules(extra)
    if not modules:
        pytest.skip(f"agent_kit imports nothing the {extra} extra alone installs")
    direct = [Requirement(r).name for r in PROJECT["optional-dependencies"][extra]]
    missing = [name for name in direct if not _installed(name)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed here")
    allowed = sorted(_base() | _extra(extra) | {"agent-kit"})
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(allowed), *modules],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )
    lines = proc.stdout.strip().splitlines()
    answer: dict[str, Any] = json.loads(lines[-1]) if lines else {"error": proc.stderr[-2000:]}
    assert answer == {"ok": True}, f"the {extra} extra lacks what {answer} needs"


def _installed(name: str) -> bool:
    try:
        md.distribution(name)
    except md.PackageNotFoundError:
        return False
    return True


def test_the_constraints_pin_versions_the_extras_accept() -> None:
    """Where constraints.txt pins a distribution an extra requires, the pin satisfies the
    extra's version range (the two files agree)."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and not name.startswith("#"):
            pins[_norm(name)] = version
    clashes = [
        f"{extra}: {text} vs {pins[_norm(req.name)]}"
        for extra, reqs in PROJECT["optional-dependencies"].items()
        for text in reqs
        if _norm((req := Requirement(text)).name) in pins
        and not req.specifier.contains(pins[_norm(req.name)], prereleases=True)
    ]
    assert clashes == []
