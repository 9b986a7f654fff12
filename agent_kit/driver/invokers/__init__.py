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

- ``path/to/entrypoint.py`` → :class:`SubprocessInvoker` (``python -m agent_kit.driver._serve
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

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from agent_kit.driver.invokers.agent_log import DEFAULT_MAX_LOG_BYTES
from agent_kit.driver.invokers.aws import (
    AGENTCORE_ARN_PATTERN,
    DEFAULT_RATE_LIMIT,
    LAMBDA_ARN_PATTERN,
    AgentCoreInvoker,
    LambdaInvoker,
    RateLimiter,
)
from agent_kit.driver.invokers.base import (
    DEFAULT_MAX_ANSWER_BYTES,
    EventHook,
    Invoker,
    InvokeResult,
    agent_env,
    parse_response_body,
)
from agent_kit.driver.invokers.local import HttpInvoker, SubprocessInvoker
from agent_kit.errors import UsageError

__all__ = [
    "AGENTCORE_ARN_PATTERN",
    "DEFAULT_RATE_LIMIT",
    "LAMBDA_ARN_PATTERN",
    "MAX_RATE",
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


#: Highest invocation rate a job may ask for (AgentCore's default quota is 25/s per runtime).
MAX_RATE: Final = 1000.0


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
    stop_sessions: bool = True,
    agent_memory: int | None = None,
    max_answer_bytes: int | None = DEFAULT_MAX_ANSWER_BYTES,
    max_log_bytes: int | None = DEFAULT_MAX_LOG_BYTES,
) -> Invoker:
    """The invoker for ``target`` (entrypoint ``.py``, URL, AgentCore or Lambda ARN).

    ``rate`` caps invocations per second (AgentCore defaults to 25/s, others unlimited); every
    invoker reads at most ``max_answer_bytes`` of an answer (``AGENT_KIT_MAX_ANSWER_BYTES``,
    default 1 MiB; None: no cap), and a local agent process logs at most ``max_log_bytes``
    (``AGENT_KIT_MAX_LOG_BYTES``);
    ``endpoint_url`` overrides the AWS endpoint (local fakes); ``stop_sessions=False`` leaves an
    AgentCore session running after its answer (the caller stops it: the agentcore-rl-toolkit
    contract's background rollouts); ``agent_memory`` caps each local agent process's memory
    (``.py`` targets only). UsageError for anything else.
    """
    if rate is not None and not 0 < rate <= MAX_RATE:
        raise UsageError(f"--rate must be > 0 and ≤ {MAX_RATE:g} invocations/s, got {rate:g}")
    max_answer = max_answer_bytes
    if agent_memory is not None and not target.endswith(".py"):
        raise UsageError("--agent-memory applies to a .py entrypoint (local agent processes)")
    if target.startswith(("http://", "https://")):
        return HttpInvoker(target, concurrency=concurrency, max_answer_bytes=max_answer)
    if target.startswith("arn:"):
        if AGENTCORE_ARN_PATTERN.match(target):
            agentcore = AgentCoreInvoker(
                target,
                endpoint_url=endpoint_url,
                rate=DEFAULT_RATE_LIMIT if rate is None else rate,
                concurrency=concurrency,
                stop_sessions=stop_sessions,
            )
            agentcore.max_answer_bytes = max_answer
            return agentcore
        if LAMBDA_ARN_PATTERN.match(target):
            function = LambdaInvoker(
                target, endpoint_url=endpoint_url, rate=rate, concurrency=concurrency
            )
            function.max_answer_bytes = max_answer
            return function
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
            max_log_bytes=max_log_bytes,
            max_answer_bytes=max_answer,
            max_memory=agent_memory,
        )
    raise UsageError(
        f"don't know how to invoke {target!r}: give an entrypoint file (.py), an http:// URL, "
        "an AgentCore runtime ARN or a Lambda function ARN"
    )
