"""``agent-kit run --contract rl-toolkit``: the trainer's side of agentcore-rl-toolkit's contract.

What an open-source trainer (verl, slime, rLLM, Tinker through ``awslabs/agentcore-rl-toolkit``)
does to an AgentCore runtime, played locally against any entrypoint that speaks the contract
(docs/trainers.md):

- each rollout attempt is invoked with the dataset row's fields at the payload's top level and
  a ``_rollout`` block: ``exp_id`` (the job name), ``input_id`` (``p<prompt index>``),
  ``s3_bucket``, ``base_url`` (the emulator's trainer route for *this* trajectory, so every
  turn is recorded under it), ``model_id``, ``api_key`` (that trajectory's own key, an HMAC
  of the run's trainer key, the job and the trajectory: it opens no other ``base_url``) and
  ``sampling_params``;
- the agent must answer ``{"status": "processing", "result_key", …}``; the driver then polls
  S3 for that key until the rollout's deadline, stops the session, and records the object's
  ``rewards`` through the emulator (CompleteRollout + UpdateReward), so summaries, reports and
  replay read the run like an MTRL one.

A result object is read up to ``AGENT_KIT_MAX_RESULT_BYTES`` (:data:`MAX_RESULT_ENV`, default
:data:`DEFAULT_MAX_RESULT_BYTES`: :class:`LocalS3`'s ``max_bytes``); a larger one is not read and
ends its rollout with a ``limit:`` reason. A key answered by two rollouts is refused
(:meth:`TrainerSide.claim`): one object cannot reward both.

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
from dataclasses import dataclass, field
from typing import Any, Final

from agent_kit.emulator.run_keys import trainer_api_key
from agent_kit.errors import UsageError
from agent_kit.settings import DEFAULTS, env_name
from agent_kit.trainer_contract import ROLLOUT_KEY, redacted_payload

__all__ = [
    "CONTRACTS",
    "DEFAULT_MAX_RESULT_BYTES",
    "MAX_RESULT_ENV",
    "MODEL_ID",
    "LocalS3",
    "S3Object",
    "TrainerResult",
    "TrainerSide",
    "finite_total",
    "processing_key",
    "read_result",
    "shared_key_reason",
]

#: The contracts ``agent-kit run --contract`` speaks.
CONTRACTS: Final = ("mtrl", "rl-toolkit")
#: The ``model_id`` the driver sends (the emulator serves its ``--policy`` whatever the name).
MODEL_ID: Final = "agent-kit-policy"
_REGION: Final = "us-west-2"
#: Default cap of one result object read from S3 (bytes).
DEFAULT_MAX_RESULT_BYTES: Final = DEFAULTS.max_result_bytes
#: The variable that sets the cap (bytes; 0 = no cap), named where a result is refused.
MAX_RESULT_ENV: Final = env_name("max_result_bytes")
_MISSING_MOTO: Final = (
    "--contract rl-toolkit needs moto for its local S3: pip install 'moto[s3,server]' "
    "(or pip install 'agent_kit[dev]')"
)


@dataclass(frozen=True)
class S3Object:
    """An object read at a key: ``doc`` its JSON document (a non-JSON body as its text; a JSON
    ``null`` is None), ``size`` its length in bytes. ``over_cap`` is the cap it exceeded, when
    it did: then nothing of it was read (``doc`` None)."""

    doc: Any
    size: int
    over_cap: int | None = None


class LocalS3:
    """moto's S3 server on an ephemeral 127.0.0.1 port with one fresh bucket for the run; it
    reads result objects up to ``max_bytes`` (``AGENT_KIT_MAX_RESULT_BYTES``; None: no cap)."""

    def __init__(self, max_bytes: int | None = DEFAULT_MAX_RESULT_BYTES) -> None:
        self.max_bytes = max_bytes
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

    def fetch(self, key: str) -> S3Object | None:
        """The object at ``key`` (read up to the cap, see :class:`S3Object`), or None when
        absent."""
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=key)
        except self._client.exceptions.NoSuchKey:
            return None
        cap, stream = self.max_bytes, response["Body"]
        announced = int(response.get("ContentLength") or 0)
        try:
            if cap is not None and announced > cap:
                return S3Object(None, announced, over_cap=cap)
            data: bytes = stream.read() if cap is None else stream.read(cap + 1)
        finally:
            stream.close()
        if cap is not None and len(data) > cap:
            return S3Object(None, max(announced, len(data)), over_cap=cap)
        try:
            return S3Object(json.loads(data), len(data))
        except (ValueError, RecursionError):
            return S3Object(data.decode("utf-8", "replace"), len(data))

    async def wait_for(self, key: str, deadline: float) -> S3Object | None:
        """Poll for ``key`` until the event loop's clock reaches ``deadline``; None if never."""
        loop = asyncio.get_running_loop()
        delay = 0.02
        while True:
            found = await asyncio.to_thread(self.fetch, key)
            if found is not None:
                return found
            left = deadline - loop.time()
            if left <= 0:
                return None
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 1.5, 1.0)


@dataclass(frozen=True)
class TrainerSide:
    """One run's trainer: its S3, the run's trainer key (never sent: each trajectory gets the
    key derived from it, :meth:`api_key_for`), the emulator's URL, and which rollouts answered
    which result key (:meth:`claim`)."""

    s3: LocalS3
    api_key: str
    endpoint: str
    _claims: dict[str, list[str]] = field(default_factory=dict, repr=False, compare=False)

    def claim(self, key: str, trajectory_id: str) -> list[str]:
        """Record that ``trajectory_id`` answered ``key``; return every rollout that answered
        it (more than one: the key is shared, and its object cannot reward any of them)."""
        owners = self._claims.setdefault(key, [])
        if trajectory_id not in owners:
            owners.append(trajectory_id)
        return list(owners)

    def claimed_by(self, key: str) -> list[str]:
        """The rollouts that answered ``key`` so far."""
        return list(self._claims.get(key, ()))

    def base_url(self, trajectory_id: str) -> str:
        """The OpenAI-compatible base URL of one trajectory (the emulator's trainer route)."""
        return f"{self.endpoint}/trainer/{trajectory_id}/v1"

    def api_key_for(self, job_arn: str, trajectory_id: str) -> str:
        """The api_key of one trajectory's ``base_url`` (the emulator's trainer route checks it)."""
        return trainer_api_key(self.api_key, job_arn, trajectory_id)

    def payload(
        self,
        prompt: str,
        trajectory_id: str,
        exp_id: str,
        prompt_index: int,
        params: dict[str, Any],
        *,
        job_arn: str,
    ) -> dict[str, Any]:
        """The rollout's payload: the row's fields at the top level (a JSON-object prompt is
        spread, else ``{"prompt": row}``) and the ``_rollout`` block, with the trajectory's
        own api_key."""
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
            "api_key": self.api_key_for(job_arn, trajectory_id),
            "sampling_params": params,
        }
        return fields

    @staticmethod
    def recorded(payload: dict[str, Any]) -> dict[str, Any]:
        """The payload as the store keeps it (the api_key redacted)."""
        return redacted_payload(payload)


def shared_key_reason(key: str, owners: list[str]) -> str:
    """The job failure of rollouts that answered one result_key: one object cannot reward
    them all."""
    return (
        f"{len(owners)} rollouts answered the same result_key {key[:300]!r} "
        f"({', '.join(owners[:4])}): one result object cannot reward them all "
        "(agentcore-rl-toolkit keys each rollout's result by its session id)"
    )


def processing_key(body: Any) -> str | None:
    """The ``result_key`` of a ``{"status": "processing", "result_key": …}`` answer, else None."""
    if not isinstance(body, dict) or body.get("status") != "processing":
        return None
    key = body.get("result_key")
    return key if isinstance(key, str) and key else None


@dataclass(frozen=True)
class TrainerResult:
    """What a result object says: the rewards and their finite ``total``, or why there are
    none (``failed``: the agent's own ``status_code`` said so); ``body`` is what the store
    records as the agent's answer (the object without its payload)."""

    rewards: list[float] | None
    failure: str | None
    body: dict[str, Any]
    failed: bool = False
    total: float | None = None


def finite_total(values: list[float]) -> float | None:
    """The exact sum of finite ``values``, or None when it leaves the float range."""
    try:
        total = math.fsum(values)
    except OverflowError:
        return None
    return total if math.isfinite(total) else None


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
    if doc is None:
        return TrainerResult(None, "the result object held null: no rewards", {"raw": None})
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
    total = finite_total(rewards)
    if total is None:
        reason = "the result object's rewards have no finite total (their sum overflows)"
        return TrainerResult(None, reason, body)
    body["reward"] = total
    return TrainerResult(rewards, None, body, total=total)
