"""``agent-kit package``, ``agent-kit deploy`` and ``agent-kit job submit|status|eval|plan``.

Every command that talks to AWS accepts ``--plan``: it prints each request it would send (as
JSON) and sends nothing. AWS endpoints follow the usual boto3 configuration, including
``AWS_ENDPOINT_URL_<SERVICE>`` overrides.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import typer
from rich.console import Console

from agent_kit.cli.job_plan import plan_cmd
from agent_kit.cli.program import program
from agent_kit.deploy import agentcore as deploy_mod
from agent_kit.deploy import jobs
from agent_kit.deploy.package import PackageResult, Target, package, package_document
from agent_kit.errors import DeployError, UsageError

__all__ = ["register"]

_out = Console(highlight=False, soft_wrap=True)
_err = Console(stderr=True, highlight=False, soft_wrap=True)

job_app = typer.Typer(
    name="job", help="Submit and inspect SageMaker MTRL jobs.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    """Add ``package``, ``deploy`` and the ``job`` group to the CLI."""
    app.command("package")(package_cmd)
    app.command("deploy")(deploy_cmd)
    job_app.command("plan")(plan_cmd)
    app.add_typer(job_app, name="job")


def _log(message: str) -> None:
    _err.print(f"[dim]…[/] {message}")


def _job_region(region: str | None, runtime_arn: str) -> str:
    """A job runs where its agent is: --region when given (checked against the ARN later),
    else the region the runtime (or Lambda) ARN names, else the configured one."""
    if region:
        return region
    try:
        return jobs.runtime_region(runtime_arn)
    except UsageError:
        return _region(None)  # the ARN itself is reported by the spec's own check


def _region(region: str | None) -> str:
    found = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not found:
        try:
            import boto3

            found = boto3.session.Session().region_name
        except Exception:  # noqa: BLE001 - any failure means "no configured region"
            found = None
    if not found:
        raise UsageError("no AWS region: pass --region or set AWS_REGION")
    return found


def _env_pairs(items: list[str] | None) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--env expects KEY=VALUE, got {item!r}")
        env[key.strip()] = value
    return env


def _requirements(path: Path | None) -> list[str] | None:
    if path is None:
        return None
    if not path.is_file():
        raise UsageError(f"--requirements {path} does not exist")
    lines = [ln.split("#", 1)[0].strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    return [ln for ln in lines if ln]


def _print_json(data: Any) -> None:
    _out.print_json(json.dumps(data, default=str))


def _print_calls(calls: list[deploy_mod.Call]) -> None:
    _out.print(f"plan: {len(calls)} request(s); nothing is sent")
    for i, call in enumerate(calls, 1):
        note = f"  # {call.note}" if call.note else ""
        _out.print(f"[bold]{i}. {call.service} {call.operation}[/]{note}")
        _print_json(call.to_dict()["params"])


# --------------------------------------------------------------------------- package


TargetOpt = Annotated[
    str,
    typer.Option(
        "--target",
        "-t",
        help="zip (direct code deploy), container, lambda-forwarder, or agentcore (a project "
        "of the npm AgentCore CLI: `agentcore package` / `agentcore deploy` take it from there).",
    ),
]


def package_cmd(
    entrypoint: Annotated[Path, typer.Argument(help="The agent's entrypoint file (agent.py).")],
    target: TargetOpt = "zip",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Output directory (default build/NAME).")
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", "-n", help="Runtime name (default: from the directory).")
    ] = None,
    region: Annotated[
        str | None, typer.Option("--region", help="Region for the config files.")
    ] = None,
    requirements: Annotated[
        Path | None,
        typer.Option(
            "--requirements",
            help="Use this requirements file instead of the pinned runtime dependencies.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Preflight and package an entrypoint for AgentCore Runtime (or a Lambda forwarder)."""
    result = package(
        entrypoint,
        target=cast(Target, target),
        out_dir=out,
        name=name,
        region=region,
        requirements=_requirements(requirements),
        log=_log,
    )
    if as_json:
        _print_json(package_document(result))
        return
    _print_package(result)


def _print_package(result: PackageResult) -> None:
    _out.print(f"packaged [bold]{result.name}[/] ({result.target}) in {result.out_dir}")
    if result.artifact is not None:
        size = f", {result.zip_bytes / 2**20:.1f} MB" if result.zip_bytes else ""
        _out.print(f"artifact: {result.artifact}{size}")
    _out.print(f"{len(result.files)} source file(s); {len(result.requirements)} requirement(s)")
    for note in result.notes:
        _out.print(f"note: {note}")
    if result.target in ("zip", "container"):
        _out.print(
            f"the starter toolkit's `agentcore deploy` also works from {result.out_dir}; "
            "the npm AgentCore CLI can `agentcore import --source .bedrock_agentcore.yaml` it"
        )


# --------------------------------------------------------------------------- deploy


def deploy_cmd(
    entrypoint: Annotated[Path, typer.Argument(help="The agent's entrypoint file (agent.py).")],
    name: Annotated[str, typer.Option("--name", "-n", help="AgentCore runtime name.")],
    role_arn: Annotated[str, typer.Option("--role-arn", help="Execution role of the runtime.")],
    s3_bucket: Annotated[
        str | None, typer.Option("--s3-bucket", help="Bucket for the code zip (target zip).")
    ] = None,
    region: Annotated[str | None, typer.Option("--region", help="AWS region.")] = None,
    target: Annotated[str, typer.Option("--target", "-t", help="zip or container.")] = "zip",
    image_uri: Annotated[
        str | None, typer.Option("--image-uri", help="ECR image URI (target container).")
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", "-e", help="Runtime env var KEY=VALUE (repeatable)."),
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Package directory.")] = None,
    requirements: Annotated[
        Path | None,
        typer.Option("--requirements", help="Requirements file replacing the pinned runtime deps."),
    ] = None,
    plan: Annotated[bool, typer.Option("--plan", help="Print the requests; send nothing.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Update even while an MTRL job uses the runtime.")
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for READY.")
    ] = 1800.0,
    poll_interval: Annotated[
        float, typer.Option("--poll-interval", help="Seconds between status polls.", hidden=True)
    ] = 5.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Package, upload and create/update an AgentCore runtime, then wait until READY."""
    if target not in ("zip", "container"):
        raise UsageError(f"--target {target!r}: deploy supports zip or container")
    spec = deploy_mod.DeploySpec(
        name=name,
        role_arn=role_arn,
        region=_region(region),
        target=cast(Literal["zip", "container"], target),
        s3_bucket=s3_bucket,
        image_uri=image_uri,
        env=_env_pairs(env),
        force=force,
    )
    spec.validate()
    pkg = package(
        entrypoint,
        target=spec.target,
        out_dir=out,
        name=name,
        region=spec.region,
        role_arn=role_arn,
        s3_path=f"s3://{s3_bucket}" if s3_bucket else None,
        requirements=_requirements(requirements),
        log=_log,
    )
    policies = deploy_mod.iam_policies(spec.region, s3_bucket)
    if plan:
        _print_deploy_plan(deploy_mod.plan_deploy(spec, pkg), policies, as_json)
        return
    result = deploy_mod.deploy(
        spec,
        pkg,
        deploy_mod.boto3_clients(spec.region),
        timeout=timeout,
        poll_interval=poll_interval,
        log=_log,
    )
    _print_deployed(result, name, policies, as_json)


def _print_deploy_plan(
    calls: list[deploy_mod.Call], policies: dict[str, Any], as_json: bool
) -> None:
    """``deploy --plan``: the requests it would send and the role's policies."""
    if as_json:
        _print_json({"plan": [c.to_dict() for c in calls], "iam": policies})
        return
    _print_calls(calls)
    _print_policies(policies)


def _print_deployed(
    result: deploy_mod.DeployResult, name: str, policies: dict[str, Any], as_json: bool
) -> None:
    """The runtime ``deploy`` created or updated, and the role's policies."""
    if as_json:
        _print_json(
            {
                "arn": result.arn,
                "id": result.runtime_id,
                "version": result.version,
                "status": result.status,
                "created": result.created,
                "iam": policies,
            }
        )
        return
    verb = "created" if result.created else "updated"
    _out.print(f"{verb} runtime {name} (version {result.version}): {result.status}")
    _out.print(f"runtime ARN: [bold]{result.arn}[/]")
    _print_policies(policies)


def _print_policies(policies: dict[str, Any]) -> None:
    _out.print("\nthe execution role needs:")
    _out.print(f"  managed policy: {', '.join(policies['managed_policies'])}")
    _out.print("  trust policy:")
    _print_json(policies["trust_policy"])
    _out.print("  inline policy:")
    _print_json(policies["inline_policy"])


# --------------------------------------------------------------------------- job


def _default_job_name(prefix: str) -> str:
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"


def _resolve_model(
    model: str, clients: deploy_mod.ClientFactory | None
) -> tuple[str, list[deploy_mod.Call]]:
    if model.startswith("arn:"):
        return model, []
    request = jobs.hub_model_arn_request(model)
    call = deploy_mod.Call("sagemaker", "DescribeHubContent", request, "resolve the model id")
    if clients is None:
        return "<HubContentArn from DescribeHubContent>", [call]
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        answer = clients("sagemaker").describe_hub_content(**request)
    except (ClientError, BotoCoreError) as exc:
        raise DeployError(
            f"could not resolve model {model!r} in SageMakerPublicHub: {exc}"
        ) from None
    return str(answer["HubContentArn"]), [call]


def _submit(spec: jobs.JobSpec, plan: bool, as_json: bool) -> None:
    clients = None if plan else deploy_mod.boto3_clients(spec.region)
    jobs.build_create_job(spec, model_arn=spec.model)  # validate before any request
    model_arn, lookups = _resolve_model(spec.model, clients)
    request, unknown = jobs.build_create_job(spec, model_arn=model_arn)
    for key in unknown:
        _err.print(f"[yellow]warning:[/] hyperparameter {key} is not validated locally")
    if clients is None:  # --plan: print the requests, send nothing
        calls = [*lookups, deploy_mod.Call("sagemaker", "CreateJob", request)]
        if as_json:
            _print_json({"plan": [c.to_dict() for c in calls]})
            return
        _print_calls(calls)
        _out.print("JobConfigDocument:")
        _print_json(json.loads(request["JobConfigDocument"]))
        return
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        answer = clients("sagemaker").create_job(**request)
    except (ClientError, BotoCoreError) as exc:
        raise DeployError(f"CreateJob failed: {exc}") from None
    if as_json:
        _print_json({"JobArn": answer["JobArn"], "JobName": spec.name})
        return
    _out.print(f"submitted {spec.category} job [bold]{spec.name}[/]: {answer['JobArn']}")
    _out.print(f"follow it with: {program()} job status {spec.name} --region {spec.region}")


HyperOpt = Annotated[
    list[str] | None,
    typer.Option("--hyperparameters", "-H", help="key=value (repeatable)."),
]


@job_app.command("submit")
def job_submit(
    runtime_arn: Annotated[
        str, typer.Option("--runtime-arn", help="AgentCore runtime ARN (or Lambda forwarder ARN).")
    ],
    train: Annotated[str, typer.Option("--train", help="s3:// training dataset.")],
    model: Annotated[str, typer.Option("--model", help="Hub model id or hub-content ARN.")],
    role_arn: Annotated[str, typer.Option("--role-arn", help="Role the job runs as.")],
    output: Annotated[str, typer.Option("--output", help="s3:// output path.")],
    validation: Annotated[
        str | None, typer.Option("--validation", help="s3:// validation dataset.")
    ] = None,
    mlflow_arn: Annotated[str | None, typer.Option("--mlflow-arn", help="MLflow app ARN.")] = None,
    hyperparameters: HyperOpt = None,
    model_package_group: Annotated[
        str | None,
        typer.Option("--model-package-group", help="Output model package group ARN."),
    ] = None,
    qualifier: Annotated[str, typer.Option("--qualifier", help="Runtime endpoint.")] = "DEFAULT",
    name: Annotated[str | None, typer.Option("--name", help="Job name.")] = None,
    region: Annotated[
        str | None,
        typer.Option("--region", help="AWS region of the job (default: the runtime ARN's)."),
    ] = None,
    plan: Annotated[bool, typer.Option("--plan", help="Print the requests; send nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Submit a multi-turn RL training job (CreateJob, category AgentRFT)."""
    spec = jobs.JobSpec(
        name=name or _default_job_name("agent-kit-mtrl"),
        agent_arn=runtime_arn,
        model=model,
        role_arn=role_arn,
        output=output,
        region=_job_region(region, runtime_arn),
        train=train,
        validation=validation,
        mlflow_arn=mlflow_arn,
        hyperparameters=jobs.parse_hyperparameters(hyperparameters or []),
        qualifier=qualifier,
        output_model_package_group=model_package_group,
    )
    _submit(spec, plan, as_json)


@job_app.command("eval")
def job_eval(
    runtime_arn: Annotated[str, typer.Option("--runtime-arn", help="AgentCore runtime ARN.")],
    dataset: Annotated[str, typer.Option("--dataset", help="s3:// evaluation dataset.")],
    model: Annotated[str, typer.Option("--model", help="Hub model id or hub-content ARN.")],
    role_arn: Annotated[str, typer.Option("--role-arn", help="Role the job runs as.")],
    output: Annotated[str, typer.Option("--output", help="s3:// output path.")],
    model_package: Annotated[
        str | None,
        typer.Option("--model-package", help="Fine-tuned model package ARN to evaluate."),
    ] = None,
    mlflow_arn: Annotated[str | None, typer.Option("--mlflow-arn", help="MLflow app ARN.")] = None,
    hyperparameters: HyperOpt = None,
    max_runtime: Annotated[
        int, typer.Option("--max-runtime", help="StoppingCondition seconds.")
    ] = 86400,
    name: Annotated[str | None, typer.Option("--name", help="Job name.")] = None,
    region: Annotated[
        str | None,
        typer.Option("--region", help="AWS region of the job (default: the runtime ARN's)."),
    ] = None,
    plan: Annotated[bool, typer.Option("--plan", help="Print the requests; send nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Submit an evaluation job (CreateJob, category AgentRFTEvaluation)."""
    spec = jobs.JobSpec(
        name=name or _default_job_name("agent-kit-eval"),
        agent_arn=runtime_arn,
        model=model,
        role_arn=role_arn,
        output=output,
        region=_job_region(region, runtime_arn),
        evaluation=dataset,
        mlflow_arn=mlflow_arn,
        hyperparameters=jobs.parse_hyperparameters(hyperparameters or []),
        input_model_package=model_package,
        max_runtime_s=max_runtime,
        category="AgentRFTEvaluation",
    )
    _submit(spec, plan, as_json)


@job_app.command("status")
def job_status_cmd(
    name: Annotated[str, typer.Argument(help="Job name.")],
    category: Annotated[
        str, typer.Option("--category", help="AgentRFT or AgentRFTEvaluation.")
    ] = "AgentRFT",
    region: Annotated[str | None, typer.Option("--region", help="AWS region.")] = None,
    pricing: Annotated[
        Path | None, typer.Option("--pricing", help="Pricing file for the cost estimate.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Show a job's status, progress, billable tokens and an estimated cost (DescribeJob)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from agent_kit.reporting.pricing import (
        TokenCounts,
        default_pricing,
        estimate_cost,
        load_pricing,
    )

    if category not in ("AgentRFT", "AgentRFTEvaluation"):
        raise UsageError("--category must be AgentRFT or AgentRFTEvaluation")
    client = deploy_mod.boto3_clients(_region(region))("sagemaker")
    try:
        answer = client.describe_job(JobName=name, JobCategory=category)
    except (ClientError, BotoCoreError) as exc:
        raise DeployError(f"DescribeJob failed: {exc}") from None
    status = jobs.job_status(answer)
    usage = status.get("billable_token_usage") or {}
    prices = load_pricing(pricing) if pricing else default_pricing()
    cost = estimate_cost(
        TokenCounts(
            prefill=int(usage.get("PrefillTokenCount") or 0),
            sample=int(usage.get("SampleTokenCount") or 0),
            train=int(usage.get("TrainTokenCount") or 0),
        ),
        prices,
    )
    status["cost_estimate"] = cost.to_dict() if usage else None
    if as_json:
        _print_json(status)
        return
    _out.print(
        f"[bold]{status['name']}[/] ({status['category']}): {status['status']} / "
        f"{status['secondary_status']}"
    )
    if status["failure_reason"]:
        _out.print(f"[red]failure:[/] {status['failure_reason']}")
    progress = status.get("progress") or {}
    if progress.get("MaxSteps"):
        _out.print(f"progress: step {progress.get('CurrentStep', 0)} / {progress['MaxSteps']}")
    elif progress.get("MaxEpoch"):
        _out.print(
            f"progress: epoch {progress.get('CurrentEpoch', 0)} / {progress['MaxEpoch']}, "
            f"step {progress.get('CurrentStep', 0)} / {progress.get('StepsPerEpoch')}"
        )
    if usage:
        _out.print(
            "billable tokens: prefill {:,} · sample {:,} · train {:,}".format(
                int(usage.get("PrefillTokenCount") or 0),
                int(usage.get("SampleTokenCount") or 0),
                int(usage.get("TrainTokenCount") or 0),
            )
        )
        _out.print(f"estimated cost: {cost.total:,.2f} {cost.currency} ({cost.label})")
    if status.get("output_model_package_arn"):
        _out.print(f"model package: {status['output_model_package_arn']}")
