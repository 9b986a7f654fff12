"""A tiny random Llama with SmolLM2's tokenizer, built offline for the training tests.

Two layers, hidden size 64: it samples and trains in well under a second per turn, so the
tests exercise the machinery (tokens, adapters, TRL's step), not the model's quality. Its
last layer adds a large constant direction that the end-of-turn token's (tied) embedding points
along, so a turn ends with probability ≈ 0.15 per token: rollouts end at varying lengths (a
random model would almost never sample the end-of-turn token, and every turn would end on the
token cap, a policy failure for Strands).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: The one tool of the chat-template tests: ``guess(number)``.
GUESS_TOOLS = (
    {
        "type": "function",
        "function": {
            "name": "guess",
            "description": "Guess a number.",
            "parameters": {"type": "object", "properties": {"number": {"type": "integer"}}},
        },
    },
)


def _tokenizer() -> Any:
    """SmolLM2's tokenizer from the packaged GGUF, offline."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import transformers

    from agent_kit.model.gguf import default_model_path

    gguf = default_model_path()
    return transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def _tiny_config(tokenizer: Any, **extra: Any) -> Any:
    """A two-layer Llama config (hidden size 64) over ``tokenizer``; ``extra``: more fields."""
    import transformers

    return transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **extra,
    )


def build_tiny_model(folder: Path) -> Path:
    """Write the tiny model and SmolLM2's tokenizer (from the packaged GGUF) into ``folder``."""
    import torch
    import transformers

    tokenizer = _tokenizer()
    config = _tiny_config(tokenizer, mlp_bias=True)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():  # end a turn with probability ≈ 0.15 per token (see the docstring)
        direction = torch.nn.functional.normalize(torch.randn(config.hidden_size), dim=0)
        model.model.layers[-1].mlp.down_proj.bias.copy_(50.0 * direction)
        model.get_input_embeddings().weight[tokenizer.eos_token_id] = 1.1 * direction
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


#: A Hermes-style chat template that renders ``tools`` (as Qwen's does) in its own words: a
#: model saved with it samples and trains with its own template, not agent_kit's.
HERMES_TOOLS_TEMPLATE = (
    "{%- if messages[0].role == 'system' %}{%- set system = messages[0].content %}"
    "{%- else %}{%- set system = '' %}{%- endif %}"
    "{{- '<|im_start|>system\\n' + system }}"
    "{%- if tools %}{{- '\\nTOOLS:' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool.function.name if tool.function is defined "
    "else tool.name) }}{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}"
    "{{- '<|im_start|>user\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if message.content %}{{- message.content }}{%- endif %}"
    "{%- for call in message.tool_calls or [] %}"
    "{%- set fn = call.function if call.function is defined else call %}"
    "{{- '<tool_call>' + {'name': fn.name, 'arguments': fn.arguments} | tojson + '</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|im_start|>tool\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def build_tool_model(folder: Path, chat_template: str | None = None) -> Path:
    """A tiny random Llama that a few epochs of LoRA fine-tuning can teach a short constant
    reply: its embeddings are large enough (std 0.4) for attention alone to single out a
    token. It has no end-of-turn bias, so the base model rarely ends a turn by itself (its
    turns run to the token cap). ``chat_template`` is written into the tokenizer's folder."""
    import torch
    import transformers

    tokenizer = _tokenizer()
    config = _tiny_config(tokenizer, initializer_range=0.4)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    model.save_pretrained(str(folder))
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(str(folder))
    return folder


def check_sampled_as_alone(backend: Any, job: Any) -> tuple[list[int], list[float]]:
    """Assert that a finished batched turn (``job``, a ``SampleJob`` of ``backend``'s batch
    sampler) sampled the tokens the one-sequence reference samples alone with the same seed,
    with its log-probabilities up to float rounding and a teacher-forced pass's; return them."""
    import pytest
    import torch

    ids, logprobs = job.future.result(timeout=120)
    alone_ids, alone_logprobs = backend.sampler.sample(
        job.prompt,
        temperature=job.temperature,
        top_p=job.top_p,
        max_new_tokens=job.max_new_tokens,
        seed=job.seed,
    )
    assert ids == alone_ids
    assert logprobs == pytest.approx(alone_logprobs, abs=1e-5)
    with torch.no_grad():
        logits = backend.loaded.model(input_ids=torch.tensor([[*job.prompt, *ids]])).logits[0]
    start = len(job.prompt) - 1
    forced = torch.log_softmax(logits[start : start + len(ids)].float(), -1)
    forced = forced[torch.arange(len(ids)), ids]
    assert torch.allclose(forced, torch.tensor(logprobs), atol=1e-4)
    return ids, logprobs
