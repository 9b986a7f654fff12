"""The Makefile's bootstrap: `make run` installs what running needs, `make test` adds the rest.

Real ``make -n`` (dry runs: the recipes are printed, nothing is installed) of this repository's
Makefile against a venv path in a temporary folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")

pytestmark = pytest.mark.e2e


def _dry_run(target: str, venv: Path) -> list[str]:
    """The install commands ``make -n TARGET`` would run with ``VENV=venv``."""
    assert MAKE, "make is the README's entry point"
    done = subprocess.run(
        [MAKE, "-n", "-C", str(ROOT), target, f"VENV={venv}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "MAKEFLAGS": ""},
    )
    return [line for line in done.stdout.splitlines() if "pip install" in line]


def _fresh(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "browser").mkdir(parents=True)
    (venv / "browser" / ".installed-stamp").touch()  # the browser is not what is checked here
    return venv


def test_make_run_installs_only_what_running_needs(tmp_path: Path) -> None:
    """On a fresh venv `make run` installs agent_kit with its runtime dependencies under the
    constraints, and neither the dev extra nor the local model."""
    installs = _dry_run("run", _fresh(tmp_path))
    project = [line for line in installs if " -e " in line]
    assert project, installs
    assert all(line.rstrip().endswith(" -e .") for line in project), project
    assert all("-c constraints.txt" in line for line in project), project
    assert not any("[dev]" in line or "smollm2" in line for line in installs), installs


def test_make_test_on_a_fresh_venv_installs_both_under_the_constraints(tmp_path: Path) -> None:
    """On a fresh venv `make test` installs the run part, then the dev extra, every install
    of the project constrained by constraints.txt."""
    installs = _dry_run("test", _fresh(tmp_path))
    project = [line for line in installs if " -e " in line]
    assert [line.split(" -e ", 1)[1].strip() for line in project] == [".", "'.[dev]'"]
    assert all("-c constraints.txt" in line for line in project), project


def test_make_test_after_make_run_adds_only_the_rest(tmp_path: Path) -> None:
    """After `make run` (its stamp newer than pyproject.toml and constraints.txt), `make test`
    installs the dev extra and the local model only: no new venv, no second run install."""
    venv = _fresh(tmp_path)
    (venv / ".run-stamp").touch()
    installs = _dry_run("test", venv)
    assert installs
    assert not any(line.rstrip().endswith(" -e .") for line in installs), installs
    assert not any("--upgrade pip" in line for line in installs), installs
    assert any(line.rstrip().endswith("-e '.[dev]'") for line in installs), installs


@pytest.mark.parametrize("target", ["run", "test"])
def test_nothing_is_installed_twice(tmp_path: Path, target: str) -> None:
    """With both stamps current, neither command installs anything."""
    venv = _fresh(tmp_path)
    (venv / ".run-stamp").touch()
    (venv / ".test-stamp").touch()
    assert _dry_run(target, venv) == []


def test_make_test_installs_torch_with_pip_before_uv(tmp_path: Path) -> None:
    """torch is installed by pip (which takes the CPU build this machine kind keeps on disk,
    pinned by constraints.txt) before uv installs the dev extra (uv would download PyPI's
    CUDA build: it does not look on the disk, and keeps a torch it finds installed)."""
    installs = _dry_run("test", _fresh(tmp_path))
    torch = [i for i, line in enumerate(installs) if line.rstrip().endswith(" torch")]
    dev = [i for i, line in enumerate(installs) if line.rstrip().endswith("-e '.[dev]'")]
    assert torch, installs
    assert dev, installs
    assert "uv pip" not in installs[torch[0]]
    assert "-c constraints.txt" in installs[torch[0]]
    assert torch[0] < dev[0]


def _named_targets(text: str) -> set[str]:
    """The ``make TARGET`` a page names: in its code blocks, and in its inline code spans."""
    import re

    blocks = re.findall(r"```.*?\n(.*?)```", text, re.S)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    found: set[str] = set()
    for chunk in [*blocks, *spans]:
        found.update(re.findall(r"(?<![\w-])make ([a-z][a-z-]*)", chunk))
    return found


def test_every_make_target_the_docs_name_exists() -> None:
    """Each ``make TARGET`` in the README's and docs' code (blocks and inline spans) is a
    target of the Makefile (docs/mlflow.md named a ``make install`` there is none of)."""
    import re

    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.M))
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = {(p.name, t) for p in pages for t in _named_targets(p.read_text(encoding="utf-8"))}
    assert {(page, t) for page, t in named if t not in targets} == set()
    assert ("mlflow.md", "test") in named
