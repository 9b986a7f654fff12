"""The credentials of one emulator run: a per-run secret, the AWS keys its agents sign with, and
the rollout tokens it mints.

:meth:`RunKeys.generate` draws everything from :mod:`secrets`, so no two runs share a key and
nothing outlives the run. The AWS keys go to the agents the run starts (through their
environment, :meth:`RunKeys.agent_env`) and to the emulator, which verifies SigV4 signatures
and ``sagemaker-api-key-…`` bearer tokens against them. A *rollout token*
(:meth:`RunKeys.mint`, ``Bearer agent-kit-rollout-<trajectory>.<mac>``) names one trajectory
of one job and carries HMAC-SHA256(secret, job ARN + trajectory id): the emulator accepts it
for that trajectory only (:meth:`RunKeys.check`), and a token it did not mint is refused.

The agentcore-rl-toolkit mode's trainer route is bound the same way: the ``api_key`` of one
trajectory's ``base_url`` is :func:`trainer_api_key` — HMAC-SHA256(the run's trainer key, job
ARN + trajectory id) — so a rollout's key opens its own trajectory only, however predictable
the trajectory ids are.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Final

from agent_kit.errors import AccessDeniedError

__all__ = ["TOKEN_PREFIX", "TRAINER_KEY_PREFIX", "RunKeys", "trainer_api_key"]

#: How a rollout token begins (after ``Bearer``).
TOKEN_PREFIX: Final = "agent-kit-rollout-"  # noqa: S105 - a format prefix, not a secret
#: How a trajectory's trainer api_key begins.
TRAINER_KEY_PREFIX: Final = "agent-kit-trainer-"
_MAX_TOKEN: Final = 2048


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise AccessDeniedError("Malformed rollout token") from None


@dataclass(frozen=True)
class RunKeys:
    """One run's secret and the AWS credentials its agents are given (never logged: the
    secret fields are left out of ``repr``)."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    secret: bytes = field(repr=False)

    @classmethod
    def generate(cls, access_key_id: str | None = None) -> RunKeys:
        """Fresh random keys (``access_key_id`` may be fixed, e.g. to a shared secret)."""
        akid = access_key_id or "AKAK" + secrets.token_hex(8).upper()
        return cls(akid, secrets.token_urlsafe(30), secrets.token_bytes(32))

    @property
    def credentials(self) -> dict[str, str]:
        """Access key id → secret access key, what the emulator verifies signatures against."""
        return {self.access_key_id: self.secret_access_key}

    def agent_env(self) -> dict[str, str]:
        """The environment variables that make an agent's AWS SDK sign with these keys."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
        }

    def _mac(self, job_arn: str, trajectory_id: str) -> bytes:
        message = f"{job_arn}\n{trajectory_id}".encode()
        return hmac.new(self.secret, message, hashlib.sha256).digest()

    def mint(self, job_arn: str, trajectory_id: str) -> str:
        """The rollout token for ``trajectory_id`` of ``job_arn`` (send as ``Bearer <token>``)."""
        body = _b64(f"{job_arn}\n{trajectory_id}".encode())
        return f"{TOKEN_PREFIX}{body}.{_b64(self._mac(job_arn, trajectory_id))}"

    def check(self, token: str) -> tuple[str, str]:
        """The (job ARN, trajectory id) a token this run minted names; AccessDeniedError for a
        forged, altered or malformed one."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > _MAX_TOKEN:
            raise AccessDeniedError("Malformed rollout token")
        body, _, mac = token[len(TOKEN_PREFIX) :].partition(".")
        try:
            job_arn, sep, trajectory_id = _unb64(body).decode("utf-8").partition("\n")
        except UnicodeDecodeError:
            raise AccessDeniedError("Malformed rollout token") from None
        if not sep or not hmac.compare_digest(_unb64(mac), self._mac(job_arn, trajectory_id)):
            raise AccessDeniedError(
                "The rollout token was not minted by this emulator run (forged or from another run)"
            )
        return job_arn, trajectory_id


def trainer_api_key(run_key: str, job_arn: str, trajectory_id: str) -> str:
    """The ``api_key`` of one trajectory's trainer ``base_url``: HMAC-SHA256(``run_key``, job
    ARN + trajectory id), so it opens that trajectory alone (the run's key is never sent)."""
    message = f"trainer\n{job_arn}\n{trajectory_id}".encode()
    mac = hmac.new(run_key.encode(), message, hashlib.sha256).digest()
    return TRAINER_KEY_PREFIX + _b64(mac)
