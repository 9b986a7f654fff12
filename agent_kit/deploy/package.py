"""Package one AgentCore entrypoint file for deployment (tooling half).

Three targets, all written under one output directory (default ``build/NAME``)::

    build/NAME/
      agent.py, local modules and data files   (copied from the entrypoint's directory)
      agent_kit/                               (the runtime half of agent_kit, copied as source)
      requirements.txt                         (runtime dependencies pinned from this environment)
      .bedrock_agentcore.yaml, .dockerignore   (the files ``agentcore configure`` writes)
      Dockerfile                               (target container)
      dist/deployment.zip                      (target zip: sources + Linux ARM64 wheels)
      dist/forwarder.zip, lambda_function.py   (target lambda-forwarder)
      pyproject.toml, agentcore/agentcore.json (target agentcore: a project of the npm AgentCore
                                                CLI; ``agentcore package`` builds the zip)

Every target first runs :func:`preflight` (AST checks, runtime name) and, after staging the
sources, imports the staged entrypoint in a subprocess; any problem is a :class:`DeployError`
or :class:`UsageError` with a readable message. The deprecated starter toolkit's ``agentcore
deploy`` works on the output directory unchanged (it reads ``.bedrock_agentcore.yaml``; ``dist/``
is in its ignore list), and the current npm CLI can ``agentcore import`` it; target agentcore
makes the directory a project of the current CLI (:mod:`agent_kit.deploy.agentcore_cli`), whose
``agentcore/`` folder (deployment targets, deployed state) survives repackaging.

Why agent_kit is copied as source: it is not on PyPI, so a requirements line cannot fetch it.
Only the runtime-half modules are copied (:func:`~agent_kit.deploy.staging.runtime_modules`): a
deployed agent carries
no emulator, store or CLI code, and the subprocess import check proves the copy is complete.

This module holds the targets and the generated files; the stages live beside it:
:mod:`agent_kit.deploy.preflight` (static checks, import check), :mod:`agent_kit.deploy.staging`
(sources,
runtime half of agent_kit, requirements, output directory) and :mod:`agent_kit.deploy.code_zip`
(Linux ARM64 wheels and ``deployment.zip``); import their names from them.
"""

from __future__ import annotations

import importlib
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from agent_kit.deploy.agentcore_cli import CONFIG_DIR, pyproject_text, runtime_entry, write_project
from agent_kit.deploy.code_zip import PYTHON_VERSION, build_zip
from agent_kit.deploy.preflight import (
    RUNTIME_NAME_PATTERN,
    check_import,
    default_name,
    preflight,
)
from agent_kit.deploy.staging import (
    copy_agent_kit,
    copy_sources,
    merge_requirements,
    pinned_requirements,
    prepare_out,
    user_requirements,
)
from agent_kit.errors import UsageError

__all__ = [
    "TARGETS",
    "PackageResult",
    "Target",
    "agentcore_config",
    "dockerfile_text",
    "package",
    "package_document",
]

Target = Literal["zip", "container", "lambda-forwarder", "agentcore"]
TARGETS: Final = ("zip", "container", "lambda-forwarder", "agentcore")

DOCKERIGNORE: Final = """\
# written by agent-kit package
__pycache__/
*.py[cod]
.venv/
venv/
.env
.git/
dist/
tests/
.bedrock_agentcore/
.bedrock_agentcore.yaml
.dockerignore
.agent-kit-package
*.log
"""


@dataclass(frozen=True)
class PackageResult:
    """What :func:`package` wrote: the output directory, the artifact and its facts."""

    name: str
    target: Target
    out_dir: Path
    entrypoint: Path
    artifact: Path | None
    files: tuple[str, ...]
    requirements: tuple[str, ...]
    zip_bytes: int = 0
    unzipped_bytes: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


# --------------------------------------------------------------------------- files


def dockerfile_text(module: str, region: str | None = None) -> str:
    """A Linux ARM64 Dockerfile running ``python -m <module>`` as a non-root user on port 8080."""
    env = "UV_SYSTEM_PYTHON=1 UV_COMPILE_BYTECODE=1 PYTHONUNBUFFERED=1 DOCKER_CONTAINER=1"
    if region:
        env += f" AWS_REGION={region} AWS_DEFAULT_REGION={region}"
    return (
        "# written by agent-kit package (target container); build for linux/arm64:\n"
        "#   docker buildx build --platform linux/arm64 -t IMAGE .\n"
        "FROM --platform=linux/arm64 ghcr.io/astral-sh/uv:python3.11-bookworm-slim\n"
        "WORKDIR /app\n"
        f"ENV {env}\n"
        "COPY requirements.txt requirements.txt\n"
        "RUN uv pip install -r requirements.txt\n"
        "RUN useradd -m -u 1000 bedrock_agentcore\n"
        "USER bedrock_agentcore\n"
        "EXPOSE 8080\n"
        "COPY --chown=bedrock_agentcore . .\n"
        f'CMD ["python", "-m", "{module}"]\n'
    )


def agentcore_config(
    name: str,
    entrypoint: Path,
    *,
    deployment_type: Literal["container", "direct_code_deploy"],
    region: str | None = None,
    account: str | None = None,
    role_arn: str | None = None,
    s3_path: str | None = None,
    ecr_repository: str | None = None,
) -> dict[str, Any]:
    """The ``.bedrock_agentcore.yaml`` document ``agentcore configure`` writes, as a dict.

    Every field, in the order ``agentcore configure`` (starter toolkit 0.3.14) writes them, as
    checked against a real ``agentcore configure --non-interactive`` run: one agent,
    ``platform: linux/arm64``, PUBLIC network, HTTP protocol, observability off (the
    requirements carry no OpenTelemetry distro), no memory. ``source_path`` stays null so the
    toolkit finds the Dockerfile and the sources at the project root (the output directory).
    """
    return {
        "default_agent": name,
        "agents": {
            name: {
                "name": name,
                "language": "python",
                "node_version": "20",  # what `agentcore configure` writes, even for Python
                "entrypoint": str(entrypoint.resolve()),
                "deployment_type": deployment_type,
                "runtime_type": "PYTHON_3_11" if deployment_type == "direct_code_deploy" else None,
                "platform": "linux/arm64",
                "container_runtime": None,
                "source_path": None,  # Dockerfile and sources at the project root
                "aws": _aws_section(
                    deployment_type,
                    region=region,
                    account=account,
                    role_arn=role_arn,
                    s3_path=s3_path,
                    ecr_repository=ecr_repository,
                ),
                **_features_off(),
            }
        },
    }


def _aws_section(
    deployment_type: Literal["container", "direct_code_deploy"],
    *,
    region: str | None,
    account: str | None,
    role_arn: str | None,
    s3_path: str | None,
    ecr_repository: str | None,
) -> dict[str, Any]:
    """The agent's ``aws`` block: role, account, region, where the code goes (created by the
    toolkit when not given), a public HTTP runtime without observability."""
    return {
        "execution_role": role_arn,
        "execution_role_auto_create": role_arn is None,
        "account": account,
        "region": region,
        "ecr_repository": ecr_repository,
        "ecr_auto_create": deployment_type == "container" and ecr_repository is None,
        "s3_path": s3_path,
        "s3_auto_create": deployment_type == "direct_code_deploy" and s3_path is None,
        "network_configuration": {
            "network_mode": "PUBLIC",
            "network_mode_config": None,
        },
        "protocol_configuration": {"server_protocol": "HTTP"},
        "observability": {"enabled": False},
        "lifecycle_configuration": {
            "idle_runtime_session_timeout": None,
            "max_lifetime": None,
        },
    }


def _features_off() -> dict[str, Any]:
    """The agent's blocks ``agentcore configure`` writes for what agent_kit leaves off: no
    memory, identity, JWT or API-key auth, header or OAuth configuration, and no ids yet."""
    return {
        "bedrock_agentcore": {
            "agent_id": None,
            "agent_arn": None,
            "agent_session_id": None,
        },
        "codebuild": {"project_name": None, "execution_role": None, "source_bucket": None},
        "memory": {
            "mode": "NO_MEMORY",
            "memory_id": None,
            "memory_arn": None,
            "memory_name": None,
            "event_expiry_days": 30,
            "first_invoke_memory_check_done": False,
            "was_created_by_toolkit": False,
        },
        "identity": {"credential_providers": [], "workload": None},
        "aws_jwt": {
            "enabled": False,
            "audiences": [],
            "signing_algorithm": "ES384",
            "issuer_url": None,
            "duration_seconds": 300,
        },
        "authorizer_configuration": None,
        "request_header_configuration": None,
        "oauth_configuration": None,
        "api_key_env_var_name": None,
        "api_key_credential_provider_name": None,
        "is_generated_by_agentcore_create": False,
    }


def _write_yaml(path: Path, document: dict[str, Any]) -> None:
    yaml = importlib.import_module("yaml")  # PyYAML, a dependency of cookiecutter

    path.write_text(
        "# written by agent-kit package; `agentcore deploy` reads this file\n"
        + yaml.safe_dump(document, sort_keys=False, default_flow_style=False),
        encoding="utf-8",
    )


# --------------------------------------------------------------------------- lambda forwarder


def _lambda_source() -> str:
    return (Path(__file__).resolve().parent / "lambda_template" / "lambda_function.py").read_text(
        encoding="utf-8"
    )


def _package_forwarder(name: str, out_dir: Path) -> PackageResult:
    """The Lambda forwarder's handler and zip in ``out_dir``; ``name`` must be a runtime name."""
    if not RUNTIME_NAME_PATTERN.match(name):
        raise UsageError(f"invalid name {name!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    handler = out_dir / "lambda_function.py"
    handler.write_text(_lambda_source(), encoding="utf-8")
    dist = out_dir / "dist"
    dist.mkdir(exist_ok=True)
    zip_path = dist / "forwarder.zip"
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as zf:
        info = zipfile.ZipInfo("lambda_function.py", (2026, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        zf.writestr(info, handler.read_bytes())
    return PackageResult(
        name=name,
        target="lambda-forwarder",
        out_dir=out_dir,
        entrypoint=handler,
        artifact=zip_path,
        files=("lambda_function.py",),
        requirements=(),
        zip_bytes=zip_path.stat().st_size,
        unzipped_bytes=handler.stat().st_size,
        notes=(
            "Lambda: runtime python3.11+, handler lambda_function.handler, "
            "env AGENT_ENDPOINT, AGENT_SECRET, ROLLOUT_TIMEOUT_SECONDS; "
            "function timeout above ROLLOUT_TIMEOUT_SECONDS",
            "agent side: RolloutApp(..., forwarder=True) and AGENT_KIT_FORWARDER_SECRET",
        ),
    )


# --------------------------------------------------------------------------- AgentCore CLI


def _write_cli_project(out: Path, name: str, entry_file: str, requirements: Sequence[str]) -> Path:
    """Make ``out`` a project of the npm AgentCore CLI: ``pyproject.toml`` (the PyPI
    requirements; agent_kit ships as source in ./agent_kit) and the runtime's entry in
    ``agentcore/agentcore.json`` (written, or updated in place); return the json's path."""
    (out / "pyproject.toml").write_text(
        pyproject_text(
            name,
            requirements,
            python=PYTHON_VERSION,
            comment="written by agent-kit package (target agentcore): `agentcore package` "
            "installs these\ndependencies; agent_kit's runtime half ships as source in ./agent_kit",
        ),
        encoding="utf-8",
    )
    entry = runtime_entry(name, entry_file, code_location="./", python=PYTHON_VERSION)
    return write_project(out, entry)


# --------------------------------------------------------------------------- entry point


def package(
    entrypoint: Path | str,
    *,
    target: Target = "zip",
    out_dir: Path | str | None = None,
    name: str | None = None,
    region: str | None = None,
    role_arn: str | None = None,
    s3_path: str | None = None,
    ecr_repository: str | None = None,
    requirements: Sequence[str] | None = None,
    uv_cache_dir: Path | None = None,
    import_check: bool = True,
    log: Callable[[str], None] = lambda _msg: None,
) -> PackageResult:
    """Preflight, stage and package ``entrypoint`` for ``target``; return what was written.

    ``requirements`` replaces the pinned runtime dependencies (:func:`pinned_requirements`);
    lines of a ``requirements.txt`` beside the entrypoint are always added (minus agent_kit).
    The output directory is emptied first, but only if it is empty or was written by this
    function before (it holds the ``.agent-kit-package`` marker); anything else is refused.
    """
    entry = Path(entrypoint).resolve()
    runtime_name = name or default_name(entry)
    if target not in TARGETS:
        raise UsageError(f"unknown target {target!r}: choose {', '.join(TARGETS)}")
    out = Path(out_dir or Path("build") / runtime_name).resolve()
    prepare_out(out, entry.parent, keep=(CONFIG_DIR,) if target == "agentcore" else ())
    if target == "lambda-forwarder":
        return _package_forwarder(runtime_name, out)

    preflight(entry, runtime_name)
    files = copy_sources(entry.parent, out, exclude=out)
    files += copy_agent_kit(out)
    module = entry.stem
    if import_check:
        log(f"import check: python -c 'import {module}'")
        check_import(out, module)
    base = list(requirements) if requirements is not None else pinned_requirements()
    reqs = merge_requirements(base, user_requirements(entry.parent))
    req_file = _write_requirements(out, reqs)
    (out / ".dockerignore").write_text(DOCKERIGNORE, encoding="utf-8")
    if target == "container":
        (out / "Dockerfile").write_text(dockerfile_text(module, region), encoding="utf-8")
        built = _Built(out / "Dockerfile", deployment_type="container")
    elif target == "agentcore":
        built = _Built(
            _write_cli_project(out, runtime_name, entry.name, reqs),
            notes=(f"`agentcore package -d {out}` builds the zip; `agentcore deploy` deploys it",),
        )
    else:
        artifact, zip_bytes, unzipped, platform = build_zip(
            out, files, req_file, cache_dir=uv_cache_dir, log=log
        )
        note = f"dependencies resolved for {platform}, CPython {PYTHON_VERSION}"
        built = _Built(artifact, zip_bytes=zip_bytes, unzipped=unzipped, notes=(note,))
    _write_yaml(
        out / ".bedrock_agentcore.yaml",
        agentcore_config(
            runtime_name,
            out / entry.name,
            deployment_type=built.deployment_type,
            region=region,
            role_arn=role_arn,
            s3_path=s3_path,
            ecr_repository=ecr_repository,
        ),
    )
    return PackageResult(
        name=runtime_name,
        target=target,
        out_dir=out,
        entrypoint=out / entry.name,
        artifact=built.artifact,
        files=tuple(files),
        requirements=tuple(reqs),
        zip_bytes=built.zip_bytes,
        unzipped_bytes=built.unzipped,
        notes=built.notes,
    )


@dataclass(frozen=True)
class _Built:
    """What a target's build step wrote: its artifact, the zip's sizes, notes for the user,
    and the deployment type the ``.bedrock_agentcore.yaml`` names."""

    artifact: Path | None
    zip_bytes: int = 0
    unzipped: int = 0
    notes: tuple[str, ...] = ()
    deployment_type: Literal["container", "direct_code_deploy"] = "direct_code_deploy"


def _write_requirements(out: Path, reqs: Sequence[str]) -> Path:
    """``out/requirements.txt`` with ``reqs``, one a line; returns its path."""
    req_file = out / "requirements.txt"
    req_file.write_text(
        "# written by agent-kit package: agent_kit itself ships as source in ./agent_kit\n"
        + "\n".join(reqs)
        + "\n",
        encoding="utf-8",
    )
    return req_file


def package_document(result: PackageResult) -> dict[str, Any]:
    """A JSON-ready summary of a :class:`PackageResult` (for ``--json`` output and logs)."""
    return {
        "name": result.name,
        "target": result.target,
        "out_dir": str(result.out_dir),
        "artifact": str(result.artifact) if result.artifact else None,
        "files": list(result.files),
        "requirements": list(result.requirements),
        "zip_bytes": result.zip_bytes,
        "unzipped_bytes": result.unzipped_bytes,
        "notes": list(result.notes),
    }
