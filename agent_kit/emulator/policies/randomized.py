"""The ``random[:SEED]`` policy: schema-valid random tool calls, then a text answer.

It works for any agent with no configuration: it reads the JSON schemas of the tools the request
offers and emits tool calls whose arguments validate against them, and after a bounded, random
number of turns a text answer. It is reproducible (all randomness comes from the request's
``rng``, which the emulator seeds from (run seed, trajectory id, turn), mixed with the spec's
seed) and doubles as a fuzzer for environments.

Temperature (the request's ``temperature``):

- ``0`` — deterministic, no randomness at all: turn *k* (counting the assistant messages so far)
  calls tool *k* of the offered list with *canonical* arguments, one call per turn, until every
  tool has been called once (at most ``max_tool_turns``); then the text ``"Final answer."``.
  Canonical values: ``default``, else ``const`` / first ``enum``, else the lower bound (numbers,
  0 when unbounded below), the placeholder ``"example"`` fitted to the length bounds (strings),
  ``False``, one-element arrays (or ``minItems``), required properties only, first
  ``anyOf``/``oneOf`` branch.
- ``> 0`` — random: the policy stops (text answer) with probability ``stop_base × (k + 1)``
  at turn *k* (``stop_base`` 0.2: at most 4 tool turns, 1.5 on average) and always at
  ``max_tool_turns``; else it calls a random tool (two calls in one turn with
  probability ``min(0.5, 0.15 T)`` unless ``parallel_tool_calls`` is false). Optional properties
  are included with probability 1/2. Each value is an *edge value* with probability
  ``min(0.5, 0.1 T²)`` (10% at T=1, 40% at T=2): empty or maximum-length strings, Unicode,
  quotes and newlines, injection-looking text, boundary and extreme integers, empty or longest
  arrays — always inside the schema's constraints.

``tool_choice`` is honoured: ``"none"`` answers with text, ``"required"`` or a named function
always calls a tool. Supported JSON-schema keywords: ``type`` (incl. lists), ``enum``,
``const``, ``default``, ``properties``/``required``, ``minProperties``, ``items`` /
``prefixItems``, ``minItems``/``maxItems``/``uniqueItems``, ``minimum``/``maximum``/
``exclusiveMinimum``/``exclusiveMaximum`` (draft 4 and later), integer ``multipleOf``,
``minLength``/``maxLength``, ``format`` (date, date-time, time, email, uri, uuid, ipv4,
hostname), ``pattern`` (a regex subset, see :mod:`agent_kit.emulator.policies.regex_sampler`),
``anyOf``/``oneOf`` (a branch is chosen), ``allOf`` (merged), local ``$ref`` (``#/$defs/...``).
"""

from __future__ import annotations

import random
from pathlib import Path

from agent_kit.emulator.policies.base import PolicyResult, result_for_reply
from agent_kit.emulator.policies.schema_sampler import SchemaSampler
from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall
from agent_kit.errors import UsageError
from agent_kit.settings import DEFAULTS, Settings

__all__ = ["RandomBackend", "from_spec"]


def _assistant_turns(request: PolicyRequest) -> int:
    return sum(1 for m in request.messages if m.get("role") == "assistant")


class RandomBackend:
    """The ``random[:SEED]`` policy (see the module docstring for its behaviour)."""

    def __init__(
        self,
        *,
        seed: int = 0,
        max_tool_turns: int = 8,
        stop_base: float = 0.2,
        tokenizer: str = DEFAULTS.tokenizer,
    ) -> None:
        self.seed = seed
        self.name = f"random:{seed}"
        self.max_tool_turns = max_tool_turns
        self.stop_base = stop_base
        #: The token counter of its usage (``AGENT_KIT_TOKENIZER``).
        self.tokenizer = tokenizer

    def reply(self, request: PolicyRequest) -> PolicyReply:
        """This turn's reply (pure function of the request, its rng state and the seed)."""
        temperature = max(0.0, float(request.temperature or 0.0))
        rng = None
        if temperature > 0:
            rng = random.Random(f"{self.seed}:{request.rng.getrandbits(64)}")
        tools = [
            t["function"]
            for t in request.tools
            if isinstance(t.get("function"), dict) and t["function"].get("name")
        ]
        choice = request.raw.get("tool_choice")
        if isinstance(choice, dict):
            forced = (choice.get("function") or {}).get("name")
            tools = [t for t in tools if t["name"] == forced] or tools
        must_call = choice == "required" or isinstance(choice, dict)
        turn = _assistant_turns(request)
        if not tools or choice == "none":
            call = False
        elif must_call:
            call = True
        elif rng is None:
            call = turn < min(len(tools), self.max_tool_turns)
        else:
            stop = turn >= self.max_tool_turns or rng.random() < self.stop_base * (turn + 1)
            call = not stop
        if not call:
            sampler = SchemaSampler(rng, temperature=temperature, root={})
            return PolicyReply(content=sampler.text_answer(request.max_tokens))
        if rng is None:
            picked = [tools[turn % len(tools)]]
        else:
            parallel = request.raw.get("parallel_tool_calls", True) is not False
            n = 2 if parallel and rng.random() < min(0.5, 0.15 * temperature) else 1
            picked = [rng.choice(tools) for _ in range(n)]
        calls = []
        for fn in picked:
            params = fn.get("parameters")
            params = params if isinstance(params, dict) else {"type": "object"}
            args = SchemaSampler(rng, temperature=temperature, root=params).value(params)
            calls.append(ToolCall(str(fn["name"]), args if isinstance(args, dict) else {}))
        return PolicyReply(content=None, tool_calls=tuple(calls))

    async def complete(self, request: PolicyRequest) -> PolicyResult:
        """The reply as a chat.completion with estimated usage."""
        return result_for_reply(request, self.reply(request), tokenizer=self.tokenizer)

    async def aclose(self) -> None:
        """Nothing to release."""


def from_spec(
    rest: str, *, seed: int, base_dir: Path | None = None, settings: Settings = DEFAULTS
) -> RandomBackend:
    """The ``random[:SEED]`` scheme: the spec's seed, else the run seed."""
    if rest:
        try:
            seed = int(rest)
        except ValueError:
            raise UsageError(
                f"bad random policy seed {rest!r}: expected random[:INTEGER]"
            ) from None
    return RandomBackend(seed=seed, tokenizer=settings.tokenizer)
