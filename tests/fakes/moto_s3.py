"""An S3 on loopback for tests: moto's server (``ThreadedMotoServer``) on 127.0.0.1.

moto stands in for Amazon S3, the AWS boundary the agentcore-rl-toolkit contract writes its
result objects to: real boto3/botocore clients talk to it over real sockets through
``endpoint_url`` (or ``AWS_ENDPOINT_URL_S3``) with dummy credentials.

Usage::

    with MotoS3("results") as s3:
        s3.url, s3.client.put_object(Bucket="results", Key="k", Body=b"{}")
        s3.wait_for("results", "k")  # polls with a deadline, returns the JSON document
"""

from __future__ import annotations

import json
import time
from typing import Any

import botocore.session
import httpx
from moto.server import ThreadedMotoServer

REGION = "us-west-2"


class MotoS3:
    """A moto server on an ephemeral loopback port, emptied, with ``buckets`` created."""

    def __init__(self, *buckets: str) -> None:
        self.buckets = buckets
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.url = ""
        self.client: Any = None

    def __enter__(self) -> MotoS3:
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        # moto keeps its backends per process: start every server from an empty S3.
        httpx.post(f"{self.url}/moto-api/reset", timeout=10).raise_for_status()
        session = botocore.session.Session()
        session.set_credentials("testing", "testing")
        self.client = session.create_client("s3", region_name=REGION, endpoint_url=self.url)
        for bucket in self.buckets:
            self.client.create_bucket(
                Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION}
            )
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.stop()

    def keys(self, bucket: str) -> list[str]:
        """Every key in ``bucket``."""
        listing = self.client.list_objects_v2(Bucket=bucket)
        return [item["Key"] for item in listing.get("Contents", [])]

    def read(self, bucket: str, key: str) -> Any:
        """The JSON document at ``bucket/key``."""
        return json.loads(self.client.get_object(Bucket=bucket, Key=key)["Body"].read())

    def wait_for(self, bucket: str, key: str, timeout: float = 60.0) -> Any:
        """Poll until ``bucket/key`` exists (AssertionError after ``timeout``); its JSON."""
        deadline = time.monotonic() + timeout
        while True:
            if key in self.keys(bucket):
                return self.read(bucket, key)
            assert time.monotonic() < deadline, f"no object s3://{bucket}/{key}"
            time.sleep(0.02)
