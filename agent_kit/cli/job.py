"""``agent-kit job submit|eval|status|plan``: SageMaker MTRL jobs.

``--plan`` and ``--json`` work as for every AWS-facing command (:mod:`agent_kit.cli.aws_io`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from agent_kit.cli.aws_io import ERR, OUT, aws_region, print_calls, print_json
from agent_kit.cli.job_plan import plan_cmd
from agent_kit.cli.program import program
from agent_kit.cli.run_options import settings_of
from agent_kit.deploy import agentcore as deploy_mod
from agent_kit.deploy import jobs
from agent_kit.errors import DeployError, UsageError

__all__ = ["register"]


job_app = typer.Typer(
    name="job", help="Submit and inspect SageMaker MTRL jobs.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    """Add the ``job`` group to the CLI."""
    job_app.command("plan")(plan_cmd)
    app.add_typer(job_app, name="job")


def _job_region(region: str | None, runtime_arn: str) -> str:
    """A job runs where its agent is: --region when given (checked against the ARN later),
    else the region the runtime (or Lambda) ARN names, else the configured one."""
    if region:
        return region
    try:
        return jobs.runtime_region(runtime_arn)
    except UsageError:
        return aws_region(None)  # the ARN itself is reported by the spec's own check


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
        ERR.print(f"[yellow]warning:[/] hyperparameter {key} is not validated locally")
    if clients is None:  # --plan: print the requests, send nothing
        calls = [*lookups, deploy_mod.Call("sagemaker", "CreateJob", request)]
        if as_json:
            print_json({"plan": [c.to_dict() for c in calls]})
            return
        print_calls(calls)
        OUT.print("JobConfigDocument:")
        print_json(json.loads(request["JobConfigDocument"]))
        return
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        answer = clients("sagemaker").create_job(**request)
    except (ClientError, BotoCoreError) as exc:
        raise DeployError(f"CreateJob failed: {exc}") from None
    if as_json:
        print_json({"JobArn": answer["JobArn"], "JobName": spec.name})
        return
    OUT.print(f"submitted {spec.category} job [bold]{spec.name}[/]: {answer['JobArn']}")
    OUT.print(f"follow it with: {program()} job status {spec.name} --region {spec.region}")


def _submit_new(options: dict[str, Any], prefix: str, **given: Any) -> None:
    """Submit the job a submitting command's options describe: the options named like
    :class:`~agent_kit.deploy.jobs.JobSpec`'s fields, ``given`` for the others; the name
    defaults to ``prefix-<timestamp>``, the region to the runtime ARN's."""
    runtime_arn = options["runtime_arn"]
    spec = settings_of(
        jobs.JobSpec,
        options,
        name=options["name"] or _default_job_name(prefix),
        agent_arn=runtime_arn,
        region=_job_region(options["region"], runtime_arn),
        hyperparameters=jobs.parse_hyperparameters(options["hyperparameters"] or []),
        **given,
    )
    _submit(spec, options["plan"], options["as_json"])


HyperOpt = Annotated[
    list[str] | None,
    typer.Option("--hyperparameters", "-H", help="key=value (repeatable)."),
]
# The options both job-submitting commands share.
JobNameOpt = Annotated[str | None, typer.Option("--name", help="Job name.")]
JobRegionOpt = Annotated[
    str | None,
    typer.Option("--region", help="AWS region of the job (default: the runtime ARN's)."),
]
PlanOpt = Annotated[bool, typer.Option("--plan", help="Print the requests; send nothing.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


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
    name: JobNameOpt = None,
    region: JobRegionOpt = None,
    plan: PlanOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Submit a multi-turn RL training job (CreateJob, category AgentRFT)."""
    _submit_new(dict(locals()), "agent-kit-mtrl", output_model_package_group=model_package_group)


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
    name: JobNameOpt = None,
    region: JobRegionOpt = None,
    plan: PlanOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Submit an evaluation job (CreateJob, category AgentRFTEvaluation)."""
    _submit_new(
        dict(locals()),
        "agent-kit-eval",
        evaluation=dataset,
        input_model_package=model_package,
        max_runtime_s=max_runtime,
        category="AgentRFTEvaluation",
    )


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
    as_json: JsonOpt = False,
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
    client = deploy_mod.boto3_clients(aws_region(region))("sagemaker")
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
        print_json(status)
        return
    OUT.print(
        f"[bold]{status['name']}[/] ({status['category']}): {status['status']} / "
        f"{status['secondary_status']}"
    )
    if status["failure_reason"]:
        OUT.print(f"[red]failure:[/] {status['failure_reason']}")
    progress = status.get("progress") or {}
    if progress.get("MaxSteps"):
        OUT.print(f"progress: step {progress.get('CurrentStep', 0)} / {progress['MaxSteps']}")
    elif progress.get("MaxEpoch"):
        OUT.print(
            f"progress: epoch {progress.get('CurrentEpoch', 0)} / {progress['MaxEpoch']}, "
            f"step {progress.get('CurrentStep', 0)} / {progress.get('StepsPerEpoch')}"
        )
    if usage:
        OUT.print(
            "billable tokens: prefill {:,} · sample {:,} · train {:,}".format(
                int(usage.get("PrefillTokenCount") or 0),
                int(usage.get("SampleTokenCount") or 0),
                int(usage.get("TrainTokenCount") or 0),
            )
        )
        OUT.print(f"estimated cost: {cost.total:,.2f} {cost.currency} ({cost.label})")
    if status.get("output_model_package_arn"):
        OUT.print(f"model package: {status['output_model_package_arn']}")
