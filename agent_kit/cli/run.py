"""``agent-kit run``: a local job against the emulator.

``run`` shows a ``rich.progress`` display on a terminal (not with ``--json`` or when stdout is
not a TTY), then the end summary (:func:`~agent_kit.reporting.report.render_terminal`);
``--json`` prints the summary JSON as the last line of stdout. A job that fails with one of the
service's job-killing reasons exits with code 9 after the summary is written; the first Ctrl-C
or SIGTERM stops the job gracefully (``--grace``) and exits 130 / 143 after the summary, a second
one aborts at once (:class:`_Signals`); ``--max-floor-rate`` turns too many floor rewards into
exit 6 (:func:`_check_floor_rate`).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, NoReturn

import typer
from rich.console import Console, RenderableType
from rich.text import Text

from agent_kit.cli.export import MlflowTarget
from agent_kit.cli.live import LiveProgress
from agent_kit.driver.job import (
    DEFAULT_STOP_GRACE_S,
    JobConfig,
    JobResult,
    ProgressHook,
)
from agent_kit.driver.local import run_local
from agent_kit.emulator.policies.registry import POLICY_HELP
from agent_kit.errors import RewardError, UsageError
from agent_kit.reporting.report import SUMMARY_FILE, render_terminal

__all__ = ["register"]


def _render_summary(result: JobResult, err: Console) -> RenderableType:
    """The end summary (:func:`~agent_kit.reporting.report.render_terminal`); when it cannot be
    rendered, one warning line on stderr and a one-line digest of the driver's figures."""
    try:
        return render_terminal(result.summary, result.run_dir)
    except Exception as exc:  # noqa: BLE001 - the digest below still shows the essentials
        err.print(
            f"warning: the end summary could not be rendered ({type(exc).__name__}: {exc}); "
            f"the summary is in {result.run_dir / SUMMARY_FILE}",
            markup=False,
        )
        return Text(
            f"{result.status}: {result.succeeded} rewarded / {result.total} slots, "
            f"{result.failed} failed (no reward); run directory {result.run_dir}"
        )


@dataclass(frozen=True)
class _RunTarget:
    """What ``run`` plays and where: the options besides the job's settings (:class:`JobConfig`)."""

    entrypoint: str | None
    dataset: Path | None
    out: Path
    resume: Path | None
    workers: int | None
    rate: float | None
    endpoint_url: str | None
    advertise_url: str | None
    emulator_port: int | None

    def check(self) -> None:
        """Refuse option combinations that cannot work, before anything starts."""
        if self.resume is None and (self.entrypoint is None or self.dataset is None):
            raise UsageError("give ENTRYPOINT and --dataset (or --resume RUN_DIR)")
        if self.advertise_url is not None and self.resume is None and not self.emulator_port:
            raise UsageError(
                "--advertise-url needs --emulator-port N: the fixed local port your tunnel "
                "forwards to (e.g. ssh -R 443:127.0.0.1:N, cloudflared --url http://127.0.0.1:N)"
            )
        if self.resume is None:
            _check_out(self.out)


def _check_out(out: Path) -> None:
    """``--out`` must be a directory this process can create and write run directories in."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out} cannot be created: {exc.strerror or exc}") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out} is not writable")


#: Exit codes of a run stopped by a signal: 128 + the signal's number, as a shell reports it.
_SIGNAL_EXIT: Final = {signal.SIGINT: 130, signal.SIGTERM: 143}


class _Aborted(Exception):
    """A second Ctrl-C/SIGTERM cut the graceful stop short."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Signals:
    """SIGINT/SIGTERM during a job: the first sets ``stop`` (the driver's graceful stop), the
    second cancels the job at once (the driver still closes the store and writes the summary)."""

    def __init__(self, err: Console, grace: float) -> None:
        self.stop = asyncio.Event()
        self.received: list[int] = []
        self._err = err
        self._grace = grace
        self._task: asyncio.Task[Any] | None = None
        self._installed: list[tuple[int, Any]] = []

    def install(self) -> None:
        """Take SIGINT and SIGTERM in the running loop (not possible off the main thread: then
        Ctrl-C stays a KeyboardInterrupt)."""
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        for signum in _SIGNAL_EXIT:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN:  # e.g. a shell's background job: leave it ignored
                continue
            try:
                loop.add_signal_handler(signum, self._on_signal, signum)
            except (ValueError, RuntimeError, NotImplementedError):
                continue
            self._installed.append((signum, previous))

    def remove(self) -> None:
        """Give the signals back to the handlers they had before :meth:`install`."""
        loop = asyncio.get_running_loop()
        for signum, previous in self._installed:
            loop.remove_signal_handler(signum)
            if previous is not None:  # None: a handler not set from Python, left as is
                signal.signal(signum, previous)
        self._installed.clear()

    def _on_signal(self, signum: int) -> None:
        self.received.append(signum)
        if len(self.received) == 1:
            self.stop.set()
            self._err.print(
                f"{signal.Signals(signum).name}: stopping — no new rollouts, {self._grace:g}s "
                "for the ones in flight (Ctrl-C again to abort now)",
                markup=False,
            )
        elif len(self.received) == 2 and self._task is not None:
            self._task.cancel()

    @property
    def exit_code(self) -> int | None:
        """130 (SIGINT) or 143 (SIGTERM) after a signal, by the first one received."""
        return _SIGNAL_EXIT[signal.Signals(self.received[0])] if self.received else None


def _play(
    target: _RunTarget,
    config: JobConfig | None,
    live: LiveProgress | None,
    signals: _Signals,
    grace: float,
) -> JobResult:
    """Run the job to its end (or its graceful stop), with the live display when there is one.
    Raises :class:`_Aborted` when a second signal cut it short."""
    progress: ProgressHook | None = live.show if live is not None else None

    async def job() -> JobResult:
        signals.install()
        try:
            return await _job()
        except asyncio.CancelledError:
            if len(signals.received) > 1:
                raise _Aborted(signals.received[0]) from None
            raise
        finally:
            signals.remove()

    async def _job() -> JobResult:
        return await run_local(
            target.entrypoint,
            target.dataset,
            config,
            out_dir=target.out,
            resume=target.resume,
            workers=target.workers,
            progress=progress,
            rate=target.rate,
            endpoint_url=target.endpoint_url,
            advertise_url=target.advertise_url,
            emulator_port=target.emulator_port,
            stop=signals.stop,
            stop_grace=grace,
        )

    if live is None:
        return asyncio.run(job())
    with live:
        return asyncio.run(job())


def _print_result(
    result: JobResult,
    console: Console,
    err: Console,
    *,
    as_json: bool,
    mlflow: MlflowTarget | None = None,
) -> None:
    """The summary JSON (``--json``) or the end summary, the MLflow export (``--mlflow``);
    then, for a failed job, where its summary is and :class:`~agent_kit.errors.JobFailed`
    (exit 9)."""
    if as_json:
        typer.echo(json.dumps(result.summary, ensure_ascii=False, default=str))
    else:
        console.print(_render_summary(result, err), soft_wrap=False, crop=False)
    if mlflow is not None:
        mlflow.export(result, console, err, as_json=as_json)
    if result.status == "failed":
        err.print(f"summary written to {result.run_dir / SUMMARY_FILE}", markup=False)
        result.raise_for_status()


def _check_floor_rate(summary: dict[str, Any], max_rate: float | None) -> None:
    """:class:`RewardError` (exit 6) when more than ``max_rate`` of the finished rollouts got
    the agent's floor reward (an agent-side failure)."""
    if max_rate is None:
        return
    counts = summary.get("counts") or {}
    finished = int(counts.get("rewarded", 0)) + int(counts.get("lost", 0))
    floors = int(summary.get("floor_rewards", 0))
    if finished and floors / finished > max_rate:
        reasons = summary.get("agent_failures") or [{}]
        top = f"; most often: {reasons[0]['reason']}" if reasons[0].get("reason") else ""
        raise RewardError(
            f"{floors} of {finished} finished rollouts got the floor reward "
            f"({floors / finished:.1%} > --max-floor-rate {max_rate:g}){top}"
        )


def _exit_interrupted(signals: _Signals, err: Console) -> NoReturn:
    """Exit 130 (SIGINT) or 143 (SIGTERM) after a signal stopped the run."""
    code = signals.exit_code or _SIGNAL_EXIT[signal.SIGINT]
    if code != _SIGNAL_EXIT[signal.SIGINT]:  # the root command says "interrupted" for a 130
        err.print("interrupted", markup=False)
    raise typer.Exit(code)


def run(
    entrypoint: Annotated[
        str | None,
        typer.Argument(
            help="Agent: entrypoint .py file, http:// URL, AgentCore runtime ARN or Lambda ARN "
            "(optional with --resume)."
        ),
    ] = None,
    dataset: Annotated[
        Path | None, typer.Option(help="Prompts: .jsonl, .json, .csv or .parquet.")
    ] = None,
    policy: Annotated[str, typer.Option(help=POLICY_HELP)] = "random",
    group_size: Annotated[int, typer.Option(help="Rollouts per prompt (2..32).")] = 8,
    batch_size: Annotated[
        int | None, typer.Option(help="Prompts per step (default: all, at most 128).")
    ] = None,
    steps: Annotated[int, typer.Option(help="Training steps to play.")] = 1,
    concurrency: Annotated[int, typer.Option(help="Rollouts in flight at most.")] = 32,
    rollout_timeout: Annotated[
        float, typer.Option(help="Seconds before a rollout is failed and retried.")
    ] = 600.0,
    max_retries: Annotated[int, typer.Option(help="Retries of a timed-out rollout (0..10).")] = 3,
    temperature: Annotated[float, typer.Option(help="inferenceParams.temperature")] = 1.0,
    top_p: Annotated[float, typer.Option(help="inferenceParams.topP")] = 1.0,
    max_tokens: Annotated[int, typer.Option(help="inferenceParams.maxTokens")] = 4096,
    success_threshold: Annotated[
        float, typer.Option(help="A rollout succeeds when its reward is at least this.")
    ] = 1.0,
    fail_fast: Annotated[
        bool,
        typer.Option(
            help="Stop the job at the first job-killing failure, as the service does "
            "(--no-fail-fast only flags it and goes on)."
        ),
    ] = True,
    report_grace: Annotated[
        float,
        typer.Option(help="Seconds to wait for CompleteRollout/UpdateReward after the answer."),
    ] = 30.0,
    seed: Annotated[int, typer.Option(help="Seed of the policy and of the run.")] = 0,
    out: Annotated[Path, typer.Option(help="Parent directory of run directories.")] = Path("runs"),
    name: Annotated[
        str | None, typer.Option(help="Job name (default: <entrypoint>-<timestamp>).")
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(help="Continue the run in this directory (its recorded settings are used)."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            help="Agent processes for a .py entrypoint (default: one per usable CPU core, "
            "at most --concurrency)."
        ),
    ] = None,
    rate: Annotated[
        float | None, typer.Option(help="Invocations per second cap (AgentCore default 25).")
    ] = None,
    endpoint_url: Annotated[
        str | None, typer.Option(help="AWS endpoint override for ARN targets (local fakes).")
    ] = None,
    advertise_url: Annotated[
        str | None,
        typer.Option(
            help="Public https URL of a tunnel to the emulator, for a deployed agent; payloads "
            "get <URL>/<random token> and the emulator serves only under the token."
        ),
    ] = None,
    emulator_port: Annotated[
        int | None,
        typer.Option(
            help="Fixed loopback port of the emulator (the port your tunnel forwards to; "
            "default: ephemeral, or the one recorded by --resume)."
        ),
    ] = None,
    grace: Annotated[
        float,
        typer.Option(
            help="Seconds in-flight rollouts get to finish after the first Ctrl-C or SIGTERM "
            "(a second one aborts at once)."
        ),
    ] = DEFAULT_STOP_GRACE_S,
    max_floor_rate: Annotated[
        float | None,
        typer.Option(
            help="Exit 6 when more than this fraction (0..1) of the finished rollouts got the "
            "agent's floor reward (default: off)."
        ),
    ] = None,
    chaos: Annotated[
        str | None,
        typer.Option(
            "--chaos",
            help="Inject faults, reproducibly by --seed: a preset (service, heavy) or "
            "FAULT=RATE[@SECONDS],… e.g. policy_5xx=0.05,latency=0.1@2 (docs/emulator.md).",
            show_default=False,
        ),
    ] = None,
    mlflow: Annotated[
        bool,
        typer.Option(
            "--mlflow",
            help="Log the run to MLflow when it ends, as the real job does (the mlflow extra; "
            "default store sqlite:///<--out>/mlflow.db).",
        ),
    ] = False,
    mlflow_uri: Annotated[
        str | None,
        typer.Option(
            "--mlflow-uri",
            help="MLflow tracking URI for --mlflow (implies it).",
            show_default=False,
        ),
    ] = None,
    mlflow_experiment: Annotated[
        str | None,
        typer.Option(
            "--mlflow-experiment",
            help="MLflow experiment for --mlflow (default agent-kit; implies --mlflow).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="No live display; summary JSON as the last stdout line.")
    ] = False,
) -> None:
    """Play a dataset against an agent the way a SageMaker MTRL job does, locally.

    The first Ctrl-C (or SIGTERM) stops starting rollouts, gives the ones in flight --grace
    seconds, writes the summary (status interrupted) and exits 130 (143 for SIGTERM); a second
    one aborts at once. ``--resume RUN_DIR`` then plays the remaining slots.
    """
    if grace < 0:
        raise UsageError(f"--grace must be ≥ 0, got {grace:g}")
    if max_floor_rate is not None and not 0 <= max_floor_rate <= 1:
        raise UsageError(f"--max-floor-rate must be 0..1, got {max_floor_rate:g}")
    target = _RunTarget(
        entrypoint=entrypoint,
        dataset=dataset,
        out=out,
        resume=resume,
        workers=workers,
        rate=rate,
        endpoint_url=endpoint_url,
        advertise_url=advertise_url,
        emulator_port=emulator_port,
    )
    config: JobConfig | None = None  # a resumed run plays with the settings it recorded
    if resume is None:
        config = JobConfig(
            name=name,
            policy=policy,
            group_size=group_size,
            batch_size=batch_size,
            steps=steps,
            concurrency=concurrency,
            rollout_timeout=rollout_timeout,
            max_retries=max_retries,
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            success_threshold=success_threshold,
            fail_fast=fail_fast,
            seed=seed,
            report_grace=report_grace,
            chaos=chaos,
        )
    elif chaos is not None:
        raise UsageError("--chaos cannot change a resumed run (it keeps its recorded settings)")
    export_to = None
    if mlflow or mlflow_uri is not None or mlflow_experiment is not None:
        export_to = MlflowTarget(mlflow_uri, mlflow_experiment)
        export_to.check()
    target.check()  # after the settings' own checks: nothing is created for a bad setting
    console = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    live = LiveProgress(console) if console.is_terminal and not as_json else None
    signals = _Signals(err, grace)
    try:
        result = _play(target, config, live, signals, grace)
    except _Aborted:
        err.print("aborted: the run directory can be resumed with --resume", markup=False)
        _exit_interrupted(signals, err)
    _print_result(result, console, err, as_json=as_json, mlflow=export_to)
    if result.status == "interrupted":
        _exit_interrupted(signals, err)
    _check_floor_rate(result.summary, max_floor_rate)


def register(app: typer.Typer) -> None:
    """Add the ``run`` command to the ``agent-kit`` Typer app."""
    app.command("run")(run)
