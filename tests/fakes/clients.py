"""Real boto3 clients pointed at the loopback doubles and the emulator.

``runtime_client(url)``: a ``sagemakerjobruntime`` client at ``url`` signing as ``ACCESS_KEY``
with ``SECRET_KEY`` in us-west-2 (``secret=``, ``region=``: others), retries off (one attempt,
so a test sees each failure); ``config``: more ``botocore.config.Config`` settings.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

#: The keys the clients sign with (``credentials={ACCESS_KEY: SECRET_KEY}`` verifies them).
ACCESS_KEY = "AKIDEXAMPLE"
SECRET_KEY = "secret"


def runtime_client(
    url: str, *, secret: str = SECRET_KEY, region: str = "us-west-2", **config: Any
) -> Any:
    """A boto3 ``sagemakerjobruntime`` client at ``url`` (see the module docstring)."""
    return boto3.client(
        "sagemakerjobruntime",
        endpoint_url=url,
        region_name=region,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=secret,
        config=Config(retries={"total_max_attempts": 1}, **config),
    )
