"""Verifying SigV4: the ``Authorization: AWS4-HMAC-SHA256`` header of a request, and the
presigned URL inside a ``sagemaker-api-key-…`` bearer token, against the secret keys of the
access key ids a run gave its agents.

botocore builds the canonical request and the string to sign exactly as the signing client did;
the signing key (four HMACs) is cached per access key, day, region and service, so a request
costs one SHA-256 of its body and one HMAC. A verified bearer token is remembered until it
expires (an agent sends the same one for hours), so a policy call with a known token is a dict
lookup.

AWS's other rules are kept too: the credential scope's date must be X-Amz-Date's day and its
region the emulator's; a signed header's X-Amz-Date must be within
:data:`MAX_CLOCK_SKEW_S` (15 minutes) of the emulator's clock, either way (a bearer's may not
lie further ahead); and a request whose exact signature was already accepted (answered 2xx), or
is being answered, is refused as a replay while that signature is valid (the signatures seen
are remembered in bounded memory, :data:`SEEN_SIGNATURES_MAX`, the oldest forgotten first). A
request answered with an error frees its signature: botocore signs a retry made within the same
second to the very same signature.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from calendar import timegm
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Final
from urllib.parse import parse_qsl, urlsplit

from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from agent_kit.errors import AccessDeniedError

__all__ = ["LENIENT_HINT", "MAX_CLOCK_SKEW_S", "SEEN_SIGNATURES_MAX", "Verifier"]

#: Appended to every refusal: how to run without verification.
LENIENT_HINT: Final = (
    "sign with the AWS keys the emulator gave this run (agent-kit run and invoke put them in "
    "the agent's environment; agent-kit emulate prints them), or run it lenient "
    "(--lenient-auth on agent-kit run / invoke / emulate; create_app(auth='sigv4-or-bearer'))"
)
_CACHE_MAX: Final = 4096
#: How far a signed request's X-Amz-Date may be from the emulator's clock (AWS: 15 minutes).
MAX_CLOCK_SKEW_S: Final = 15 * 60
#: How many accepted signatures are remembered to refuse their replay.
SEEN_SIGNATURES_MAX: Final = 100_000


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
    """Checks SigV4 signatures against ``credentials`` (access key id → secret access key),
    and AWS's date, region and replay rules (module docstring); ``region`` None accepts any
    scope's region."""

    def __init__(
        self,
        credentials: Mapping[str, str],
        clock: Callable[[], float] = time.time,
        *,
        region: str | None = None,
        seen_max: int = SEEN_SIGNATURES_MAX,
    ) -> None:
        self.credentials = dict(credentials)
        self.region = region
        self._clock = clock
        self._keys: dict[tuple[str, str, str, str], bytes] = {}
        self._tokens: dict[str, tuple[str, float]] = {}
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._pending: dict[str, float] = {}
        self._seen_max = seen_max
        self._seen_lock = threading.Lock()

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
        return access_key

    def _check_date(self, amz_date: str, signed: float) -> None:
        """A signed header's X-Amz-Date must be within :data:`MAX_CLOCK_SKEW_S` of now."""
        skew = signed - self._clock()
        if abs(skew) > MAX_CLOCK_SKEW_S:
            when = "ahead of" if skew > 0 else "behind"
            raise AccessDeniedError(
                f"Signature expired: X-Amz-Date {amz_date} is {abs(skew) / 60:.0f} minutes "
                f"{when} the emulator's clock (at most 15 minutes either way)"
            )

    def _reserve(self, sig: str, valid_until: float) -> None:
        """Refuse a signature already accepted (and still valid) or in flight; hold this one
        until :meth:`settle` says how its request ended."""
        now = self._clock()
        with self._seen_lock:
            seen = self._seen
            while seen:
                oldest, until = next(iter(seen.items()))
                if until >= now and len(seen) < self._seen_max:
                    break
                del seen[oldest]
            if sig in seen or sig in self._pending:
                raise AccessDeniedError(
                    "This signed request was already received (a replay): every request "
                    "must be signed anew"
                )
            self._pending[sig] = valid_until

    def settle(self, sig: str, accepted: bool) -> None:
        """End a held signature's request: ``accepted`` (a 2xx answer) remembers it, so its
        replay is refused while it is valid; an error answer frees it for the client's retry
        (botocore re-signs a retry within the same second to the same signature)."""
        with self._seen_lock:
            until = self._pending.pop(sig, None)
            if accepted and until is not None:
                self._seen[sig] = until

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
        the request it came with, its date, region and that it is no replay; return its
        access key id (AccessDeniedError otherwise). The signature is held until
        :meth:`settle` (call it with how the request ended)."""
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
        self._reserve(sig, signed_at + MAX_CLOCK_SKEW_S)
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
                f"The bearer token is not yet valid: its X-Amz-Date {params['X-Amz-Date']} is "
                "more than 15 minutes ahead of the emulator's clock"
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
