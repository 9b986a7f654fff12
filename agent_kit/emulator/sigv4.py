"""Verifying SigV4: the ``Authorization: AWS4-HMAC-SHA256`` header of a request, and the
presigned URL inside a ``sagemaker-api-key-…`` bearer token, against the secret keys of the
access key ids a run gave its agents.

botocore builds the canonical request and the string to sign exactly as the signing client did;
the signing key (four HMACs) is cached per access key, day, region and service, so a request
costs one SHA-256 of its body and one HMAC. A verified bearer token is remembered until it
expires (an agent sends the same one for hours), so a policy call with a known token is a dict
lookup.

AWS's other rules are kept too, and no more than them: the credential scope's date must be
X-Amz-Date's day, its region the emulator's and its service the Job Runtime's signing name
(``sagemaker``: a signature made for ``s3`` is refused, as AWS refuses it with "Credential
should be scoped to correct service: 'sagemaker'"; IAM's "Troubleshoot signed requests for AWS
APIs", https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-troubleshooting.html,
Credential scope errors: the scope is ``YYYYMMDD/region/service/aws4_request`` and each part
must be the request's), and a request must arrive within
:data:`MAX_CLOCK_SKEW_S` (five minutes) of its X-Amz-Date, either way (a bearer token's
presigned URL may not be dated further ahead). That window is AWS's whole protection against
replays: a request is never refused for having been received before. botocore signs two
identical calls made within one second (a retry with its ClientToken, the same prompt asked
twice) to the very same signature, and the service answers each as its own call.
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

from agent_kit.contract import SIGNING_NAME
from agent_kit.errors import AccessDeniedError

__all__ = ["LENIENT_HINT", "MAX_CLOCK_SKEW_S", "Verifier"]

#: Appended to every refusal: how to run without verification.
LENIENT_HINT: Final = (
    "sign with the AWS keys the emulator gave this run (agent-kit run and invoke put them in "
    "the agent's environment; agent-kit emulate prints them), or run it lenient "
    "(--lenient-auth on agent-kit run / invoke / emulate; create_app(auth='sigv4-or-bearer'))"
)
_CACHE_MAX: Final = 4096
#: How far a signed request's X-Amz-Date may be from the emulator's clock, either way. AWS's
#: SigV4 documentation: "In most cases, a request must reach AWS within five minutes of the time
#: stamp in the request. Otherwise, AWS denies the request."
#: (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html,
#: and reference_sigv-troubleshooting.html); services answer "Signature expired: … is now
#: earlier than … (… - 5 min.)".
MAX_CLOCK_SKEW_S: Final = 5 * 60
_WINDOW: Final = "5 min."


def _field(parts: Mapping[str, str], name: str) -> str:
    value = parts.get(name)
    if not value:
        raise AccessDeniedError(f"Malformed SigV4 signature (no {name})")
    return value


def _stamp(epoch: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(epoch))


def _epoch(amz_date: str) -> float:
    try:
        return float(timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ")))
    except ValueError:
        raise AccessDeniedError("Malformed SigV4 date (X-Amz-Date)") from None


class Verifier:
    """Checks SigV4 signatures against ``credentials`` (access key id → secret access key),
    and AWS's date, region and service rules (module docstring); ``region`` None accepts any
    scope's region, ``service`` is the one service a scope may name. A signature is never
    refused for having been seen before (AWS refuses none)."""

    def __init__(
        self,
        credentials: Mapping[str, str],
        clock: Callable[[], float] = time.time,
        *,
        region: str | None = None,
        service: str = SIGNING_NAME,
    ) -> None:
        self.credentials = dict(credentials)
        self.region = region
        self.service = service
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
        if self.region is not None and scope[1] != self.region:
            raise AccessDeniedError(
                f"The SigV4 credential scope names region {scope[1][:64]!r}; this emulator is "
                f"{self.region!r} (sign for the emulator's region: AWS_REGION={self.region})"
            )
        if scope[2] != self.service:
            raise AccessDeniedError(
                f"Credential should be scoped to correct service: {self.service!r} (the "
                f"signature's credential scope names {scope[2][:64]!r}; sign the Job Runtime's "
                f"requests for {self.service!r}, as boto3's sagemakerjobruntime client does)"
            )
        return access_key

    def _check_date(self, amz_date: str, signed: float) -> None:
        """A signed header's X-Amz-Date must be within :data:`MAX_CLOCK_SKEW_S` of now, either
        way (AWS's wording: "Signature expired" / "Signature not yet current")."""
        now = self._clock()
        if signed < now - MAX_CLOCK_SKEW_S:
            raise AccessDeniedError(
                f"Signature expired: X-Amz-Date {amz_date} is now earlier than "
                f"{_stamp(now - MAX_CLOCK_SKEW_S)} ({_stamp(now)} - {_WINDOW}): a signed "
                "request must reach the emulator within 5 minutes of its X-Amz-Date (check "
                "the clock of the signing machine)"
            )
        if signed > now + MAX_CLOCK_SKEW_S:
            raise AccessDeniedError(
                f"Signature not yet current: X-Amz-Date {amz_date} is still later than "
                f"{_stamp(now + MAX_CLOCK_SKEW_S)} ({_stamp(now)} + {_WINDOW}): a signed "
                "request must reach the emulator within 5 minutes of its X-Amz-Date (check "
                "the clock of the signing machine)"
            )

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
        the request it came with, its date and region; return its access key id
        (AccessDeniedError otherwise)."""
        parts = dict(
            p.strip().partition("=")[::2] for p in value[len("AWS4-HMAC-SHA256") :].split(",")
        )
        credential = _field(parts, "Credential")
        signed = _field(parts, "SignedHeaders").split(";")
        amz_date = headers.get("x-amz-date", "")
        signed_at = _epoch(amz_date)
        kept = {name: headers.get(name, "") for name in signed}
        host = headers.get("host", "localhost")
        url = f"http://{host}{raw_path}" + (f"?{query}" if query else "")
        request = AWSRequest(method=method, url=url, headers=kept, data=body)
        request.context["timestamp"] = amz_date
        signer = SigV4Auth(Credentials("", ""), "", "")
        sig = _field(parts, "Signature")
        access_key = self._check(credential, signer, request, sig)
        self._check_date(amz_date, signed_at)
        return access_key

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
        if started - now > MAX_CLOCK_SKEW_S:
            raise AccessDeniedError(
                f"Signature not yet current: the bearer token's X-Amz-Date "
                f"{params['X-Amz-Date']} is more than 5 minutes ahead of the emulator's clock "
                "(check the clock of the signing machine)"
            )
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
