"""How rollouts reach the agent: a local entrypoint process, a URL, an AgentCore ARN, a Lambda.

Every invoker implements :class:`Invoker`: ``await start()``, then any number of concurrent
``await invoke(payload, session_id, timeout)`` calls, then ``await aclose()``. ``invoke`` never
raises for a rollout-level problem; it returns an :class:`InvokeResult` whose ``status`` says
what happened at the invocation boundary:

- ``ok``: the agent answered 2xx (``body`` is its JSON, or the list of SSE events);
- ``error``: the agent was reached and answered an error (non-2xx, Lambda ``FunctionError``);
- ``unreachable``: the agent could not be reached or died mid-request (connection refused or
  reset, process crashed, throttled by AgentCore) — the driver fails and retries the rollout;
- ``timeout``: no answer within ``timeout`` seconds — the driver expires and retries.

:func:`make_invoker` picks the implementation from the target string:

- ``path/to/entrypoint.py`` → :class:`SubprocessInvoker` (``python -m agent_kit.emulator._serve
  FILE`` on an inherited loopback socket; restarted when it dies; logs in the run directory);
- ``http://…`` / ``https://…`` → :class:`HttpInvoker` (an agent already running, e.g.
  ``agentcore dev`` or a container);
- ``arn:aws:bedrock-agentcore:…:runtime/…`` → :class:`AgentCoreInvoker` (boto3
  ``invoke_agent_runtime`` with a token-bucket rate cap, ``stop_runtime_session`` after each
  rollout);
- ``arn:aws:lambda:…`` → :class:`LambdaInvoker` (boto3 ``lambda`` ``invoke``, RequestResponse).

The two AWS invokers are exercised offline against local fake endpoints (``endpoint_url`` or
``AWS_ENDPOINT_URL_BEDROCK_AGENTCORE`` / ``AWS_ENDPOINT_URL_LAMBDA``) with dummy credentials.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import httpx

from agent_kit.contract import ENDPOINT_ENV, HEADER_SESSION_ID
from agent_kit.errors import InvokerError, UsageError

__all__ = [
    "AGENTCORE_ARN_PATTERN",
    "DEFAULT_RATE_LIMIT",
    "LAMBDA_ARN_PATTERN",
    "AgentCoreInvoker",
    "EventHook",
    "HttpInvoker",
    "InvokeResult",
    "Invoker",
    "LambdaInvoker",
    "RateLimiter",
    "SubprocessInvoker",
    "agent_env",
    "make_invoker",
    "parse_response_body",
]

#: AgentCore's default quota is ~25 InvokeAgentRuntime calls per second per runtime.
DEFAULT_RATE_LIMIT: Final = 25.0
AGENTCORE_ARN_PATTERN: Final = re.compile(
    r"^arn:aws[a-z\-]*:bedrock-agentcore:(?P<region>[a-z0-9\-]+):(?P<account>[0-9]{12}):"
    r"runtime/(?P<name>[a-zA-Z0-9_\-]+)(?::(?P<qualifier>[a-zA-Z0-9_\-]+))?$"
)
LAMBDA_ARN_PATTERN: Final = re.compile(
    r"^arn:aws[a-z\-]*:lambda:(?P<region>[a-z0-9\-]+):(?P<account>[0-9]{12}):"
    r"function:(?P<name>[a-zA-Z0-9_\-]+)(?::(?P<qualifier>[a-zA-Z0-9_\-$]+))?$"
)
_TAIL_BYTES: Final = 2000
_ACCEPT: Final = "application/json, text/event-stream"

#: ``on_event(kind, detail)``: invokers report process starts/exits/restarts through it.
EventHook = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class InvokeResult:
    """What one invocation returned: ``status`` (see the module docstring), body or error text."""

    status: str
    body: Any = None
    error: str | None = None
    http_status: int | None = None

    @property
    def ok(self) -> bool:
        """True when the agent answered 2xx."""
        return self.status == "ok"


class Invoker(Protocol):
    """The interface the driver uses to run one rollout on the agent."""

    name: str

    async def start(self) -> None:
        """Get ready to invoke (start processes, check reachability); InvokerError if not."""

    async def invoke(
        self, payload: dict[str, Any], session_id: str, timeout: float
    ) -> InvokeResult:
        """Send one rollout payload; never raises for rollout-level failures."""

    async def aclose(self) -> None:
        """Release every resource (processes, sockets, clients); idempotent."""


def agent_env(endpoint: str, region: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment that points an agent process at an emulator at ``endpoint``.

    Sets ``RFT_RUNTIME_ENDPOINT`` and ``AWS_ENDPOINT_URL_SAGEMAKERJOBRUNTIME`` (so both the
    OpenAI-compatible route and boto3 reach the emulator), ``AWS_REGION``/``AWS_DEFAULT_REGION``,
    disables the EC2 metadata lookup, and supplies dummy access keys when the environment has
    none (the emulator does not verify signatures).
    """
    env = dict(os.environ if base is None else base)
    env[ENDPOINT_ENV] = endpoint
    env["AWS_ENDPOINT_URL_SAGEMAKERJOBRUNTIME"] = endpoint
    env["AWS_REGION"] = region
    env["AWS_DEFAULT_REGION"] = region
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    if not env.get("AWS_ACCESS_KEY_ID"):
        env["AWS_ACCESS_KEY_ID"] = "agent-kit-local"
        env["AWS_SECRET_ACCESS_KEY"] = "agent-kit-local"  # noqa: S105 - dummy, never verified
        env.pop("AWS_SESSION_TOKEN", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def parse_response_body(content_type: str | None, data: bytes) -> Any:
    """Decode an agent's answer: JSON → value; SSE (``data: …`` lines) → list of event values."""
    if content_type and "text/event-stream" in content_type:
        events: list[Any] = []
        for line in data.decode("utf-8", "replace").splitlines():
            if not line.startswith("data:"):
                continue
            text = line[5:].strip()
            if not text or text == "[DONE]":
                continue
            try:
                events.append(json.loads(text))
            except ValueError:
                events.append(text)
        return events
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")


def _error_text(body: Any, fallback: str) -> str:
    if isinstance(body, dict):
        for key in ("error", "message", "Message", "errorMessage"):
            if key in body:
                return str(body[key])[:500]
    if isinstance(body, str) and body:
        return body[:500]
    return fallback


async def _post(
    client: httpx.AsyncClient, url: str, payload: dict[str, Any], session_id: str, timeout: float
) -> InvokeResult:
    try:
        response = await client.post(
            url,
            json=payload,
            headers={
                HEADER_SESSION_ID: session_id,
                "Accept": "application/json, text/event-stream",
            },
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        )
    except httpx.TimeoutException as exc:
        if isinstance(exc, httpx.ConnectTimeout):
            return InvokeResult("unreachable", error=f"cannot connect to the agent at {url}")
        return InvokeResult("timeout", error=f"no answer from the agent within {timeout:g} s")
    except httpx.TransportError as exc:
        return InvokeResult(
            "unreachable", error=f"the agent connection failed: {type(exc).__name__}: {exc}"
        )
    body = parse_response_body(response.headers.get("content-type"), response.content)
    if response.is_success:
        return InvokeResult("ok", body=body, http_status=response.status_code)
    return InvokeResult(
        "error",
        body=body,
        http_status=response.status_code,
        error=f"agent answered HTTP {response.status_code}: "
        + _error_text(body, response.reason_phrase),
    )


def _client(concurrency: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=max(concurrency, 10))
    # Every request passes its own timeout (the rollout's); the client default is never used.
    return httpx.AsyncClient(limits=limits, timeout=None, trust_env=False)  # noqa: S113


# -- an agent already running ----------------------------------------------------------------


class HttpInvoker:
    """Invoke an agent already serving ``/invocations`` at a URL (``agentcore dev``, container)."""

    def __init__(self, url: str, *, concurrency: int = 32, startup_timeout: float = 10.0) -> None:
        base = url.rstrip("/")
        base = base.removesuffix("/invocations")
        self.name = base
        self.base_url = base
        self.startup_timeout = startup_timeout
        self._concurrency = concurrency
        self._http: httpx.AsyncClient | None = None

    async def start(self) -> None:
        """Check that ``GET /ping`` answers 200 before the first rollout (InvokerError if not)."""
        self._http = _client(self._concurrency)
        deadline = time.monotonic() + self.startup_timeout
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                response = await self._http.get(f"{self.base_url}/ping", timeout=2.0)
                if response.status_code == 200:
                    return
                last = f"HTTP {response.status_code}"
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(0.1)
        raise InvokerError(f"no agent answering GET {self.base_url}/ping ({last})")

    async def invoke(
        self, payload: dict[str, Any], session_id: str, timeout: float
    ) -> InvokeResult:
        """POST the payload to ``/invocations`` with the AgentCore session header."""
        if self._http is None:
            raise InvokerError("invoker not started")
        return await _post(self._http, f"{self.base_url}/invocations", payload, session_id, timeout)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None


# -- local entrypoint processes ---------------------------------------------------------------


class _Worker:
    def __init__(self, owner: SubprocessInvoker, index: int) -> None:
        self.owner = owner
        self.index = index
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = owner.log_dir / f"agent-{index}.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.inflight = 0
        self.ready = asyncio.Event()
        self.broken: str | None = None
        self.starts = 0
        self.watch: asyncio.Task[None] | None = None

    def tail(self) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - _TAIL_BYTES))
                return fh.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    async def launch(self) -> None:
        self.ready.clear()
        self.starts += 1
        owner = self.owner
        with self.log_path.open("ab") as log:
            log.write(f"--- agent-kit: start #{self.starts} of worker {self.index} ---\n".encode())
            log.flush()
            self.proc = await asyncio.create_subprocess_exec(
                owner.python,
                "-m",
                "agent_kit.emulator._serve",
                str(owner.entrypoint),
                "--fd",
                str(self.sock.fileno()),
                "--parent-pid",
                str(os.getpid()),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env={**owner.env, "AGENT_KIT_PORT": str(self.port)},
                cwd=str(owner.entrypoint.parent),
                pass_fds=(self.sock.fileno(),),
                start_new_session=True,
            )
        owner.emit(
            "agent_start", {"worker": self.index, "pid": self.proc.pid, "start": self.starts}
        )
        await self._wait_ping()

    async def _wait_ping(self) -> None:
        assert self.proc is not None
        owner = self.owner
        deadline = time.monotonic() + owner.startup_timeout
        async with httpx.AsyncClient(trust_env=False) as http:
            while True:
                if self.proc.returncode is not None:
                    raise InvokerError(
                        f"agent {owner.entrypoint} exited with code {self.proc.returncode} "
                        f"before answering /ping; log tail:\n{self.tail()}"
                    )
                try:
                    response = await http.get(f"{self.url}/ping", timeout=1.0)
                    if response.status_code == 200:
                        self.ready.set()
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise InvokerError(
                        f"agent {owner.entrypoint} did not answer /ping within "
                        f"{owner.startup_timeout:g} s; log tail:\n{self.tail()}"
                    )
                await asyncio.sleep(0.05)

    async def supervise(self) -> None:
        """Restart the process whenever it exits while the invoker is open."""
        owner = self.owner
        failures = 0
        while not owner.closing:
            assert self.proc is not None
            code = await self.proc.wait()
            self.ready.clear()
            if owner.closing:
                return
            owner.restarts += 1
            owner.emit(
                "agent_exit",
                {"worker": self.index, "returncode": code, "log_tail": self.tail()[-500:]},
            )
            while not owner.closing:
                try:
                    await self.launch()
                    failures = 0
                    break
                except InvokerError as exc:
                    failures += 1
                    if failures >= owner.max_restarts:
                        self.broken = str(exc)
                        owner.emit("agent_broken", {"worker": self.index, "error": str(exc)})
                        self.ready.set()  # wake waiters; they see `broken`
                        return
                    await asyncio.sleep(min(2.0, 0.2 * failures))

    async def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 5.0)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self.watch is not None:
            self.watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.watch
        self.sock.close()


class SubprocessInvoker:
    """Run an entrypoint file as ``workers`` local processes and invoke them over loopback.

    Each worker listens on its own loopback socket, created here and inherited by the child,
    so its port is fixed before the child starts and stays the same across restarts. The
    child's stdout and stderr go to ``log_dir/agent-<i>.log``. A worker that exits is
    restarted at once (reported through ``on_event`` as ``agent_exit``/``agent_start``); the
    rollouts it was serving come back ``unreachable``. Invocations go to the least busy worker.
    """

    def __init__(
        self,
        entrypoint: str | Path,
        *,
        env: Mapping[str, str] | None = None,
        workers: int = 1,
        log_dir: str | Path | None = None,
        concurrency: int = 32,
        startup_timeout: float = 60.0,
        max_restarts: int = 5,
        python: str = sys.executable,
        on_event: EventHook | None = None,
    ) -> None:
        path = Path(entrypoint).resolve()
        if not path.is_file():
            raise UsageError(f"entrypoint not found: {entrypoint}")
        if workers < 1:
            raise UsageError(f"workers must be ≥ 1, got {workers}")
        self.entrypoint = path
        self.name = str(path)
        self.env = dict(os.environ if env is None else env)
        self.n_workers = workers
        self.log_dir = Path(log_dir) if log_dir is not None else Path.cwd()
        self.startup_timeout = startup_timeout
        self.max_restarts = max_restarts
        self.python = python
        self.on_event = on_event
        self.closing = False
        self.restarts = 0
        self._concurrency = concurrency
        self._workers: list[_Worker] = []
        self._http: httpx.AsyncClient | None = None

    def emit(self, kind: str, detail: dict[str, Any]) -> None:
        """Forward an event to ``on_event`` (errors in the hook are not the invoker's)."""
        if self.on_event is not None:
            self.on_event(kind, detail)

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        return [
            w.proc.pid for w in self._workers if w.proc is not None and w.proc.returncode is None
        ]

    @property
    def log_paths(self) -> list[Path]:
        """The log file of each worker."""
        return [w.log_path for w in self._workers]

    async def start(self) -> None:
        """Start every worker and wait for each ``/ping``; InvokerError with the log tail if not."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._workers = [_Worker(self, i) for i in range(self.n_workers)]
        self._http = _client(self._concurrency)
        try:
            await asyncio.gather(*(w.launch() for w in self._workers))
        except BaseException:
            await self.aclose()
            raise
        for worker in self._workers:
            worker.watch = asyncio.create_task(worker.supervise())

    async def invoke(
        self, payload: dict[str, Any], session_id: str, timeout: float
    ) -> InvokeResult:
        """POST to the least busy worker's ``/invocations``; a dead worker → ``unreachable``."""
        if self._http is None or not self._workers:
            raise InvokerError("invoker not started")
        worker = min(self._workers, key=lambda w: (not w.ready.is_set(), w.inflight))
        worker.inflight += 1
        try:
            if not worker.ready.is_set():
                try:
                    await asyncio.wait_for(worker.ready.wait(), timeout)
                except asyncio.TimeoutError:
                    return InvokeResult("unreachable", error="the agent process is restarting")
            if worker.broken:
                return InvokeResult("unreachable", error=worker.broken)
            result = await _post(
                self._http, f"{worker.url}/invocations", payload, session_id, timeout
            )
            if result.status == "unreachable":
                return InvokeResult(
                    "unreachable",
                    error=f"{result.error} (agent worker {worker.index} crashed or restarted)",
                )
            return result
        finally:
            worker.inflight -= 1

    async def aclose(self) -> None:
        """Terminate every worker (SIGTERM, then SIGKILL after 5 s) and close the sockets."""
        self.closing = True
        await asyncio.gather(*(w.stop() for w in self._workers), return_exceptions=True)
        if self._http is not None:
            await self._http.aclose()
            self._http = None


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
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                await self._sleep((1.0 - self._tokens) / self.rate)


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
            data = response["response"].read()
            body = parse_response_body(response.get("contentType"), data)
            status = int(response.get("statusCode") or 200)
        except Exception as exc:  # noqa: BLE001 - every AWS/transport failure becomes a result
            return _client_error(exc)
        finally:
            if self.stop_sessions:
                with contextlib.suppress(Exception):
                    self._client.stop_runtime_session(
                        agentRuntimeArn=self.arn,
                        qualifier=self.qualifier,
                        runtimeSessionId=session_id,
                    )
        if 200 <= status < 300:
            return InvokeResult("ok", body=body, http_status=status)
        return InvokeResult(
            "error", body=body, http_status=status, error=_error_text(body, f"HTTP {status}")
        )

    async def invoke(
        self, payload: dict[str, Any], session_id: str, timeout: float
    ) -> InvokeResult:
        """Rate-limited ``invoke_agent_runtime``, then ``stop_runtime_session``."""
        return await self._run(lambda: self._call(payload, session_id), timeout)


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
            body = parse_response_body("application/json", response["Payload"].read())
        except Exception as exc:  # noqa: BLE001 - every AWS/transport failure becomes a result
            return _client_error(exc)
        status = int(response.get("StatusCode") or 200)
        if response.get("FunctionError"):
            return InvokeResult(
                "error",
                body=body,
                http_status=status,
                error=f"Lambda {response['FunctionError']} error: "
                + _error_text(body, "function failed"),
            )
        return InvokeResult("ok", body=body, http_status=status)

    async def invoke(
        self, payload: dict[str, Any], session_id: str, timeout: float
    ) -> InvokeResult:
        """One synchronous Lambda invocation (``session_id`` is not used by Lambda)."""
        return await self._run(lambda: self._call(payload), timeout)


def make_invoker(
    target: str,
    *,
    env: Mapping[str, str] | None = None,
    workers: int = 1,
    log_dir: str | Path | None = None,
    concurrency: int = 32,
    rate: float | None = None,
    endpoint_url: str | None = None,
    startup_timeout: float = 60.0,
    on_event: EventHook | None = None,
) -> Invoker:
    """The invoker for ``target`` (entrypoint ``.py``, URL, AgentCore or Lambda ARN).

    ``rate`` caps invocations per second (AgentCore defaults to 25/s, others unlimited);
    ``endpoint_url`` overrides the AWS endpoint (local fakes). UsageError for anything else.
    """
    if target.startswith(("http://", "https://")):
        return HttpInvoker(target, concurrency=concurrency)
    if target.startswith("arn:"):
        if AGENTCORE_ARN_PATTERN.match(target):
            return AgentCoreInvoker(
                target,
                endpoint_url=endpoint_url,
                rate=DEFAULT_RATE_LIMIT if rate is None else rate,
                concurrency=concurrency,
            )
        if LAMBDA_ARN_PATTERN.match(target):
            return LambdaInvoker(
                target, endpoint_url=endpoint_url, rate=rate, concurrency=concurrency
            )
        raise UsageError(
            f"unsupported ARN {target!r}: expected arn:aws:bedrock-agentcore:REGION:ACCOUNT:"
            "runtime/NAME or arn:aws:lambda:REGION:ACCOUNT:function:NAME"
        )
    if target.endswith(".py"):
        return SubprocessInvoker(
            target,
            env=env,
            workers=workers,
            log_dir=log_dir,
            concurrency=concurrency,
            startup_timeout=startup_timeout,
            on_event=on_event,
        )
    raise UsageError(
        f"don't know how to invoke {target!r}: give an entrypoint file (.py), an http:// URL, "
        "an AgentCore runtime ARN or a Lambda function ARN"
    )
