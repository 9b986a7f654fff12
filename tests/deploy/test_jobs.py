"""``agent-kit job submit|eval|status`` and the CreateJob document builder.

CLI tests use real boto3 clients against the loopback fake ``tests/fakes/aws_control.FakeAws``
(sagemaker JSON protocol) and assert the exact CreateJob request that arrived.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import botocore.session
import pytest
from fakes.aws_control import FakeAws
from hypothesis import given
from hypothesis import strategies as st

from agent_kit.cli import main
from agent_kit.deploy.jobs import (
    JOB_SCHEMA_VERSION,
    TRAINING_HYPERPARAMETERS,
    JobSpec,
    build_create_job,
    parse_hyperparameters,
    runtime_region,
    validate_hyperparameters,
)
from agent_kit.errors import DeployError, UsageError

RUNTIME = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/wordle-abcdefghij"
ROLE = "arn:aws:iam::123456789012:role/JobRole"
MODEL = "arn:aws:sagemaker:us-west-2:aws:hub-content/SageMakerPublicHub/Model/gpt-oss-20b/1.0.0"
MLFLOW = "arn:aws:sagemaker:us-west-2:123456789012:mlflow-app/app-1"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAws]:
    """A started fake with the process environment pointing boto3 at it."""
    aws = FakeAws().start()
    for key, value in aws.env().items():
        monkeypatch.setenv(key, value)
    yield aws
    aws.stop()


def submit_args(*extra: str, runtime: str = RUNTIME, model: str = MODEL) -> list[str]:
    """``job submit`` arguments for a Wordle-like training job."""
    return [
        "job",
        "submit",
        "--runtime-arn",
        runtime,
        "--train",
        "s3://data-bucket/wordle/train.jsonl",
        "--validation",
        "s3://data-bucket/wordle/holdout.jsonl",
        "--model",
        model,
        "--role-arn",
        ROLE,
        "--output",
        "s3://out-bucket/runs/",
        "--mlflow-arn",
        MLFLOW,
        "--name",
        "wordle-run-1",
        "--region",
        "us-west-2",
        *extra,
    ]


def test_submit_sends_exact_create_job(fake: FakeAws, capsys: pytest.CaptureFixture[str]) -> None:
    """The CreateJob request carries the category, schema version and the full document."""
    code = main(
        submit_args(
            "-H",
            "group_size=8",
            "-H",
            "global_batch_size=64",
            "-H",
            "rollout_timeout=900",
            "-H",
            "advantage_method=rloo",
            "-H",
            "temperature=0.7",
        )
    )
    assert code == 0, capsys.readouterr().err
    assert fake.operations() == ["CreateJob"]
    request = fake.find("CreateJob")[0]
    assert request.headers["x-amz-target"] == "SageMaker.CreateJob"
    body = request.json
    document = json.loads(body.pop("JobConfigDocument"))
    assert body == {
        "JobName": "wordle-run-1",
        "RoleArn": ROLE,
        "JobCategory": "AgentRFT",
        "JobConfigSchemaVersion": "1.0.0",
    }
    assert document == {
        "AgentConfig": {
            "BedrockAgentCoreConfig": {"AgentRuntimeArn": RUNTIME, "Qualifier": "DEFAULT"}
        },
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": "s3://data-bucket/wordle/train.jsonl",
                    }
                },
            },
            {
                "ChannelName": "validation",
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": "s3://data-bucket/wordle/holdout.jsonl",
                    }
                },
            },
        ],
        "OutputDataConfig": {"S3OutputPath": "s3://out-bucket/runs/"},
        "TrainingConfig": {
            "BaseModelArn": MODEL,
            "AcceptEula": True,
            "MlflowConfig": {"MlflowResourceArn": MLFLOW},
            "HyperParameters": {
                "group_size": 8,
                "global_batch_size": 64,
                "rollout_timeout": 900,
                "advantage_method": "rloo",
                "temperature": 0.7,
            },
        },
    }
    assert "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/wordle-run-1" in (
        capsys.readouterr().out
    )


def test_submit_resolves_model_id_through_hub(
    fake: FakeAws, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model id is resolved with DescribeHubContent before CreateJob uses its ARN."""
    assert main(submit_args(model="gpt-oss-20b")) == 0, capsys.readouterr().err
    assert fake.operations() == ["DescribeHubContent", "CreateJob"]
    assert fake.find("DescribeHubContent")[0].json == {
        "HubName": "SageMakerPublicHub",
        "HubContentType": "Model",
        "HubContentName": "gpt-oss-20b",
    }
    document = json.loads(fake.find("CreateJob")[0].json["JobConfigDocument"])
    assert document["TrainingConfig"]["BaseModelArn"].endswith("/Model/gpt-oss-20b/1.0.0")


def test_submit_region_mismatch_is_refused(
    fake: FakeAws, capsys: pytest.CaptureFixture[str]
) -> None:
    """A runtime in another region than the job: exit 11, both regions named, nothing sent."""
    other = RUNTIME.replace("us-west-2", "us-east-1")
    code = main(submit_args(runtime=other))
    err = capsys.readouterr().err
    assert code == 11
    assert "us-east-1" in err
    assert "us-west-2" in err
    assert "same region" in err
    assert fake.requests == []


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("group_size=64", "out of range [2, 32]"),
        ("global_batch_size=100", "choose one of 32, 64, 128"),
        ("rollout_timeout=120", "out of range [300, 86400]"),
        ("rollout_max_concurrency=200", "out of range [32, 96]"),
        ("rollout_max_retries=0", "out of range [1, 10]"),
        ("group_size=eight", "expected int"),
        ("advantage_method=ppo2", "choose one of"),
        ("temperature=nan", "finite"),
        ("loss_fn=ppo;rm -rf", "characters the service rejects"),
        ("novalue", "key=value"),
    ],
)
def test_submit_bad_hyperparameters_exit_2(
    fake: FakeAws, capsys: pytest.CaptureFixture[str], item: str, expected: str
) -> None:
    """Out-of-range or malformed hyperparameters are usage errors citing the documented range."""
    assert main(submit_args("-H", item)) == 2
    assert expected in capsys.readouterr().err
    assert fake.requests == []


def test_unknown_hyperparameter_passes_with_warning(
    fake: FakeAws, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name outside the documented table is sent as given, with a warning."""
    assert main(submit_args("-H", "learning_rate=1e-5")) == 0
    assert "learning_rate is not validated locally" in capsys.readouterr().err
    document = json.loads(fake.find("CreateJob")[0].json["JobConfigDocument"])
    assert document["TrainingConfig"]["HyperParameters"] == {"learning_rate": "1e-5"}


def test_submit_plan_sends_nothing(fake: FakeAws, capsys: pytest.CaptureFixture[str]) -> None:
    """``--plan`` prints the DescribeHubContent + CreateJob requests and sends none."""
    assert main([*submit_args(model="gpt-oss-20b"), "--plan", "--json"]) == 0
    assert fake.requests == []
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert [c["operation"] for c in plan] == ["DescribeHubContent", "CreateJob"]
    assert plan[1]["params"]["JobCategory"] == "AgentRFT"


def test_eval_job_uses_flat_string_hyperparameters(
    fake: FakeAws, capsys: pytest.CaptureFixture[str]
) -> None:
    """``job eval`` sends AgentRFTEvaluation, string hyperparameters and a stopping condition."""
    code = main(
        [
            "job",
            "eval",
            "--runtime-arn",
            RUNTIME,
            "--dataset",
            "s3://data-bucket/wordle/holdout.jsonl",
            "--model",
            MODEL,
            "--role-arn",
            ROLE,
            "--output",
            "s3://out-bucket/eval/",
            "--mlflow-arn",
            MLFLOW,
            "-H",
            "eval_group_size=4",
            "-H",
            "pass_k_values=[1, 2, 4]",
            "--max-runtime",
            "7200",
            "--name",
            "wordle-eval",
            "--region",
            "us-west-2",
        ]
    )
    assert code == 0, capsys.readouterr().err
    body = fake.find("CreateJob")[0].json
    assert body["JobCategory"] == "AgentRFTEvaluation"
    document = json.loads(body["JobConfigDocument"])
    assert document["InputDataConfig"][0]["ChannelName"] == "evaluation"
    assert document["OutputDataConfig"] == {
        "S3OutputPath": "s3://out-bucket/eval/",
        "MlflowConfig": {"MlflowResourceArn": MLFLOW},
    }
    assert document["EvaluationConfig"] == {
        "BaseModelArn": MODEL,
        "AcceptEula": True,
        "HyperParameters": {"eval_group_size": "4", "pass_k_values": "[1, 2, 4]"},
    }
    assert document["StoppingCondition"] == {"MaxRuntimeInSeconds": 7200}


def test_status_shows_progress_tokens_and_cost(
    fake: FakeAws, capsys: pytest.CaptureFixture[str]
) -> None:
    """DescribeJob's progress and BillableTokenUsage are shown with a labelled cost estimate."""
    fake.add_job("wordle-run-1", RUNTIME)
    assert main(["job", "status", "wordle-run-1", "--region", "us-west-2", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert fake.find("DescribeJob")[0].json == {
        "JobName": "wordle-run-1",
        "JobCategory": "AgentRFT",
    }
    assert status["status"] == "InProgress"
    assert status["progress"] == {"MaxSteps": 100, "CurrentStep": 42}
    assert status["billable_token_usage"]["TrainTokenCount"] == 643_300_000
    # the fake reports the published reference run's tokens, which cost about $339 in all
    assert status["cost_estimate"]["total"] == pytest.approx(339, rel=0.02)
    assert status["cost_estimate"]["label"]


def test_status_of_unknown_job_is_deploy_error(
    fake: FakeAws, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown job name exits 11 with the service's message."""
    assert main(["job", "status", "nope", "--region", "us-west-2"]) == 11
    assert "job not found" in capsys.readouterr().err


def test_document_fits_the_botocore_model() -> None:
    """The built request has exactly CreateJob's members, within the model's length limits."""
    spec = JobSpec(
        name="j1",
        agent_arn=RUNTIME,
        model=MODEL,
        role_arn=ROLE,
        output="s3://bkt/o/",
        region="us-west-2",
        train="s3://bkt/t.jsonl",
    )
    request, unknown = build_create_job(spec)
    assert unknown == []
    shape = botocore.session.get_session().get_service_model("sagemaker")
    members = shape.operation_model("CreateJob").input_shape.members
    assert set(request) <= set(members)
    assert request["JobConfigSchemaVersion"] == JOB_SCHEMA_VERSION
    assert len(request["JobConfigDocument"]) <= members["JobConfigDocument"].metadata["max"]
    assert members["JobCategory"].enum.count(request["JobCategory"]) == 1


def test_lambda_agent_uses_custom_agent_lambda_config() -> None:
    """A Lambda forwarder ARN becomes CustomAgentLambdaConfig."""
    lam = "arn:aws:lambda:us-west-2:123456789012:function:mtrl-forwarder"
    spec = JobSpec("j", lam, MODEL, ROLE, "s3://bkt/o/", "us-west-2", train="s3://bkt/t")
    document = json.loads(build_create_job(spec)[0]["JobConfigDocument"])
    assert document["AgentConfig"] == {"CustomAgentLambdaConfig": {"LambdaArn": lam}}


def test_runtime_region_rejects_non_agent_arns() -> None:
    """Only AgentCore runtime and Lambda ARNs name an agent."""
    assert runtime_region(RUNTIME) == "us-west-2"
    with pytest.raises(UsageError):
        runtime_region("arn:aws:s3:::bucket")


def test_model_arn_region_must_match() -> None:
    """A hub model ARN from another region is refused."""
    spec = JobSpec(
        "j",
        RUNTIME,
        MODEL.replace("us-west-2", "eu-west-1"),
        ROLE,
        "s3://bkt/o/",
        "us-west-2",
        train="s3://bkt/t",
    )
    with pytest.raises(DeployError, match="eu-west-1"):
        build_create_job(spec)


def test_parse_hyperparameters_rejects_duplicates() -> None:
    """The same key twice is an error, never a silent overwrite."""
    with pytest.raises(UsageError, match="twice"):
        parse_hyperparameters(["group_size=4", "group_size=8"])


@given(st.integers(min_value=-1000, max_value=1000))
def test_group_size_range_matches_documentation(value: int) -> None:
    """group_size is accepted exactly on the documented [2, 32]."""
    try:
        typed, _ = validate_hyperparameters({"group_size": str(value)}, TRAINING_HYPERPARAMETERS)
    except UsageError:
        assert not 2 <= value <= 32
    else:
        assert 2 <= value <= 32
        assert typed == {"group_size": value}


def test_plan_takes_the_region_from_the_runtime_arn(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's ``job submit … --plan`` without --region plans the job where the runtime ARN
    says: no 'no AWS region' error when none is configured, and the ARN's region (not the
    configured one) when another is configured; an explicit --region still has to match."""
    for key in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    args = submit_args("--plan", "--json")
    at = args.index("--region")
    del args[at : at + 2]
    assert main(args) == 0, capsys.readouterr().err
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert [c["operation"] for c in plan] == ["CreateJob"]
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    assert main(args) == 0, capsys.readouterr().err  # the model ARN (us-west-2) matches too
    capsys.readouterr()
    assert main([*args, "--region", "eu-central-1"]) == 11
    assert "same region" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://b/runs/", "bucket 'b': a bucket name has 3 to 63 characters (1 given)"),
        ("s3://Out_Bucket/runs/", "only lowercase letters, digits"),
        ("s3://out..bucket/", "no two adjacent dots"),
        ("s3://192.168.1.1/x", "IP address"),
        ("s3:///runs", "names no bucket"),
        ("https://out-bucket/runs", "starts with s3://"),
    ],
)
def test_output_uri_problem_is_named(
    fake: FakeAws, capsys: pytest.CaptureFixture[str], uri: str, expected: str
) -> None:
    """An invalid --output says what is wrong with it (a short bucket is not 'not an s3:// URI')."""
    args = submit_args()
    args[args.index("--output") + 1] = uri
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--output" in err
    assert expected in err
    assert fake.requests == []
