"""``agent-kit emulate``: serve the local Job Runtime emulator until Ctrl-C."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agent_kit.cli.process import tune_process
from agent_kit.cli.run_options import door_settings
from agent_kit.contract import JOB_ARN_PATTERN
from agent_kit.emulator.policies.registry import POLICY_HELP
from agent_kit.errors import UsageError
from agent_kit.settings import env_name

if TYPE_CHECKING:
    import uvicorn
    from starlette.applications import Starlette

    from agent_kit.emulator.core import Emulator
    from agent_kit.emulator.run_keys import RunKeys
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

    from agent_kit.emulator.core import Emulator
    from agent_kit.emulator.policies import load_policy

    run = store or Path("runs") / time.strftime("emulate-%Y%m%d-%H%M%S")
    tune_process(policies=[policy])
    backend = load_policy(policy, settings=settings)
    run_store = _open_store(run)
    emu = Emulator(
        run_store,
        backend,
        account_id=match["account"],
        region=match["region"] or "us-west-2",
        max_body_bytes=max_body_bytes,
        max_turns_per_trajectory=max_turns,
        lenient=lenient,
    )
    emu.create_job(match["name"], {"policy": policy, "lenient": lenient}, arn=job_arn)

    sock = _bind(host, port, run_store)
    bound = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{bound}"
    app, keys = _app(emu, url, secret, lenient_auth)

    _print_banner(emu, keys, job_arn, url, policy, run_store.path)
    _serve(app, sock, emu, run_store)
    typer.echo(f"emulator stopped; run store at {run_store.path}")


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


def _bind(host: str, port: int, run_store: RunStore) -> socket.socket:
    """A socket bound on ``host:port``; a port that cannot be bound closes the store and is a
    usage error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        run_store.close()
        raise UsageError(f"cannot bind {host}:{port}: {exc}") from None
    return sock


def _serve(app: Starlette, sock: socket.socket, emu: Emulator, run_store: RunStore) -> None:
    """Serve ``app`` on ``sock`` with uvicorn until Ctrl-C, then close the socket, the emulator
    and the store."""
    server = _server(app)
    try:
        asyncio.run(server.serve(sockets=[sock]))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        try:
            asyncio.run(emu.aclose())
        finally:
            run_store.close()


def _server(app: Starlette) -> uvicorn.Server:
    """The uvicorn server ``emulate`` runs, with uvicorn's own signal handling and the guarded
    config every emulator server uses (:func:`~agent_kit.emulator.serving.uvicorn_config`: a
    connection that sends no complete request within the read timeout is dropped, before any
    authentication; malformed framing is a quiet 400)."""
    import uvicorn

    from agent_kit.emulator.serving import uvicorn_config

    return uvicorn.Server(uvicorn_config(app, timeout_graceful_shutdown=5))


def _app(
    emu: Emulator, url: str, secret: str | None, lenient_auth: bool
) -> tuple[Starlette, RunKeys]:
    """The emulator's app with fresh per-run keys (verified unless ``lenient_auth``); with a
    shared secret the agents' access key id is the secret (the remote-bind rule)."""
    from agent_kit.emulator.run_keys import RunKeys
    from agent_kit.emulator.server import create_app

    keys = RunKeys.generate(access_key_id=secret)
    app = create_app(
        emu,
        auth="sigv4-or-bearer" if lenient_auth else "verify",
        keys=keys,
        secret=secret,
        endpoint=url,
    )
    return app, keys


def _print_banner(
    emu: Emulator, keys: RunKeys, job_arn: str, url: str, policy: str, store_path: str
) -> None:
    """What the emulator serves, an example payload (with its rollout token), and how to point
    an agent at it (the AWS keys it must sign with)."""
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
