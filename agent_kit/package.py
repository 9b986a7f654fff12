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

Every target first runs :func:`preflight` (AST checks, runtime name) and, after staging the
sources, imports the staged entrypoint in a subprocess; any problem is a :class:`DeployError`
or :class:`UsageError` with a readable message. ``agentcore deploy`` works on the output
directory unchanged (it reads ``.bedrock_agentcore.yaml``; ``dist/`` is in its ignore list).

Why agent_kit is copied as source: it is not on PyPI, so a requirements line cannot fetch it.
Only the runtime-half modules are copied (:data:`RUNTIME_MODULES`): a deployed agent carries
no emulator, store or CLI code, and the subprocess import check proves the copy is complete.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from agent_kit.errors import DeployError, UsageError

__all__ = [
    "MAX_UNZIPPED_BYTES",
    "MAX_ZIP_BYTES",
    "RUNTIME_MODULES",
    "RUNTIME_NAME_PATTERN",
    "RUNTIME_REQUIREMENTS",
    "PackageResult",
    "Target",
    "agentcore_config",
    "default_name",
    "describe",
    "dockerfile_text",
    "package",
    "pinned_requirements",
    "preflight",
    "runtime_closure",
]

Target = Literal["zip", "container", "lambda-forwarder"]

#: AgentCore runtime names (CreateAgentRuntime ``agentRuntimeName``): no hyphens.
RUNTIME_NAME_PATTERN: Final = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]{0,47}$")
#: Direct code deploy limit the AgentCore starter toolkit enforces on the zip (250 MB,
#: ``CodeZipPackager.create_deployment_package``, bedrock-agentcore-starter-toolkit 0.3.14).
MAX_ZIP_BYTES: Final = 250 * 1024 * 1024
#: Unzipped limit. [chosen] 750 MB: not verified against AgentCore documentation (the toolkit
#: checks only the zipped size); a package this large is almost certainly a mistake anyway.
MAX_UNZIPPED_BYTES: Final = 750 * 1024 * 1024
#: Runtime-half roots of agent_kit; the package holds these plus what they import
#: (:func:`runtime_closure`).
RUNTIME_MODULES: Final = (
    "__init__",
    "app",
    "contract",
    "environment",
    "episode",
    "errors",
    "forwarder",
    "policy",
    "reward",
    "runtime_client",
)
#: Distributions the runtime half needs, pinned to this environment's versions on packaging.
RUNTIME_REQUIREMENTS: Final = (
    "bedrock-agentcore",
    "boto3",
    "httpx",
    "openai",
    "pydantic",
    "starlette",
    "strands-agents",
    "uvicorn",
)
PYTHON_VERSION: Final = "3.11"
_PLATFORMS: Final = ("aarch64-manylinux2014", "aarch64-manylinux_2_17", "aarch64-manylinux_2_28")
_SKIP_DIRS: Final = frozenset(
    {
        "__pycache__",
        ".venv",
        "venv",
        "env",
        ".git",
        "build",
        "dist",
        "node_modules",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".hypothesis",
        ".tox",
        "tests",
        "runs",
        ".bedrock_agentcore",
        ".idea",
        ".vscode",
    }
)
_SKIP_FILES: Final = frozenset(
    {".env", ".bedrock_agentcore.yaml", ".dockerignore", "Dockerfile", ".DS_Store", ".gitignore"}
)
_SKIP_SUFFIXES: Final = (".pyc", ".pyo", ".so", ".log", ".swp", ".zip", ".egg-info")
_AGENT_KIT_NAMES: Final = frozenset({"agent_kit", "agent-kit"})
IMPORT_TIMEOUT_S: Final = 120.0
#: Marks an output directory as ours: only such a directory is ever emptied and rewritten.
_MARKER: Final = ".agent-kit-package"
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


# --------------------------------------------------------------------------- preflight


def default_name(entrypoint: Path) -> str:
    """A valid runtime name derived from the entrypoint's directory (or file) name."""
    base = entrypoint.resolve().parent.name
    if base in {"", ".", "src", "app"}:
        base = entrypoint.stem
    name = re.sub(r"[^a-zA-Z0-9_]", "_", base).strip("_")
    if not name or not name[0].isalpha():
        name = f"agent_{name}".rstrip("_")
    return name[:48]


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    parts = [test.left, *test.comparators]
    names = {p.id for p in parts if isinstance(p, ast.Name)}
    consts = {p.value for p in parts if isinstance(p, ast.Constant)}
    return names == {"__name__"} and consts == {"__main__"} and isinstance(test.ops[0], ast.Eq)


def _calls_app_run(node: ast.stmt) -> bool:
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr == "run"
            and isinstance(sub.func.value, ast.Name)
            and sub.func.value.id == "app"
        ):
            return True
    return False


def preflight(entrypoint: Path, name: str) -> None:
    """Static checks: the file parses, binds module variable ``app``, calls ``app.run()`` under
    ``if __name__ == "__main__":``, and ``name`` is a valid AgentCore runtime name."""
    if not RUNTIME_NAME_PATTERN.match(name):
        raise UsageError(
            f"invalid runtime name {name!r}: AgentCore runtime names match "
            "[a-zA-Z][a-zA-Z0-9_]{0,47} (letters, digits, underscores; no hyphens)"
        )
    if not entrypoint.is_file() or entrypoint.suffix != ".py":
        raise UsageError(f"entrypoint {entrypoint} is not a .py file")
    source = entrypoint.read_text(encoding="utf-8")
    try:
        tree = ast.parse(source, filename=str(entrypoint))
    except SyntaxError as exc:
        raise DeployError(f"{entrypoint}:{exc.lineno}: syntax error: {exc.msg}") from None
    binds_app = False
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "app" for t in targets):
            binds_app = True
    if not binds_app:
        raise DeployError(
            f"{entrypoint}: no module-level variable named `app`; AgentCore (and `agentcore dev`) "
            "import the entrypoint and serve `app`, e.g. `app = RolloutApp(...)`"
        )
    guards = [n for n in tree.body if _is_main_guard(n)]
    if not any(_calls_app_run(g) for g in guards):
        raise DeployError(
            f'{entrypoint}: missing `if __name__ == "__main__": app.run()`; the AgentCore '
            "container and direct code deploy start the server by running the file"
        )


def _import_check(source_dir: Path, module: str, *, timeout: float = IMPORT_TIMEOUT_S) -> str:
    """Import the staged entrypoint in a fresh interpreter; return the type name of ``app``."""
    code = (
        "import importlib, sys\n"
        "mod = importlib.import_module(sys.argv[1])\n"
        "app = getattr(mod, 'app', None)\n"
        "if app is None or not callable(getattr(app, 'run', None)):\n"
        "    sys.exit('module variable `app` is missing or has no run()')\n"
        "kit = sys.modules.get('agent_kit')\n"
        "if kit is not None and not kit.__file__.startswith(sys.argv[2]):\n"
        "    sys.exit('agent_kit was imported from ' + kit.__file__ + ', not the package')\n"
        "print(type(app).__module__ + '.' + type(app).__qualname__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(source_dir)
    env.setdefault("AWS_DEFAULT_REGION", "us-west-2")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code, module, str(source_dir.resolve()) + os.sep],
            cwd=source_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DeployError(
            f"importing {module} took longer than {timeout:.0f} s; does it start work at import "
            "time? Move it under `if __name__ == '__main__':` or into the entrypoint"
        ) from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise DeployError(f"the packaged entrypoint does not import cleanly:\n{tail}")
    return proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""


# --------------------------------------------------------------------------- staging


def _skip(path: Path) -> bool:
    name = path.name
    if path.is_dir():
        return name in _SKIP_DIRS or name.endswith(".egg-info") or name in _AGENT_KIT_NAMES
    return name in _SKIP_FILES or name.endswith(_SKIP_SUFFIXES)


def _copy_sources(src_dir: Path, out_dir: Path, exclude: Path) -> list[str]:
    """Copy the entrypoint's directory (code + data files) into ``out_dir``; return rel paths."""
    copied: list[str] = []
    for root, dirs, files in os.walk(src_dir):
        root_path = Path(root)
        dirs[:] = sorted(
            d for d in dirs if not _skip(root_path / d) and (root_path / d).resolve() != exclude
        )
        for fname in sorted(files):
            path = root_path / fname
            if _skip(path) or path.is_symlink():
                continue
            rel = path.relative_to(src_dir)
            dest = out_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
            copied.append(rel.as_posix())
    return copied


def _agent_kit_imports(path: Path) -> set[str]:
    """Top-level agent_kit module names a source file imports (anywhere in the file)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "agent_kit" and len(parts) > 1:
                found.add(parts[1])
    return found


def runtime_closure(pkg_dir: Path | None = None) -> list[str]:
    """The agent_kit modules a deployed agent needs: :data:`RUNTIME_MODULES` plus every
    agent_kit module they import, transitively (found by AST, so nothing is imported here)."""
    root = pkg_dir or Path(__file__).resolve().parent
    todo = [m for m in RUNTIME_MODULES if (root / f"{m}.py").is_file()]
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = root / f"{module}.py"
        if not path.is_file():
            path = root / module / "__init__.py"
            if not path.is_file():
                continue
        todo.extend(_agent_kit_imports(path) - seen)
    return sorted(seen)


def _copy_agent_kit(out_dir: Path) -> list[str]:
    pkg_dir = Path(__file__).resolve().parent
    dest = out_dir / "agent_kit"
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for module in runtime_closure(pkg_dir):
        src = pkg_dir / f"{module}.py"
        if src.is_file():
            shutil.copy2(src, dest / src.name)
            copied.append(f"agent_kit/{src.name}")
            continue
        for path in sorted((pkg_dir / module).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                rel = path.relative_to(pkg_dir)
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, dest / rel)
                copied.append(f"agent_kit/{rel.as_posix()}")
    typed = pkg_dir / "py.typed"
    if typed.is_file():
        shutil.copy2(typed, dest / "py.typed")
        copied.append("agent_kit/py.typed")
    return copied


def pinned_requirements(names: Sequence[str] = RUNTIME_REQUIREMENTS) -> list[str]:
    """``name==version`` for each installed distribution (``DeployError`` if one is missing)."""
    pins = []
    for name in names:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            raise DeployError(f"runtime dependency {name} is not installed here") from None
        pins.append(f"{name}=={version}")
    return pins


def _user_requirements(src_dir: Path) -> list[str]:
    """Lines of the entrypoint's own requirements.txt, minus agent_kit (not on PyPI)."""
    path = src_dir / "requirements.txt"
    if not path.is_file():
        return []
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith(("-e", "--editable", ".", "/", "file:")):
            continue  # local paths do not exist inside the runtime
        dist = re.split(r"[\s<>=!~;\[@]", line, maxsplit=1)[0].lower().replace("_", "-")
        if dist in {"agent-kit"}:
            continue
        lines.append(line)
    return lines


def _merge_requirements(base: Sequence[str], extra: Sequence[str]) -> list[str]:
    def key(line: str) -> str:
        return re.split(r"[\s<>=!~;\[@]", line, maxsplit=1)[0].lower().replace("_", "-")

    seen = {key(line) for line in base}
    return [*base, *(line for line in extra if key(line) not in seen)]


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
                "aws": {
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
                },
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
        },
    }


def _write_yaml(path: Path, document: dict[str, Any]) -> None:
    yaml = importlib.import_module("yaml")  # PyYAML, a dependency of cookiecutter

    path.write_text(
        "# written by agent-kit package; `agentcore deploy` reads this file\n"
        + yaml.safe_dump(document, sort_keys=False, default_flow_style=False),
        encoding="utf-8",
    )


# --------------------------------------------------------------------------- zip


def _find_uv() -> str:
    try:
        import uv

        found: str = uv.find_uv_bin()
        return found
    except (ImportError, FileNotFoundError):
        pass
    sibling = Path(sys.executable).with_name("uv")
    if sibling.is_file():
        return str(sibling)
    found_path = shutil.which("uv")
    if found_path:
        return found_path
    raise DeployError("`uv` is needed to resolve Linux ARM64 wheels: pip install uv")


def _install_arm64(
    requirements_file: Path, target: Path, *, cache_dir: Path | None, log: Callable[[str], None]
) -> str:
    """``uv pip install`` for Linux ARM64 / CPython 3.11, trying the toolkit's platform tags."""
    uv = _find_uv()
    errors = []
    for platform in _PLATFORMS:
        if target.exists():
            shutil.rmtree(target)
        cmd = [
            uv,
            "pip",
            "install",
            "--target",
            str(target),
            "--python-version",
            PYTHON_VERSION,
            "--python-platform",
            platform,
            "--only-binary",
            ":all:",
            "--quiet",
            "-r",
            str(requirements_file),
        ]
        if cache_dir is not None:
            cmd[3:3] = ["--cache-dir", str(cache_dir)]
        log(f"resolving dependencies for {platform}")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=1800)
        if proc.returncode == 0:
            return platform
        errors.append(f"{platform}: " + "\n".join(proc.stderr.strip().splitlines()[-6:]))
    raise DeployError(
        "could not resolve Linux ARM64 wheels for every requirement (a dependency without an "
        "aarch64 wheel must be replaced or vendored):\n" + "\n".join(errors)
    )


def _zip_tree(zf: zipfile.ZipFile, root: Path, skip_pycache: bool = True) -> int:
    total = 0
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not (skip_pycache and d == "__pycache__"))
        for fname in sorted(files):
            path = Path(dirpath) / fname
            if fname.endswith((".pyc", ".pyo")):
                continue
            arc = path.relative_to(root).as_posix()
            info = zipfile.ZipInfo.from_file(path, arc)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if os.access(path, os.X_OK) else 0o644) << 16
            with path.open("rb") as fh:
                zf.writestr(info, fh.read())
            total += path.stat().st_size
    return total


def _build_zip(
    out_dir: Path,
    source_files: Sequence[str],
    requirements_file: Path,
    *,
    cache_dir: Path | None,
    log: Callable[[str], None],
) -> tuple[Path, int, int, str]:
    dist = out_dir / "dist"
    deps = dist / "deps"
    dist.mkdir(parents=True, exist_ok=True)
    platform = _install_arm64(requirements_file, deps, cache_dir=cache_dir, log=log)
    zip_path = dist / "deployment.zip"
    unzipped = 0
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as zf:
        unzipped += _zip_tree(zf, deps)
        for rel in source_files:
            path = out_dir / rel
            info = zipfile.ZipInfo.from_file(path, rel)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, path.read_bytes())
            unzipped += path.stat().st_size
    shutil.rmtree(deps)
    size = zip_path.stat().st_size
    if size > MAX_ZIP_BYTES:
        raise DeployError(
            f"deployment.zip is {size / 2**20:.1f} MB; AgentCore direct code deploy accepts at "
            f"most {MAX_ZIP_BYTES // 2**20} MB zipped. Trim dependencies or use --target container"
        )
    if unzipped > MAX_UNZIPPED_BYTES:
        raise DeployError(
            f"the package unzips to {unzipped / 2**20:.1f} MB; the limit is "
            f"{MAX_UNZIPPED_BYTES // 2**20} MB. Trim dependencies or use --target container"
        )
    return zip_path, size, unzipped, platform


# --------------------------------------------------------------------------- lambda forwarder


def _lambda_source() -> str:
    return (Path(__file__).resolve().parent / "templates_lambda" / "lambda_function.py").read_text(
        encoding="utf-8"
    )


def _package_forwarder(name: str, out_dir: Path) -> PackageResult:
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
    if target not in ("zip", "container", "lambda-forwarder"):
        raise UsageError(f"unknown target {target!r}: choose zip, container or lambda-forwarder")
    out = Path(out_dir or Path("build") / runtime_name).resolve()
    _prepare_out(out, entry.parent)
    if target == "lambda-forwarder":
        if not RUNTIME_NAME_PATTERN.match(runtime_name):
            raise UsageError(f"invalid name {runtime_name!r}")
        return _package_forwarder(runtime_name, out)

    preflight(entry, runtime_name)
    files = _copy_sources(entry.parent, out, exclude=out)
    files += _copy_agent_kit(out)
    module = entry.stem
    if import_check:
        log(f"import check: python -c 'import {module}'")
        _import_check(out, module)
    base = list(requirements) if requirements is not None else pinned_requirements()
    reqs = _merge_requirements(base, _user_requirements(entry.parent))
    req_file = out / "requirements.txt"
    req_file.write_text(
        "# written by agent-kit package: agent_kit itself ships as source in ./agent_kit\n"
        + "\n".join(reqs)
        + "\n",
        encoding="utf-8",
    )
    (out / ".dockerignore").write_text(DOCKERIGNORE, encoding="utf-8")
    notes: list[str] = []
    artifact: Path | None = None
    zip_bytes = unzipped = 0
    if target == "container":
        (out / "Dockerfile").write_text(dockerfile_text(module, region), encoding="utf-8")
        artifact = out / "Dockerfile"
        deployment_type: Literal["container", "direct_code_deploy"] = "container"
    else:
        artifact, zip_bytes, unzipped, platform = _build_zip(
            out, files, req_file, cache_dir=uv_cache_dir, log=log
        )
        notes.append(f"dependencies resolved for {platform}, CPython {PYTHON_VERSION}")
        deployment_type = "direct_code_deploy"
    _write_yaml(
        out / ".bedrock_agentcore.yaml",
        agentcore_config(
            runtime_name,
            out / entry.name,
            deployment_type=deployment_type,
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
        artifact=artifact,
        files=tuple(files),
        requirements=tuple(reqs),
        zip_bytes=zip_bytes,
        unzipped_bytes=unzipped,
        notes=tuple(notes),
    )


def _prepare_out(out: Path, source_dir: Path) -> None:
    if out == source_dir or source_dir.is_relative_to(out):
        raise UsageError(f"--out {out} would overwrite the entrypoint's own directory")
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"--out {out} exists and is not a directory")
        ours = (out / _MARKER).is_file()
        if any(out.iterdir()) and not ours:
            raise UsageError(f"--out {out} is not empty and was not written by agent-kit package")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / _MARKER).write_text("written by agent-kit package; safe to delete\n", encoding="utf-8")


def describe(result: PackageResult) -> dict[str, Any]:
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
