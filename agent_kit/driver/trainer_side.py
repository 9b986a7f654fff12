"""``agent-kit run --contract rl-toolkit``: the trainer's side of agentcore-rl-toolkit's contract.

What an open-source trainer (verl, slime, rLLM, Tinker through ``awslabs/agentcore-rl-toolkit``)
does to an AgentCore runtime, played locally against any entrypoint that speaks the contract
(docs/trainers.md):

- each rollout attempt is invoked with the dataset row's fields at the payload's top level and
  a ``_rollout`` block: ``exp_id`` (the job name), ``input_id`` (``p<prompt index>``),
  ``s3_bucket``, ``base_url`` (the emulator's trainer route for *this* trajectory, so every
  turn is recorded under it), ``model_id``, ``api_key`` (a per-run key the route checks) and
  ``sampling_params``;
- the agent must answer ``{"status": "processing", "result_key", …}``; the driver then polls
  S3 for that key until the rollout's deadline, stops the session, and records the object's
  ``rewards`` through the emulator (CompleteRollout + UpdateReward), so summaries, reports and
  replay read the run like an MTRL one.

S3 is moto's server on 127.0.0.1 (:class:`LocalS3`; moto is a dev dependency, and this mode
says how to install it when it is missing). Agent processes find it through
``AWS_ENDPOINT_URL_S3``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import secrets
from dataclasses import dataclass
from typing import Any, Final

from agent_kit.errors import UsageError
from agent_kit.trainer_contract import ROLLOUT_KEY, redacted_payload

__all__ = [
    "CONTRACTS",
    "MODEL_ID",
    "LocalS3",
    "TrainerResult",
    "TrainerSide",
    "processing_key",
    "read_result",
]

#: The contracts ``agent-kit run --contract`` speaks.
CONTRACTS: Final = ("mtrl", "rl-toolkit")
#: The ``model_id`` the driver sends (the emulator serves its ``--policy`` whatever the name).
MODEL_ID: Final = "agent-kit-policy"
_REGION: Final = "us-west-2"
_MISSING_MOTO: Final = (
    "--contract rl-toolkit needs moto for its local S3: pip install 'moto[s3,server]' "
    "(or pip install 'agent_kit[dev]')"
)


class LocalS3:
    """moto's S3 server on an ephemeral 127.0.0.1 port with one fresh bucket for the run."""

    def __init__(self) -> None:
        self.bucket = f"agent-kit-rollouts-{secrets.token_hex(6)}"
        self.url = ""
        self._server: Any = None
        self._client: Any = None

    def start(self) -> LocalS3:
        """Start the server and create the bucket; :class:`UsageError` when moto is missing."""
        try:
            from moto.server import ThreadedMotoServer
        except ImportError:
            raise UsageError(_MISSING_MOTO) from None
        import botocore.session

        # moto serves through werkzeug, which logs every request line to stderr by default.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        session = botocore.session.Session()
        session.set_credentials("agent-kit-local", "agent-kit-local")
        self._client = session.create_client("s3", region_name=_REGION, endpoint_url=self.url)
        self._client.create_bucket(
            Bucket=self.bucket, CreateBucketConfiguration={"LocationConstraint": _REGION}
        )
        return self

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    def fetch(self, key: str) -> Any:
        """The JSON document at ``key`` (a non-JSON body as its text), or None when absent."""
        try:
            body = self._client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except self._client.exceptions.NoSuchKey:
            return None
        try:
            return json.loads(body)
        except ValueError:
            return body.decode("utf-8", "replace")

    async def wait_for(self, key: str, deadline: float) -> Any:
        """Poll for ``key`` until the event loop's clock reaches ``deadline``; None if never."""
        loop = asyncio.get_running_loop()
        delay = 0.02
        while True:
            doc = await asyncio.to_thread(self.fetch, key)
            if doc is not None:
                return doc
            left = deadline - loop.time()
            if left <= 0:
                return None
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 1.5, 1.0)


@dataclass(frozen=True)
class TrainerSide:
    """One run's trainer: its S3, the api_key its chat route checks, the emulator's URL."""

    s3: LocalS3
    api_key: str
    endpoint: str

    def base_url(self, trajectory_id: str) -> str:
        """The OpenAI-compatible base URL of one trajectory (the emulator's trainer route)."""
        return f"{self.endpoint}/trainer/{trajectory_id}/v1"

    def payload(
        self,
        prompt: str,
        trajectory_id: str,
        exp_id: str,
        prompt_index: int,
        params: dict[str, Any],
    ) -> dict[str, Any]:
        """The rollout's payload: the row's fields at the top level (a JSON-object prompt is
        spread, else ``{"prompt": row}``) and the ``_rollout`` block."""
        try:
            row = json.loads(prompt)
        except ValueError:
            row = None
        fields = dict(row) if isinstance(row, dict) else {"prompt": prompt}
        fields.pop(ROLLOUT_KEY, None)
        fields[ROLLOUT_KEY] = {
            "exp_id": exp_id,
            "input_id": f"p{prompt_index}",
            "s3_bucket": self.s3.bucket,
            "base_url": self.base_url(trajectory_id),
            "model_id": MODEL_ID,
            "api_key": self.api_key,
            "sampling_params": params,
        }
        return fields

    @staticmethod
    def recorded(payload: dict[str, Any]) -> dict[str, Any]:
        """The payload as the store keeps it (the api_key redacted)."""
        return redacted_payload(payload)


def processing_key(body: Any) -> str | None:
    """The ``result_key`` of a ``{"status": "processing", "result_key": …}`` answer, else None."""
    if not isinstance(body, dict) or body.get("status") != "processing":
        return None
    key = body.get("result_key")
    return key if isinstance(key, str) and key else None


@dataclass(frozen=True)
class TrainerResult:
    """What a result object says: the rewards, or why there are none (``failed``: the agent's
    own ``status_code`` said so); ``body`` is what the store records as the agent's answer
    (the object without its payload)."""

    rewards: list[float] | None
    failure: str | None
    body: dict[str, Any]
    failed: bool = False


def _rewards(value: Any) -> list[float] | None:
    values = value if isinstance(value, list) else [value]
    if not values:
        return None
    out: list[float] = []
    for item in values:
        if isinstance(item, bool) or not isinstance(item, int | float):
            return None
        if not math.isfinite(item):
            return None
        out.append(float(item))
    return out


def read_result(doc: Any) -> TrainerResult:
    """Interpret a result object (agentcore-rl-toolkit's shape: ``rewards`` float or list,
    ``status_code``, ``stop_reason``; agent_kit adds ``metrics`` and ``failure``)."""
    if not isinstance(doc, dict):
        return TrainerResult(None, "the result object is not a JSON object", {"raw": str(doc)})
    body = {k: v for k, v in doc.items() if k != "payload"}
    metrics = body.get("metrics")
    if isinstance(metrics, dict) and metrics.get("floor_reward") == 1.0:
        body["floor_reward"] = True
    status = body.get("status_code", 200)
    if status != 200:
        reason = str(body.get("stop_reason") or "no stop_reason")[:500]
        return TrainerResult(None, f"status_code {status}: {reason}", body, failed=True)
    rewards = _rewards(body.get("rewards"))
    if rewards is None:
        return TrainerResult(None, "the result object has no finite rewards", body)
    body["reward"] = math.fsum(rewards)
    return TrainerResult(rewards, None, body)
