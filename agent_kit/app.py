"""RolloutApp: an AgentCore app whose entrypoint plays one MTRL rollout.

``RolloutApp`` **is** a :class:`bedrock_agentcore.runtime.BedrockAgentCoreApp` (a Starlette app):
``POST /invocations`` runs one episode, ``GET /ping`` answers health (``HealthyBusy`` while a
rollout is in flight), and ``app.run()`` serves on port 8080 — so the module variable must be
named ``app`` and the file must end with ``if __name__ == "__main__": app.run()``.

Per invocation it validates the payload (HTTP 400 with a readable message when it is bad),
builds a **fresh** environment, runs a Strands agent whose tools are the environment's ``@tool``
methods, scores the episode, reports CompleteRollout + UpdateReward when the payload carries
``metadata``, and returns ``{"reward", "reward_breakdown", "turns", "usage", "stop_reason",
"tool_log", …}`` (``tool_log``: the last turn's tool results, bounded, for the transcripts).

The same entrypoint speaks the open-source trainers' contract (agentcore-rl-toolkit's, see
:mod:`agent_kit.trainer_contract` and docs/trainers.md): a payload with ``_config`` plays
against the trainer's ``base_url`` and answers ``{"reward", "metrics"}``; one with
``_rollout`` answers ``{"status": "processing", "s3_bucket", "result_key"}`` at once, plays in
the background (``HealthyBusy``) and writes the result object to S3. Neither reports to a Job
Runtime.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from bedrock_agentcore.runtime import BedrockAgentCoreApp
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_kit.contract import MAX_PAYLOAD_BYTES, RolloutPayload, parse_payload, resolve_endpoint
from agent_kit.environment import Environment
from agent_kit.episode_loop import (
    EpisodeOutcome,
    EpisodeSettings,
    ModelFactory,
    ModelHandle,
    RewardFunction,
    play_episode,
)
from agent_kit.errors import ContractError
from agent_kit.policy_client import PolicyConfig, TokenProvider, build_model
from agent_kit.runtime_client import RolloutReporter, s3_client
from agent_kit.settings import Settings
from agent_kit.trainer_contract import (
    TrainerPayload,
    error_result,
    http_answer,
    parse_trainer_payload,
    result_key,
    s3_result,
)

__all__ = ["RolloutApp"]

logger = logging.getLogger("agent_kit.app")


class _BodyLimit:
    """ASGI middleware: refuse /invocations bodies over ``max_bytes`` with a 400, unread."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._reject(scope, receive, send)
                return
        seen = 0
        too_big = False

        async def limited() -> Message:
            nonlocal seen, too_big
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    too_big = True
                    raise ContractError("body too large")
            return message

        try:
            await self.app(scope, limited, send)
        except ContractError:
            if not too_big:
                raise
            await self._reject(scope, receive, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse(
            {
                "error": f"payload too large: the limit is {self.max_bytes} bytes",
                "error_type": "ValidationError",
            },
            status_code=400,
        )
        await response(scope, receive, send)


class RolloutApp(BedrockAgentCoreApp):
    """An AgentCore app that runs one RL episode per invocation and reports its reward.

    Args:
        environment: the :class:`Environment` subclass (or a zero-argument factory); a fresh
            instance is built for every rollout.
        reward: ``reward(env, episode) -> Reward | float``.
        system_prompt: the agent's system prompt.
        max_turns: policy calls allowed per episode (an environment's ``max_turns`` wins).
        max_tool_calls: tool executions allowed per episode (``None``: unlimited).
        floor_reward: reported when the episode fails on the agent's side, so the job never
            dies for lack of a reward.
        score_unfinished: score episodes cut by a limit with the reward function (default) or
            give them the floor.
        budget_s: wall-clock budget of one rollout, kept below the service's rollout_timeout
            (default 600 s).
        policy: transport settings (default: ``agent_settings``' ``AGENT_KIT_POLICY_*``, see
            ``PolicyConfig``).
        model_factory: advanced/testing: builds the Strands model of an episode yourself.
        max_payload_bytes: largest accepted /invocations body.
        forwarder: also serve ``POST /rollout`` + ``GET /health`` for a Lambda forwarder (its
            secret: ``AGENT_KIT_FORWARDER_SECRET``).
        agent_settings: the ``AGENT_KIT_*`` settings of the agent process (its policy
            transport, auxiliary model, port, forwarder secret). Default: read from the
            environment here, once (this is the agent's door, docs/settings.md); a malformed
            value is a :class:`~agent_kit.errors.UsageError` naming the variable.
    """

    def __init__(
        self,
        environment: type[Environment] | Callable[[], Environment],
        *,
        reward: RewardFunction,
        system_prompt: str = "",
        max_turns: int = 16,
        max_tool_calls: int | None = None,
        floor_reward: float = -1.0,
        score_unfinished: bool = True,
        budget_s: float = 420.0,
        recover_text_tool_calls: bool = True,
        policy: PolicyConfig | None = None,
        model_factory: ModelFactory | None = None,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        forwarder: bool = False,
        debug: bool = False,
        agent_settings: Settings | None = None,
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        if not callable(reward):
            raise TypeError("reward must be a function reward(env, episode) -> Reward | float")
        super().__init__(
            debug=debug, middleware=[Middleware(_BodyLimit, max_bytes=max_payload_bytes)]
        )
        self.environment = environment
        self.reward_fn = reward
        self.settings = EpisodeSettings(
            system_prompt=system_prompt,
            max_turns=max_turns,
            max_tool_calls=max_tool_calls,
            floor_reward=float(floor_reward),
            score_unfinished=score_unfinished,
            budget_s=budget_s,
            recover_text_tool_calls=recover_text_tool_calls,
        )
        #: The ``AGENT_KIT_*`` settings this agent read at its door (constructor docstring).
        self.agent_settings = (
            agent_settings
            if agent_settings is not None
            else Settings.from_environ(os.environ, door="agent")
        )
        self.policy_config = (
            policy if policy is not None else PolicyConfig.from_settings(self.agent_settings)
        )
        self._model_factory = model_factory
        self._token_provider: TokenProvider | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.entrypoint(self._invocation)
        if forwarder:
            from agent_kit.forwarder import enable_forwarder_routes

            enable_forwarder_routes(self, self.agent_settings.forwarder_secret)

    # -- the entrypoint ------------------------------------------------------------------------
    async def _invocation(self, payload: Any, context: Any = None) -> Any:
        try:
            trainer = parse_trainer_payload(payload)
            parsed = trainer.rollout if trainer is not None else parse_payload(payload)
        except ContractError as exc:
            return _bad_request(exc.message)
        if trainer is not None and trainer.mode == "s3":
            return self._start_background(trainer, getattr(context, "session_id", None))
        task_id = self.add_async_task("rollout", {"trajectory": _trajectory_of(payload)})
        try:
            if trainer is not None:
                return http_answer(await self.play_for_trainer(trainer))
            return await self.play(parsed)
        except ContractError as exc:
            return _bad_request(exc.message)
        finally:
            self.complete_async_task(task_id)

    async def play(
        self, payload: RolloutPayload, *, model_factory: ModelFactory | None = None
    ) -> dict[str, Any]:
        """Run and report one rollout; return the JSON body. Raises only ContractError.

        ``model_factory`` builds this episode's Strands model instead of the app's own (the
        ``model_factory`` given to the constructor, else the policy endpoint of its
        :class:`~agent_kit.policy_client.PolicyConfig`): the test kit's
        :func:`~agent_kit.driver.inprocess.run_episode` plays a scripted policy with it.
        """
        outcome = await play_episode(
            payload,
            environment=self.environment,
            reward=self.reward_fn,
            settings=self.settings,
            model_factory=model_factory or self._model_factory or self._default_model,
            agent_settings=self.agent_settings,
        )
        if payload.metadata is not None:
            await self._report(payload, outcome)
        if outcome.episode.failure is not None:
            logger.warning(
                "rollout %s ended with a %s failure: %s (reward %s)",
                outcome.episode.trajectory_id,
                outcome.episode.failure.boundary,
                outcome.episode.failure.reason,
                outcome.reward.total,
            )
        return outcome.body()

    async def play_for_trainer(self, payload: TrainerPayload) -> EpisodeOutcome:
        """Play one episode of a trainer payload against its ``base_url`` (nothing is
        reported: the reward goes into the answer or the result object). Raises only
        ContractError."""
        policy = payload.policy

        async def trainer_model(rollout: RolloutPayload) -> ModelHandle:
            base = self.policy_config
            config = replace(
                base,
                base_url=policy.base_url,
                model_id=policy.model_id,
                api_key=policy.api_key,
                extra_params={**base.extra_params, **policy.sampling_params},
            )
            handle: ModelHandle = build_model(rollout, config)
            return handle

        outcome = await play_episode(
            payload.rollout,
            environment=self.environment,
            reward=self.reward_fn,
            settings=self.settings,
            model_factory=self._model_factory or trainer_model,
            agent_settings=self.agent_settings,
        )
        if outcome.episode.failure is not None:
            logger.warning(
                "%s rollout ended with a %s failure: %s (reward %s)",
                payload.mode,
                outcome.episode.failure.boundary,
                outcome.episode.failure.reason,
                outcome.reward.total,
            )
        return outcome

    def _start_background(self, payload: TrainerPayload, session_id: str | None) -> Any:
        """S3 mode: start the episode in the background, answer where its result will be."""
        s3 = payload.s3
        key = result_key(s3.exp_id, s3.input_id, session_id)
        task_id = self.add_async_task("rollout", {"result_key": key})
        task = asyncio.get_running_loop().create_task(
            self._background_rollout(payload, key, task_id)
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return {"status": "processing", "s3_bucket": s3.s3_bucket, "result_key": key}

    async def _background_rollout(self, payload: TrainerPayload, key: str, task_id: int) -> None:
        """Play, then write the result object (an error object when playing failed); the app
        stays HealthyBusy until the object is written."""
        try:
            try:
                doc = s3_result(await self.play_for_trainer(payload), payload, key)
            except ContractError as exc:
                doc = error_result(payload, key, 400, exc.message, None)
            except Exception as exc:
                logger.exception("rollout %s failed", key)
                reason = f"{type(exc).__name__}: {exc}"
                doc = error_result(payload, key, 500, reason, traceback.format_exc())
            await asyncio.to_thread(self._put_result, payload.s3.s3_bucket, key, doc)
        except Exception:
            logger.exception(
                "could not write the result object s3://%s/%s", payload.s3.s3_bucket, key
            )
        finally:
            self.complete_async_task(task_id)

    def _put_result(self, bucket: str, key: str, doc: dict[str, Any]) -> None:
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        body = json.dumps(doc, ensure_ascii=False, indent=2).encode()
        s3_client(region).put_object(
            Bucket=bucket, Key=key, Body=body, ContentType="application/json"
        )

    async def _report(self, payload: RolloutPayload, outcome: EpisodeOutcome) -> None:
        meta = payload.metadata
        if meta is None:  # a plain invocation reports nothing (docs/contract.md §2)
            return
        reporter = RolloutReporter(
            meta.job_arn,
            meta.rollout_id,
            resolve_endpoint(meta),
            meta.resolved_region(),
        )
        result = await reporter.areport(outcome.reward.wire_values(outcome.episode.turns))
        outcome.reported = result.reported
        outcome.report_error = result.error

    async def _default_model(self, payload: RolloutPayload) -> ModelHandle:
        if self._token_provider is None and payload.metadata is not None:
            self._token_provider = TokenProvider(region=payload.metadata.resolved_region())
        handle: ModelHandle = build_model(
            payload, self.policy_config, token_provider=self._token_provider
        )
        return handle

    # -- serving -------------------------------------------------------------------------------
    def run(self, port: int | None = None, host: str | None = None, **kwargs: Any) -> None:
        """Serve on ``port`` (default ``AGENT_KIT_PORT``, else 8080, as the app read it at its
        construction); 127.0.0.1 outside containers."""
        if port is None:
            port = self.agent_settings.port
        super().run(port=port, host=host, **kwargs)


def _bad_request(message: str) -> Response:
    return JSONResponse({"error": message, "error_type": "ValidationError"}, status_code=400)


def _trajectory_of(payload: Any) -> str:
    if isinstance(payload, dict) and isinstance(payload.get("metadata"), dict):
        meta = payload["metadata"]
        for key in ("rolloutId", "trajectoryId", "trajectory_id", "rollout_id"):
            if isinstance(meta.get(key), str):
                return str(meta[key])
    return "local"
