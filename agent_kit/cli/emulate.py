"""``agent-kit emulate``: serve the local Job Runtime emulator until Ctrl-C."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agent_kit.cli.process import tune_process
from agent_kit.cli.run_options import door_settings
from agent_kit.contract import JOB_ARN_PATTERN
from agent_kit.emulator.policies.registry import POLICY_HELP
from agent_kit.errors import UsageError
from agent_kit.settings import env_name

if TYPE_CHECKING:
    from agent_kit.emulator.local_service import LocalService
    from agent_kit.emulator.policies import PolicyBackend
    from agent_kit.store import RunStore

__all__ = ["SECRET_ENV", "register"]

#: Environment variable holding the shared secret (alternative to ``--secret``; read at the
#: CLI's door).
SECRET_ENV = env_name("emulator_secret")
_DEFAULT_ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/local"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def emulate(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option(help="Address to bind (loopback unless --allow-remote).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="TCP port; 0 picks a free one.")
    ] = 8765,
    policy: Annotated[str, typer.Option(help=POLICY_HELP)] = "random",
    store: Annotated[
        Path | None, typer.Option(help="Run directory or .sqlite file (default runs/emulate-…).")
    ] = None,
    job_arn: Annotated[str, typer.Option(help="ARN of the emulated job.")] = _DEFAULT_ARN,
    lenient: Annotated[
        bool, typer.Option(help="Create an unknown trajectory on its first turn.")
    ] = False,
    allow_remote: Annotated[
        bool, typer.Option(help="Allow a non-loopback --host (requires a shared secret).")
    ] = False,
    secret: Annotated[
        str | None,
        typer.Option(help=f"Shared secret every request must carry (${SECRET_ENV})."),
    ] = None,
    max_body_bytes: Annotated[int, typer.Option(min=1024, help="Request body size cap.")] = 4 << 20,
    max_turns: Annotated[int, typer.Option(min=1, help="Turn cap per trajectory.")] = 256,
    lenient_auth: Annotated[
        bool,
        typer.Option(
            "--lenient-auth",
            help="Check only the shape of SigV4 / bearer credentials, not their signatures.",
        ),
    ] = False,
) -> None:
    """Serve the MTRL Job Runtime emulator on loopback until Ctrl-C."""
    settings = door_settings(ctx)
    secret = secret or settings.emulator_secret
    if not _is_loopback(host):
        if not allow_remote:
            raise UsageError(f"refusing to bind {host}: pass --allow-remote (and a --secret)")
        if not secret:
            raise UsageError(f"binding {host} needs a shared secret: --secret or ${SECRET_ENV}")
    match = JOB_ARN_PATTERN.match(job_arn)
    if not match:
        raise UsageError(f"not a SageMaker job ARN: {job_arn!r}")

    from agent_kit.emulator.policies import load_policy

    run = store or Path("runs") / time.strftime("emulate-%Y%m%d-%H%M%S")
    tune_process(policies=[policy])
    backend = load_policy(policy, settings=settings)
    run_store = _open_store(run)
    served = _Served(
        job_arn=job_arn,
        job_name=match["name"],
        policy=policy,
        lenient=lenient,
        options={
            "host": host,
            "port": port,
            "secret": secret,
            "verify_auth": not lenient_auth,
            "account_id": match["account"],
            "region": match["region"] or "us-west-2",
            "max_body_bytes": max_body_bytes,
            "max_turns_per_trajectory": max_turns,
            "lenient": lenient,
        },
    )
    try:
        asyncio.run(_serve(run_store, backend, served))
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass  # Ctrl-C (or SIGTERM): the service has stopped gracefully on its way out
    finally:
        run_store.close()
    typer.echo(f"emulator stopped; run store at {run_store.path}")


@dataclass(frozen=True)
class _Served:
    """What ``emulate`` serves: its one job and the bring-up's options."""

    job_arn: str
    job_name: str
    policy: str
    lenient: bool
    options: dict[str, Any]


def _open_store(run: Path) -> RunStore:
    """The emulator's run store at ``--store``; a place that cannot hold one (a regular file
    that is no store, a location where nothing can be created) is a usage error naming it."""
    from agent_kit.store import RunStore, resolve_path

    try:
        return RunStore.open(run)
    except OSError as exc:
        raise UsageError(
            f"cannot open the run store {run} ({resolve_path(run)}): "
            f"{exc.strerror or exc}; --store takes a run directory or a .sqlite file"
        ) from None


async def _serve(run_store: RunStore, backend: PolicyBackend, served: _Served) -> None:
    """Serve through the one bring-up (:func:`~agent_kit.emulator.local_service.local_service`)
    until SIGINT (Ctrl-C) or SIGTERM cancels this task; the service stops gracefully on the way
    out. A port that cannot be bound is a usage error."""
    from agent_kit.emulator.local_service import local_service

    task = asyncio.current_task()
    if task is not None:  # always, under asyncio.run
        for stop in (signal.SIGINT, signal.SIGTERM):  # even where a shell ignored SIGINT
            asyncio.get_running_loop().add_signal_handler(stop, task.cancel)
    async with local_service(run_store, backend, **served.options) as svc:
        record = {"policy": served.policy, "lenient": served.lenient}
        svc.emulator.create_job(served.job_name, record, arn=served.job_arn)
        _print_banner(svc, served.job_arn, served.policy, run_store.path)
        await svc.serve_forever()


def _print_banner(svc: LocalService, job_arn: str, policy: str, store_path: str) -> None:
    """What the emulator serves, an example payload (with its rollout token), and how to point
    an agent at it (the AWS keys it must sign with)."""
    emu, keys, url = svc.emulator, svc.keys, svc.url
    trajectory = emu.open_trajectory(job_arn, '{"prompt": "hello"}')
    token = keys.mint(job_arn, trajectory.id)
    example = emu.rollout_payload(trajectory, url, api_key=token)
    typer.echo(f"agent-kit emulator serving {url}  (policy {policy}, store {store_path})")
    typer.echo("example payload (a fresh rolloutId, ready to POST to your agent's /invocations):")
    typer.echo("  " + json.dumps(example))
    typer.echo("point an agent at it:")
    typer.echo(f"  RFT_RUNTIME_ENDPOINT={url}")
    typer.echo(f"  AWS_ENDPOINT_URL_SAGEMAKERJOBRUNTIME={url}")
    typer.echo(f"  AWS_REGION={emu.region}")
    typer.echo(f"  AWS_ACCESS_KEY_ID={keys.access_key_id}")
    typer.echo(f"  AWS_SECRET_ACCESS_KEY={keys.secret_access_key}")
    typer.echo("  (unset AWS_SESSION_TOKEN; the emulator verifies SigV4 and bearer signatures")
    typer.echo("   against these keys, or only their shape with --lenient-auth)")
    typer.echo("  or, for one rollout: Authorization: Bearer <its payload's metadata.apiKey>")
    typer.echo(
        f"more rollouts: curl -X POST {url}/_emulator/rollouts"
        ' -H "content-type: application/json" -d \'{"prompt": "..."}\''
    )
    typer.echo("Ctrl-C to stop.", nl=True)


def register(app: typer.Typer) -> None:
    """Add the ``emulate`` command to the ``agent-kit`` app."""
    app.command("emulate")(emulate)
