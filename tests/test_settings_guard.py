"""Settings are read at two doors only, and docs/settings.md lists every one of them.

- The guard: an AST scan of agent_kit/ finds no module, other than agent_kit/settings.py and
  the two doors (the CLI's root, agent_kit/cli/__init__.py; the agent's entry,
  agent_kit/app.py), that reads an ``AGENT_KIT_*`` variable through ``os.environ`` /
  ``os.getenv`` (a literal name, a module constant naming one, or ``env_name(...)``), lets
  click read one (``envvar=``), or calls ``Settings.from_environ``.
- The page: docs/settings.md holds, between its markers, the table rendered from
  :func:`agent_kit.settings.settings_table` (``AGENT_KIT_REGEN_GOLDEN=1`` rewrites it).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import agent_kit
from agent_kit.settings import PREFIX, settings_table

PACKAGE = Path(agent_kit.__file__).parent
ROOT = PACKAGE.parent
DOORS = frozenset({"settings.py", "cli/__init__.py", "app.py"})
PAGE = ROOT / "docs" / "settings.md"
START = "<!-- settings table: generated from agent_kit/settings.py, do not edit -->"
END = "<!-- end of the settings table -->"
_READS = frozenset({"get", "getenv", "pop", "setdefault"})


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound to a string (``NAME = "…"``, ``NAME: Final = "…"``)."""
    found: dict[str, str] = {}
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if (
            isinstance(target, ast.Name)
            and isinstance(value, ast.Constant)
            and isinstance(value.value, str)
        ):
            found[target.id] = value.value
    return found


def _names_a_setting(node: ast.AST | None, constants: dict[str, str]) -> bool:
    """Whether ``node`` is an ``AGENT_KIT_*`` name: a literal, an f-string starting with the
    prefix, a module constant holding one, or a call of ``env_name``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith(PREFIX)
    if isinstance(node, ast.JoinedStr) and node.values:
        return _names_a_setting(node.values[0], constants)
    if isinstance(node, ast.Name):
        return constants.get(node.id, "").startswith(PREFIX)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name == "env_name"
    return False


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ`` (``from os import environ``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and getattr(node.value, "id", "") == "os"
    return isinstance(node, ast.Name) and node.id == "environ"


def _call_reads(node: ast.Call, constants: dict[str, str]) -> bool:
    """``os.environ.get(NAME)``, ``os.getenv(NAME)``, ``getenv(NAME)``, ``….from_environ(…)``
    or ``…(envvar=NAME)``."""
    func = node.func
    first = node.args[0] if node.args else None
    if isinstance(func, ast.Attribute) and func.attr == "from_environ":
        return True
    if any(k.arg == "envvar" and _names_a_setting(k.value, constants) for k in node.keywords):
        return True
    if isinstance(func, ast.Attribute) and func.attr in _READS:
        via_os = func.attr == "getenv" and getattr(func.value, "id", "") == "os"
        return (_is_environ(func.value) or via_os) and _names_a_setting(first, constants)
    getenv = isinstance(func, ast.Name) and func.id == "getenv"
    return getenv and _names_a_setting(first, constants)


def reads(source: str) -> list[int]:
    """The lines of ``source`` that read an ``AGENT_KIT_*`` variable (module docstring)."""
    tree = ast.parse(source)
    constants = _constants(tree)
    found: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            hit = _call_reads(node, constants)
        elif isinstance(node, ast.Subscript):
            loaded = _is_environ(node.value) and isinstance(node.ctx, ast.Load)
            hit = loaded and _names_a_setting(node.slice, constants)
        elif isinstance(node, ast.Compare):
            tested = any(_is_environ(c) for c in node.comparators)
            hit = tested and _names_a_setting(node.left, constants)
        else:
            hit = False
        if hit:
            found.append(node.lineno)
    return found


def test_the_scan_finds_every_way_of_reading_a_setting() -> None:
    """The scanner flags each form of read (so the guard below could fail) and passes writes
    and other variables."""
    offending = """
import os
from os import environ, getenv
NAME = "AGENT_KIT_HF_BATCH"
CAP: Final = "AGENT_KIT_MAX_LOG_BYTES"
a = os.environ.get("AGENT_KIT_PORT")
b = os.environ[NAME]
c = os.getenv(CAP, "1")
d = environ.get(f"AGENT_KIT_{x}")
e = getenv("AGENT_KIT_TOKENIZER")
f = "AGENT_KIT_MALLOC" in os.environ
g = os.environ.get(env_name("hf_batch"))
h = Settings.from_environ(os.environ)
i = typer.Option(envvar="AGENT_KIT_EMULATOR_SECRET")
"""
    assert reads(offending) == list(range(6, 15))
    harmless = """
import os
env = {**os.environ, "AGENT_KIT_PORT": "1"}
os.environ["AGENT_KIT_PORT"] = "2"
region = os.environ.get("AWS_REGION")
message = "set AGENT_KIT_POLICY_URL"
"""
    assert reads(harmless) == []


def test_only_the_doors_read_agent_kit_variables() -> None:
    """No module of agent_kit/ but settings.py, the CLI's root and the agent's entry reads an
    ``AGENT_KIT_*`` variable; library code takes the settings as arguments."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in DOORS:
            continue
        offenders += [f"{rel}:{line}" for line in reads(path.read_text(encoding="utf-8"))]
    assert offenders == []
    for door in ("cli/__init__.py", "app.py"):
        assert reads((PACKAGE / door).read_text(encoding="utf-8")), door  # the one read each


def render_table() -> str:
    """The markdown table of docs/settings.md, from the declarations."""
    lines = [
        "| variable | read by | type | default | range | what it does |",
        "|---|---|---|---|---|---|",
    ]
    doors = {"tooling": "CLI", "agent": "agent"}
    for row in settings_table():
        unit = f" {row['unit']}" if row["unit"] and row["default"] != "unset" else ""
        cells = [
            f"`{row['name']}`",
            doors[row["door"]],
            row["type"],
            f"`{row['default']}`{unit}" if row["default"] != "unset" else "unset",
            row["range"].replace("|", "\\|"),
            row["help"].replace("|", "\\|"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_the_settings_page_lists_every_variable() -> None:
    """docs/settings.md's table is the one rendered from the declarations (regenerate it with
    AGENT_KIT_REGEN_GOLDEN=1), and the CLI reference and the README link to the page."""
    text = PAGE.read_text(encoding="utf-8")
    head, start, rest = text.partition(START + "\n")
    table, end, tail = rest.partition(END)
    assert start, f"{PAGE} lost its start marker"
    assert end, f"{PAGE} lost its end marker"
    table = table.rstrip("\n")
    expected = render_table()
    if table != expected and os.environ.get("AGENT_KIT_REGEN_GOLDEN") == "1":
        PAGE.write_text(head + START + "\n" + expected + "\n" + END + tail, encoding="utf-8")
        table = expected
    assert table == expected, "docs/settings.md differs from agent_kit/settings.py"
    assert "(settings.md)" in (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "(docs/settings.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
