"""``agent-kit run`` (a local job against the emulator) and ``agent-kit invoke`` (one rollout).

``run`` shows a ``rich.progress`` display on a terminal (not with ``--json`` or when stdout is
not a TTY), then the end summary (:func:`~agent_kit.reporting.report.render_terminal`);
``--json`` prints the summary JSON as the last line of stdout. A job that fails with one of the
service's job-killing reasons exits with code 9 after the summary is written; the first Ctrl-C
or SIGTERM stops the job gracefully (``--grace``) and exits 130 / 143 after the summary, a second
one aborts at once (:class:`_Signals`); ``--max-floor-rate`` turns too many floor rewards into
exit 6 (:func:`_check_floor_rate`).

``invoke`` plays one rollout and prints its turn-by-turn transcript, read back from the run
store, then exits 7 if the rollout was not reported and 6 if the agent's answer names an
environment or reward-function failure (see :func:`_outcome_error`).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, NoReturn

import typer
from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
from rich.progress import Progress as RichProgress
from rich.text import Text

from agent_kit.cli.export import print_export
from agent_kit.driver.dataset import load_dataset
from agent_kit.driver.job import (
    DEFAULT_STOP_GRACE_S,
    NO_REWARD_REASON,
    InvokeOutcome,
    JobConfig,
    JobResult,
    Progress,
    ProgressHook,
    invoke_once,
)
from agent_kit.driver.local import run_local
from agent_kit.emulator.policies.registry import POLICY_HELP
from agent_kit.errors import (
    AgentKitError,
    EnvironmentFailure,
    ReportingError,
    RewardError,
    UsageError,
)
from agent_kit.export.mlflow import export_run, require_mlflow
from agent_kit.reporting.report import SUMMARY_FILE, num, render_terminal
from agent_kit.reporting.summary_schema import Summary
from agent_kit.store import RunStore, TurnRow

__all__ = ["register"]


def _fmt_seconds(value: float | None) -> str:
    if value is None:
        return "–"
    value = max(0.0, value)
    if value < 60:
        return f"{value:.0f}s"
    minutes, seconds = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class _LiveProgress(RichProgress):
    """The live display of a job: a ``rich.progress`` row (step, bar, rollouts done of total,
    rate and ETA as the driver measures them) and a line of counts below it."""

    def __init__(self, console: Console) -> None:
        self.counts = Text("")  # read by get_renderables, which Progress calls as it is built
        super().__init__(
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=30),
            MofNCompleteColumn(),
            TextColumn("rollouts"),
            TextColumn("{task.fields[speed]}"),
            console=console,
            refresh_per_second=4,
        )
        self._task = self.add_task("starting the emulator and the agent…", total=None, speed="")

    def show(self, p: Progress) -> None:
        """The driver's progress hook: show one snapshot."""
        counts = Text(
            f"rewarded {p.succeeded}  failed {p.failed}  retried {p.retried}  "
            f"in flight {p.in_flight}  reward mean {num(p.reward_mean)}"
        )
        if p.job_failures:
            counts.append(f"  job failures: {p.job_failures}", style="bold red")
        self.counts = counts
        self.update(
            self._task,
            description=f"step {p.step + 1}/{p.steps}",
            total=p.total,
            completed=p.done,
            speed=f"{p.rate:.2f}/s  ETA {_fmt_seconds(p.eta)}",
        )

    def get_renderables(self) -> Iterable[RenderableType]:
        """The task row, then the counts line (once the first snapshot came)."""
        yield from super().get_renderables()
        if self.counts:
            yield self.counts


def _render_summary(result: JobResult, err: Console) -> RenderableType:
    """The end summary (:func:`~agent_kit.reporting.report.render_terminal`); when it cannot be
    rendered, one warning line on stderr and a one-line digest of the driver's figures."""
    try:
        return render_terminal(result.written_summary(), result.run_dir)
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
    live: _LiveProgress | None,
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


@dataclass(frozen=True)
class _MlflowTarget:
    """Where ``--mlflow`` logs the run once it ends (None: the run's default store)."""

    tracking_uri: str | None
    experiment: str | None

    def check(self) -> None:
        """The mlflow extra is installed: checked before the run, not after it."""
        require_mlflow()

    def export(self, result: JobResult, console: Console, err: Console, *, as_json: bool) -> None:
        """Log the run (also an interrupted or failed one); a failed export is one warning
        line, the run's own outcome and exit code stand."""
        try:
            exported = export_run(
                result.run_dir,
                tracking_uri=self.tracking_uri,
                experiment=self.experiment,
                job=result.job_arn,
            )
        except Exception as exc:  # noqa: BLE001 - the run is recorded; export it again later
            err.print(
                f"warning: the MLflow export failed ({type(exc).__name__}: {exc}); retry with "
                f"agent-kit export mlflow {result.run_dir}",
                markup=False,
            )
            return
        print_export(exported, err if as_json else console)


def _print_result(
    result: JobResult,
    console: Console,
    err: Console,
    *,
    as_json: bool,
    mlflow: _MlflowTarget | None = None,
) -> None:
    """The summary JSON (``--json``) or the end summary, the MLflow export (``--mlflow``);
    then, for a failed job, where its summary is and :class:`~agent_kit.errors.JobFailed`
    (exit 9)."""
    if as_json:
        typer.echo(json.dumps(result.written_summary().document(), ensure_ascii=False, default=str))
    else:
        console.print(_render_summary(result, err), soft_wrap=False, crop=False)
    if mlflow is not None:
        mlflow.export(result, console, err, as_json=as_json)
    if result.status == "failed":
        err.print(f"summary written to {result.run_dir / SUMMARY_FILE}", markup=False)
        result.raise_for_status()


def _check_floor_rate(summary: Summary, max_rate: float | None) -> None:
    """:class:`RewardError` (exit 6) when more than ``max_rate`` of the finished rollouts got
    the agent's floor reward (an agent-side failure)."""
    if max_rate is None:
        return
    finished = summary.counts.rewarded + summary.counts.lost
    floors = summary.floor_rewards
    if finished and floors / finished > max_rate:
        reasons = summary.agent_failures
        top = f"; most often: {reasons[0].reason}" if reasons and reasons[0].reason else ""
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
        export_to = _MlflowTarget(mlflow_uri, mlflow_experiment)
        export_to.check()
    target.check()  # after the settings' own checks: nothing is created for a bad setting
    console = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    live = _LiveProgress(console) if console.is_terminal and not as_json else None
    signals = _Signals(err, grace)
    try:
        result = _play(target, config, live, signals, grace)
    except _Aborted:
        err.print("aborted: the run directory can be resumed with --resume", markup=False)
        _exit_interrupted(signals, err)
    _print_result(result, console, err, as_json=as_json, mlflow=export_to)
    if result.status == "interrupted":
        _exit_interrupted(signals, err)
    _check_floor_rate(result.written_summary(), max_floor_rate)


# -- invoke ------------------------------------------------------------------------------------


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return "" if content is None else str(content)


def _print_message(console: Console, message: dict[str, Any]) -> None:
    role = str(message.get("role", "?"))
    style = {"system": "dim", "user": "cyan", "tool": "yellow", "assistant": "green"}.get(role, "")
    label = "tool result" if role == "tool" else role
    text = _message_text(message)
    if text:
        console.print(Text(f"  {label}: ", style=f"bold {style}") + Text(text))
    for call in message.get("tool_calls") or []:
        fn = call.get("function", {}) if isinstance(call, dict) else {}
        console.print(
            Text("  tool call: ", style="bold magenta")
            + Text(f"{fn.get('name')}({fn.get('arguments')})")
        )


def _print_transcript(console: Console, turns: list[TurnRow]) -> None:
    previous = 0
    for turn in turns:
        messages = list(turn.request.get("messages") or [])
        console.print(
            Text(
                f"turn {turn.idx + 1}  {turn.route}  prompt {turn.prompt_tokens} · completion "
                f"{turn.completion_tokens} tokens{' (estimated)' if turn.usage_estimated else ''}"
                f"  {turn.latency_ms:.1f} ms",
                style="bold",
            )
        )
        # Messages new since the previous turn (its own assistant reply is echoed back first).
        start = previous + 1 if previous else 0
        for message in messages[start:]:
            if isinstance(message, dict):
                _print_message(console, message)
        previous = len(messages)
        tools = turn.request.get("tools") or []
        if tools and turn.idx == 0:
            names = [str(t.get("function", {}).get("name")) for t in tools if isinstance(t, dict)]
            console.print(Text(f"  tools offered: {', '.join(names)}", style="dim"))
        choices = turn.response.get("choices") or [{}]
        reply = choices[0].get("message", {}) if isinstance(choices[0], dict) else {}
        console.print(Text("  policy →", style="bold green"))
        _print_message(console, {"role": "assistant", **reply})


def _outcome_json(outcome: InvokeOutcome, turns: list[TurnRow]) -> dict[str, Any]:
    result = outcome.result
    return {
        "trajectory_id": outcome.trajectory_id,
        "state": outcome.state,
        "reason": outcome.reason,
        "reward": outcome.reward,
        "turns": [
            {
                "route": t.route,
                "request": t.request,
                "response": t.response,
                "prompt_tokens": t.prompt_tokens,
                "completion_tokens": t.completion_tokens,
            }
            for t in turns
        ],
        "agent_status": None if result is None else result.status,
        "agent_response": None if result is None else result.body,
        "agent_error": None if result is None else result.error,
        "store": str(outcome.store_path),
    }


def invoke(
    entrypoint: Annotated[
        str, typer.Argument(help="Agent: entrypoint .py file, http:// URL or ARN.")
    ],
    prompt: Annotated[
        str | None, typer.Option(help="The prompt string (often a JSON task object).")
    ] = None,
    dataset: Annotated[Path | None, typer.Option(help="Take the prompt from this dataset.")] = None,
    row: Annotated[int, typer.Option(help="Row of --dataset (0-based).")] = 0,
    policy: Annotated[str, typer.Option(help=POLICY_HELP)] = "random",
    temperature: Annotated[float, typer.Option(help="inferenceParams.temperature")] = 1.0,
    timeout: Annotated[float, typer.Option(help="Rollout timeout in seconds.")] = 120.0,
    seed: Annotated[int, typer.Option(help="Policy seed.")] = 0,
    out: Annotated[
        Path | None, typer.Option(help="Keep the run store here (default: a temporary directory).")
    ] = None,
    endpoint_url: Annotated[
        str | None, typer.Option(help="AWS endpoint override for ARN targets (local fakes).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the transcript as JSON.")] = False,
) -> None:
    """Play one rollout and print its turn-by-turn transcript (the debugging view)."""
    text = _invoke_prompt(prompt, dataset, row)
    console = Console(highlight=False, soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="agent-kit-invoke-") as tmp:
        run_dir = out if out is not None else Path(tmp) / "invoke"
        outcome = asyncio.run(
            invoke_once(
                entrypoint,
                text,
                policy=policy,
                run_dir=run_dir,
                rollout_timeout=timeout,
                temperature=temperature,
                seed=seed,
                endpoint_url=endpoint_url,
            )
        )
        with RunStore.open(outcome.store_path, readonly=True) as store:
            turns = store.list_turns(outcome.trajectory_id)
        error = _outcome_error(outcome, len(turns))
        if as_json:
            typer.echo(json.dumps(_outcome_json(outcome, turns), default=str))
        else:
            _print_outcome(console, outcome, turns, kept=out is not None)
    if error is not None:
        raise error


def _invoke_prompt(prompt: str | None, dataset: Path | None, row: int) -> str:
    """The prompt of ``invoke``: ``--prompt`` itself, or row ``--row`` of ``--dataset``."""
    if prompt is not None and dataset is None:
        return prompt
    if prompt is None and dataset is not None:
        data = load_dataset(dataset)
        if not 0 <= row < len(data):
            raise UsageError(f"--row {row} is outside {dataset} (0..{len(data) - 1})")
        return data[row]
    raise UsageError("give exactly one of --prompt TEXT or --dataset PATH --row N")


def _outcome_error(outcome: InvokeOutcome, n_turns: int) -> AgentKitError | None:
    """The error ``invoke`` exits with for its rollout, or None when nothing went wrong.

    - :class:`ReportingError` (exit 7): the agent says its CompleteRollout/UpdateReward failed
      after its retries (``"reported": false``), or the agent answered after sampling but the
      rollout never got its reward (no reward in time, or never completed);
    - :class:`EnvironmentFailure` / :class:`RewardError` (exit 6): the agent's answer names an
      ``environment`` / ``reward`` failure (the rollout was still reported, with a floor reward).
    """
    tid = outcome.trajectory_id
    result = outcome.result
    body = result.body if result is not None and isinstance(result.body, dict) else {}
    if body.get("reported") is False:
        why = body.get("report_error") or "the agent's report failed"
        return ReportingError(f"rollout {tid} was not reported: {why}")
    answered = result is not None and result.ok and n_turns > 0
    if outcome.state not in ("REWARDED", "FAILED") and (
        answered or outcome.reason == NO_REWARD_REASON
    ):
        return ReportingError(f"rollout {tid} was not reported: {outcome.reason}")
    failure = body.get("failure")
    if isinstance(failure, dict):
        reason = failure.get("reason")
        if failure.get("boundary") == "environment":
            return EnvironmentFailure(f"rollout {tid}: the environment failed: {reason}")
        if failure.get("boundary") == "reward":
            return RewardError(f"rollout {tid}: the reward function failed: {reason}")
    return None


def _print_outcome(
    console: Console, outcome: InvokeOutcome, turns: list[TurnRow], *, kept: bool
) -> None:
    """The human view of ``invoke``: the transcript, the rollout's state, reward and answer."""
    console.print(Text(f"rollout {outcome.trajectory_id}", style="bold underline"))
    _print_transcript(console, turns)
    result = outcome.result
    console.print(Text(f"state: {outcome.state}", style="bold"))
    if outcome.reason:
        console.print(Text(f"reason: {outcome.reason}", style="red"))
    console.print(Text(f"reward (UpdateReward): {outcome.reward}", style="bold"))
    if result is not None:
        body = result.body
        if isinstance(body, dict) and "reward_breakdown" in body:
            console.print(Text(f"reward breakdown: {json.dumps(body['reward_breakdown'])}"))
        console.print(
            Text(f"agent answered ({result.status}): ", style="dim")
            + Text(json.dumps(body, default=str)[:2000] if body is not None else str(result.error))
        )
    if kept:
        console.print(Text(f"run store: {outcome.store_path}", style="dim"))


def register(app: typer.Typer) -> None:
    """Add the ``run`` and ``invoke`` commands to the ``agent-kit`` Typer app."""
    app.command("run")(run)
    app.command("invoke")(invoke)
