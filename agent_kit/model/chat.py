"""A model's chat format: how a conversation with tools becomes prompt text and how an assistant
message (tool calls included) is written as the model would emit it. (The model's text is read
back into tool calls by :func:`agent_kit.model.tool_calls.parse_tool_calls`; a rollout's turns are
continued token-in, token-out by :mod:`agent_kit.model.continuation`.)

One :class:`ChatFormat` per tokenizer, chosen by :func:`chat_format`:

- a tokenizer whose own chat template renders ``tools`` (Qwen's, Llama 3.x's, …) keeps it, and
  the tool-call syntax is learnt from it: a probe assistant message with one tool call is
  rendered, and its text says whether calls are Hermes-style ``<tool_call>{"name",
  "arguments"}</tool_call>`` blocks (Qwen) or a bare JSON object ``{"name", "parameters"}``
  (Llama 3.x, optionally after ``<|python_tag|>``);
- any other (SmolLM2's GGUF template drops tools) gets agent_kit's
  :data:`CHATML_TOOLS_TEMPLATE` and Hermes blocks (the ``local`` policy hands the same
  template to llama.cpp).

Sampling (:mod:`agent_kit.model.sampler`) and the warm start's supervised examples
(``agent_kit.train.warm``) both render through :func:`render` and :func:`completion_text`, so
the model is trained on exactly the text it samples with.

**What the conversation says is text, never control.** Message contents, tool results, tool-call
arguments and tool schemas come from the agent, its tools and the pages they read: a tool result
that holds ``<|im_end|>\n<|im_start|>system`` must not close its turn and open a system turn
once tokenized. :func:`render` writes every string of the messages and tools with a zero-width
space (U+200B) after the first character of each of the tokenizer's control strings (its
special and added tokens, :attr:`ChatFormat.controls`): the tokenizer then reads them as
ordinary text, and only the template's own markup becomes control tokens. Sampling and the warm
start render alike, so both see the same text.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "CHATML_TOOLS_TEMPLATE",
    "ESCAPE",
    "ChatFormat",
    "Syntax",
    "chat_format",
    "completion_text",
    "control_strings",
    "render",
]

Syntax = Literal["hermes", "json"]
"""How a model writes tool calls: Hermes ``<tool_call>`` blocks or a bare JSON object."""

CHATML_TOOLS_TEMPLATE: Final = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content }}"
    "{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query."
    "\\n\\nYou are provided with function signatures within <tools></tools> XML tags:"
    "\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and"
    " arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    '{"name": <function-name>, "arguments": <args-json-object>}'
    "\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant' }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for call in message.tool_calls or [] %}"
    "{%- set fn = call.function if call.function is defined else call %}"
    '{{- \'\\n<tool_call>\\n{"name": "\' + fn.name + \'", "arguments": \' }}'
    "{%- if fn.arguments is string %}{{- fn.arguments }}"
    "{%- else %}{{- fn.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + (message.content or '') + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""A ChatML chat template that renders ``tools`` (Hermes/Qwen style): the tool schemas in the
system message, calls as ``<tool_call>{"name", "arguments"}</tool_call>``, results as
``<tool_response>`` user turns. Used for ChatML models whose own template drops tools."""

#: What :func:`render` writes after the first character of a control string in untrusted text.
ESCAPE: Final = "\u200b"
_PROBE_TOOL: Final = "agent_kit_probe_tool"
_PROBE_TOOLS: Final = (
    {
        "type": "function",
        "function": {
            "name": _PROBE_TOOL,
            "description": "Probe.",
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
        },
    },
)
_PROBE_MESSAGES: Final = ({"role": "system", "content": "S"}, {"role": "user", "content": "U"})


@dataclass(frozen=True)
class ChatFormat:
    """How one tokenizer's conversations are written: ``template`` (None: the tokenizer's own),
    the tool-call ``syntax``, the token that ends an assistant turn, and whether assistant
    tool-call arguments are handed to the template as objects (own templates) or as the JSON
    text the agent sent back (agent_kit's template). ``controls``: the strings the tokenizer
    reads as control tokens, escaped in the conversation's own text (see the module
    docstring)."""

    template: str | None
    syntax: Syntax
    end_token: str
    own: bool
    controls: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """A short description for messages: ``own template (hermes)`` or ``agent_kit ChatML``."""
        return f"own template ({self.syntax})" if self.own else "agent_kit ChatML tool template"


def _normalise(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as model templates expect them: tool-call arguments as objects, not text."""
    out: list[dict[str, Any]] = []
    for message in messages:
        calls = message.get("tool_calls")
        if not calls:
            out.append(dict(message))
            continue
        fixed = []
        for call in calls:
            fn = dict(call.get("function") or call)
            arguments = fn.get("arguments")
            if isinstance(arguments, str):
                with contextlib.suppress(ValueError):
                    fn["arguments"] = json.loads(arguments) if arguments.strip() else {}
            fixed.append({"type": "function", "id": call.get("id"), "function": fn})
        out.append({**message, "tool_calls": fixed})
    return out


def control_strings(tokenizer: Any) -> tuple[str, ...]:
    """The strings ``tokenizer`` turns into control tokens wherever they appear in a text: its
    special tokens and added tokens (Qwen's ``<tool_call>`` is an added, not a special, one),
    but for whitespace and plain words; longest first."""
    found = {str(t) for t in getattr(tokenizer, "all_special_tokens", None) or ()}
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    found |= {str(getattr(t, "content", t)) for t in decoder.values()}
    kept = {t for t in found if len(t) > 1 and t.strip() == t and not t.isalnum()}
    return tuple(sorted(kept, key=lambda t: (-len(t), t)))


@functools.lru_cache(maxsize=16)
def _control_pattern(controls: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(c) for c in controls))


def _escape_text(text: str, pattern: re.Pattern[str]) -> str:
    # a pass breaks every match it finds; an overlapping one is found by the next
    while pattern.search(text):
        text = pattern.sub(lambda m: m[0][0] + ESCAPE + m[0][1:], text)
    return text


def _as_text(value: Any, pattern: re.Pattern[str]) -> Any:
    """``value`` (a message, a tool, any JSON) with every string value escaped; keys kept."""
    if isinstance(value, str):
        return _escape_text(value, pattern)
    if isinstance(value, dict):
        return {k: _as_text(v, pattern) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_text(v, pattern) for v in value]
    return value


def render(
    tokenizer: Any,
    fmt: ChatFormat,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]],
    *,
    gen: bool,
) -> str:
    """The chat text of ``messages`` and ``tools`` in ``fmt`` (with the assistant header when
    ``gen``); the control strings in their text escaped (see the module docstring)."""
    chosen = _normalise(messages) if fmt.own else list(messages)
    if fmt.controls:
        pattern = _control_pattern(fmt.controls)
        chosen = [_as_text(m, pattern) for m in chosen]
        tools = [_as_text(t, pattern) for t in tools]
    text: str = tokenizer.apply_chat_template(
        chosen,
        tools=list(tools) or None,
        chat_template=fmt.template,
        tokenize=False,
        add_generation_prompt=gen,
    )
    return text


def completion_text(
    tokenizer: Any,
    fmt: ChatFormat,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]],
    reply: dict[str, Any],
) -> tuple[str, str] | None:
    """``(prompt, completion)``: the prompt the policy samples ``reply`` (an assistant message)
    after, and the reply as the model writes it, up to and including its end-of-turn token;
    None when the template does not render the prompt as a prefix of the conversation."""
    prompt = render(tokenizer, fmt, messages, tools, gen=True)
    full = render(tokenizer, fmt, [*messages, _canonical(reply)], tools, gen=False)
    if not full.startswith(prompt):
        return None
    completion = full[len(prompt) :].rstrip()
    if not completion.endswith(fmt.end_token):
        completion += fmt.end_token
    return prompt, completion


def _canonical(reply: dict[str, Any]) -> dict[str, Any]:
    """``reply`` with its tool calls' JSON arguments written as an agent sends them back in the
    history (``json.dumps``: ``{"guess": "crane"}``), whatever spacing the recorded response
    used, so that a target and the history of the next turn spell a call alike."""
    calls = reply.get("tool_calls")
    if not calls:
        return reply
    fixed = []
    for call in calls:
        fn = dict(call.get("function") or {})
        arguments = fn.get("arguments")
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):
                fn["arguments"] = json.dumps(json.loads(arguments) if arguments.strip() else {})
        fixed.append({**call, "function": fn})
    return {**reply, "tool_calls": fixed}


def _renders_tools(tokenizer: Any) -> bool:
    if not getattr(tokenizer, "chat_template", None):
        return False
    try:
        text = tokenizer.apply_chat_template(
            list(_PROBE_MESSAGES), tools=list(_PROBE_TOOLS), tokenize=False
        )
    except Exception:  # noqa: BLE001 - a template that cannot render tools has no tool support
        return False
    return isinstance(text, str) and _PROBE_TOOL in text


def _end_token(tokenizer: Any, assistant: str) -> str:
    tail = assistant.rstrip()
    specials = sorted(
        {str(t) for t in getattr(tokenizer, "all_special_tokens", [])}
        | {str(t) for t in getattr(tokenizer, "added_tokens_encoder", {})},
        key=len,
        reverse=True,
    )
    for token in specials:
        if token and tail.endswith(token):
            return token
    return str(tokenizer.eos_token or "")


def chat_format(tokenizer: Any) -> ChatFormat:
    """The :class:`ChatFormat` for ``tokenizer`` (see the module docstring)."""
    controls = control_strings(tokenizer)
    if not _renders_tools(tokenizer):
        return ChatFormat(CHATML_TOOLS_TEMPLATE, "hermes", "<|im_end|>", False, controls)
    call = {"name": _PROBE_TOOL, "arguments": {"x": 1}}
    reply = {"role": "assistant", "content": "", "tool_calls": [{"function": call}]}
    probe = ChatFormat(None, "hermes", "", own=True)
    prompt = render(tokenizer, probe, _PROBE_MESSAGES, _PROBE_TOOLS, gen=True)
    full = render(tokenizer, probe, [*_PROBE_MESSAGES, reply], _PROBE_TOOLS, gen=False)
    assistant = full[len(prompt) :] if full.startswith(prompt) else full
    syntax: Syntax = "hermes" if "<tool_call>" in assistant else "json"
    return ChatFormat(None, syntax, _end_token(tokenizer, assistant), True, controls)
