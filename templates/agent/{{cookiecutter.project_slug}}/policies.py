"""Scripted policies for local runs, tests and replays: no model, no AWS, fully reproducible.

Use one with ``--policy scripted:policies.py:NAME``. A scripted policy is called once per turn
with an ``agent_kit.emulator.PolicyRequest`` (the chat history so far, the offered tools, the
sampling parameters and a seeded ``rng``) and returns a ``PolicyReply``. It must be a pure
function of the request, so a run with the same seed is the same run.

- ``binary_search``: halves the range each turn. At temperature 0 it always solves the task;
  above 0 it sometimes picks a random number in the range instead (with probability
  ``min(temperature, 1) / 2``), so the rollouts of one group get different rewards — which is
  what group-relative RL learns from.
- ``random_guess``: guesses uniformly in the original range; a weak baseline.

TODO: write a scripted policy for your task (a plausible strategy, with temperature-driven
mistakes) so you can run and test the pipeline before any model is involved.
"""

from __future__ import annotations

import re

from agent_kit.emulator import PolicyReply, PolicyRequest, ToolCall

TOOL = "{{ cookiecutter.tool_name }}"
_RANGE = re.compile(r"between (-?\d+) and (-?\d+)")
_FEEDBACK = re.compile(r"(higher|lower): the number is \w+ than (-?\d+)")
_CORRECT = re.compile(r"\bcorrect: the number is")


def _range(request: PolicyRequest) -> tuple[int, int] | None:
    """The interval still possible after the feedback so far, or None when it is unknown."""
    first_user = next((m for m in request.messages if m.get("role") == "user"), None)
    found = _RANGE.search(str(first_user.get("content", ""))) if first_user else None
    if found is None:
        return None
    low, high = int(found.group(1)), int(found.group(2))
    for result in request.tool_results():
        feedback = _FEEDBACK.search(result)
        if feedback is None:
            continue
        number = int(feedback.group(2))
        if feedback.group(1) == "higher":
            low = max(low, number + 1)
        else:
            high = min(high, number - 1)
    return low, high


def _solved(request: PolicyRequest) -> bool:
    return any(_CORRECT.search(r) for r in request.tool_results())


def _call(number: int) -> PolicyReply:
    return PolicyReply(tool_calls=(ToolCall(TOOL, {"number": number}),))


def binary_search(request: PolicyRequest) -> PolicyReply:
    """Guess the middle of the remaining range; at temperature > 0, sometimes a random number."""
    bounds = _range(request)
    if _solved(request):
        return PolicyReply(content="Found it.")
    if bounds is None or bounds[0] > bounds[1]:
        return PolicyReply(content="I cannot tell which numbers are left.")
    low, high = bounds
    if request.temperature > 0 and request.rng.random() < min(request.temperature, 1.0) / 2:
        return _call(request.rng.randint(low, high))
    return _call((low + high) // 2)


def random_guess(request: PolicyRequest) -> PolicyReply:
    """Guess uniformly in the original range, ignoring the feedback (a weak baseline)."""
    if _solved(request):
        return PolicyReply(content="Found it.")
    first_user = next((m for m in request.messages if m.get("role") == "user"), None)
    found = _RANGE.search(str(first_user.get("content", ""))) if first_user else None
    if found is None:
        return PolicyReply(content="I cannot tell the range.")
    return _call(request.rng.randint(int(found.group(1)), int(found.group(2))))
