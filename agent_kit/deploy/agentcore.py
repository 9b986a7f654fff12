"""Deploy a packaged entrypoint to AgentCore Runtime with boto3 (tooling half).

Plan before apply: :func:`plan_deploy` lists every request :func:`deploy` would send, as
:class:`Call` records (service, operation, parameters), and sends nothing. :func:`deploy` then:

1. finds a runtime of the same name (``bedrock-agentcore-control`` ListAgentRuntimes);
2. if one exists, refuses to update it while an MTRL job that uses it is running
   (``sagemaker`` ListJobs + DescribeJob of categories AgentRFT and AgentRFTEvaluation;
   redeploying kills in-flight rollouts) unless ``force``;
3. uploads the zip (``s3`` PutObject to ``s3://BUCKET/NAME/deployment.zip``) or takes the
   container image URI as given (agent_kit does not build or push images);
4. CreateAgentRuntime, or UpdateAgentRuntime for an existing runtime;
5. polls GetAgentRuntime until READY (or a *_FAILED status, or the deadline).

AWS clients come from an injectable factory, so tests point them at a loopback fake.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from agent_kit.deploy.package import PackageResult
from agent_kit.deploy.preflight import RUNTIME_NAME_PATTERN
from agent_kit.deploy.s3names import check_bucket_name
from agent_kit.errors import DeployError, UsageError

__all__ = [
    "MANAGED_POLICY",
    "RUNNING_JOB_STATUSES",
    "Call",
    "ClientFactory",
    "DeployResult",
    "DeploySpec",
    "boto3_clients",
    "deploy",
    "find_runtime",
    "iam_policies",
    "jobs_using_runtime",
    "plan_deploy",
    "runtime_request",
    "wait_ready",
]

ClientFactory = Callable[[str], Any]
#: The managed policy the agent's execution role needs to call the Job Runtime API.
MANAGED_POLICY: Final = "AmazonSageMakerJobRuntimeAccess"
#: Job statuses during which the job still invokes the runtime.
RUNNING_JOB_STATUSES: Final = ("InProgress", "Stopping")
_JOB_CATEGORIES: Final = ("AgentRFT", "AgentRFTEvaluation")
_ROLE_ARN: Final = r"arn:aws[a-z\-]*:iam::\d{12}:role/"


@dataclass(frozen=True)
class Call:
    """One AWS request: service (boto3 client name), operation (API name) and parameters."""

    service: str
    operation: str
    params: dict[str, Any]
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (bytes bodies are shown as their size)."""
        params = {
            k: (f"<{len(v)} bytes>" if isinstance(v, (bytes, bytearray)) else v)
            for k, v in self.params.items()
        }
        out: dict[str, Any] = {"service": self.service, "operation": self.operation}
        out["params"] = params
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class DeploySpec:
    """What to deploy: runtime name, role, region, artifact location and runtime settings."""

    name: str
    role_arn: str
    region: str
    target: Literal["zip", "container"] = "zip"
    s3_bucket: str | None = None
    image_uri: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    description: str | None = None
    force: bool = False

    def validate(self) -> None:
        """Raise :class:`UsageError` for a bad name, role, missing bucket/image or env."""
        import re

        if not RUNTIME_NAME_PATTERN.match(self.name):
            raise UsageError(
                f"invalid runtime name {self.name!r}: use [a-zA-Z][a-zA-Z0-9_]{{0,47}} (no hyphens)"
            )
        if not re.match(_ROLE_ARN, self.role_arn):
            raise UsageError(f"--role-arn {self.role_arn!r} is not an IAM role ARN")
        if self.target == "zip" and not self.s3_bucket:
            raise UsageError("--s3-bucket is required for --target zip (the code is uploaded)")
        if self.s3_bucket:
            check_bucket_name("--s3-bucket", self.s3_bucket)
        if self.target == "container" and not self.image_uri:
            raise UsageError(
                "--image-uri is required for --target container: build the generated Dockerfile "
                "for linux/arm64 and push it to ECR first (agent_kit does not build images)"
            )
        if len(self.env) > 50:
            raise UsageError("AgentCore allows at most 50 environment variables")

    @property
    def s3_key(self) -> str:
        """Object key of the uploaded zip (the toolkit's layout: NAME/deployment.zip)."""
        return f"{self.name}/deployment.zip"


@dataclass(frozen=True)
class DeployResult:
    """The deployed runtime: ARN, id, version, final status and whether it was created."""

    arn: str
    runtime_id: str
    version: str
    status: str
    created: bool
    calls: tuple[Call, ...]


def boto3_clients(region: str) -> ClientFactory:
    """A client factory over one boto3 session (endpoints from ``AWS_ENDPOINT_URL_*``)."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(region_name=region)
    config = Config(retries={"mode": "standard", "max_attempts": 3}, user_agent_extra="agent-kit")
    cache: dict[str, Any] = {}

    def factory(service: str) -> Any:
        if service not in cache:
            cache[service] = session.client(service, region_name=region, config=config)
        return cache[service]

    return factory


def _aws_call(client: Any, operation: str, params: dict[str, Any]) -> dict[str, Any]:
    """Call a boto3 operation by API name; turn AWS errors into :class:`DeployError`."""
    from botocore.exceptions import BotoCoreError, ClientError

    method = getattr(client, _snake(operation))
    try:
        result: dict[str, Any] = method(**params)
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise DeployError(
            f"{operation} failed: {err.get('Code', 'Error')}: {err.get('Message', exc)}"
        ) from None
    except BotoCoreError as exc:
        raise DeployError(f"{operation} failed: {exc}") from None
    return result


def _snake(name: str) -> str:
    import re

    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def runtime_request(
    spec: DeploySpec, entrypoint: str, s3_version: str | None = None
) -> dict[str, Any]:
    """The CreateAgentRuntime body minus ``agentRuntimeName`` (shared with UpdateAgentRuntime)."""
    if spec.target == "zip":
        s3: dict[str, Any] = {"bucket": spec.s3_bucket, "prefix": spec.s3_key}
        if s3_version:
            s3["versionId"] = s3_version
        artifact: dict[str, Any] = {
            "codeConfiguration": {
                "code": {"s3": s3},
                "runtime": "PYTHON_3_11",
                "entryPoint": [entrypoint],
            }
        }
    else:
        artifact = {"containerConfiguration": {"containerUri": spec.image_uri}}
    body: dict[str, Any] = {
        "agentRuntimeArtifact": artifact,
        "roleArn": spec.role_arn,
        "networkConfiguration": {"networkMode": "PUBLIC"},
        "protocolConfiguration": {"serverProtocol": "HTTP"},
    }
    if spec.env:
        body["environmentVariables"] = dict(spec.env)
    if spec.description:
        body["description"] = spec.description
    return body


def _entry_name(pkg: PackageResult | None) -> str:
    return pkg.entrypoint.name if pkg is not None else "agent.py"


def plan_deploy(spec: DeploySpec, pkg: PackageResult | None) -> list[Call]:
    """Every request :func:`deploy` may send, in order; nothing is sent."""
    spec.validate()
    calls = [Call("bedrock-agentcore-control", "ListAgentRuntimes", {}, "find a runtime by name")]
    if not spec.force:
        for category in _JOB_CATEGORIES:
            for status in RUNNING_JOB_STATUSES:
                calls.append(
                    Call(
                        "sagemaker",
                        "ListJobs",
                        {"JobCategory": category, "StatusEquals": status},
                        "only if the runtime exists; then DescribeJob per job",
                    )
                )
    if spec.target == "zip":
        size = pkg.zip_bytes if pkg is not None else 0
        calls.append(
            Call(
                "s3",
                "PutObject",
                {"Bucket": spec.s3_bucket, "Key": spec.s3_key, "Body": f"<{size} bytes>"},
            )
        )
    body = runtime_request(spec, _entry_name(pkg))
    calls.append(
        Call(
            "bedrock-agentcore-control",
            "CreateAgentRuntime",
            {"agentRuntimeName": spec.name, **body},
            "or UpdateAgentRuntime(agentRuntimeId=…, same body) if the runtime exists",
        )
    )
    calls.append(
        Call("bedrock-agentcore-control", "GetAgentRuntime", {"agentRuntimeId": "<id>"}, "polled")
    )
    return calls


def _paginate(client: Any, operation: str, key: str, params: dict[str, Any]) -> Iterator[Any]:
    token_in = "nextToken" if operation == "ListAgentRuntimes" else "NextToken"
    token: str | None = None
    for _ in range(1000):
        page = _aws_call(client, operation, {**params, **({token_in: token} if token else {})})
        yield from page.get(key, [])
        token = page.get(token_in)
        if not token:
            return


def find_runtime(ctrl: Any, name: str) -> dict[str, Any] | None:
    """The ListAgentRuntimes entry named ``name``, or None."""
    for entry in _paginate(ctrl, "ListAgentRuntimes", "agentRuntimes", {}):
        if entry.get("agentRuntimeName") == name:
            found: dict[str, Any] = entry
            return found
    return None


def _runtime_of(document: str | None) -> str | None:
    try:
        config = json.loads(document or "{}")
    except ValueError:
        return None
    agent = config.get("AgentConfig", {}) if isinstance(config, dict) else {}
    bedrock = agent.get("BedrockAgentCoreConfig", {}) if isinstance(agent, dict) else {}
    arn = bedrock.get("AgentRuntimeArn") if isinstance(bedrock, dict) else None
    return arn if isinstance(arn, str) else None


def jobs_using_runtime(sagemaker: Any, runtime_arn: str) -> list[str]:
    """Names of running AgentRFT / AgentRFTEvaluation jobs whose AgentConfig names the runtime."""
    busy = []
    for category in _JOB_CATEGORIES:
        for status in RUNNING_JOB_STATUSES:
            params = {"JobCategory": category, "StatusEquals": status}
            for summary in _paginate(sagemaker, "ListJobs", "JobSummaries", params):
                job = _aws_call(
                    sagemaker,
                    "DescribeJob",
                    {"JobName": summary["JobName"], "JobCategory": category},
                )
                if _runtime_of(job.get("JobConfigDocument")) == runtime_arn:
                    busy.append(f"{summary['JobName']} ({category}, {job.get('JobStatus')})")
    return busy


def wait_ready(
    ctrl: Any,
    runtime_id: str,
    *,
    timeout: float = 1800.0,
    poll_interval: float = 5.0,
    log: Callable[[str], None] = lambda _m: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll GetAgentRuntime until READY; :class:`DeployError` on *_FAILED or the deadline."""
    deadline = clock() + timeout
    last = ""
    while True:
        info = _aws_call(ctrl, "GetAgentRuntime", {"agentRuntimeId": runtime_id})
        status = str(info.get("status", ""))
        if status != last:
            log(f"runtime {runtime_id}: {status}")
            last = status
        if status == "READY":
            return info
        if status.endswith("FAILED") or status == "DELETING":
            reason = info.get("failureReason") or "no reason given"
            raise DeployError(f"runtime {runtime_id} is {status}: {reason}")
        if clock() >= deadline:
            raise DeployError(
                f"runtime {runtime_id} is still {status} after {timeout:.0f} s; "
                "check it with GetAgentRuntime or the console"
            )
        sleep(poll_interval)


def deploy(
    spec: DeploySpec,
    pkg: PackageResult | None,
    clients: ClientFactory,
    *,
    timeout: float = 1800.0,
    poll_interval: float = 5.0,
    log: Callable[[str], None] = lambda _m: None,
) -> DeployResult:
    """Upload, create or update the runtime and wait for READY (see the module docstring)."""
    spec.validate()
    sent: list[Call] = []

    def call(service: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        sent.append(Call(service, operation, params))
        return _aws_call(clients(service), operation, params)

    ctrl = clients("bedrock-agentcore-control")
    existing = find_runtime(ctrl, spec.name)
    sent.append(Call("bedrock-agentcore-control", "ListAgentRuntimes", {}))
    if existing is not None and not spec.force:
        busy = jobs_using_runtime(clients("sagemaker"), existing["agentRuntimeArn"])
        if busy:
            raise DeployError(
                f"refusing to update runtime {spec.name}: MTRL job(s) using it are running: "
                + ", ".join(busy)
                + ". Redeploying kills their in-flight rollouts; wait for them, stop them, "
                "or pass --force"
            )
    version: str | None = None
    if spec.target == "zip":
        if pkg is None or pkg.artifact is None or pkg.artifact.suffix != ".zip":
            raise DeployError("no deployment.zip to upload; package with --target zip first")
        log(f"uploading {pkg.artifact} to s3://{spec.s3_bucket}/{spec.s3_key}")
        put = call(
            "s3",
            "PutObject",
            {"Bucket": spec.s3_bucket, "Key": spec.s3_key, "Body": Path(pkg.artifact).read_bytes()},
        )
        version = put.get("VersionId")
    body = runtime_request(spec, _entry_name(pkg), version)
    if existing is None:
        log(f"creating runtime {spec.name}")
        out = call(
            "bedrock-agentcore-control",
            "CreateAgentRuntime",
            {"agentRuntimeName": spec.name, **body},
        )
    else:
        log(f"updating runtime {spec.name} ({existing['agentRuntimeId']})")
        out = call(
            "bedrock-agentcore-control",
            "UpdateAgentRuntime",
            {"agentRuntimeId": existing["agentRuntimeId"], **body},
        )
    runtime_id = out["agentRuntimeId"]
    info = wait_ready(ctrl, runtime_id, timeout=timeout, poll_interval=poll_interval, log=log)
    return DeployResult(
        arn=str(out.get("agentRuntimeArn") or info.get("agentRuntimeArn")),
        runtime_id=runtime_id,
        version=str(info.get("agentRuntimeVersion") or out.get("agentRuntimeVersion") or ""),
        status=str(info.get("status")),
        created=existing is None,
        calls=tuple(sent),
    )


def iam_policies(region: str, s3_bucket: str | None = None) -> dict[str, Any]:
    """The execution role the runtime needs: trust policy, managed policy, inline permissions."""
    statements: list[dict[str, Any]] = [
        {
            "Sid": "Logs",
            "Effect": "Allow",
            "Action": [
                "logs:CreateLogGroup",
                "logs:CreateLogStream",
                "logs:PutLogEvents",
                "logs:DescribeLogGroups",
                "logs:DescribeLogStreams",
            ],
            "Resource": f"arn:aws:logs:{region}:*:log-group:/aws/bedrock-agentcore/runtimes/*",
        },
        {
            "Sid": "EcrPull",
            "Effect": "Allow",
            "Action": [
                "ecr:BatchGetImage",
                "ecr:GetDownloadUrlForLayer",
                "ecr:GetAuthorizationToken",
            ],
            "Resource": "*",
        },
        {
            "Sid": "Metrics",
            "Effect": "Allow",
            "Action": ["cloudwatch:PutMetricData", "xray:PutTraceSegments"],
            "Resource": "*",
        },
    ]
    if s3_bucket:
        statements.append(
            {
                "Sid": "CodeZip",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:GetObjectVersion"],
                "Resource": f"arn:aws:s3:::{s3_bucket}/*",
            }
        )
    return {
        "managed_policies": [f"arn:aws:iam::aws:policy/{MANAGED_POLICY}"],
        "trust_policy": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "bedrock-agentcore.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        },
        "inline_policy": {"Version": "2012-10-17", "Statement": statements},
    }
