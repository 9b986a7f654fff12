"""The ``sagemaker-api-key-…`` bearer token as the SDK signs it, for the test agents and the
emulator's tests (no side effect at import: tests load it by path)."""

from __future__ import annotations

import base64
from typing import Any


def presigned_token(
    credentials: Any, region: str, *, service: str = "sagemaker", expires: int = 43200
) -> str:
    """A ``sagemaker-api-key-…`` bearer: a URL presigned (botocore's SigV4QueryAuth) with
    ``credentials`` for ``service`` in ``region``, as the SDK's token generator makes it."""
    from botocore.auth import SigV4QueryAuth
    from botocore.awsrequest import AWSRequest

    host = "sagemaker.amazonaws.com"
    request = AWSRequest(
        method="POST",
        url=f"https://{host}/",
        headers={"host": host},
        params={"Action": "CallWithBearerToken"},
    )
    SigV4QueryAuth(credentials, service, region, expires=expires).add_auth(request)
    url = request.url.removeprefix("https://") + "&Version=1"
    return "sagemaker-api-key-" + base64.b64encode(url.encode()).decode()
