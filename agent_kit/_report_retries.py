"""How a report's calls ride on botocore's retries: paced by the reporter, every request counted.

:class:`InFlight` is the reporter operation running on the current thread, published through
:data:`IN_FLIGHT` while its botocore call runs (botocore calls its event hooks on the calling
thread, so the hooks below see the right report). :func:`pace_retries` replaces the
standard-mode retry handler botocore registered on a client with the same botocore handler
(its retry conditions, attempt limit and retry quota) whose backoff is the report's
``base_delay`` / ``max_delay`` and whose pause goes through the report's ``sleep``.
:func:`count_attempts` adds a passive ``before-send`` hook counting the HTTP requests of the
report in flight. :mod:`agent_kit.runtime_client` uses both; nothing here retries by itself.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

from botocore.retries import quota, standard
from botocore.retries.base import BaseRetryBackoff

__all__ = [
    "DEFAULT_BASE_DELAY",
    "DEFAULT_MAX_DELAY",
    "IN_FLIGHT",
    "InFlight",
    "count_attempts",
    "pace_retries",
]

#: The reporter's log (retries are logged where its failures are).
logger = logging.getLogger("agent_kit.runtime_client")

#: First pause before a retry, in seconds, when a report gives none.
DEFAULT_BASE_DELAY: Final = 0.25
#: Longest single pause, in seconds, when a report gives none.
DEFAULT_MAX_DELAY: Final = 4.0
#: botocore registers its standard-mode retry handler under ``retry-config-<service id>``.
_RETRY_HANDLER_ID: Final = "retry-config-{service}"
_ATTEMPT_COUNTER_ID: Final = "agent-kit-report-attempts"


@dataclass
class InFlight:
    """One reporter operation running on this thread: how to pace retries, what was sent."""

    operation: str
    trajectory_id: str
    max_attempts: int
    base_delay: float
    max_delay: float
    sleep: Callable[[float], None]
    sent: int = 0


#: The reporter operation the current thread is running (botocore calls its hooks in that thread).
IN_FLIGHT: ContextVar[InFlight | None] = ContextVar("agent_kit_report_in_flight", default=None)


class _ReporterBackoff(BaseRetryBackoff):  # type: ignore[misc]
    """The pause botocore takes before retrying a report: ``base_delay · 2^(attempt-1)``, capped
    at ``max_delay``, times a 50-100 % jitter, with the settings of the report in flight on the
    calling thread (the reporter defaults, 0.25 s and 4 s, outside a report)."""

    def delay_amount(self, context: Any) -> float:
        """Seconds to wait after ``context.attempt_number`` (1-based) failed attempts."""
        call = IN_FLIGHT.get()
        base = DEFAULT_BASE_DELAY if call is None else call.base_delay
        cap = DEFAULT_MAX_DELAY if call is None else call.max_delay
        delay = min(cap, base * 2.0 ** (int(context.attempt_number) - 1))
        return delay * random.uniform(0.5, 1.0)


class _PacedRetries:
    """botocore's standard-mode retry handler (conditions, attempt limit, retry quota) with
    ``_ReporterBackoff`` as its backoff; the pause goes through the report's ``sleep``."""

    def __init__(self, max_attempts: int, service: str) -> None:
        adapter = standard.RetryEventAdapter()
        detector = standard.ThrottlingErrorDetector(adapter)
        self.quota = standard.RetryQuotaChecker(quota.RetryQuota(), detector)
        self._handler = standard.RetryHandler(
            retry_policy=standard.RetryPolicy(
                retry_checker=standard.StandardRetryConditions(max_attempts=max_attempts),
                retry_backoff=_ReporterBackoff(),
            ),
            retry_event_adapter=adapter,
            retry_quota=self.quota,
            service_name=service,
        )

    def needs_retry(self, **kwargs: Any) -> Any:
        """The ``needs-retry`` hook: botocore decides; its pause is slept here, not by botocore."""
        delay = self._handler.needs_retry(**kwargs)
        call = IN_FLIGHT.get()
        if call is None or delay is None or delay is False:
            return delay
        logger.warning(
            "%s for trajectory %s: attempt %d/%d failed (%s); botocore retries in %.2f s",
            call.operation,
            call.trajectory_id,
            int(kwargs.get("attempts") or 0),
            call.max_attempts,
            _attempt_outcome(kwargs),
            delay,
        )
        call.sleep(float(delay))
        return 0  # retry now: the pause is over


def _attempt_outcome(kwargs: dict[str, Any]) -> str:
    """A short reason for a failed attempt, from botocore's ``needs-retry`` arguments."""
    exc = kwargs.get("caught_exception")
    if exc is not None:
        return f"{type(exc).__name__}: {exc}"
    http, parsed = kwargs.get("response") or (None, None)
    code = (parsed or {}).get("Error", {}).get("Code") or "Unknown"
    return f"{code} (HTTP {getattr(http, 'status_code', '?')})"


def _count_attempt(**_: Any) -> None:
    """``before-send`` hook: one more HTTP request of the report in flight on this thread."""
    call = IN_FLIGHT.get()
    if call is not None:
        call.sent += 1


def count_attempts(client: Any) -> None:
    """Register the attempt counter on a client (idempotent; a client without events is left)."""
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is not None:
        events.register("before-send", _count_attempt, unique_id=_ATTEMPT_COUNTER_ID)


def pace_retries(client: Any, max_attempts: int) -> None:
    """Re-register ``client``'s standard-mode retry handler with the reporter's pacing.

    ``client`` must have been created with ``retries={"mode": "standard",
    "total_max_attempts": max_attempts}``; its retry decisions stay botocore's.
    """
    events = client.meta.events
    service = client.meta.service_model.service_id.hyphenize()
    paced = _PacedRetries(max_attempts, service)
    handler_id = _RETRY_HANDLER_ID.format(service=service)
    events.unregister(f"needs-retry.{service}", unique_id=handler_id)
    events.register(f"needs-retry.{service}", paced.needs_retry, unique_id=handler_id)
    events.register(f"after-call.{service}", paced.quota.release_retry_quota)
