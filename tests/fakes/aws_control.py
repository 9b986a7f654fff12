"""A loopback fake of the AWS control-plane APIs agent_kit's deploy and job commands call.

One real HTTP server (stdlib ``ThreadingHTTPServer`` on 127.0.0.1, ephemeral port) answers, for
real boto3 clients pointed at it with ``AWS_ENDPOINT_URL_<SERVICE>`` and dummy credentials:

- ``bedrock-agentcore-control`` (rest-json): ListAgentRuntimes, CreateAgentRuntime,
  UpdateAgentRuntime, GetAgentRuntime (status goes CREATING/UPDATING → READY after
  ``polls_until_ready`` polls, or ``*_FAILED`` when ``fail_with`` is set);
- ``s3`` (rest-xml): PutObject (path-style), keeping the bytes and answering a version id;
- ``sagemaker`` (json 1.1): ListJobs, DescribeJob, CreateJob, DescribeHubContent. A created job
  is listed and described: InProgress, then, after ``polls_until_done`` DescribeJob calls,
  Completed (``on_done`` may fill its ``ServiceOutput`` or fail it); CreateJob answers
  ResourceLimitExceeded while ``job_quota`` jobs of the category are InProgress, and
  ``max_running`` keeps the most that ever were at once.

The service of a request is read from the SigV4 credential scope in ``Authorization`` (requests
are signed but not verified). Every request is recorded (:class:`Recorded`) so tests assert the
exact wire requests. This is a mock at the AWS boundary we cannot reach offline.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

ACCOUNT = "123456789012"


@dataclass
class Recorded:
    """One request as it arrived: service, operation, method, path, headers and body."""

    service: str
    operation: str
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        """The body parsed as JSON (None when empty or not JSON)."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


@dataclass
class FakeAws:
    """State and recorder of the fake; start with :meth:`start`, stop with :meth:`stop`."""

    region: str = "us-west-2"
    polls_until_ready: int = 2
    fail_with: str | None = None
    requests: list[Recorded] = field(default_factory=list)
    runtimes: dict[str, dict[str, Any]] = field(default_factory=dict)
    jobs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    objects: dict[tuple[str, str], bytes] = field(default_factory=dict)
    polls_until_done: int = 2
    job_quota: int | None = None
    on_done: Callable[[dict[str, Any], dict[str, Any]], None] | None = None
    max_running: int = 0
    _polls: dict[str, int] = field(default_factory=dict)
    _job_polls: dict[tuple[str, str], int] = field(default_factory=dict)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeAws:
        """Serve on 127.0.0.1 on an ephemeral port in a daemon thread."""
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Shut the server down."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        """Base URL of the server."""
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def env(self) -> dict[str, str]:
        """Environment variables that point boto3 at this fake with dummy credentials."""
        return {
            "AWS_ENDPOINT_URL_BEDROCK_AGENTCORE_CONTROL": self.url,
            "AWS_ENDPOINT_URL_S3": self.url,
            "AWS_ENDPOINT_URL_SAGEMAKER": self.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
            "AWS_MAX_ATTEMPTS": "1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    # ------------------------------------------------------------------ state helpers

    def add_runtime(self, name: str, status: str = "READY") -> dict[str, Any]:
        """Register an existing runtime named ``name``; return its record."""
        runtime_id = f"{name}-{'a' * 10}"
        record = {
            "agentRuntimeName": name,
            "agentRuntimeId": runtime_id,
            "agentRuntimeArn": self.runtime_arn(runtime_id),
            "agentRuntimeVersion": "1",
            "status": status,
            "description": "",
            "lastUpdatedAt": _now(),
        }
        self.runtimes[runtime_id] = record
        return record

    def runtime_arn(self, runtime_id: str) -> str:
        """The ARN the fake gives a runtime id."""
        return f"arn:aws:bedrock-agentcore:{self.region}:{ACCOUNT}:runtime/{runtime_id}"

    def add_job(
        self, name: str, runtime_arn: str, status: str = "InProgress", category: str = "AgentRFT"
    ) -> None:
        """Register a job of ``category`` whose AgentConfig names ``runtime_arn``."""
        document = {
            "AgentConfig": {"BedrockAgentCoreConfig": {"AgentRuntimeArn": runtime_arn}},
            "ServiceOutput": {
                "ProgressInfo": {"MaxSteps": 100, "CurrentStep": 42},
                "BillableTokenUsage": {
                    "PrefillTokenCount": 491_600_000,
                    "SampleTokenCount": 159_700_000,
                    "TrainTokenCount": 643_300_000,
                },
            },
        }
        self.jobs[(category, name)] = {
            "JobName": name,
            "JobArn": f"arn:aws:sagemaker:{self.region}:{ACCOUNT}:job/{category}/{name}",
            "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/JobRole",
            "JobCategory": category,
            "JobConfigSchemaVersion": "1.0.0",
            "JobConfigDocument": json.dumps(document),
            "CreationTime": 1_780_000_000,
            "LastModifiedTime": 1_780_000_100,
            "JobStatus": status,
            "SecondaryStatus": "Training" if status == "InProgress" else status,
            "SecondaryStatusTransitions": [
                {"Status": "Starting", "StartTime": 1_780_000_000, "StatusMessage": "starting"}
            ],
        }

    def operations(self, service: str | None = None) -> list[str]:
        """Operation names received, in order (optionally of one service)."""
        return [r.operation for r in self.requests if service in (None, r.service)]

    def find(self, operation: str) -> list[Recorded]:
        """Requests of one operation, in order."""
        return [r for r in self.requests if r.operation == operation]

    # ------------------------------------------------------------------ dispatch

    def handle(self, rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        """Answer one request: (status, headers, body)."""
        if rec.service == "bedrock-agentcore":
            return self._control(rec)
        if rec.service == "s3":
            return self._s3(rec)
        if rec.service == "sagemaker":
            return self._sagemaker(rec)
        return 400, {}, b"unknown service"

    def _running(self, category: str) -> int:
        return sum(
            1
            for (c, _), job in self.jobs.items()
            if c == category and job["JobStatus"] == "InProgress"
        )

    def _create_job(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        category, name = body["JobCategory"], body["JobName"]
        if self.job_quota is not None and self._running(category) >= self.job_quota:
            return _error_json("ResourceLimitExceeded", f"{category} jobs: quota reached")
        if (category, name) in self.jobs:
            return _error_json("ResourceInUse", f"job {name} exists")
        arn = f"arn:aws:sagemaker:{self.region}:{ACCOUNT}:job/{category}/{name}"
        self.jobs[(category, name)] = {
            "JobName": name,
            "JobArn": arn,
            "RoleArn": body["RoleArn"],
            "JobCategory": category,
            "JobConfigSchemaVersion": body["JobConfigSchemaVersion"],
            "JobConfigDocument": body["JobConfigDocument"],
            "CreationTime": 1_780_000_000,
            "LastModifiedTime": 1_780_000_000,
            "JobStatus": "InProgress",
            "SecondaryStatus": "Starting",
        }
        self._job_polls[(category, name)] = 0
        self.max_running = max(self.max_running, self._running(category))
        return _json(200, {"JobArn": arn}, amz=True)

    def _advance(self, key: tuple[str, str], job: dict[str, Any]) -> None:
        """A created job in progress ends after ``polls_until_done`` descriptions."""
        if key not in self._job_polls or job["JobStatus"] != "InProgress":
            return
        self._job_polls[key] += 1
        if self._job_polls[key] < self.polls_until_done:
            return
        job["JobStatus"] = job["SecondaryStatus"] = "Completed"
        if self.on_done is not None:
            document = json.loads(job["JobConfigDocument"])
            self.on_done(job, document)
            job["JobConfigDocument"] = json.dumps(document)

    def _control(self, rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        path = rec.path.split("?", 1)[0]
        match = re.fullmatch(r"/runtimes/([^/]+)/", path)
        if rec.method == "POST" and path == "/runtimes/":
            rec.operation = "ListAgentRuntimes"
            items = [
                {k: v for k, v in r.items() if k != "_request"} for r in self.runtimes.values()
            ]
            return _json(200, {"agentRuntimes": items})
        if rec.method == "PUT" and path == "/runtimes/":
            rec.operation = "CreateAgentRuntime"
            body = rec.json
            record = self.add_runtime(body["agentRuntimeName"], status="CREATING")
            record["_request"] = body
            return _json(202, self._summary(record))
        if match and rec.method == "PUT":
            rec.operation = "UpdateAgentRuntime"
            record = self.runtimes.get(unquote(match[1]))
            if record is None:
                return _error_rest(404, "ResourceNotFoundException", "no such runtime")
            record["status"] = "UPDATING"
            record["agentRuntimeVersion"] = str(int(record["agentRuntimeVersion"]) + 1)
            record["_request"] = rec.json
            self._polls[record["agentRuntimeId"]] = 0
            return _json(202, self._summary(record))
        if match and rec.method == "GET":
            rec.operation = "GetAgentRuntime"
            record = self.runtimes.get(unquote(match[1]))
            if record is None:
                return _error_rest(404, "ResourceNotFoundException", "no such runtime")
            rid = record["agentRuntimeId"]
            self._polls[rid] = self._polls.get(rid, 0) + 1
            if record["status"] in ("CREATING", "UPDATING") and (
                self._polls[rid] >= self.polls_until_ready
            ):
                if self.fail_with:
                    record["status"] = record["status"].replace("ING", "E_FAILED")
                    record["failureReason"] = self.fail_with
                else:
                    record["status"] = "READY"
            out = {k: v for k, v in record.items() if k != "_request"}
            return _json(200, out)
        return _error_rest(404, "ResourceNotFoundException", f"no route {rec.method} {path}")

    def _summary(self, record: dict[str, Any]) -> dict[str, Any]:
        return {
            "agentRuntimeArn": record["agentRuntimeArn"],
            "agentRuntimeId": record["agentRuntimeId"],
            "agentRuntimeVersion": record["agentRuntimeVersion"],
            "createdAt": _now(),
            "status": record["status"],
        }

    def _s3(self, rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        parts = urlparse(rec.path).path.lstrip("/").split("/", 1)
        if rec.method == "PUT" and len(parts) == 2:
            rec.operation = "PutObject"
            self.objects[(parts[0], unquote(parts[1]))] = rec.body
            return 200, {"ETag": '"abc"', "x-amz-version-id": "v0001"}, b""
        return 400, {}, b"<Error><Code>InvalidRequest</Code></Error>"

    def _sagemaker(self, rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        target = rec.headers.get("x-amz-target", "")
        rec.operation = target.split(".", 1)[-1]
        body = rec.json or {}
        if rec.operation == "ListJobs":
            summaries = [
                {
                    k: job[k]
                    for k in (
                        "JobArn",
                        "JobName",
                        "JobCategory",
                        "JobStatus",
                        "CreationTime",
                        "LastModifiedTime",
                    )
                }
                | {"JobSecondaryStatus": job["SecondaryStatus"]}
                for (category, _), job in self.jobs.items()
                if category == body.get("JobCategory")
                and body.get("StatusEquals") in (None, job["JobStatus"])
            ]
            return _json(200, {"JobSummaries": summaries}, amz=True)
        if rec.operation == "DescribeJob":
            key = (body.get("JobCategory"), body.get("JobName"))
            job = self.jobs.get(key)
            if job is None:
                return _error_json("ResourceNotFound", "job not found")
            self._advance(key, job)
            return _json(200, job, amz=True)
        if rec.operation == "CreateJob":
            return self._create_job(body)
        if rec.operation == "DescribeHubContent":
            name = body["HubContentName"]
            hub = f"arn:aws:sagemaker:{self.region}:aws:hub-content/SageMakerPublicHub"
            arn = f"{hub}/Model/{name}/1.0.0"
            return _json(
                200,
                {
                    "HubContentName": name,
                    "HubContentArn": arn,
                    "HubContentVersion": "1.0.0",
                    "HubContentType": "Model",
                    "DocumentSchemaVersion": "2.0.0",
                    "HubName": "SageMakerPublicHub",
                    "HubArn": f"arn:aws:sagemaker:{self.region}:aws:hub/SageMakerPublicHub",
                    "HubContentDocument": "{}",
                    "HubContentStatus": "Available",
                    "CreationTime": 1_780_000_000,
                },
                amz=True,
            )
        return _error_json("ValidationException", f"unsupported operation {rec.operation}")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json(status: int, data: Any, amz: bool = False) -> tuple[int, dict[str, str], bytes]:
    ctype = "application/x-amz-json-1.1" if amz else "application/json"
    return status, {"Content-Type": ctype}, json.dumps(data).encode()


def _error_rest(status: int, code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": "application/json", "x-amzn-ErrorType": code}
    return status, headers, json.dumps({"message": message}).encode()


def _error_json(code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": "application/x-amz-json-1.1"}
    return 400, headers, json.dumps({"__type": code, "message": message}).encode()


_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/[^/]+/([^/]+)/aws4_request")


class _Handler(BaseHTTPRequestHandler):
    owner: FakeAws
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self) -> None:
        body = self._read_body()
        scope = _SCOPE.search(self.headers.get("Authorization", ""))
        rec = Recorded(
            service=scope[1] if scope else "unknown",
            operation="?",
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        with self.owner._lock:
            status, headers, payload = self.owner.handle(rec)
            self.owner.requests.append(rec)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-amzn-RequestId", "req-1")
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        """Serve a GET."""
        self._serve()

    def do_PUT(self) -> None:
        """Serve a PUT."""
        self._serve()

    def do_POST(self) -> None:
        """Serve a POST."""
        self._serve()
