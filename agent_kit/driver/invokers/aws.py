"""Invokers for deployed agents through boto3: an AgentCore runtime ARN, a Lambda forwarder.

Both are exercised offline against local fake endpoints (``endpoint_url`` or
``AWS_ENDPOINT_URL_BEDROCK_AGENTCORE`` / ``AWS_ENDPOINT_URL_LAMBDA``) with dummy credentials.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from agent_kit.driver.invokers.base import (
    DEFAULT_MAX_ANSWER_BYTES,
    InvokeResult,
    answer_too_large,
    error_text,
    parse_response_body,
)
from agent_kit.errors import InvokerError, UsageError

logger = logging.getLogger("agent_kit.driver.invokers")

__all__ = [
    "AGENTCORE_ARN_PATTERN",
    "DEFAULT_RATE_LIMIT",
    "LAMBDA_ARN_PATTERN",
    "AgentCoreInvoker",
    "LambdaInvoker",
    "RateLimiter",
]

DEFAULT_RATE_LIMIT: Final = 25.0
AGENTCORE_ARN_PATTERN: Final = re.compile(
    r"^arn:aws[a-z\-]*:bedrock-agentcore:(?P<region>[a-z0-9\-]+):(?P<account>[0-9]{12}):"
    r"runtime/(?P<name>[a-zA-Z0-9_\-]+)(?::(?P<qualifier>[a-zA-Z0-9_\-]+))?$"
)
LAMBDA_ARN_PATTERN: Final = re.compile(
    r"^arn:aws[a-z\-]*:lambda:(?P<region>[a-z0-9\-]+):(?P<account>[0-9]{12}):"
    r"function:(?P<name>[a-zA-Z0-9_\-]+)(?::(?P<qualifier>[a-zA-Z0-9_\-$]+))?$"
)

# -- AWS invokers ------------------------------------------------------------------------------


class RateLimiter:
    """An asyncio token bucket: at most ``rate`` acquisitions per second, bursts up to ``burst``.

    ``clock`` and ``sleep`` default to ``time.monotonic`` and ``asyncio.sleep`` (injectable so
    the spacing can be checked without waiting).
    """

    def __init__(
        self,
        rate: float,
        burst: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if rate <= 0:
            raise UsageError(f"rate limit must be positive, got {rate}")
        self.rate = rate
        self.burst = max(1.0, burst if burst is not None else rate)
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.burst
        self._stamp = clock()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        """Wait until a token is available and take it (FIFO among waiters)."""
        async with self._lock:
            while True:
                now = self._clock()
                self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
                self._stamp = now
                if self._tokens >= 1.0 - 1e-9:  # float rounding must not strand a waiter
                    self._tokens = max(0.0, self._tokens - 1.0)
                    return
                await self._sleep(max((1.0 - self._tokens) / self.rate, 1e-4))


def _boto_client(
    service: str, region: str, endpoint_url: str | None, concurrency: int, read_timeout: float
) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(
        read_timeout=read_timeout,
        connect_timeout=10,
        retries={"total_max_attempts": 1},
        max_pool_connections=max(10, concurrency),
    )
    return boto3.session.Session().client(
        service, region_name=region, endpoint_url=endpoint_url, config=config
    )


class _BotoInvoker:
    """Shared machinery: a boto3 client used from a dedicated thread pool, a rate limiter."""

    service: str = ""
    #: Cap of one answer read from the agent (None: no cap); see ``post_invocation``.
    max_answer_bytes: int | None = DEFAULT_MAX_ANSWER_BYTES

    def __init__(
        self,
        arn: str,
        region: str,
        *,
        endpoint_url: str | None,
        rate: float | None,
        concurrency: int,
        read_timeout: float,
    ) -> None:
        self.name = arn
        self.arn = arn
        self.region = region
        self.endpoint_url = endpoint_url
        self.limiter = RateLimiter(rate) if rate else None
        self._concurrency = concurrency
        self._read_timeout = read_timeout
        self._client: Any = None
        self._pool: ThreadPoolExecutor | None = None

    def _read(self, stream: Any) -> bytes | None:
        """An answer's streaming body, read up to :attr:`max_answer_bytes`; None (and the
        stream closed unread) past it."""
        cap = self.max_answer_bytes
        data: bytes = stream.read() if cap is None else stream.read(cap + 1)
        if cap is not None and len(data) > cap:
            stream.close()
            return None
        return data

    async def start(self) -> None:
        """Build the boto3 client (credentials are resolved lazily by botocore)."""
        self._client = _boto_client(
            self.service, self.region, self.endpoint_url, self._concurrency, self._read_timeout
        )
        self._pool = ThreadPoolExecutor(
            max_workers=max(4, self._concurrency), thread_name_prefix=f"agent-kit-{self.service}"
        )

    async def _run(self, fn: Callable[[], InvokeResult], timeout: float) -> InvokeResult:
        if self._client is None or self._pool is None:
            raise InvokerError("invoker not started")
        if self.limiter is not None:
            await self.limiter.acquire()
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(self._pool, fn), timeout)
        except asyncio.TimeoutError:
            return InvokeResult("timeout", error=f"no answer within {timeout:g} s")

    async def aclose(self) -> None:
        """Shut the thread pool down without waiting for abandoned calls."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _client_error(exc: Exception) -> InvokeResult:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return InvokeResult(
            "unreachable",
            error=f"{err.get('Code', 'Error')}: {err.get('Message', '')}",
            http_status=status,
        )
    return InvokeResult("unreachable", error=f"{type(exc).__name__}: {exc}")


class AgentCoreInvoker(_BotoInvoker):
    """Invoke a deployed AgentCore runtime (boto3 ``bedrock-agentcore`` ``invoke_agent_runtime``).

    The payload goes as JSON bytes with ``runtimeSessionId`` = the rollout's session id (≥ 33
    characters, as the API requires) and ``qualifier`` (default ``DEFAULT``); JSON and SSE
    responses are both decoded. Calls are capped at ``rate`` per second (AgentCore's default
    quota is ~25/s per runtime). After each rollout ``stop_runtime_session`` frees the
    session's microVM (its failure is ignored). Offline tests point ``endpoint_url`` (or
    ``AWS_ENDPOINT_URL_BEDROCK_AGENTCORE``) at a local fake runtime with dummy credentials.
    """

    service = "bedrock-agentcore"

    def __init__(
        self,
        arn: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        rate: float | None = DEFAULT_RATE_LIMIT,
        qualifier: str | None = None,
        concurrency: int = 32,
        read_timeout: float = 900.0,
        stop_sessions: bool = True,
    ) -> None:
        match = AGENTCORE_ARN_PATTERN.match(arn)
        if not match:
            raise UsageError(f"not an AgentCore runtime ARN: {arn!r}")
        base = arn if match["qualifier"] is None else arn.rsplit(":", 1)[0]
        super().__init__(
            base,
            region or match["region"],
            endpoint_url=endpoint_url,
            rate=rate,
            concurrency=concurrency,
            read_timeout=read_timeout,
        )
        self.qualifier = qualifier or match["qualifier"] or "DEFAULT"
        self.stop_sessions = stop_sessions

    def _call(self, payload: dict[str, Any], session_id: str) -> InvokeResult:
        try:
            response = self._client.invoke_agent_runtime(
                agentRuntimeArn=self.arn,
                qualifier=self.qualifier,
                runtimeSessionId=session_id,
                payload=json.dumps(payload).encode(),
                contentType="application/json",
                accept="application/json, text/event-stream",
            )
            status = int(response.get("statusCode") or 200)
            data = self._read(response["response"])
            if data is None:
                return answer_too_large(self.max_answer_bytes or 0, status)
            body = parse_response_body(response.get("contentType"), data)
        except Exception as exc:  # noqa: BLE001 - every AWS/transport failure becomes a result
            return _client_error(exc)
        finally:
            if self.stop_sessions:
                self._stop(session_id)
        if 200 <= status < 300:
            return InvokeResult("ok", body=body, http_status=status)
        return InvokeResult(
            "error", body=body, http_status=status, error=error_text(body, f"HTTP {status}")
        )

    async def invoke(
        self, payload: dict[str, Any], session_id: str, timeout: float
    ) -> InvokeResult:
        """Rate-limited ``invoke_agent_runtime``, then ``stop_runtime_session`` (unless
        ``stop_sessions`` is off: the caller stops it with :meth:`stop_session`)."""
        return await self._run(lambda: self._call(payload, session_id), timeout)

    async def stop_session(self, session_id: str) -> None:
        """``stop_runtime_session`` for a session whose rollout went on after its answer (the
        agentcore-rl-toolkit contract); a failure is logged at debug and ignored."""
        if self._client is None or self._pool is None:
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._pool, self._stop, session_id)

    def _stop(self, session_id: str) -> None:
        try:
            self._client.stop_runtime_session(
                agentRuntimeArn=self.arn, qualifier=self.qualifier, runtimeSessionId=session_id
            )
        except Exception as exc:  # noqa: BLE001 - the rollout's outcome stands
            logger.debug(
                "StopRuntimeSession %s failed: %s: %s", session_id, type(exc).__name__, exc
            )


class LambdaInvoker(_BotoInvoker):
    """Invoke a Lambda forwarder synchronously (boto3 ``lambda`` ``invoke``, RequestResponse).

    The function receives the rollout payload unchanged and is expected to POST it to the
    agent's ``/invocations`` and return the agent's answer; a ``FunctionError`` comes back as
    status ``error``. Offline tests point ``endpoint_url`` (or ``AWS_ENDPOINT_URL_LAMBDA``) at a
    local fake with dummy credentials.
    """

    service = "lambda"

    def __init__(
        self,
        arn: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        rate: float | None = None,
        concurrency: int = 32,
        read_timeout: float = 900.0,
    ) -> None:
        match = LAMBDA_ARN_PATTERN.match(arn)
        if not match:
            raise UsageError(f"not a Lambda function ARN: {arn!r}")
        super().__init__(
            arn,
            region or match["region"],
            endpoint_url=endpoint_url,
            rate=rate,
            concurrency=concurrency,
            read_timeout=read_timeout,
        )

    def _call(self, payload: dict[str, Any]) -> InvokeResult:
        try:
            response = self._client.invoke(
                FunctionName=self.arn,
                InvocationType="RequestResponse",
                Payload=json.dumps(payload).encode(),
            )
            data = self._read(response["Payload"])
            status = int(response.get("StatusCode") or 200)
            if data is None:
                return answer_too_large(self.max_answer_bytes or 0, status)
            body = parse_response_body("application/json", data)
        except Exception as exc:  # noqa: BLE001 - every AWS/transport failure becomes a result
            return _client_error(exc)
        if response.get("FunctionError"):
            return InvokeResult(
                "error",
                body=body,
                http_status=status,
                error=f"Lambda {response['FunctionError']} error: "
                + error_text(body, "function failed"),
            )
        return InvokeResult("ok", body=body, http_status=status)

    async def invoke(
        self, payload: dict[str, Any], session_id: str, timeout: float
    ) -> InvokeResult:
        """One synchronous Lambda invocation (``session_id`` is not used by Lambda)."""
        return await self._run(lambda: self._call(payload), timeout)
