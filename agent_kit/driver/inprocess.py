"""Play a :class:`~agent_kit.app.RolloutApp`'s episodes in-process, no server, no sockets.

:class:`ScriptedModel` is a Strands model that asks a *scripted policy* (the callables
``agent-kit run --policy scripted:…`` uses: ``policy(PolicyRequest) -> PolicyReply | str |
dict``) for each turn; :func:`run_episode` plays one episode of an entrypoint with it. The public
test kit (:mod:`agent_kit.testing`) and in-process replay (:mod:`agent_kit.replay.engine`) are
built on this module.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from strands.models import Model
from strands.models.openai import OpenAIModel

from agent_kit.app import RolloutApp
from agent_kit.contract import TEMPERATURE, TOP_P, RolloutPayload
from agent_kit.emulator.loader import load_entrypoint, module_name_for
from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, coerce_reply
from agent_kit.episode_loop import ModelFactory, ModelHandle
from agent_kit.errors import UsageError

__all__ = ["ScriptedModel", "ScriptedPolicy", "load_app", "run_episode", "scripted_model_factory"]


ScriptedPolicy = Callable[[PolicyRequest], Any]


def _estimate_tokens(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return max(1, (len(text) + 3) // 4)


def _flatten(message: dict[str, Any]) -> dict[str, Any]:
    out = dict(message)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    elif content is None:
        out["content"] = ""
    return out


class ScriptedModel(Model):
    """A Strands model that asks a scripted policy for each turn (no HTTP, deterministic).

    The policy sees exactly what the emulator would pass it: OpenAI-format messages with
    flattened content, OpenAI function tools, sampling parameters and an ``rng`` seeded from
    (seed, trajectory id, turn).
    """

    def __init__(
        self,
        policy: ScriptedPolicy,
        *,
        temperature: float = TEMPERATURE.default,
        top_p: float = TOP_P.default,
        max_tokens: int | None = None,
        seed: int = 0,
        trajectory_id: str = "local",
        job_arn: str = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/local",
    ) -> None:
        self.policy = policy
        self.config: dict[str, Any] = {
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "seed": seed,
        }
        self.trajectory_id = trajectory_id
        self.job_arn = job_arn
        self.turn = 0
        #: Every PolicyRequest this model built, oldest first (for assertions in tests).
        self.requests: list[PolicyRequest] = []

    def update_config(self, **model_config: Any) -> None:
        """Update sampling settings (``temperature``, ``top_p``, ``max_tokens``, ``seed``)."""
        self.config.update(model_config)

    def get_config(self) -> dict[str, Any]:
        """The current sampling settings."""
        return dict(self.config)

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported: scripted policies answer with text and tool calls only."""
        raise NotImplementedError("ScriptedModel does not support structured output")

    def _request(self, messages: Any, tool_specs: Any, system_prompt: str | None) -> PolicyRequest:
        openai_messages = [
            _flatten(m) for m in OpenAIModel.format_request_messages(messages, system_prompt)
        ]
        tools = [
            {
                "type": "function",
                "function": {
                    "name": spec["name"],
                    "description": spec.get("description", ""),
                    "parameters": spec["inputSchema"]["json"],
                },
            }
            for spec in tool_specs or []
        ]
        seed_text = f"{self.config['seed']}|{self.trajectory_id}|{self.turn}"
        rng = random.Random(int.from_bytes(hashlib.sha256(seed_text.encode()).digest()[:8], "big"))
        # ``tools`` always, as Strands' OpenAI model sends it (``[]`` for a tool-less agent)
        raw: dict[str, Any] = {"model": "default", "messages": openai_messages, "tools": tools}
        return PolicyRequest(
            messages=tuple(openai_messages),
            tools=tuple(tools),
            temperature=float(self.config["temperature"]),
            top_p=float(self.config["top_p"]),
            max_tokens=self.config["max_tokens"],
            rng=rng,
            trajectory_id=self.trajectory_id,
            job_arn=self.job_arn,
            turn=self.turn,
            raw=raw,
        )

    async def stream(  # type: ignore[override]
        self,
        messages: Any,
        tool_specs: Any = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield one turn as Strands stream events."""
        request = self._request(messages, tool_specs, system_prompt)
        self.requests.append(request)
        self.turn += 1
        value = self.policy(request)
        if asyncio.iscoroutine(value):
            value = await value
        reply: PolicyReply = coerce_reply(value)
        yield {"messageStart": {"role": "assistant"}}
        if reply.content:
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": reply.content}}}
            yield {"contentBlockStop": {}}
        for index, call in enumerate(reply.tool_calls):
            call_id = call.id or f"call_{self.turn}_{index}"
            yield {
                "contentBlockStart": {
                    "start": {"toolUse": {"name": call.name, "toolUseId": call_id}}
                }
            }
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": call.arguments_json()}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use" if reply.tool_calls else "end_turn"}}
        prompt_tokens = _estimate_tokens(request.raw)
        completion_tokens = _estimate_tokens(
            (reply.content or "") + "".join(c.arguments_json() for c in reply.tool_calls)
        )
        yield {
            "metadata": {
                "usage": {
                    "inputTokens": prompt_tokens,
                    "outputTokens": completion_tokens,
                    "totalTokens": prompt_tokens + completion_tokens,
                },
                "metrics": {"latencyMs": 0},
            }
        }


class _Handle:
    def __init__(self, model: ScriptedModel) -> None:
        self.model = model

    async def aclose(self) -> None:
        return None


def scripted_model_factory(
    policy: ScriptedPolicy, *, seed: int = 0, trajectory_id: str | None = None
) -> ModelFactory:
    """A ``model_factory`` for :class:`RolloutApp` that plays ``policy`` in-process; the
    model's trajectory id (what seeds the policy's ``rng``) is ``trajectory_id``, else the
    payload's ``rolloutId``, else ``"local"``."""

    async def factory(payload: RolloutPayload) -> ModelHandle:
        params = payload.inference_params
        meta = payload.metadata
        return _Handle(
            ScriptedModel(
                policy,
                temperature=float(
                    TEMPERATURE.default if params.temperature is None else params.temperature
                ),
                top_p=float(TOP_P.default if params.top_p is None else params.top_p),
                max_tokens=params.max_tokens,
                seed=seed,
                trajectory_id=trajectory_id
                if trajectory_id is not None
                else (meta.rollout_id if meta else "local"),
            )
        )

    return factory


def load_app(path: str | Path) -> RolloutApp:
    """Import an entrypoint file by path (:mod:`agent_kit.emulator.loader`) and return its
    module variable ``app``; UsageError unless it is a :class:`RolloutApp`."""
    app = load_entrypoint(path, name=module_name_for(Path(path).resolve(), "_agent_kit_entry"))
    if not isinstance(app, RolloutApp):
        raise UsageError(
            f"{Path(path).resolve()} has no module variable `app` that is a RolloutApp"
        )
    return app


def run_episode(
    app_or_file: RolloutApp | str | Path,
    task: dict[str, Any] | str,
    *,
    policy: ScriptedPolicy,
    temperature: float = TEMPERATURE.default,
    seed: int = 0,
    trajectory_id: str = "local",
) -> dict[str, Any]:
    """Play one episode in-process with a scripted policy; return the entrypoint's JSON body.

    ``task`` is the dict packed into the payload's ``prompt`` (or the prompt string itself).
    Nothing is reported: the payload carries no ``metadata``.
    """
    app = app_or_file if isinstance(app_or_file, RolloutApp) else load_app(app_or_file)
    prompt = task if isinstance(task, str) else json.dumps(task)
    payload = RolloutPayload.for_rollout(prompt, inference_params={"temperature": temperature})
    factory = scripted_model_factory(policy, seed=seed, trajectory_id=trajectory_id)
    return asyncio.run(app.play(payload, model_factory=factory))
