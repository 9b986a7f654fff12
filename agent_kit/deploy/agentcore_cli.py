"""Projects for the current AgentCore CLI (npm ``@aws/agentcore``) (tooling half).

The CLI reads a declarative project: ``agentcore/agentcore.json`` (the
``AgentCoreProjectSpec`` of the types it ships in ``agentcore/.llm-context/agentcore.ts``) and
``agentcore/aws-targets.json``; each Python runtime's ``codeLocation`` holds a
``pyproject.toml``. ``agentcore package`` runs ``uv pip install -r pyproject.toml --target
STAGING --python-platform aarch64-manylinux… --only-binary :all:`` in the code location, copies
the code location's files on top (minus
``.venv``, ``.git``, ``__pycache__``, ``node_modules``, ``.env*`` and the root ``agentcore/``)
and zips the result.

agent_kit is not on PyPI, so its runtime half reaches that zip one of two ways:

- **as source** (``agent-kit package --target agentcore``): the staged output directory already
  holds ``./agent_kit`` (the runtime half), so the code location's files carry it and the
  ``pyproject.toml`` lists only PyPI packages;
- **as a wheel** (``agent-kit new``): :func:`build_runtime_wheel` writes
  ``agent_kit-VERSION-py3-none-any.whl`` holding only the runtime half, and the project's
  ``pyproject.toml`` points uv at it with ``[tool.uv.sources]``; uv installs that wheel like any
  other dependency (no build step, so ``--only-binary :all:`` accepts it).

This module writes and updates the project files (:func:`write_project`), builds the wheel and
checks names against the CLI's rules (:data:`PROJECT_NAME_PATTERN`, ``RUNTIME_NAME_PATTERN``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from agent_kit.deploy.preflight import RUNTIME_NAME_PATTERN
from agent_kit.deploy.staging import PACKAGE_DIR, pinned_requirements, runtime_modules
from agent_kit.errors import DeployError, UsageError

__all__ = [
    "CONFIG_DIR",
    "PROJECT_NAME_PATTERN",
    "PYTHON_RUNTIMES",
    "SCHEMA_URL",
    "build_runtime_wheel",
    "project_name",
    "pyproject_text",
    "python_runtime",
    "runtime_entry",
    "runtime_wheel_name",
    "write_project",
]

#: The project's config folder, relative to the project root.
CONFIG_DIR: Final = "agentcore"
#: ``$schema`` of ``agentcore.json`` as ``agentcore create`` (0.30.0) writes it.
SCHEMA_URL: Final = "https://schema.agentcore.aws.dev/v1/agentcore.json"
#: ``AgentCoreProjectSpec.name``: letters and digits only, at most 23 characters.
PROJECT_NAME_PATTERN: Final = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,22}$")
#: ``AgentEnvSpec.runtimeVersion`` values for Python (``PythonRuntime`` in the CLI's types).
PYTHON_RUNTIMES: Final = ("3.10", "3.11", "3.12", "3.13", "3.14")
#: Arrays ``AgentCoreProjectSpec`` requires (``agentcore create`` writes them empty).
_REQUIRED_ARRAYS: Final = (
    "runtimes",
    "memories",
    "knowledgeBases",
    "credentials",
    "evaluators",
    "onlineEvalConfigs",
    "agentCoreGateways",
    "policyEngines",
    "configBundles",
    "abTests",
    "harnesses",
)
_EPOCH: Final = (2026, 1, 1, 0, 0, 0)


def project_name(name: str) -> str:
    """A valid ``AgentCoreProjectSpec.name`` from a runtime or project name (drops ``_``/``-``)."""
    letters = re.sub(r"[^A-Za-z0-9]", "", name)
    if not letters or not letters[0].isalpha():
        letters = "agent" + letters
    return letters[:23]


def python_runtime(version: str) -> str:
    """``"3.11"`` → ``"PYTHON_3_11"`` (UsageError for a version AgentCore does not offer)."""
    if version not in PYTHON_RUNTIMES:
        offered = ", ".join(PYTHON_RUNTIMES)
        raise UsageError(f"Python {version} is not an AgentCore runtime; choose one of {offered}")
    return "PYTHON_" + version.replace(".", "_")


def runtime_entry(
    name: str, entrypoint: str, *, code_location: str = "./", python: str = "3.11"
) -> dict[str, Any]:
    """The ``AgentEnvSpec`` of one Python CodeZip runtime served over HTTP on a public network,
    the fields and values ``agentcore add agent --type byo`` writes."""
    if not RUNTIME_NAME_PATTERN.match(name):
        raise UsageError(
            f"invalid runtime name {name!r}: AgentCore runtime names match "
            "[a-zA-Z][a-zA-Z0-9_]{0,47} (letters, digits, underscores; no hyphens)"
        )
    return {
        "name": name,
        "build": "CodeZip",
        "entrypoint": entrypoint,
        "codeLocation": code_location,
        "runtimeVersion": python_runtime(python),
        "networkMode": "PUBLIC",
        "protocol": "HTTP",
    }


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DeployError(f"cannot read {path}: {exc}") from None


def write_project(root: Path, entry: dict[str, Any], *, name: str | None = None) -> Path:
    """Write ``root/agentcore/agentcore.json`` with ``entry`` among its runtimes; return its path.

    A missing file is created (project ``name``, default from the runtime name, and the empty
    arrays the CLI requires); an existing one keeps everything else: other runtimes, other
    resources, and fields of this runtime agent_kit does not set (``envVars``, ``tags``, …).
    ``aws-targets.json`` is created as ``[]`` when missing and never rewritten.
    """
    config = root / CONFIG_DIR
    config.mkdir(parents=True, exist_ok=True)
    path = config / "agentcore.json"
    if path.exists():
        spec = _read_json(path)
        if not isinstance(spec, dict) or not isinstance(spec.get("runtimes", []), list):
            raise DeployError(f"{path} is not an AgentCore project (no runtimes list)")
    else:
        title = name or project_name(entry["name"])
        if not PROJECT_NAME_PATTERN.match(title):
            raise UsageError(
                f"invalid AgentCore project name {title!r}: it must match "
                "[A-Za-z][A-Za-z0-9]{0,22} (letters and digits, at most 23)"
            )
        spec = {"$schema": SCHEMA_URL, "name": title, "version": 1, "managedBy": "CDK"}
        spec.update({key: [] for key in _REQUIRED_ARRAYS})
    runtimes: list[Any] = spec.setdefault("runtimes", [])
    for i, old in enumerate(runtimes):
        if isinstance(old, dict) and old.get("name") == entry["name"]:
            runtimes[i] = {**old, **entry}
            break
    else:
        runtimes.append(dict(entry))
    path.write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    targets = config / "aws-targets.json"
    if not targets.exists():
        targets.write_text("[]\n", encoding="utf-8")
    return path


def pyproject_text(
    name: str, requirements: Sequence[str], *, python: str = "3.11", comment: str = ""
) -> str:
    """A minimal ``pyproject.toml`` whose ``[project].dependencies`` are ``requirements``: what
    ``agentcore package`` installs into the zip with ``uv pip install -r pyproject.toml``."""
    deps = "".join(f"  {json.dumps(line)},\n" for line in requirements)
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    return (
        f"{head}[project]\n"
        f"name = {json.dumps(name)}\n"
        'version = "0.1.0"\n'
        f'requires-python = ">={python}"\n'
        f"dependencies = [\n{deps}]\n"
    )


# --------------------------------------------------------------------------- runtime wheel


def runtime_wheel_name(version: str | None = None) -> str:
    """The file name of the runtime-half wheel: ``agent_kit-VERSION-py3-none-any.whl``."""
    from agent_kit import __version__

    return f"agent_kit-{version or __version__}-py3-none-any.whl"


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def build_runtime_wheel(dest_dir: Path, requirements: Sequence[str] | None = None) -> Path:
    """Write the runtime half of agent_kit as a wheel into ``dest_dir``; return its path.

    The wheel (PEP 427, pure Python, tag ``py3-none-any``) holds exactly
    :func:`~agent_kit.deploy.staging.runtime_modules` plus ``py.typed``; its ``Requires-Dist``
    is ``requirements`` (default: the runtime dependencies pinned to this environment, as in
    ``agent-kit package``). Entries carry a fixed timestamp, so the same sources give the same
    bytes. No emulator, store, report or CLI code is inside.
    """
    from agent_kit import __version__

    deps = list(requirements) if requirements is not None else pinned_requirements()
    files: list[tuple[str, bytes]] = [
        (f"agent_kit/{module}.py", (PACKAGE_DIR / f"{module}.py").read_bytes())
        for module in runtime_modules()
    ]
    if (PACKAGE_DIR / "py.typed").is_file():
        files.append(("agent_kit/py.typed", (PACKAGE_DIR / "py.typed").read_bytes()))
    info = f"agent_kit-{__version__}.dist-info"
    metadata = (
        "Metadata-Version: 2.1\nName: agent_kit\n"
        f"Version: {__version__}\n"
        "Summary: The runtime half of agent_kit (RolloutApp and the MTRL contract), as deployed\n"
        "Requires-Python: >=3.10\n" + "".join(f"Requires-Dist: {line}\n" for line in deps)
    )
    wheel = "Wheel-Version: 1.0\nGenerator: agent_kit\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files += [(f"{info}/METADATA", metadata.encode()), (f"{info}/WHEEL", wheel.encode())]
    record = [_record_line(arc, data) for arc, data in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    dest_dir.mkdir(parents=True, exist_ok=True)
    path = dest_dir / runtime_wheel_name(__version__)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in files:
            entry = zipfile.ZipInfo(arcname, _EPOCH)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            zf.writestr(entry, data)
    return path
