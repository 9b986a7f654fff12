"""The endpoints of the emulator's app: the policy routes (a turn), the two reports, and the
admin routes that mint a rollout and show a trajectory.

:class:`Routes` binds them to one :class:`~agent_kit.emulator.core.Emulator`; auth runs before
them (route middleware, :mod:`agent_kit.emulator.auth`), and what they raise is answered by
:mod:`agent_kit.emulator.error_shapes`. Which path is which route, and what each answers, is
:mod:`agent_kit.emulator.server`'s docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from agent_kit.contract import CompleteRolloutBody, UpdateRewardBody
from agent_kit.emulator.aux_route import AUX_KIND_HEADER, AUX_NAME_HEADER, aux_turn
from agent_kit.emulator.chat_request import parse_chat
from agent_kit.emulator.core import Emulator
from agent_kit.emulator.http_request import (
    EVENTSTREAM,
    check_bound,
    check_same_trajectory,
    is_json,
    job_arn_of,
    parse_json,
    read_body,
    served_url,
    wants_eventstream,
)
from agent_kit.emulator.run_keys import RunKeys
from agent_kit.emulator.schemas import MintRolloutBody, parse_body
from agent_kit.emulator.sse import chunks_from_completion, dumps, eventstream_body, sse_body
from agent_kit.errors import NotFoundError, QuotaExceededError, ValidationError

__all__ = [
    "MINT_MAX_BYTES",
    "MINT_MAX_ROLLOUTS",
    "ROUTE_CHAT",
    "ROUTE_SAMPLE",
    "ROUTE_STREAM",
    "Routes",
]

ROUTE_SAMPLE: Final = "/sample"
ROUTE_STREAM: Final = "/sample-with-response-stream"
ROUTE_CHAT: Final = "/v1/chat/completions"
#: The body of a report route.
_Report = TypeVar("_Report", CompleteRolloutBody, UpdateRewardBody)
_EMPTY: Final = b"{}"
#: Default bound of the rollouts ``POST /_emulator/rollouts`` mints (the emulator keeps each).
MINT_MAX_ROLLOUTS: Final = 10_000
#: Default bound of the bytes of their prompts.
MINT_MAX_BYTES: Final = 64 << 20


class Routes:
    """The endpoints of one app over one emulator (auth is done before they run).

    The mint route keeps at most ``max_minted`` rollouts and ``max_minted_bytes`` bytes of
    their prompts (the emulator keeps every trajectory it opens, in memory and in the store):
    past either bound it answers 402 ServiceQuotaExceededException and opens nothing.
    """

    def __init__(
        self,
        emu: Emulator,
        endpoint: str | None,
        prefix: str,
        keys: RunKeys | None,
        *,
        max_minted: int = MINT_MAX_ROLLOUTS,
        max_minted_bytes: int = MINT_MAX_BYTES,
    ) -> None:
        self.emu = emu
        self.keys = keys
        self.limit = emu.max_body_bytes
        self.endpoint = endpoint
        self.prefix = prefix
        self.max_minted, self.max_minted_bytes = max_minted, max_minted_bytes
        self.minted = self.minted_bytes = 0

    async def _json(self, request: Request) -> tuple[bytes, Any]:
        raw = await read_body(request, self.limit)
        return raw, parse_json(raw)

    async def _turn(
        self,
        request: Request,
        route: str,
        job_arn: str | None = None,
        trajectory_id: str | None = None,
    ) -> Response:
        headers = request.headers
        job_arn = job_arn or headers.get("x-amzn-sagemaker-job-arn")
        trajectory_id = trajectory_id or headers.get("x-amzn-sagemaker-trajectory-id")
        check_bound(request, job_arn, trajectory_id)
        raw, body = await self._json(request)
        chat = parse_chat(body)
        stream = chat.stream if route == ROUTE_CHAT else route == ROUTE_STREAM
        outcome = await self.emu.turn(
            job_arn,
            trajectory_id,
            body,
            route=route,
            stream=stream,
            raw=raw,
            parsed=chat,
            peer=f"{request.client.host}:{request.client.port}" if request.client else None,
        )
        if not stream:
            body_bytes = outcome.response_json
            if outcome.truncated:  # chaos: a JSON body that stops mid-way
                body_bytes = body_bytes[: max(1, len(body_bytes) // 2)]
            return Response(body_bytes, media_type="application/json")
        chunks = outcome.chunks
        if chunks is None:
            chunks = chunks_from_completion(outcome.response, include_usage=chat.include_usage)
        elif not chat.include_usage:
            chunks = [c for c in chunks if c.get("choices") or c.get("usage") is None]
        if route == ROUTE_STREAM and wants_eventstream(request):
            frames = eventstream_body(chunks[:1] if outcome.truncated else chunks)
            return Response(frames, media_type=EVENTSTREAM)
        sse = sse_body(chunks)
        if outcome.truncated:  # chaos: the stream stops after its first event, no [DONE]
            sse = sse[: sse.index(b"\n\n") + 2]
        return Response(sse, media_type="text/event-stream", headers={"cache-control": "no-cache"})

    async def sample(self, request: Request) -> Response:
        """``POST /sample``."""
        return await self._turn(request, ROUTE_SAMPLE)

    async def sample_stream(self, request: Request) -> Response:
        """``POST /sample-with-response-stream``."""
        return await self._turn(request, ROUTE_STREAM)

    async def chat(self, request: Request) -> Response:
        """``POST /v1/chat/completions``."""
        return await self._turn(request, ROUTE_CHAT)

    async def aux_chat(self, request: Request) -> Response:
        """``POST /aux/v1/chat/completions``: a judge's or simulated user's call
        (:mod:`agent_kit.emulator.aux_route`), JSON or SSE per the body's ``stream``."""
        headers = request.headers
        job_arn = headers.get("x-amzn-sagemaker-job-arn")
        trajectory_id = headers.get("x-amzn-sagemaker-trajectory-id")
        check_bound(request, job_arn, trajectory_id)
        _, body = await self._json(request)
        chat = parse_chat(body)
        kind = headers.get(AUX_KIND_HEADER)
        name = headers.get(AUX_NAME_HEADER)
        outcome = await aux_turn(self.emu, job_arn, trajectory_id, body, kind=kind, name=name)
        if not chat.stream:
            return Response(outcome.response_json, media_type="application/json")
        chunks = chunks_from_completion(outcome.response, include_usage=chat.include_usage)
        return Response(
            sse_body(chunks), media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )

    async def trainer_chat(self, request: Request) -> Response:
        """``POST /trainer/{trajectory_id}/v1/chat/completions`` (the trainer's base_url)."""
        tid = request.path_params["trajectory_id"]
        row = self.emu.store.get_trajectory(tid)
        if row is None:
            raise NotFoundError(f"Trajectory {tid[:256]} not found")
        return await self._turn(request, ROUTE_CHAT, row.job_arn, tid)

    async def complete_rollout(self, request: Request) -> Response:
        """``POST /complete-rollout``."""
        return await self._report(request, CompleteRolloutBody, self.emu.complete_rollout)

    async def update_reward(self, request: Request) -> Response:
        """``POST /update-reward``."""
        return await self._report(request, UpdateRewardBody, self.emu.update_reward)

    async def _report(
        self,
        request: Request,
        model: type[_Report],
        apply: Callable[[str | None, _Report], None],
    ) -> Response:
        """One of the two reports: its body read as ``model``, its job and trajectory checked
        against the request's (header, rollout token), then ``apply``'d; an empty answer."""
        body = parse_body(model, (await self._json(request))[1])
        arn = job_arn_of(request, body.job_arn)
        check_same_trajectory(request, body.trajectory_id, arn)
        apply(arn, body)
        return Response(_EMPTY, media_type="application/json")

    async def mint_rollout(self, request: Request) -> Response:
        """``POST /_emulator/rollouts``: an OPEN trajectory and its ready-to-send payload."""
        if not is_json(request.headers.get("content-type")):
            raise ValidationError(
                "POST /_emulator/rollouts takes JSON only: send Content-Type: application/json"
            )
        raw = await read_body(request, self.limit)
        body = parse_body(MintRolloutBody, parse_json(raw) if raw.strip() else {})
        arn = body.job_arn or self.emu.default_job_arn
        if arn is None:
            raise ValidationError("No job: pass jobArn or start the emulator with a job")
        arn = self.emu.check_job(arn)
        tid = body.rollout_id
        if tid is not None and self.emu.state(tid) is not None:
            raise ValidationError(f"Trajectory {tid} already exists")
        prompt = body.prompt_text
        size = len(prompt.encode("utf-8", "surrogatepass"))
        self._check_mint_bound(size)
        traj = self.emu.open_trajectory(arn, prompt, trajectory_id=tid)
        self.minted += 1
        self.minted_bytes += size
        url = self.endpoint or served_url(request.scope) + self.prefix
        token = None if self.keys is None else self.keys.mint(arn, traj.id)
        payload = self.emu.rollout_payload(traj, url, body.inference_params, api_key=token)
        return Response(dumps(payload), media_type="application/json")

    def _check_mint_bound(self, size: int) -> None:
        """402 when one more rollout of ``size`` prompt bytes would pass the mint bounds."""
        if self.minted + 1 > self.max_minted:
            what = f"its bound of {self.max_minted} rollouts"
        elif self.minted_bytes + size > self.max_minted_bytes:
            what = (
                f"its bound of {self.max_minted_bytes} bytes of prompts "
                f"({self.minted_bytes} kept, this one {size})"
            )
        else:
            return
        raise QuotaExceededError(
            f"POST /_emulator/rollouts keeps every rollout it mints and has reached {what}: "
            "restart agent-kit emulate for a fresh run"
        )

    async def show_trajectory(self, request: Request) -> Response:
        """``GET /_emulator/trajectories/{trajectory_id}``."""
        tid = request.path_params["trajectory_id"]
        row = self.emu.store.get_trajectory(tid)
        if row is None:
            raise NotFoundError(f"Trajectory {tid} not found")
        reward = self.emu.store.get_reward(tid)
        info = {
            "trajectoryId": row.id,
            "jobArn": row.job_arn,
            "state": getattr(self.emu.state(tid), "value", row.state),
            "turns": self.emu.turn_count(tid),
            "reason": row.reason,
            "rewards": None if reward is None else reward.rewards,
        }
        return Response(dumps(info), media_type="application/json")
