"""Verifying SigV4: the ``Authorization: AWS4-HMAC-SHA256`` header of a request, and the
presigned URL inside a ``sagemaker-api-key-…`` bearer token, against the secret keys of the
access key ids a run gave its agents.

botocore builds the canonical request and the string to sign exactly as the signing client did;
the signing key (four HMACs) is cached per access key, day, region and service, so a request
costs one SHA-256 of its body and one HMAC. A verified bearer token is remembered until it
expires (an agent sends the same one for hours), so a policy call with a known token is a dict
lookup.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from calendar import timegm
from collections.abc import Callable, Mapping
from typing import Final
from urllib.parse import parse_qsl, urlsplit

from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from agent_kit.errors import AccessDeniedError

__all__ = ["LENIENT_HINT", "Verifier"]

#: Appended to every refusal: how to run without verification.
LENIENT_HINT: Final = (
    "sign with the AWS keys the emulator gave this run (agent-kit run and invoke put them in "
    "the agent's environment; agent-kit emulate prints them), or run it lenient "
    "(--lenient-auth on agent-kit run / invoke / emulate; create_app(auth='sigv4-or-bearer'))"
)
_CACHE_MAX: Final = 4096


def _field(parts: Mapping[str, str], name: str) -> str:
    value = parts.get(name)
    if not value:
        raise AccessDeniedError(f"Malformed SigV4 signature (no {name})")
    return value


def _epoch(amz_date: str) -> float:
    try:
        return float(timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ")))
    except ValueError:
        raise AccessDeniedError("Malformed SigV4 date (X-Amz-Date)") from None


class Verifier:
    """Checks SigV4 signatures against ``credentials`` (access key id → secret access key)."""

    def __init__(
        self, credentials: Mapping[str, str], clock: Callable[[], float] = time.time
    ) -> None:
        self.credentials = dict(credentials)
        self._clock = clock
        self._keys: dict[tuple[str, str, str, str], bytes] = {}
        self._tokens: dict[str, tuple[str, float]] = {}

    def _secret(self, access_key: str) -> str:
        secret = self.credentials.get(access_key)
        if secret is None:
            raise AccessDeniedError(
                f"The request is signed with access key id {access_key[:64]!r}, which this "
                f"emulator was not given: {LENIENT_HINT}"
            )
        return secret

    def _signing_key(self, access_key: str, scope: list[str]) -> bytes:
        day, region, service = scope[0], scope[1], scope[2]
        cached = self._keys.get((access_key, day, region, service))
        if cached is None:
            key = ("AWS4" + self._secret(access_key)).encode()
            for part in (day, region, service, "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            if len(self._keys) >= _CACHE_MAX:
                self._keys.clear()
            self._keys[(access_key, day, region, service)] = cached = key
        return cached

    def _check(self, credential: str, signer: SigV4Auth, request: AWSRequest, sig: str) -> str:
        access_key, *scope = credential.split("/")
        if len(scope) != 4 or scope[3] != "aws4_request":
            raise AccessDeniedError("Malformed SigV4 credential scope")
        self._secret(access_key)
        signer._region_name = scope[1]
        signer._service_name = scope[2]
        if request.context["timestamp"][:8] != scope[0]:
            raise AccessDeniedError("SigV4 credential scope and X-Amz-Date disagree")
        string = signer.string_to_sign(request, signer.canonical_request(request))
        key = self._signing_key(access_key, scope)
        expected = hmac.new(key, string.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, sig):
            raise AccessDeniedError(f"The SigV4 signature does not match: {LENIENT_HINT}")
        return access_key

    def verify_header(
        self,
        value: str,
        method: str,
        raw_path: str,
        query: str,
        headers: Mapping[str, str],
        body: bytes,
    ) -> str:
        """Verify an ``AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`` header for
        the request it came with; return its access key id (AccessDeniedError otherwise)."""
        parts = dict(
            p.strip().partition("=")[::2] for p in value[len("AWS4-HMAC-SHA256") :].split(",")
        )
        credential = _field(parts, "Credential")
        signed = _field(parts, "SignedHeaders").split(";")
        amz_date = headers.get("x-amz-date", "")
        _epoch(amz_date)
        kept = {name: headers.get(name, "") for name in signed}
        host = headers.get("host", "localhost")
        url = f"http://{host}{raw_path}" + (f"?{query}" if query else "")
        request = AWSRequest(method=method, url=url, headers=kept, data=body)
        request.context["timestamp"] = amz_date
        signer = SigV4Auth(Credentials("", ""), "", "")
        return self._check(credential, signer, request, _field(parts, "Signature"))

    def verify_bearer(self, url: str) -> str:
        """Verify the presigned URL of a bearer token (host + query, as the SDK encodes it) and
        that it has not expired; return its access key id (AccessDeniedError otherwise)."""
        cached = self._tokens.get(url)
        now = self._clock()
        if cached is not None and now < cached[1]:
            return cached[0]
        split = urlsplit(url if "://" in url else "https://" + url)
        pairs = [p for p in split.query.split("&") if p and not p.startswith("Version=")]
        params = dict(parse_qsl("&".join(pairs)))
        credential = _field(params, "X-Amz-Credential")
        self._secret(credential.split("/", 1)[0])
        sig = _field(params, "X-Amz-Signature")
        started = _epoch(_field(params, "X-Amz-Date"))
        expires = _field(params, "X-Amz-Expires")
        if not expires.isdigit() or now >= started + int(expires):
            raise AccessDeniedError("The bearer token has expired")
        query = "&".join(p for p in pairs if not p.startswith("X-Amz-Signature="))
        request = AWSRequest(
            method="POST",
            url=f"https://{split.netloc}{split.path or '/'}?{query}",
            headers={"host": split.netloc},
        )
        request.context["timestamp"] = params["X-Amz-Date"]
        signer = SigV4QueryAuth(Credentials("", ""), "", "", expires=int(expires))
        access_key = self._check(credential, signer, request, sig)
        if len(self._tokens) >= _CACHE_MAX:
            self._tokens.clear()
        self._tokens[url] = (access_key, started + int(expires))
        return access_key
