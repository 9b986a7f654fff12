"""``agent-kit package`` and ``agent-kit deploy`` (the ``job`` group: :mod:`agent_kit.cli.job`).

``--plan`` and ``--json`` work as for every AWS-facing command (:mod:`agent_kit.cli.aws_io`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, cast

import typer

from agent_kit.cli.aws_io import ERR, OUT, aws_region, print_calls, print_json
from agent_kit.cli.run_options import key_values
from agent_kit.deploy import agentcore as deploy_mod
from agent_kit.deploy.package import PackageResult, Target, package, package_document
from agent_kit.errors import UsageError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``package`` and ``deploy`` to the CLI."""
    app.command("package")(package_cmd)
    app.command("deploy")(deploy_cmd)


def _log(message: str) -> None:
    ERR.print(f"[dim]…[/] {message}")


def _requirements(path: Path | None) -> list[str] | None:
    if path is None:
        return None
    if not path.is_file():
        raise UsageError(f"--requirements {path} does not exist")
    lines = [ln.split("#", 1)[0].strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    return [ln for ln in lines if ln]


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
        print_json(package_document(result))
        return
    _print_package(result)


def _print_package(result: PackageResult) -> None:
    OUT.print(f"packaged [bold]{result.name}[/] ({result.target}) in {result.out_dir}")
    if result.artifact is not None:
        size = f", {result.zip_bytes / 2**20:.1f} MB" if result.zip_bytes else ""
        OUT.print(f"artifact: {result.artifact}{size}")
    OUT.print(f"{len(result.files)} source file(s); {len(result.requirements)} requirement(s)")
    for note in result.notes:
        OUT.print(f"note: {note}")
    if result.target in ("zip", "container"):
        OUT.print(
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
        region=aws_region(region),
        target=cast(Literal["zip", "container"], target),
        s3_bucket=s3_bucket,
        image_uri=image_uri,
        env=key_values(env, "--env expects KEY=VALUE"),
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
        print_json({"plan": [c.to_dict() for c in calls], "iam": policies})
        return
    print_calls(calls)
    _print_policies(policies)


def _print_deployed(
    result: deploy_mod.DeployResult, name: str, policies: dict[str, Any], as_json: bool
) -> None:
    """The runtime ``deploy`` created or updated, and the role's policies."""
    if as_json:
        print_json(
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
    OUT.print(f"{verb} runtime {name} (version {result.version}): {result.status}")
    OUT.print(f"runtime ARN: [bold]{result.arn}[/]")
    _print_policies(policies)


def _print_policies(policies: dict[str, Any]) -> None:
    OUT.print("\nthe execution role needs:")
    OUT.print(f"  managed policy: {', '.join(policies['managed_policies'])}")
    OUT.print("  trust policy:")
    print_json(policies["trust_policy"])
    OUT.print("  inline policy:")
    print_json(policies["inline_policy"])
