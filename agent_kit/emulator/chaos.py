"""Chaos mode: the emulator injects the faults a real MTRL job throws at an agent.

``agent-kit run … --chaos SPEC`` makes the emulator answer some calls badly, at rates the user
sets, reproducibly: whether a fault hits is a pure function of (seed, fault, trajectory id,
call index), so the same run with the same seed is hit at the same places whatever the
concurrency or timing. Every hit is recorded as a ``chaos`` event in run.sqlite
(``{"fault", "turn"|"call"}``), and the summary counts, per fault, the rollouts it hit and how
each ended (docs/failures.md).

SPEC is a comma-separated list of ``FAULT=RATE`` items (RATE in [0, 1], the chance per call),
``FAULT=RATE@SECONDS`` for the timed faults, or a preset name; later items override earlier
ones, so ``service,policy_5xx=0.2`` is the preset with more 5xx.

Faults on the policy routes (``/v1/chat/completions``, ``/sample``, the stream route):

=====================  ==========================================================================
``policy_5xx``         500 InternalServiceError before the policy is asked (nothing recorded)
``policy_429``         429 ThrottlingException (nothing recorded)
``policy_403``         403 AccessDeniedException "signature expired": the agent must re-sign
``latency``            the answer is delayed by SECONDS (default 2)
``timeout``            the call hangs for SECONDS (default 30), then 500; clients with a shorter
                       timeout give up first
``truncated_sse``      the answer is cut short: a stream stops after its first chunk with no
                       ``[DONE]``, a JSON body stops mid-way (the turn is recorded)
``text_tool_calls``    tool calls come back written as JSON text in ``content``, with no
                       ``tool_calls`` field (what many open models do)
``malformed_tool_calls``  tool call arguments are not valid JSON
=====================  ==========================================================================

Faults on CompleteRollout / UpdateReward:

=====================  ==========================================================================
``report_throttle``    429 ThrottlingException, the report not applied: the agent must retry
``report_lost``        the report is applied, then the answer is a 500: a retry is a duplicate
                       (answered from the ClientToken cache, or a conflict without one)
=====================  ==========================================================================

Presets: ``service`` (rates in the range a long real job sees: ``policy_5xx=0.01``,
``policy_429=0.02``, ``policy_403=0.002``, ``latency=0.05@1``, ``truncated_sse=0.005``,
``text_tool_calls=0.01``, ``malformed_tool_calls=0.005``, ``report_throttle=0.02``,
``report_lost=0.005``) and ``heavy`` (every fault at 0.05, timed faults short). These are
agent_kit's choices, not published AWS figures.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from agent_kit.errors import UsageError

__all__ = [
    "FAULTS",
    "POLICY_FAULTS",
    "PRESETS",
    "REPORT_FAULTS",
    "Chaos",
    "as_text_tool_calls",
    "parse_chaos",
    "with_malformed_arguments",
]


#: Policy-route faults, in the order they are tried for one call (first hit wins).
POLICY_FAULTS: Final = (
    "policy_403",
    "policy_429",
    "policy_5xx",
    "timeout",
    "latency",
    "truncated_sse",
    "text_tool_calls",
    "malformed_tool_calls",
)
#: CompleteRollout / UpdateReward faults.
REPORT_FAULTS: Final = ("report_throttle", "report_lost")
FAULTS: Final = POLICY_FAULTS + REPORT_FAULTS
#: Default SECONDS of the timed faults.
_DEFAULT_SECONDS: Final = {"latency": 2.0, "timeout": 30.0}

PRESETS: Final[Mapping[str, str]] = {
    "service": (
        "policy_5xx=0.01,policy_429=0.02,policy_403=0.002,latency=0.05@1,truncated_sse=0.005,"
        "text_tool_calls=0.01,malformed_tool_calls=0.005,report_throttle=0.02,report_lost=0.005"
    ),
    "heavy": ",".join(
        f"{name}=0.05@{0.5 if name == 'latency' else 5}"
        if name in _DEFAULT_SECONDS
        else f"{name}=0.05"
        for name in FAULTS
    ),
}


@dataclass(frozen=True)
class Chaos:
    """Fault rates (and seconds for timed faults) plus the seed of the hit decisions."""

    rates: Mapping[str, float]
    seconds: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0
    spec: str = ""

    def hits(self, fault: str, trajectory_id: str, index: int) -> bool:
        """Whether ``fault`` hits call ``index`` of ``trajectory_id`` (deterministic)."""
        rate = self.rates.get(fault, 0.0)
        if rate <= 0.0:
            return False
        if rate >= 1.0:
            return True
        digest = hashlib.blake2b(
            f"{self.seed}\x00{fault}\x00{trajectory_id}\x00{index}".encode(), digest_size=8
        ).digest()
        return int.from_bytes(digest, "big") / 2.0**64 < rate

    def policy_fault(self, trajectory_id: str, turn: int) -> str | None:
        """The policy-route fault for this turn, if any (the first of POLICY_FAULTS that hits)."""
        for fault in POLICY_FAULTS:
            if self.hits(fault, trajectory_id, turn):
                return fault
        return None

    def report_fault(self, trajectory_id: str, call: int) -> str | None:
        """The CompleteRollout/UpdateReward fault for this report call, if any."""
        for fault in REPORT_FAULTS:
            if self.hits(fault, trajectory_id, call):
                return fault
        return None

    def delay(self, fault: str) -> float:
        """SECONDS of a timed fault."""
        return float(self.seconds.get(fault, _DEFAULT_SECONDS.get(fault, 0.0)))

    def to_config(self) -> dict[str, Any]:
        """JSON form for the job config in the store (so the summary knows the rates)."""
        return {"spec": self.spec, "rates": dict(self.rates), "seconds": dict(self.seconds)}


def parse_chaos(spec: str, *, seed: int = 0) -> Chaos:
    """Parse ``--chaos SPEC``; :class:`UsageError` naming the bad item and the known faults."""
    rates: dict[str, float] = {}
    seconds: dict[str, float] = {}
    items = [item.strip() for item in spec.split(",") if item.strip()]
    if not items:
        raise UsageError("--chaos: give FAULT=RATE items or a preset (" + _known() + ")")
    expanded: list[str] = []
    for item in items:
        if item.lower() in PRESETS:
            expanded.extend(PRESETS[item.lower()].split(","))
        else:
            expanded.append(item)
    for item in expanded:
        name, eq, value = item.partition("=")
        name = name.strip().lower()
        if not eq or name not in FAULTS:
            raise UsageError(f"--chaos: unknown item {item!r}; known: {_known()}")
        rate_text, at, secs_text = value.partition("@")
        rate = _number(item, rate_text)
        if not 0.0 <= rate <= 1.0:
            raise UsageError(f"--chaos: {item!r}: the rate is a chance per call, in [0, 1]")
        if at:
            if name not in _DEFAULT_SECONDS:
                raise UsageError(f"--chaos: {item!r}: only latency and timeout take @SECONDS")
            secs = _number(item, secs_text)
            if not 0.0 < secs <= 600.0:
                raise UsageError(f"--chaos: {item!r}: SECONDS must be in (0, 600]")
            seconds[name] = secs
        rates[name] = rate
    return Chaos(rates=rates, seconds=seconds, seed=seed, spec=spec.strip())


def _number(item: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"--chaos: {item!r}: {text.strip()!r} is not a number") from None
    if not math.isfinite(value):
        raise UsageError(f"--chaos: {item!r}: the value must be finite")
    return value


def _known() -> str:
    return ", ".join(FAULTS) + "; presets: " + ", ".join(PRESETS)


# -- response rewrites --------------------------------------------------------------------------


def _message(response: Mapping[str, Any]) -> dict[str, Any] | None:
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return None
    message = choices[0].get("message")
    return dict(message) if isinstance(message, Mapping) else None


def _tool_calls(response: Mapping[str, Any]) -> tuple[dict[str, Any], list[Any]] | None:
    """The first choice's message and its tool calls, or None when it has no tool call."""
    message = _message(response)
    calls = message.get("tool_calls") if message else None
    if not message or not isinstance(calls, list) or not calls:
        return None
    return message, calls


def _with_message(
    response: Mapping[str, Any], message: dict[str, Any], finish: str
) -> dict[str, Any]:
    choice = {**response["choices"][0], "message": message, "finish_reason": finish}
    return {**response, "choices": [choice, *response["choices"][1:]]}


def as_text_tool_calls(response: Mapping[str, Any]) -> dict[str, Any] | None:
    """``response`` with its tool calls written as JSON text in ``content`` (no ``tool_calls``),
    or None when it has no tool call to rewrite."""
    if (found := _tool_calls(response)) is None:
        return None
    message, calls = found
    written = []
    for call in calls:
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping):
            continue
        raw = fn.get("arguments")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            arguments = raw
        written.append({"name": fn.get("name"), "arguments": arguments})
    text = "\n".join(json.dumps(w) for w in written)
    prefix = message.get("content") if isinstance(message.get("content"), str) else ""
    new = {k: v for k, v in message.items() if k != "tool_calls"}
    new["content"] = f"{prefix}\n{text}".strip() if prefix else text
    return _with_message(response, new, "stop")


def with_malformed_arguments(response: Mapping[str, Any]) -> dict[str, Any] | None:
    """``response`` with every tool call's arguments cut to invalid JSON, or None when it has
    no tool call."""
    if (found := _tool_calls(response)) is None:
        return None
    message, calls = found
    broken = []
    for call in calls:
        if not isinstance(call, Mapping):
            broken.append(call)
            continue
        fn = dict(call.get("function") or {})
        raw = fn.get("arguments")
        text = raw if isinstance(raw, str) else json.dumps(raw)
        fn["arguments"] = text[: max(1, len(text) // 2)] + '",'
        broken.append({**call, "function": fn})
    return _with_message(response, {**message, "tool_calls": broken}, "tool_calls")
