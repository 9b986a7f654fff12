"""SageMaker MTRL jobs: build, validate and submit CreateJob requests; read job status.

Built to the botocore ``sagemaker`` model (CreateJob / DescribeJob / ListJobs, JSON protocol)
and to the document the public ``sagemaker-train`` SDK builds
(``MultiTurnRLTrainer._build_job_config``, ``MultiTurnRLEvaluator``; schema version 1.0.0):

- training (``JobCategory="AgentRFT"``): ``AgentConfig.BedrockAgentCoreConfig{AgentRuntimeArn,
  Qualifier}`` (or ``CustomAgentLambdaConfig{LambdaArn}``), ``InputDataConfig`` channels
  ``train``/``validation`` (``S3DataSource{S3DataType: S3Prefix, S3Uri}``),
  ``OutputDataConfig{S3OutputPath}``, optional ``ModelPackageConfig``, and
  ``TrainingConfig{BaseModelArn, MlflowConfig?, AcceptEula, HyperParameters}``;
- evaluation (``"AgentRFTEvaluation"``): channel ``evaluation``, MlflowConfig inside
  ``OutputDataConfig``, ``EvaluationConfig{BaseModelArn, AcceptEula, HyperParameters}`` with
  **string** values, ``StoppingCondition{MaxRuntimeInSeconds}``.

Hyperparameters are checked against the documented ranges (:data:`TRAINING_HYPERPARAMETERS`:
the SageMaker "Hyperparameters reference" for MTRL plus docs/contract.md §1 for the rollout ones).
Names not listed there are passed through unvalidated and reported, because the service's
per-model recipe is the authority.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from agent_kit.contract import MAX_TOKENS, TEMPERATURE, TOP_P
from agent_kit.deploy.s3names import check_s3_uri
from agent_kit.errors import DeployError, UsageError

__all__ = [
    "EVAL_HYPERPARAMETERS",
    "JOB_SCHEMA_VERSION",
    "TRAINING_HYPERPARAMETERS",
    "HyperParameter",
    "JobSpec",
    "build_create_job",
    "hub_model_arn_request",
    "job_status",
    "parse_hyperparameters",
    "runtime_region",
    "validate_hyperparameters",
]

JOB_SCHEMA_VERSION: Final = "1.0.0"
_RUNTIME_ARN = re.compile(
    r"^arn:aws[a-z\-]*:bedrock-agentcore:(?P<region>[a-z0-9\-]+):[0-9]{12}:runtime/[a-zA-Z0-9_\-]+$"
)
_LAMBDA_ARN = re.compile(
    r"^arn:aws[a-z\-]*:lambda:(?P<region>[a-z0-9\-]+):[0-9]{12}:function:[a-zA-Z0-9\-_.]+"
    r"(:\$LATEST|:[a-zA-Z0-9\-_]+)?$"
)
_ROLE_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+$")
_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_MLFLOW_ARN = re.compile(
    r"^arn:[a-z0-9\-.]+:sagemaker:[^:]+:[^:]+:mlflow-(app|tracking-server)/.+$"
)
_HUB_MODEL_ARN = re.compile(
    r"^arn:aws[a-z\-]*:sagemaker:(?P<region>[a-z0-9\-]+):[^:]*:hub-content/"
)
_SAFE_VALUE = re.compile(r"^[a-zA-Z0-9/_.:,\-\s'\"\[\]]*$")  # the SDK's allowed characters


@dataclass(frozen=True)
class HyperParameter:
    """A documented hyperparameter: kind, inclusive range or allowed choices, and default."""

    kind: Literal["int", "float", "choice", "list"]
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    default: str = ""

    def check(self, name: str, raw: str) -> Any:
        """Parse ``raw`` and check it; raise :class:`UsageError` naming the documented range."""
        if self.kind == "choice":
            if raw not in self.choices:
                raise UsageError(
                    f"hyperparameter {name}={raw!r}: choose one of {', '.join(self.choices)}"
                )
            return raw
        if self.kind == "list":
            try:
                value = json.loads(raw)
            except ValueError:
                value = None
            if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
                raise UsageError(f"hyperparameter {name}={raw!r}: expected a list like [1, 2, 4]")
            return value
        try:
            number = int(raw) if self.kind == "int" else float(raw)
        except ValueError:
            raise UsageError(f"hyperparameter {name}={raw!r}: expected {self.kind}") from None
        if isinstance(number, float) and not math.isfinite(number):
            raise UsageError(f"hyperparameter {name}={raw!r}: must be finite")
        if self.choices and str(number) not in self.choices:
            raise UsageError(
                f"hyperparameter {name}={raw}: choose one of {', '.join(self.choices)}"
            )
        if (self.low is not None and number < self.low) or (
            self.high is not None and number > self.high
        ):
            raise UsageError(
                f"hyperparameter {name}={raw} is out of range [{_fmt(self.low)}, {_fmt(self.high)}]"
            )
        return number


def _fmt(value: float | None) -> str:
    if value is None:
        return "…"
    return str(int(value)) if float(value).is_integer() else str(value)


_ADV = (
    "monte_carlo", "group_based", "group_based_per_turn", "rloo", "reinforce_pp",
    "reinforce_pp_baseline", "opo", "grpo_passk", "gpg",
)  # fmt: skip

#: The sampling hyperparameters' ranges and defaults are the inference settings' own
#: (:data:`agent_kit.contract.TEMPERATURE`, ``TOP_P``, ``MAX_TOKENS``: the service documents the
#: same); only the service's token window, 512..8192 for training and at most 8192 for an
#: evaluation, is its own.
_TEMPERATURE: Final = HyperParameter("float", TEMPERATURE.low, TEMPERATURE.high)
_TOP_P: Final = HyperParameter("float", TOP_P.low, TOP_P.high)
_MAX_TOKENS_CAP: Final = 8192

#: MTRL training hyperparameters with their documented ranges.
TRAINING_HYPERPARAMETERS: Final[Mapping[str, HyperParameter]] = {
    "global_batch_size": HyperParameter("int", choices=("32", "64", "128"), default="128"),
    "group_size": HyperParameter("int", 2, 32, default="8"),
    "advantage_method": HyperParameter("choice", choices=_ADV, default="group_based"),
    "loss_fn": HyperParameter("choice", choices=("importance_sampling", "ppo", "cispo")),
    "clip_low_threshold": HyperParameter("float", 0, 1, default="0.8"),
    "clip_high_threshold": HyperParameter("float", 1, 10, default="1.2"),
    "temperature": replace(_TEMPERATURE, default=_fmt(TEMPERATURE.default)),
    "sampling_top_p": replace(_TOP_P, default=_fmt(TOP_P.default)),
    "sampling_max_tokens": HyperParameter(
        "int", 512, _MAX_TOKENS_CAP, default=_fmt(MAX_TOKENS.default)
    ),
    "pass_k_values": HyperParameter("list", default="[1, 2, 4, 8, 16, 32]"),
    "success_threshold": HyperParameter("float", default="1"),
    "max_epochs": HyperParameter("int", 1, 30, default="1"),
    "max_steps": HyperParameter("int", 1, 1000, default="50"),
    "val_every": HyperParameter("int", 0, 100, default="10"),
    "rollout_max_concurrency": HyperParameter("int", 32, 96, default="96"),
    "rollout_timeout": HyperParameter("int", 300, 86400, default="600"),
    "rollout_max_retries": HyperParameter("int", 1, 10, default="3"),
}

#: AgentRFTEvaluation hyperparameters (sent as strings, as the SDK does).
EVAL_HYPERPARAMETERS: Final[Mapping[str, HyperParameter]] = {
    "eval_group_size": HyperParameter("int", 1, 32),
    "temperature": _TEMPERATURE,
    "sampling_top_p": _TOP_P,
    "sampling_max_tokens": HyperParameter("int", MAX_TOKENS.low, _MAX_TOKENS_CAP),
    "sampling_temperature": _TEMPERATURE,
    "top_p": _TOP_P,
    "max_tokens": HyperParameter("int", MAX_TOKENS.low, _MAX_TOKENS_CAP),
    "pass_k_values": HyperParameter("list"),
    "success_threshold": HyperParameter("float"),
}


def parse_hyperparameters(items: Sequence[str]) -> dict[str, str]:
    """``["k=v", ...]`` → ``{k: v}``; :class:`UsageError` on a malformed or repeated item."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--hyperparameters expects key=value, got {item!r}")
        if key in out:
            raise UsageError(f"hyperparameter {key} given twice")
        out[key] = value.strip()
    return out


def validate_hyperparameters(
    values: Mapping[str, str], table: Mapping[str, HyperParameter]
) -> tuple[dict[str, Any], list[str]]:
    """Check every documented key; return (typed values, names passed through unvalidated)."""
    typed: dict[str, Any] = {}
    unknown: list[str] = []
    for key, raw in values.items():
        if not _SAFE_VALUE.match(raw):
            raise UsageError(
                f"hyperparameter {key}={raw!r} has characters the service rejects "
                "(allowed: letters, digits, / _ . : , - space ' \" [ ])"
            )
        spec = table.get(key)
        if spec is None:
            unknown.append(key)
            typed[key] = raw
        else:
            typed[key] = spec.check(key, raw)
    return typed, unknown


def runtime_region(agent_arn: str) -> str:
    """The region inside an AgentCore runtime or Lambda ARN (:class:`UsageError` otherwise)."""
    match = _RUNTIME_ARN.match(agent_arn) or _LAMBDA_ARN.match(agent_arn)
    if not match:
        raise UsageError(
            f"{agent_arn!r} is neither an AgentCore runtime ARN "
            "(arn:aws:bedrock-agentcore:REGION:ACCOUNT:runtime/ID) nor a Lambda function ARN"
        )
    return match["region"]


@dataclass(frozen=True)
class JobSpec:
    """Inputs of one CreateJob request (training or evaluation)."""

    name: str
    agent_arn: str
    model: str
    role_arn: str
    output: str
    region: str
    train: str | None = None
    validation: str | None = None
    evaluation: str | None = None
    mlflow_arn: str | None = None
    hyperparameters: Mapping[str, str] | None = None
    qualifier: str = "DEFAULT"
    output_model_package_group: str | None = None
    input_model_package: str | None = None
    max_runtime_s: int = 86400
    category: Literal["AgentRFT", "AgentRFTEvaluation"] = "AgentRFT"


def _check_common(spec: JobSpec) -> None:
    if not _JOB_NAME.match(spec.name):
        raise UsageError(f"job name {spec.name!r}: 1-63 letters, digits and hyphens")
    if not _ROLE_ARN.match(spec.role_arn):
        raise UsageError(f"--role-arn {spec.role_arn!r} is not an IAM role ARN")
    agent_region = runtime_region(spec.agent_arn)
    if agent_region != spec.region:
        raise DeployError(
            f"the agent is in {agent_region} but the job would run in {spec.region}: MTRL needs "
            f"the runtime and the job in the same region (pass --region {agent_region} or deploy "
            f"the agent to {spec.region})"
        )
    for label, uri in (
        ("--train", spec.train),
        ("--validation", spec.validation),
        ("--dataset", spec.evaluation),
        ("--output", spec.output),
    ):
        if uri is not None:
            check_s3_uri(label, uri)
    if spec.mlflow_arn is not None and not _MLFLOW_ARN.match(spec.mlflow_arn):
        raise UsageError(f"--mlflow-arn {spec.mlflow_arn!r} is not a SageMaker MLflow ARN")
    model_match = _HUB_MODEL_ARN.match(spec.model)
    if spec.model.startswith("arn:") and not model_match:
        raise UsageError(f"--model {spec.model!r} is not a SageMaker hub-content model ARN")
    if model_match and model_match["region"] != spec.region:
        raise DeployError(
            f"the model ARN is in {model_match['region']} but the job would run in {spec.region}"
        )


def _agent_config(spec: JobSpec) -> dict[str, Any]:
    if _RUNTIME_ARN.match(spec.agent_arn):
        config: dict[str, Any] = {"AgentRuntimeArn": spec.agent_arn}
        if spec.qualifier:
            config["Qualifier"] = spec.qualifier
        return {"BedrockAgentCoreConfig": config}
    return {"CustomAgentLambdaConfig": {"LambdaArn": spec.agent_arn}}


def _channel(name: str, uri: str) -> dict[str, Any]:
    return {
        "ChannelName": name,
        "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri}},
    }


def build_create_job(
    spec: JobSpec, *, model_arn: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The CreateJob parameters for ``spec`` and the hyperparameter names not validated locally.

    ``model_arn`` is the resolved hub-content ARN of ``spec.model`` (needed when ``model`` is a
    hub model id rather than an ARN; see :func:`hub_model_arn_request`).
    """
    _check_common(spec)
    base_model = model_arn or spec.model
    hps = dict(spec.hyperparameters or {})
    if spec.category == "AgentRFT":
        if not spec.train:
            raise UsageError("--train s3://… is required for a training job")
        typed, unknown = validate_hyperparameters(hps, TRAINING_HYPERPARAMETERS)
        channels = [_channel("train", spec.train)]
        if spec.validation:
            channels.append(_channel("validation", spec.validation))
        training: dict[str, Any] = {"BaseModelArn": base_model, "AcceptEula": True}
        if spec.mlflow_arn:
            training["MlflowConfig"] = {"MlflowResourceArn": spec.mlflow_arn}
        if typed:
            training["HyperParameters"] = typed
        document: dict[str, Any] = {
            "AgentConfig": _agent_config(spec),
            "InputDataConfig": channels,
            "OutputDataConfig": {"S3OutputPath": spec.output},
        }
        if spec.output_model_package_group:
            document["ModelPackageConfig"] = {
                "OutputModelPackageGroupArn": spec.output_model_package_group
            }
        document["TrainingConfig"] = training
    else:
        if not spec.evaluation:
            raise UsageError("--dataset s3://… is required for an evaluation job")
        typed, unknown = validate_hyperparameters(hps, EVAL_HYPERPARAMETERS)
        output: dict[str, Any] = {"S3OutputPath": spec.output}
        if spec.mlflow_arn:
            output["MlflowConfig"] = {"MlflowResourceArn": spec.mlflow_arn}
        evaluation: dict[str, Any] = {"BaseModelArn": base_model, "AcceptEula": True}
        if hps:
            evaluation["HyperParameters"] = {k: str(v) for k, v in hps.items()}
        document = {
            "AgentConfig": _agent_config(spec),
            "InputDataConfig": [_channel("evaluation", spec.evaluation)],
            "OutputDataConfig": output,
            "EvaluationConfig": evaluation,
        }
        if spec.input_model_package:
            document["ModelPackageConfig"] = {"InputModelPackageArn": spec.input_model_package}
        document["StoppingCondition"] = {"MaxRuntimeInSeconds": spec.max_runtime_s}
    request = {
        "JobName": spec.name,
        "RoleArn": spec.role_arn,
        "JobCategory": spec.category,
        "JobConfigSchemaVersion": JOB_SCHEMA_VERSION,
        "JobConfigDocument": json.dumps(document),
    }
    return request, unknown


def hub_model_arn_request(model: str) -> dict[str, str]:
    """The DescribeHubContent request that resolves a public hub model id to its ARN."""
    return {"HubName": "SageMakerPublicHub", "HubContentType": "Model", "HubContentName": model}


def job_status(describe: Mapping[str, Any]) -> dict[str, Any]:
    """A summary of a DescribeJob answer: status, progress, token usage, output, failure."""
    try:
        config = json.loads(describe.get("JobConfigDocument") or "{}")
    except ValueError:
        config = {}
    service = config.get("ServiceOutput", {}) if isinstance(config, dict) else {}
    transitions = [
        {
            "status": t.get("Status"),
            "start": str(t.get("StartTime")),
            "message": t.get("StatusMessage"),
        }
        for t in describe.get("SecondaryStatusTransitions") or []
    ]
    return {
        "name": describe.get("JobName"),
        "arn": describe.get("JobArn"),
        "category": describe.get("JobCategory"),
        "status": describe.get("JobStatus"),
        "secondary_status": describe.get("SecondaryStatus"),
        "failure_reason": describe.get("FailureReason"),
        "progress": service.get("ProgressInfo"),
        "billable_token_usage": service.get("BillableTokenUsage"),
        "output_model_package_arn": service.get("OutputModelPackageArn"),
        "mlflow": service.get("MlflowDetails"),
        "transitions": transitions,
    }
