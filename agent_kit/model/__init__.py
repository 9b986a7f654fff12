"""The local model: loading (:mod:`~agent_kit.model.loading`), the chat format
(:mod:`~agent_kit.model.chat`), the tool-call parser (:mod:`~agent_kit.model.tool_calls`), the
turn-continuation rule (:mod:`~agent_kit.model.continuation`), the token draw and the
one-sequence reference sampler (:mod:`~agent_kit.model.sampling`), continuous batched sampling
(:mod:`~agent_kit.model.batch`), chat turns sampled end to end (:mod:`~agent_kit.model.sampler`:
what the ``hf`` policy adapts), model files and GGUF headers (:mod:`~agent_kit.model.gguf`), the
sampled turns' token records (:mod:`~agent_kit.model.turns`) and the one LoRA configuration
(:mod:`~agent_kit.model.lora`).

The ``hf`` and ``local`` policies (:mod:`agent_kit.emulator.policies`) and training
(:mod:`agent_kit.train`) use it. torch, transformers and peft are optional (the ``train``
extra): no module here imports them at import time, and this face loads its names on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_kit import lazy_face

if TYPE_CHECKING:
    from agent_kit.model.batch import BatchSampler, SampleJob
    from agent_kit.model.chat import (
        CHATML_TOOLS_TEMPLATE,
        ChatFormat,
        chat_format,
        completion_text,
        render,
    )
    from agent_kit.model.gguf import DEFAULT_MODEL, MODEL_HINT, default_model_path, gguf_metadata
    from agent_kit.model.loading import (
        TRAIN_HINT,
        LoadedModel,
        ModelSpec,
        load_model,
        parse_model_spec,
    )
    from agent_kit.model.lora import LORA_TARGETS, lora_config
    from agent_kit.model.turns import TurnTokens

#: Public name → the module that defines it.
_HOMES = {
    "BatchSampler": "batch",
    "CHATML_TOOLS_TEMPLATE": "chat",
    "ChatFormat": "chat",
    "DEFAULT_MODEL": "gguf",
    "LORA_TARGETS": "lora",
    "LoadedModel": "loading",
    "MODEL_HINT": "gguf",
    "ModelSpec": "loading",
    "SampleJob": "batch",
    "TRAIN_HINT": "loading",
    "TurnTokens": "turns",
    "chat_format": "chat",
    "completion_text": "chat",
    "default_model_path": "gguf",
    "gguf_metadata": "gguf",
    "load_model": "loading",
    "lora_config": "lora",
    "parse_model_spec": "loading",
    "render": "chat",
}

__all__ = [
    "CHATML_TOOLS_TEMPLATE",
    "DEFAULT_MODEL",
    "LORA_TARGETS",
    "MODEL_HINT",
    "TRAIN_HINT",
    "BatchSampler",
    "ChatFormat",
    "LoadedModel",
    "ModelSpec",
    "SampleJob",
    "TurnTokens",
    "chat_format",
    "completion_text",
    "default_model_path",
    "gguf_metadata",
    "load_model",
    "lora_config",
    "parse_model_spec",
    "render",
]


__getattr__ = lazy_face(__name__, _HOMES)
