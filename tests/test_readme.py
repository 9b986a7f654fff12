"""The README front page runs as pasted: every ```bash / ```sh block, command by command, from
the root of a copy of the repository, with the venv's ``agent-kit`` where ``make run`` leaves it.

A block is deliberately not run only when the line before it is ``<!-- not-run: REASON -->``
(the two ``make`` commands: CI runs ``make test``, and this test stands for ``make run``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The venv this test runs in (``.venv`` after ``make test``).
VENV = Path(sys.executable).parent.parent
_BLOCK = re.compile(r"(?:^(<!--[^\n]*-->)\n)?^```(bash|sh)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_NOT_RUN = re.compile(r"<!-- not-run: (\S.*\S) -->")
#: Commands that would install into (or rebuild) the shared venv the copy links to: they belong
#: in a not-run block.
_INSTALLS = re.compile(r"^\s*(make|pip|python3? -m pip|uv pip)\b")
#: What a copy of the repository leaves out (build outputs, caches, the venv itself).
_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "runs", "build", "dist", "__pycache__", "*_cache", ".hypothesis", "*.egg-info"
)


def blocks(text: str) -> list[tuple[str | None, list[str]]]:
    """Each shell block of a markdown text: its not-run reason (None when it runs) and its
    commands (continuation lines joined, blank and comment-only lines dropped)."""
    found = []
    for match in _BLOCK.finditer(text):
        marker, _, body = match.groups()
        reason = None
        if marker is not None:
            why = _NOT_RUN.fullmatch(marker)
            assert why, f"an HTML comment before a shell block must be a not-run marker: {marker}"
            reason = why.group(1)
        lines = body.replace("\\\n", " ").splitlines()
        commands = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
        found.append((reason, commands))
    return found


def test_blocks_are_parsed_with_their_markers() -> None:
    """The parser joins continuations, drops comments and reads a not-run marker's reason."""
    text = (
        "<!-- not-run: needs a GPU -->\n```bash\nmake gpu\n```\n\n"
        "```sh\n# a comment\nagent-kit run a.py \\\n    --dataset d.jsonl\n\n```\n"
        "```python\nprint('not shell')\n```\n"
    )
    assert blocks(text) == [
        ("needs a GPU", ["make gpu"]),
        (None, ["agent-kit run a.py      --dataset d.jsonl"]),
    ]


def test_front_page_links_resolve() -> None:
    """Every relative link of the README names a file or folder of the repository."""
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    assert targets
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, missing


def test_front_page_commands_run_as_pasted(tmp_path: Path) -> None:
    """Every command of every README shell block not marked not-run exits 0, in order, from
    the root of a copy of the repository whose ``.venv`` is this test's venv; the not-run
    blocks are rare and each says why."""
    found = blocks(README.read_text(encoding="utf-8"))
    skipped = [reason for reason, _ in found if reason is not None]
    assert len(skipped) <= 1, skipped
    commands = [c for reason, cs in found if reason is None for c in cs]
    assert len(commands) >= 5, commands
    installs = [c for c in commands if _INSTALLS.match(c)]
    assert not installs, f"install commands would change this test's venv; mark them: {installs}"
    copy = tmp_path / "agent_kit"
    shutil.copytree(ROOT, copy, ignore=_IGNORE, symlinks=True)
    (copy / ".venv").symlink_to(VENV, target_is_directory=True)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(HOME=str(home), PATH=f"{VENV / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}")
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, (
            f"{command!r} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
