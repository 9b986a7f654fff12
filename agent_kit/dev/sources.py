"""What a dev loop watches, and the policy a project plays by default.

The loop watches three kinds of file, each with its own consequence on a save:

- **agent** files: the entrypoint and the modules beside it that it imports, transitively
  (:func:`local_imports`: ``import helper``, ``from pkg import mod`` and relative imports,
  resolved in the folder the loader puts first on ``sys.path`` — the entrypoint's — and in
  the packages they name; the standard library and installed packages are not watched). A
  change restarts the agent processes;
- **policy** files: a ``scripted:FILE.py:NAME`` policy's file and the modules beside it that it
  imports. A change reloads the policy in the loop's own process;
- the **dataset**: a change is read by the next iteration.

Imports are read from the files' syntax trees, never by importing them, and again after every
save (a new ``import`` is watched from the next iteration on).

A project names the policy it plays by default in a ``policies.py`` beside the entrypoint:
``DEFAULT_POLICY = "Solver"`` (the name of a class or function of that file; read without
importing it) makes the default ``scripted:<folder>/policies.py:Solver``
(:func:`default_policy`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "DEFAULT_POLICY_NAME",
    "POLICIES_FILE",
    "Changes",
    "Sources",
    "default_policy",
    "local_imports",
    "scripted_file",
]

#: The file beside an entrypoint that holds the project's scripted policies.
POLICIES_FILE: Final = "policies.py"
#: The module-level name in it that says which of them plays by default.
DEFAULT_POLICY_NAME: Final = "DEFAULT_POLICY"
_SCRIPTED: Final = "scripted:"


def local_imports(file: Path) -> frozenset[Path]:
    """``file`` and every module beside it that it imports, transitively (resolved paths; see
    the module docstring). A file that does not parse adds only itself: its load says why."""
    start = file.resolve()
    root = start.parent
    found: set[Path] = set()
    todo = [start]
    while todo:
        path = todo.pop()
        if path in found:
            continue
        found.add(path)
        todo.extend(p for p in _imports_of(path, root) if p not in found)
    return frozenset(found)


def _imports_of(path: Path, root: Path) -> list[Path]:
    """The local files one module's import statements run (anywhere in it, lazy ones too)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    files: list[Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                files += _module_files(root, alias.name.split("."))
        elif isinstance(node, ast.ImportFrom):
            base = root
            if node.level:
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
            parts = node.module.split(".") if node.module else []
            files += _module_files(base, parts)
            for alias in node.names:  # ``from pkg import mod`` may name a submodule
                files += _module_files(base, [*parts, alias.name])
    return files


def _module_files(base: Path, parts: Sequence[str]) -> list[Path]:
    """The files importing ``a.b.c`` from ``base`` runs: each package's ``__init__.py`` on the
    way and the module itself; nothing for a name that is not a file under ``base``."""
    files: list[Path] = []
    folder = base
    for i, part in enumerate(parts):
        if not part.isidentifier():
            break
        package = folder / part
        if (package / "__init__.py").is_file():
            files.append((package / "__init__.py").resolve())
        elif i == len(parts) - 1 and (folder / f"{part}.py").is_file():
            files.append((folder / f"{part}.py").resolve())
            break
        elif not package.is_dir():  # neither a package nor a namespace folder
            break
        folder = package
    return files


def default_policy(entrypoint: Path) -> str | None:
    """``scripted:<folder>/policies.py:NAME`` when a ``policies.py`` beside ``entrypoint``
    declares ``DEFAULT_POLICY = "NAME"`` at module level; None otherwise."""
    file = entrypoint.resolve().parent / POLICIES_FILE
    try:
        tree = ast.parse(file.read_bytes(), filename=str(file))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        named = any(isinstance(t, ast.Name) and t.id == DEFAULT_POLICY_NAME for t in targets)
        if named and isinstance(value, ast.Constant) and isinstance(value.value, str):
            return f"{_SCRIPTED}{file}:{value.value}"
    return None


def scripted_file(spec: str) -> Path | None:
    """The file of a ``scripted:FILE.py[:NAME]`` policy spec (resolved), None for another."""
    if not spec.startswith(_SCRIPTED):
        return None
    rest = spec[len(_SCRIPTED) :]
    file = rest if rest.endswith(".py") else rest.rpartition(":")[0]
    return Path(file).expanduser().resolve() if file else None


@dataclass(frozen=True)
class Changes:
    """What one batch of saves touched: the agent's code, the policy's, the dataset; and the
    files' names, as the verdict shows them."""

    agent: bool = False
    policy: bool = False
    dataset: bool = False
    names: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        """True when a watched file changed."""
        return self.agent or self.policy or self.dataset


@dataclass(frozen=True)
class Sources:
    """The files one dev loop watches (see the module docstring), as of the last scan."""

    entrypoint: Path
    dataset: Path
    agent: frozenset[Path]
    policy: frozenset[Path]

    @classmethod
    def scan(cls, entrypoint: Path, dataset: Path, policy_file: Path | None) -> Sources:
        """Read the imports again: the entrypoint's, and the policy file's when there is one."""
        policy = local_imports(policy_file) if policy_file is not None else frozenset()
        return cls(entrypoint.resolve(), dataset.resolve(), local_imports(entrypoint), policy)

    @property
    def files(self) -> frozenset[Path]:
        """Every watched file."""
        return self.agent | self.policy | {self.dataset}

    @property
    def folders(self) -> frozenset[Path]:
        """The folders the watched files are in (watched one level deep each)."""
        return frozenset(p.parent for p in self.files)

    def changes(self, paths: Iterable[Path]) -> Changes:
        """What a batch of changed ``paths`` touched (paths outside the sources are ignored)."""
        touched = {p.resolve() for p in paths} & self.files
        names = sorted({self._name(p) for p in touched})
        return Changes(
            agent=bool(touched & self.agent),
            policy=bool(touched & self.policy),
            dataset=self.dataset in touched,
            names=tuple(names),
        )

    def _name(self, path: Path) -> str:
        """A watched file's name as the verdict shows it: relative to the entrypoint's folder
        when it is under it, else the file name."""
        try:
            return str(path.relative_to(self.entrypoint.parent))
        except ValueError:
            return path.name
