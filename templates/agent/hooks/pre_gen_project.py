"""Pre-generation hook of the ``agent`` template: validate the variables before any file is kept.

Cookiecutter renders this file with Jinja, then runs it with the Python that runs cookiecutter.
A non-zero exit makes cookiecutter raise ``FailedHookException`` and delete the half-made
project directory. The file is self-contained (standard library only) so it works under plain
``cookiecutter templates/agent`` without agent_kit installed; ``agent_kit.scaffold.project`` loads
the
same :func:`validate` (without running :func:`main`) to check variables up front, so both
paths apply one set of rules.
"""

from __future__ import annotations

import json
import keyword
import re
import sys
from collections.abc import Mapping

# Cookiecutter substitutes the whole rendered context here (JSON; quotes arrive escaped, so the
# raw string cannot end early). Only main() parses it: importing this file never needs it.
_RENDERED_CONTEXT = r"""{{ cookiecutter | jsonify }}"""

RUNTIME_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]{0,47}$")
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]{1,2}$")
PYTHON_VERSION = re.compile(r"^3\.(1[0-3])$")
CLASS_NAME = re.compile(r"^[A-Z][A-Za-z0-9_]{0,63}$")
# A tool becomes a method of the environment class: a leading underscore would name (or
# override) a private or dunder attribute (``_attach``, ``__init__``, ``__class__``).
TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
SLUG = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")
WHOLE_NUMBER = re.compile(r"^[0-9]{1,6}$")

# Ranges: max_turns is policy calls per episode (the emulator allows 256); group_size is the
# service's rollouts per prompt (2..32).
INT_RANGES = {"max_turns": (1, 256), "group_size": (2, 32)}

# Names the project's files already use: a class or tool with one of them would shadow it.
RESERVED_CLASS_NAMES = frozenset(
    {
        "Any",
        "Environment",
        "Episode",
        "Path",
        "PolicyReply",
        "PolicyRequest",
        "Reward",
        "RolloutApp",
        "ToolCall",
    }
)
RESERVED_TOOL_NAMES = frozenset(
    {
        "done",
        "episode",
        "finish",
        "max_tool_calls",
        "max_turns",
        "metrics",
        "next_user_message",
        "parse_text_tool_calls",
        "reset",
        "result",
        "tool",
        "tool_names",
        "tools",
    }
)
RESERVED_SLUGS = frozenset({"agent", "agent_kit", "policies", "test", "tests"})

REQUIRED = (
    "project_name",
    "project_slug",
    "agent_description",
    "environment_class",
    "tool_name",
    "max_turns",
    "group_size",
    "aws_region",
    "python_version",
    "runtime_name",
)

TEXT_LIMITS = {"project_name": 80, "agent_description": 300}


def _check_text(name: str, value: str, problems: list[str]) -> None:
    limit = TEXT_LIMITS[name]
    if not value.strip():
        problems.append(f"{name} must not be empty")
    elif len(value) > limit:
        problems.append(f"{name} is {len(value)} characters long; the limit is {limit}")
    elif not value.isprintable():
        problems.append(f"{name} must be one line of printable text (no newlines or tabs)")
    elif '"' in value or "\\" in value:
        problems.append(
            f"{name} {value!r} must not contain double quotes or backslashes "
            "(it is written into Python and TOML strings)"
        )


def _check_identifier(
    name: str, value: str, pattern: re.Pattern[str], rule: str, problems: list[str]
) -> bool:
    if not pattern.fullmatch(value) or not value.isidentifier() or keyword.iskeyword(value):
        problems.append(f"{name} {value!r} is not valid: {rule}")
        return False
    return True


def validate(context: Mapping[str, object]) -> list[str]:
    """Check the template variables; return one readable message per problem (empty = valid).

    Guarantees: every variable the template uses is checked; a value that passes renders into
    a project whose files are valid Python/TOML and whose runtime name AgentCore accepts.
    """
    missing = [key for key in REQUIRED if context.get(key) is None]
    if missing:
        return [f"{key} is missing" for key in missing]
    problems: list[str] = []

    def text(key: str) -> str:
        return str(context[key])

    for key in ("project_name", "agent_description"):
        _check_text(key, text(key), problems)

    slug = text("project_slug")
    if _check_identifier(
        "project_slug",
        slug,
        SLUG,
        "use a lower-case Python identifier (letters, digits, underscores; no spaces or "
        "hyphens; not starting with a digit; at most 64 characters; not a keyword)",
        problems,
    ) and (slug in RESERVED_SLUGS):
        problems.append(
            f"project_slug {slug!r} would shadow a module the project imports; pick another"
        )

    cls = text("environment_class")
    if _check_identifier(
        "environment_class",
        cls,
        CLASS_NAME,
        "use a CapWords Python class name such as TaskEnv",
        problems,
    ) and (cls in RESERVED_CLASS_NAMES):
        problems.append(f"environment_class {cls!r} clashes with a name the project's files import")

    tool = text("tool_name")
    if _check_identifier(
        "tool_name",
        tool,
        TOOL_NAME,
        "use a lower-case Python identifier that starts with a letter (a leading underscore "
        "would replace a private or built-in attribute of the environment class), at most 64 "
        "characters, such as guess",
        problems,
    ) and (tool in RESERVED_TOOL_NAMES):
        problems.append(f"tool_name {tool!r} clashes with an Environment attribute; pick another")

    runtime = text("runtime_name")
    if not RUNTIME_NAME.fullmatch(runtime):
        problems.append(
            f"runtime_name {runtime!r} is not a valid AgentCore runtime name: use a letter "
            "first, then only letters, digits and underscores (no hyphens or spaces), "
            "1 to 48 characters"
        )

    for key, (low, high) in INT_RANGES.items():
        raw = text(key)
        if not WHOLE_NUMBER.fullmatch(raw):
            problems.append(f"{key} {raw!r} is not a whole number")
            continue
        number = int(raw)
        if not low <= number <= high:
            problems.append(f"{key} is {number}; it must be between {low} and {high}")

    region = text("aws_region")
    if not REGION.fullmatch(region):
        problems.append(f"aws_region {region!r} does not look like an AWS region (e.g. us-west-2)")

    version = text("python_version")
    if not PYTHON_VERSION.fullmatch(version):
        problems.append(
            f"python_version {version!r} is not supported: use 3.10, 3.11, 3.12 or 3.13 "
            "(the versions AgentCore Runtime offers)"
        )

    return problems


def main() -> int:
    """Validate the rendered context; print every problem to stderr and return 1 if any."""
    context = json.loads(_RENDERED_CONTEXT)
    problems = validate(context)
    if not problems:
        return 0
    print("error: invalid template variables:", file=sys.stderr)
    for problem in problems:
        print(f"  - {problem}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
