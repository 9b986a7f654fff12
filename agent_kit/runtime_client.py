"""The Job Runtime client: one shared AWS session, and CompleteRollout + UpdateReward reporting.

- :func:`shared_session` is the process's one botocore session (lazily created, thread-safe).
  Every rollout in the process signs with it — the policy token provider, the Sample transport
  and the reporter — so credentials are resolved once and refreshed by botocore's refreshable
  credentials instead of being re-loaded per rollout (which starves the credential endpoint at
  ~32 concurrent rollouts).
- :func:`job_runtime_client` caches one boto3 ``sagemakerjobruntime`` client per
  (region, endpoint, retry, timeout) setting; boto3 clients are thread-safe.
- :class:`RolloutReporter` sends CompleteRollout(``ready``) then UpdateReward with a stable
  ClientToken per operation, treats a ConflictException that shows the work is already done as
  success, and **never raises**: a failure is logged (logger ``agent_kit.runtime_client``, with
  the trajectory id) and returned.

Retries are botocore's. The reporter's client is built with
``Config(retries={"mode": "standard", "total_max_attempts": max_attempts})``, so botocore's
standard mode decides what is retried (throttling codes, a bare 429, 500/502/503/504, modeled
retryable errors, connection errors and timeouts), how often, under its retry quota, and resends
the same request (same ``amz-sdk-invocation-id``, ``amz-sdk-request: attempt=N; max=M``, same
ClientToken). The reporter changes only how long botocore pauses: its standard-mode retry
handler is re-registered with a backoff of ``base_delay`` doubling per attempt, capped at
``max_delay``, 50-100 % jitter, and the pause goes through the reporter's ``sleep``
(:mod:`agent_kit._report_retries`). An injected ``client`` keeps its own retry configuration.
``attempts`` counts every HTTP request: a passive ``before-send`` hook on the client (the
reporter's own or an injected one) counts them while a report is in flight.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Final, Literal

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from agent_kit._report_retries import (
    DEFAULT_BASE_DELAY,
    DEFAULT_MAX_DELAY,
    IN_FLIGHT,
    InFlight,
    count_attempts,
    pace_retries,
)
from agent_kit.contract import TrajectoryState

__all__ = [
    "ReportResult",
    "RolloutReporter",
    "job_runtime_client",
    "reset_shared_session",
    "s3_client",
    "shared_session",
]

logger = logging.getLogger("agent_kit.runtime_client")

SERVICE: Final = "sagemakerjobruntime"
_STATES: Final = "|".join(state.value for state in TrajectoryState)
_STATE_RE: Final = re.compile(rf"\b({_STATES})\b")
_FROM_STATE_RE: Final = re.compile(rf"\bfrom\s+({_STATES})\b")
_TOKEN_NAMESPACE: Final = uuid.UUID("5b0f8c3e-6a0e-4c53-9d8e-6d1f3a7c2b10")

_lock = threading.Lock()
_session: botocore.session.Session | None = None
_clients: dict[tuple[Any, ...], Any] = {}


def shared_session() -> botocore.session.Session:
    """The process-wide botocore session, created on first use (safe to call from any thread)."""
    global _session
    if _session is None:
        with _lock:
            if _session is None:
                _session = botocore.session.Session()
    return _session


def reset_shared_session() -> None:
    """Forget the process-wide botocore session and its cached clients (the next call makes new
    ones, reading credentials and endpoint variables afresh). For tests and long-lived tools."""
    global _session
    with _lock:
        _session = None
        _clients.clear()


def _new_client(
    sess: botocore.session.Session,
    region: str,
    endpoint_url: str | None,
    max_attempts: int | None,
    connect_timeout: float,
    read_timeout: float,
) -> Any:
    retries: dict[str, Any] = {"mode": "standard"}
    if max_attempts is not None:
        retries["total_max_attempts"] = max(1, max_attempts)
    config = Config(
        retries=retries,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        max_pool_connections=128,
    )
    boto_session = boto3.session.Session(botocore_session=sess)
    return boto_session.client(
        SERVICE, region_name=region, endpoint_url=endpoint_url, config=config
    )


def job_runtime_client(
    region: str,
    endpoint_url: str | None = None,
    *,
    max_attempts: int | None = None,
    connect_timeout: float = 10.0,
    read_timeout: float = 60.0,
    session: botocore.session.Session | None = None,
) -> Any:
    """A cached boto3 ``sagemakerjobruntime`` client on the shared session.

    ``max_attempts`` is botocore's *total* attempts per call (1 = no botocore retries); ``None``
    keeps botocore's standard retry mode (3 attempts). The pool holds 128 connections so 96
    concurrent rollouts never churn connections.
    """
    sess = session or shared_session()
    key = (id(sess), region, endpoint_url, max_attempts, connect_timeout, read_timeout)
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _new_client(
                sess, region, endpoint_url, max_attempts, connect_timeout, read_timeout
            )
            _clients[key] = client
    return client


def s3_client(region: str | None = None) -> Any:
    """A cached S3 client on the shared session (standard retries), created on first use; its
    endpoint follows ``AWS_ENDPOINT_URL_S3`` like any botocore client. Trainer-contract
    rollouts write their result objects with it (docs/trainers.md)."""
    sess = shared_session()
    key = ("s3", id(sess), region)
    with _lock:
        client = _clients.get(key)
        if client is None:
            config = Config(retries={"mode": "standard"}, max_pool_connections=128)
            client = sess.create_client("s3", region_name=region, config=config)
            _clients[key] = client
    return client


def _reporter_client(region: str, endpoint_url: str | None, max_attempts: int) -> Any:
    """The cached client reporters use: standard retry mode, ``max_attempts`` in total, paced by
    the report in flight (:func:`~agent_kit._report_retries.pace_retries`), requests counted."""
    sess = shared_session()
    key = ("report", id(sess), region, endpoint_url, max_attempts)
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _new_client(sess, region, endpoint_url, max_attempts, 5.0, 30.0)
            pace_retries(client, max_attempts)
            count_attempts(client)
            _clients[key] = client
    return client


@dataclass(frozen=True)
class ReportResult:
    """What happened when a rollout was reported.

    ``reported`` is True only when every call the status needs succeeded (or was already done):
    CompleteRollout + UpdateReward for ``ready``, CompleteRollout alone for ``failed``.
    ``attempts`` counts HTTP calls over both operations; ``error`` is a readable reason or None.
    """

    reported: bool
    error: str | None
    attempts: int
    complete_ok: bool
    reward_ok: bool


class _CallFailedError(Exception):
    """An operation failed for good (internal to the reporter)."""


Operation = Literal["CompleteRollout", "UpdateReward"]


@dataclass(eq=False)
class RolloutReporter:
    """Reports one trajectory's completion and reward to the Job Runtime; never raises.

    Args:
        job_arn: the job of the trajectory.
        trajectory_id: the trajectory (the payload's ``metadata.rolloutId``).
        endpoint: Job Runtime endpoint URL (``None``: botocore's default for the region).
        region: AWS region the calls are signed for.
        client: a ``sagemakerjobruntime`` client to use instead of the shared one (tests); it
            retries as it was configured to.
        max_attempts: attempts per operation, retries included (default 5): botocore's
            ``total_max_attempts``.
        base_delay: first pause before a retry in seconds; it doubles per retry, with jitter.
        max_delay: cap of one pause.
        sleep: how botocore's pauses are waited (``time.sleep``; injectable for tests).
    """

    job_arn: str
    trajectory_id: str
    endpoint: str | None
    region: str
    _: KW_ONLY
    client: Any = field(default=None, repr=False)
    max_attempts: int = 5
    base_delay: float = DEFAULT_BASE_DELAY
    max_delay: float = DEFAULT_MAX_DELAY
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    _attempts: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def client_token(self, operation: Operation, status: str = "ready") -> str:
        """The ClientToken of one operation: derived from (job, trajectory, operation), so every
        retry — and every reporter of the same trajectory — sends the same token."""
        name = f"{self.job_arn}\n{self.trajectory_id}\n{operation}"
        if operation == "CompleteRollout":
            name += f"\n{status}"
        return str(uuid.uuid5(_TOKEN_NAMESPACE, name))

    def _get_client(self) -> Any:
        if self.client is None:
            self.client = _reporter_client(self.region, self.endpoint, self.max_attempts)
        else:
            count_attempts(self.client)
        return self.client

    def report(
        self, rewards: Sequence[float], *, status: Literal["ready", "failed"] = "ready"
    ) -> ReportResult:
        """CompleteRollout(``status``), then UpdateReward(``rewards``) when ``status`` is ready."""
        self._attempts = 0
        complete_ok = reward_ok = False
        try:
            values = self._check(rewards, status)
            client = self._get_client()
            self._call(client.complete_rollout, "CompleteRollout", status, Status=status)
            complete_ok = True
            if status == "ready":
                self._call(client.update_reward, "UpdateReward", status, Rewards=values)
                reward_ok = True
        except _CallFailedError as exc:
            return self._failed(str(exc), complete_ok, reward_ok)
        except Exception as exc:  # noqa: BLE001 - the reporter never raises; failure is returned
            return self._failed(f"{type(exc).__name__}: {exc}", complete_ok, reward_ok)
        logger.debug(
            "reported trajectory %s (%s) in %d attempt(s)",
            self.trajectory_id,
            status,
            self._attempts,
        )
        return ReportResult(True, None, self._attempts, complete_ok, reward_ok)

    async def areport(
        self, rewards: Sequence[float], *, status: Literal["ready", "failed"] = "ready"
    ) -> ReportResult:
        """:meth:`report` in a worker thread, so the event loop keeps serving other rollouts."""
        return await asyncio.to_thread(self.report, list(rewards), status=status)

    # -- internals ---------------------------------------------------------------------------
    def _failed(self, error: str, complete_ok: bool, reward_ok: bool) -> ReportResult:
        logger.error(
            "reporting trajectory %s failed after %d attempt(s): %s",
            self.trajectory_id,
            self._attempts,
            error,
        )
        return ReportResult(False, error, self._attempts, complete_ok, reward_ok)

    @staticmethod
    def _check(rewards: Sequence[float], status: str) -> list[float]:
        if status not in ("ready", "failed"):
            raise _CallFailedError(f"status must be 'ready' or 'failed', got {status!r}")
        values = [float(r) for r in rewards]
        if status == "ready":
            if not values:
                raise _CallFailedError("no reward to report (rewards is empty)")
            if not all(math.isfinite(v) for v in values):
                raise _CallFailedError(f"rewards must be finite numbers, got {values!r}")
        return values

    def _call(
        self, send: Callable[..., Any], operation: Operation, status: str, **fields: Any
    ) -> None:
        """One botocore call of ``operation`` (``send``, given ``fields``, the job, the trajectory
        and the operation's ClientToken; botocore retries inside it); conflicts that show the
        work is done count as success, anything else left after botocore's retries fails it."""
        call = InFlight(
            operation,
            self.trajectory_id,
            self.max_attempts,
            self.base_delay,
            self.max_delay,
            self.sleep,
        )
        token = IN_FLIGHT.set(call)
        try:
            send(
                JobArn=self.job_arn,
                TrajectoryId=self.trajectory_id,
                ClientToken=self.client_token(operation, status),
                **fields,
            )
        except ClientError as exc:
            code, message, http = _error_parts(exc)
            if code == "ConflictException" and _already_done(operation, status, message):
                logger.info(
                    "%s for trajectory %s was already done (%s)",
                    operation,
                    self.trajectory_id,
                    message,
                )
                return
            reason = f"{operation} failed: {code} (HTTP {http}): {message}"
            raise _CallFailedError(_gave_up(reason, call.sent)) from exc
        except (BotoConnectionError, HTTPClientError) as exc:
            reason = f"{operation} failed: cannot reach the Job Runtime: {exc}"
            raise _CallFailedError(_gave_up(reason, call.sent)) from exc
        except BotoCoreError as exc:
            raise _CallFailedError(f"{operation} failed: {exc}") from exc
        finally:
            IN_FLIGHT.reset(token)
            self._attempts += max(call.sent, 1)


def _gave_up(reason: str, sent: int) -> str:
    return f"{reason} (gave up after {sent} attempts)" if sent > 1 else reason


def _error_parts(exc: ClientError) -> tuple[str, str, int]:
    error = exc.response.get("Error", {})
    code = str(error.get("Code") or "Unknown")
    message = str(error.get("Message") or exc)
    http = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    return code, message, http


def _already_done(operation: Operation, status: str, message: str) -> bool:
    """Whether a ConflictException message shows that the work was already done.

    docs/contract.md §4: a conflict names the trajectory's current state ("Cannot transition
    trajectory T from S to …", "… not in valid status for UpdateReward: S"). CompleteRollout is
    done when S is READY or REWARDED (ready) / FAILED (failed); UpdateReward when S is REWARDED.
    A conflict that names no state is *not* taken as success.
    """
    found = _FROM_STATE_RE.search(message) or _STATE_RE.search(message)
    if found is None:
        return False
    state = found.group(1)
    if operation == "CompleteRollout":
        if status == "ready":
            return state in (TrajectoryState.READY, TrajectoryState.REWARDED)
        return state == TrajectoryState.FAILED
    return state == TrajectoryState.REWARDED
