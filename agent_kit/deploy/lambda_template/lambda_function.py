"""Lambda forwarder for MTRL agents hosted outside AgentCore (EKS, EC2, Fargate).

The MTRL service invokes this function synchronously with the rollout payload (docs/contract.md §2).
The function validates it and POSTs it to ``$AGENT_ENDPOINT/rollout`` with
``Authorization: Bearer $AGENT_SECRET``; the agent serves that route with
``agent_kit.forwarder.enable_forwarder_routes`` (``RolloutApp(..., forwarder=True)``).

Environment:
    AGENT_ENDPOINT            base URL of the agent, e.g. ``https://agent.internal:8443`` (required)
    AGENT_SECRET              shared bearer secret (required)
    ROLLOUT_TIMEOUT_SECONDS   the job's ``rollout_timeout`` (default 600); the HTTP timeout is
                              this minus ``TIMEOUT_MARGIN_SECONDS`` (default 30), at least 1 s

Result: the agent's JSON answer (``{"reward": r}``) on success. Every failure is *returned* as
``{"errorType": T, "errorMessage": M}`` with T one of ``ValidationError`` (bad payload, 4xx from
the agent), ``AccessDenied`` (401/403), ``Throttling`` (429/503) or ``InternalServerError``
(agent unreachable, timed out, 5xx or garbage). Standard library only; never logs the secret.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from typing import Any

__all__ = ["ForwarderError", "forward", "handler", "validate_event"]

_JOB_ARN = re.compile(
    r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:"
    r"job/[a-zA-Z0-9_\-]+/[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
)
_MAX_BODY = 1 << 20


# Not an AgentKitError on purpose: this file is shipped alone as the forwarder Lambda's code,
# outside agent_kit's runtime half, so it imports nothing of agent_kit (errors.py included).
class ForwarderError(Exception):
    """A failure with the errorType the forwarder reports for it."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message

    def to_response(self) -> dict[str, str]:
        """The ``{"errorType", "errorMessage"}`` body returned to the service."""
        return {"errorType": self.error_type, "errorMessage": self.message}


def _first(mapping: dict[str, Any], *names: str) -> Any:
    for name in names:
        if name in mapping:
            return mapping[name]
    return None


def validate_event(event: Any) -> dict[str, Any]:
    """Return the payload as a dict if it follows the MTRL contract, else raise ValidationError."""
    if isinstance(event, (str, bytes)):
        try:
            event = json.loads(event)
        except ValueError:
            raise ForwarderError("ValidationError", "event is not valid JSON") from None
    if not isinstance(event, dict):
        raise ForwarderError("ValidationError", "event must be a JSON object")
    if not isinstance(event.get("prompt"), str):
        raise ForwarderError("ValidationError", "prompt: a string is required")
    metadata = event.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise ForwarderError("ValidationError", "metadata must be an object")
        job_arn = _first(metadata, "jobArn", "job_arn")
        if not isinstance(job_arn, str) or not _JOB_ARN.match(job_arn):
            raise ForwarderError("ValidationError", "metadata.jobArn: not a SageMaker job ARN")
        rollout = _first(metadata, "rolloutId", "trajectoryId", "trajectory_id", "rollout_id")
        if not isinstance(rollout, str) or not 1 <= len(rollout) <= 256:
            raise ForwarderError("ValidationError", "metadata.rolloutId: 1..256 characters")
    params = _first(event, "inferenceParams", "inference_params")
    if params is not None and not isinstance(params, dict):
        raise ForwarderError("ValidationError", "inferenceParams must be an object")
    return event


def _timeout() -> float:
    try:
        rollout = float(os.environ.get("ROLLOUT_TIMEOUT_SECONDS", "600"))
        margin = float(os.environ.get("TIMEOUT_MARGIN_SECONDS", "30"))
    except ValueError:
        raise ForwarderError(
            "InternalServerError", "ROLLOUT_TIMEOUT_SECONDS/TIMEOUT_MARGIN_SECONDS must be numbers"
        ) from None
    return max(1.0, rollout - margin)


def _type_for_status(status: int) -> str:
    if status in (401, 403):
        return "AccessDenied"
    if status in (429, 503):
        return "Throttling"
    if 400 <= status < 500:
        return "ValidationError"
    return "InternalServerError"


def forward(payload: dict[str, Any]) -> Any:
    """POST a validated payload to the agent and return its JSON answer; raise on failure."""
    endpoint = os.environ.get("AGENT_ENDPOINT", "").rstrip("/")
    secret = os.environ.get("AGENT_SECRET", "")
    if not endpoint.startswith(("http://", "https://")):
        raise ForwarderError("InternalServerError", "AGENT_ENDPOINT is not an http(s) URL")
    if not secret:
        raise ForwarderError("InternalServerError", "AGENT_SECRET is not set")
    request = urllib.request.Request(  # noqa: S310 - scheme checked above
        endpoint + "/rollout",
        data=json.dumps(payload).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Authorization": f"Bearer {secret}",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=_timeout()) as response:  # noqa: S310
            body = response.read(_MAX_BODY + 1)
    except urllib.error.HTTPError as exc:
        try:
            detail = exc.read(2048).decode("utf-8", "replace").strip()
        finally:
            exc.close()
        message = f"agent answered HTTP {exc.code}" + (f": {detail}" if detail else "")
        raise ForwarderError(_type_for_status(exc.code), message) from None
    except TimeoutError:
        raise ForwarderError("InternalServerError", "agent did not answer in time") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ForwarderError("InternalServerError", f"agent unreachable: {reason}") from None
    if len(body) > _MAX_BODY:
        raise ForwarderError("InternalServerError", "agent answer larger than 1 MiB")
    try:
        return json.loads(body) if body else {}
    except ValueError:
        raise ForwarderError("InternalServerError", "agent answered non-JSON") from None


def handler(event: Any, context: Any = None) -> Any:
    """Lambda entry point: validate, forward, and map every failure to the error shape."""
    try:
        return forward(validate_event(event))
    except ForwarderError as failure:
        return failure.to_response()
