"""``agent-kit deploy`` against a loopback fake of bedrock-agentcore-control, s3 and sagemaker.

Real boto3 clients (dummy credentials) talk HTTP to ``tests/fakes/aws_control.FakeAws`` through
``AWS_ENDPOINT_URL_*``; the tests assert the exact requests that arrived.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.aws_control import FakeAws
from helpers import MINIMAL_AGENT as AGENT

from agent_kit.cli import main
from agent_kit.deploy.agentcore import DeploySpec, iam_policies, plan_deploy
from agent_kit.deploy.s3names import bucket_name_problem

ROLE = "arn:aws:iam::123456789012:role/AgentRole"
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-agent:1"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAws]:
    """A started fake with the process environment pointing boto3 at it."""
    aws = FakeAws().start()
    for key, value in aws.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield aws
    aws.stop()


@pytest.fixture
def entry(tmp_path: Path) -> Path:
    """A minimal valid entrypoint in its own directory."""
    project = tmp_path / "proj"
    project.mkdir()
    path = project / "agent.py"
    path.write_text(AGENT)
    return path


def deploy_args(entry: Path, tmp_path: Path, *extra: str) -> list[str]:
    """Common ``deploy`` arguments for the container target (no uv needed)."""
    return [
        "deploy",
        str(entry),
        "--name",
        "my_agent",
        "--role-arn",
        ROLE,
        "--region",
        "us-west-2",
        "--target",
        "container",
        "--image-uri",
        IMAGE,
        "--out",
        str(tmp_path / "out"),
        "--poll-interval",
        "0",
        *extra,
    ]


def test_deploy_zip_creates_runtime_with_exact_requests(
    fake: FakeAws,
    entry: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A new zip deploy lists, uploads, creates with the exact body, polls to READY."""
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    reqs = tmp_path / "reqs.txt"
    reqs.write_text(f"pydantic=={importlib.metadata.version('pydantic')}\n")
    code = main(
        [
            "deploy",
            str(entry),
            "--name",
            "my_agent",
            "--role-arn",
            ROLE,
            "--s3-bucket",
            "code-bucket",
            "--region",
            "us-west-2",
            "--env",
            "POLICY_TRANSPORT=openai",
            "--env",
            "LOG_LEVEL=debug",
            "--requirements",
            str(reqs),
            "--out",
            str(tmp_path / "out"),
            "--poll-interval",
            "0",
        ]
    )
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, captured.err
    assert fake.operations() == [
        "ListAgentRuntimes",
        "PutObject",
        "CreateAgentRuntime",
        "GetAgentRuntime",
        "GetAgentRuntime",
    ]
    uploaded = fake.objects[("code-bucket", "my_agent/deployment.zip")]
    assert uploaded == (tmp_path / "out" / "dist" / "deployment.zip").read_bytes()
    create = fake.find("CreateAgentRuntime")[0]
    assert create.method == "PUT"
    assert create.path == "/runtimes/"
    body = create.json
    assert body.pop("clientToken")
    assert body == {
        "agentRuntimeName": "my_agent",
        "agentRuntimeArtifact": {
            "codeConfiguration": {
                "code": {
                    "s3": {
                        "bucket": "code-bucket",
                        "prefix": "my_agent/deployment.zip",
                        "versionId": "v0001",
                    }
                },
                "runtime": "PYTHON_3_11",
                "entryPoint": ["agent.py"],
            }
        },
        "roleArn": ROLE,
        "networkConfiguration": {"networkMode": "PUBLIC"},
        "protocolConfiguration": {"serverProtocol": "HTTP"},
        "environmentVariables": {"POLICY_TRANSPORT": "openai", "LOG_LEVEL": "debug"},
    }
    arn = fake.runtime_arn("my_agent-aaaaaaaaaa")
    assert arn in out
    assert "AmazonSageMakerJobRuntimeAccess" in out
    assert "bedrock-agentcore.amazonaws.com" in out


def test_deploy_updates_existing_runtime_when_no_job_runs(
    fake: FakeAws, entry: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An existing runtime is updated in place after the running-job check finds nothing."""
    existing = fake.add_runtime("my_agent")
    fake.add_job("old-job", existing["agentRuntimeArn"], status="Completed")
    fake.add_job("other-job", fake.runtime_arn("someone_else-bbbbbbbbbb"))
    code = main(deploy_args(entry, tmp_path))
    assert code == 0, capsys.readouterr().err
    ops = fake.operations()
    assert ops[0] == "ListAgentRuntimes"
    assert ops.count("ListJobs") == 4  # AgentRFT + AgentRFTEvaluation × InProgress + Stopping
    assert fake.find("DescribeJob")[0].json == {"JobName": "other-job", "JobCategory": "AgentRFT"}
    assert "CreateAgentRuntime" not in ops
    update = fake.find("UpdateAgentRuntime")[0]
    assert update.path == f"/runtimes/{existing['agentRuntimeId']}/"
    body = update.json
    assert body["agentRuntimeArtifact"] == {"containerConfiguration": {"containerUri": IMAGE}}
    assert body["roleArn"] == ROLE
    assert "agentRuntimeName" not in body
    assert ops[-1] == "GetAgentRuntime"
    assert "updated runtime my_agent (version 2): READY" in capsys.readouterr().out


def test_deploy_refuses_update_while_job_runs(
    fake: FakeAws, entry: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A running MTRL job on the runtime blocks the update: exit 11, nothing changed."""
    existing = fake.add_runtime("my_agent")
    fake.add_job("live-job", existing["agentRuntimeArn"])
    code = main(deploy_args(entry, tmp_path))
    err = capsys.readouterr().err
    assert code == 11
    assert "live-job" in err
    assert "--force" in err
    assert not {"UpdateAgentRuntime", "PutObject", "CreateAgentRuntime"} & set(fake.operations())


def test_deploy_force_updates_despite_running_job(
    fake: FakeAws, entry: Path, tmp_path: Path
) -> None:
    """``--force`` skips the job check and updates."""
    existing = fake.add_runtime("my_agent")
    fake.add_job("live-job", existing["agentRuntimeArn"])
    assert main(deploy_args(entry, tmp_path, "--force")) == 0
    ops = fake.operations()
    assert "ListJobs" not in ops
    assert "UpdateAgentRuntime" in ops


def test_deploy_plan_sends_nothing(
    fake: FakeAws, entry: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--plan`` prints the requests and the IAM policy, and sends no request at all."""
    code = main([*deploy_args(entry, tmp_path, "--plan", "--json")])
    out = capsys.readouterr().out
    assert code == 0
    assert fake.requests == []
    plan = json.loads(out)
    ops = [c["operation"] for c in plan["plan"]]
    assert ops == ["ListAgentRuntimes", *["ListJobs"] * 4, "CreateAgentRuntime", "GetAgentRuntime"]
    create = plan["plan"][5]["params"]
    assert create["agentRuntimeName"] == "my_agent"
    assert create["agentRuntimeArtifact"] == {"containerConfiguration": {"containerUri": IMAGE}}
    assert plan["iam"]["managed_policies"] == [
        "arn:aws:iam::aws:policy/AmazonSageMakerJobRuntimeAccess"
    ]


def test_deploy_failed_runtime_reports_reason(
    fake: FakeAws, entry: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A runtime that ends CREATE_FAILED exits 11 with the service's failure reason."""
    fake.fail_with = "image manifest is not linux/arm64"
    code = main(deploy_args(entry, tmp_path))
    err = capsys.readouterr().err
    assert code == 11
    assert "CREATE_FAILED" in err
    assert "not linux/arm64" in err


def test_deploy_wait_has_a_deadline(
    fake: FakeAws, entry: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A runtime that never becomes READY fails at the deadline with a clear message."""
    fake.polls_until_ready = 10**9
    code = main(deploy_args(entry, tmp_path, "--timeout", "0"))
    assert code == 11
    assert "still CREATING" in capsys.readouterr().err
    assert fake.operations().count("GetAgentRuntime") == 1


def test_deploy_container_without_image_is_usage_error(
    fake: FakeAws, entry: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The container target needs --image-uri (agent_kit builds no images): exit 2, no request."""
    args = deploy_args(entry, tmp_path)
    i = args.index("--image-uri")
    del args[i : i + 2]
    assert main(args) == 2
    assert "--image-uri is required" in capsys.readouterr().err
    assert fake.requests == []


def test_deploy_zip_without_bucket_is_usage_error(entry: Path, tmp_path: Path) -> None:
    """The zip target needs --s3-bucket; the error comes before packaging."""
    code = main(["deploy", str(entry), "--name", "a", "--role-arn", ROLE, "--region", "us-west-2"])
    assert code == 2


@pytest.mark.parametrize(
    ("bucket", "expected"),
    [
        ("b", "3 to 63 characters (1 given)"),
        ("s3://code-bucket", "takes a bucket name, not a URI: 'code-bucket'"),
        ("Code_Bucket", "only lowercase letters"),
        ("-code", "begins and ends with a letter or a digit"),
        ("xn--code", "reserved"),
    ],
)
def test_deploy_bad_bucket_name_says_what_is_wrong(
    entry: Path, capsys: pytest.CaptureFixture[str], bucket: str, expected: str
) -> None:
    """--s3-bucket is checked against S3's naming rules before packaging: exit 2, the rule."""
    code = main(
        [
            *("deploy", str(entry), "--name", "a", "--role-arn", ROLE, "--region", "us-west-2"),
            *("--s3-bucket", bucket, "--plan"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--s3-bucket" in err
    assert expected in err


def test_valid_bucket_names_pass() -> None:
    """Names S3 accepts pass the check (dots, hyphens, digits, 3 and 63 characters)."""
    for name in ("abc", "my.code-bucket.2026", "a" * 63, "1bucket1"):
        assert bucket_name_problem(name) is None, name


def test_plan_lists_upload_for_zip_target() -> None:
    """The plan of a zip deploy includes the S3 upload; with force, no job check."""
    spec = DeploySpec(name="a", role_arn=ROLE, region="us-east-1", s3_bucket="bkt", force=True)
    calls = plan_deploy(spec, None)
    assert "ListJobs" not in [c.operation for c in calls]
    put = next(c for c in calls if c.operation == "PutObject")
    assert put.params["Bucket"] == "bkt"
    assert put.params["Key"] == "a/deployment.zip"


def test_iam_policies_scope_code_bucket_and_trust_agentcore() -> None:
    """The policy trusts bedrock-agentcore and grants read on the code bucket only."""
    policies = iam_policies("eu-central-1", "b")
    principal = policies["trust_policy"]["Statement"][0]["Principal"]["Service"]
    assert principal == "bedrock-agentcore.amazonaws.com"
    s3 = [s for s in policies["inline_policy"]["Statement"] if s["Sid"] == "CodeZip"]
    assert s3[0]["Resource"] == "arn:aws:s3:::b/*"
    logs = next(s for s in policies["inline_policy"]["Statement"] if s["Sid"] == "Logs")
    assert "eu-central-1" in logs["Resource"]
