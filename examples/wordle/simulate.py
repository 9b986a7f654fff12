"""In-process Wordle simulation — environment + scripted policy + reward, WITHOUT Strands,
servers or the emulator.

This is a stand-in for ``agent-kit run`` used by the tests and by ``evaluate.py --mode sim``: it
plays the same ``WordleEnv`` tool and ``wordle_reward`` from ``agent.py`` and the same policies
from ``policies.py``, and it mimics agent_kit's episode loop (``agent_kit/episode_loop.py``): the
policy sees OpenAI-style messages (system, user, assistant with ``tool_calls``, ``tool`` results); a
text-only reply is parsed with ``parse_text_tool_calls`` and the recovered call is executed,
flagged ``recovered=True`` and its result sent back as a user message; the episode stops when the
environment finishes, after ``max_turns`` policy calls, or after a text reply with no guess in it.
Per-turn rng is seeded from (seed, trajectory id, turn), like the emulator's scripted backend.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from agent_kit.emulator.schemas import PolicyRequest, coerce_reply
from agent_kit.episode import Episode, ToolCallRecord, TurnRecord
from agent_kit.reward import Reward

HERE = Path(__file__).resolve().parent


def load_module(path: str | Path, name: str | None = None) -> ModuleType:
    """Import a file by path (registered in ``sys.modules`` under ``name``); cached by name."""
    path = Path(path).resolve()
    name = name or f"wordle_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def agent_module() -> ModuleType:
    """``examples/wordle/agent.py`` as a module."""
    return load_module(HERE / "agent.py", "wordle_agent")


def policies_module() -> ModuleType:
    """``examples/wordle/policies.py`` as a module."""
    return load_module(HERE / "policies.py", "wordle_policies")


def read_dataset(path: str | Path) -> list[dict[str, Any]]:
    """The tasks of an MTRL ``.jsonl`` dataset (each line ``{"prompt": "<JSON string>"}``)."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            rows.append(json.loads(json.loads(line)["prompt"]))
    return rows


def openai_tools(env: Any) -> tuple[dict[str, Any], ...]:
    """The environment's tools as OpenAI function-tool definitions (what the policy is sent)."""
    out = []
    for t in env.tools():
        spec = t.tool_spec
        out.append(
            {
                "type": "function",
                "function": {
                    "name": spec["name"],
                    "description": spec["description"],
                    "parameters": spec["inputSchema"]["json"],
                },
            }
        )
    return tuple(out)


@dataclass
class SimResult:
    """One simulated rollout: its reward, the game's outcome and every request the policy saw."""

    task: dict[str, Any]
    reward: Reward
    solved: bool
    guesses: int
    episode: Episode
    requests: list[PolicyRequest] = field(default_factory=list)


def play(
    policy: Callable[[PolicyRequest], Any],
    task: dict[str, Any],
    *,
    temperature: float = 0.0,
    seed: int = 0,
    trajectory_id: str = "sim-0",
    max_turns: int | None = None,
) -> SimResult:
    """Play one episode of ``task`` with ``policy`` and score it with ``wordle_reward``."""
    mod = agent_module()
    env = mod.WordleEnv()
    episode = Episode(task=task, prompt="", trajectory_id=trajectory_id)
    env._attach(episode)
    prompt = env.reset(task)
    episode.prompt = prompt
    tools = openai_tools(env)
    tool_fns = {t.tool_name: t for t in env.tools()}
    limit_turns = max_turns or mod.MAX_TURNS
    limit_calls = env.max_tool_calls
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": mod.SYSTEM_PROMPT},
        {"role": "user", "content": prompt},
    ]
    requests: list[PolicyRequest] = []

    def execute(name: str, arguments: dict[str, Any], recovered: bool) -> str:
        fn = tool_fns.get(name)
        try:
            output = str(fn(**arguments)) if fn else f"Error: unknown tool {name!r}"
        except TypeError as exc:
            output = f"Error: {exc}"
        episode.tool_calls.append(
            ToolCallRecord(
                max(0, episode.turns - 1), name, dict(arguments), output, "success", recovered
            )
        )
        return output

    while episode.turns < limit_turns and not env.done:
        turn = episode.turns
        request = PolicyRequest(
            messages=tuple(dict(m) for m in messages),
            tools=tools,
            temperature=temperature,
            top_p=1.0,
            max_tokens=None,
            rng=random.Random(f"{seed}:{trajectory_id}:{turn}"),
            trajectory_id=trajectory_id,
            job_arn="arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/sim",
            turn=turn,
            raw={},
        )
        requests.append(request)
        reply = coerce_reply(policy(request))
        episode.turn_log.append(
            TurnRecord(
                turn,
                stop_reason=reply.finish_reason,
                text=reply.content or "",
                tool_calls=[c.name for c in reply.tool_calls],
            )
        )
        if reply.tool_calls:
            calls = [
                {
                    "id": c.id or f"call_{turn}_{i}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments_json()},
                }
                for i, c in enumerate(reply.tool_calls)
            ]
            messages.append(
                {"role": "assistant", "content": reply.content or "", "tool_calls": calls}
            )
            for call, wire in zip(reply.tool_calls, calls, strict=True):
                if env.done or len(episode.tool_calls) >= (limit_calls or 10**9):
                    break
                args = (
                    call.arguments
                    if isinstance(call.arguments, dict)
                    else json.loads(call.arguments)
                )
                output = execute(call.name, args, recovered=False)
                messages.append({"role": "tool", "tool_call_id": wire["id"], "content": output})
            if limit_calls is not None and len(episode.tool_calls) >= limit_calls:
                break
            continue
        text = reply.content or ""
        messages.append({"role": "assistant", "content": text})
        recovered = list(env.parse_text_tool_calls(text))
        if not recovered:
            break
        outputs = [
            f"[{c.name}] {execute(c.name, dict(c.arguments), recovered=True)}" for c in recovered
        ]
        messages.append(
            {
                "role": "user",
                "content": "Result of the tool call written in your message:\n"
                + "\n".join(outputs),
            }
        )
    reward = mod.wordle_reward(env, episode)
    return SimResult(task, reward, env.solved, len(env.history), episode, requests)


def play_groups(
    policy: Callable[[PolicyRequest], Any],
    tasks: Iterable[dict[str, Any]],
    *,
    group_size: int = 4,
    temperature: float = 0.0,
    seed: int = 0,
) -> list[list[SimResult]]:
    """Play every task ``group_size`` times (one group per task), like a job step does."""
    groups = []
    for task in tasks:
        groups.append(
            [
                play(
                    policy,
                    task,
                    temperature=temperature,
                    seed=seed,
                    trajectory_id=f"{task.get('id', 'task')}-{k}",
                )
                for k in range(group_size)
            ]
        )
    return groups
