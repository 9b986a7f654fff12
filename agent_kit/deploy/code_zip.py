"""The direct-code-deploy zip: sources plus Linux ARM64 wheels (tooling half).

:func:`build_zip` resolves the requirements for Linux ARM64 / CPython 3.11 with ``uv pip
install --target`` (trying the platform tags the AgentCore starter toolkit tries), zips the
wheels' files and the staged sources into ``dist/deployment.zip`` and enforces the size limits
(:data:`MAX_ZIP_BYTES`, :data:`MAX_UNZIPPED_BYTES`). Used by
:func:`agent_kit.deploy.package.package`
for ``--target zip``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from agent_kit.errors import DeployError

__all__ = ["MAX_UNZIPPED_BYTES", "MAX_ZIP_BYTES", "PYTHON_VERSION", "build_zip"]

#: Direct code deploy limit the AgentCore starter toolkit enforces on the zip (250 MB,
#: ``CodeZipPackager.create_deployment_package``, bedrock-agentcore-starter-toolkit 0.3.14).
MAX_ZIP_BYTES: Final = 250 * 1024 * 1024
#: Unzipped limit. [chosen] 750 MB: not verified against AgentCore documentation (the toolkit
#: checks only the zipped size); a package this large is almost certainly a mistake anyway.
MAX_UNZIPPED_BYTES: Final = 750 * 1024 * 1024
PYTHON_VERSION: Final = "3.11"
_PLATFORMS: Final = ("aarch64-manylinux2014", "aarch64-manylinux_2_17", "aarch64-manylinux_2_28")


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


def build_zip(
    out_dir: Path,
    source_files: Sequence[str],
    requirements_file: Path,
    *,
    cache_dir: Path | None,
    log: Callable[[str], None],
) -> tuple[Path, int, int, str]:
    """Write ``out_dir/dist/deployment.zip`` (ARM64 wheels + ``source_files``); return its path,
    zipped and unzipped sizes and the platform tag that resolved (DeployError past a limit)."""
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
