"""``agent-kit run``: a local job against the emulator, from options to exit code.

``run`` parses its options (:mod:`agent_kit.cli.run_options`) into one
:class:`~agent_kit.driver.config.RunConfig`, plays it with
:func:`~agent_kit.driver.local.play_local` (which takes SIGINT/SIGTERM: see
:mod:`agent_kit.driver.stop`), renders the outcome and maps it to an exit code. On a terminal
(not with ``--json`` or when stdout is not a TTY) it shows the live display
(:class:`~agent_kit.cli.live.LiveProgress`), then the end summary
(:func:`~agent_kit.reporting.report.render_terminal`); ``--json`` prints the summary JSON as the
last line of stdout. A job that fails with one of the service's job-killing reasons exits with
code 9 after the summary is written; the first Ctrl-C or SIGTERM stops the job gracefully
(``--grace``) and exits 130 / 143 after the summary, a second one aborts at once;
a job whose rollouts failed as a whole (status ``rollouts_failed``: none got a real reward,
or more than ``--max-floor-rate``, default 0.5, got the floor reward) exits 6 after the summary;
``--mlflow`` logs the run as it ends (:class:`~agent_kit.cli.export.MlflowTarget`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import typer
from rich.console import Console, RenderableType
from rich.text import Text

from agent_kit.cli.export import MlflowTarget
from agent_kit.cli.live import LiveProgress
from agent_kit.cli.process import tune_process
from agent_kit.cli.program import program
from agent_kit.cli.run_options import (
    AdvertiseUrlOption,
    AgentMemoryOption,
    AsJsonOption,
    AuxPolicyOption,
    BatchSizeOption,
    ChaosOption,
    ConcurrencyOption,
    ContractOption,
    DatasetOption,
    EmulatorPortOption,
    EndpointUrlOption,
    EntrypointArgument,
    FailFastOption,
    GraceOption,
    GroupSizeOption,
    LenientAuthOption,
    MaxFloorRateOption,
    MaxRetriesOption,
    MaxTokensOption,
    MlflowExperimentOption,
    MlflowOption,
    MlflowUriOption,
    NameOption,
    OutOption,
    PolicyOption,
    RateOption,
    ReportGraceOption,
    ResumeOption,
    RolloutTimeoutOption,
    SeedOption,
    StepsOption,
    SuccessThresholdOption,
    TemperatureOption,
    TopPOption,
    WorkersOption,
    door_settings,
    settings_of,
)
from agent_kit.cli.stopping import aborts_exit, announcer, exit_interrupted
from agent_kit.driver.config import DEFAULT_STOP_GRACE_S, JobConfig, RunConfig
from agent_kit.driver.invokers.process_tree import parse_memory
from agent_kit.driver.job import JobResult
from agent_kit.driver.local import LocalRun, play_local
from agent_kit.errors import AgentKitError, RewardError, UsageError
from agent_kit.reporting.terminal import print_rendered, render_terminal
from agent_kit.reporting.words import plural
from agent_kit.store import RunStore
from agent_kit.store.layout import RunLayout
from agent_kit.store.run_figures import ROLLOUTS_FAILED
from agent_kit.store.store_file import verify

__all__ = ["register"]


def _memory(text: str) -> int:
    """``--agent-memory`` in bytes; UsageError naming the option when malformed."""
    try:
        return parse_memory(text)
    except ValueError as exc:
        raise UsageError(f"--agent-memory: {exc}") from None


def _render_summary(result: JobResult, err: Console) -> RenderableType:
    """The end summary (:func:`~agent_kit.reporting.report.render_terminal`); when it cannot be
    rendered, one warning line on stderr and a one-line digest of the driver's figures."""
    try:
        return render_terminal(result.written_summary(), result.run_dir, program=program())
    except Exception as exc:  # noqa: BLE001 - the digest below still shows the essentials
        err.print(
            f"warning: the end summary could not be rendered ({type(exc).__name__}: {exc}); "
            f"the summary is in {RunLayout(result.run_dir).summary}",
            markup=False,
        )
        return Text(
            f"{result.status}: {result.succeeded} rewarded / {plural(result.total, 'slot')}, "
            f"{result.failed} lost (no reward); run directory {result.run_dir}"
        )


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
        typer.echo(json.dumps(result.written_summary().document(), ensure_ascii=False, default=str))
    else:
        print_rendered(console, _render_summary(result, err))
    if mlflow is not None:
        mlflow.export(result, console, err, as_json=as_json)
    if result.status == "failed":
        err.print(f"summary written to {RunLayout(result.run_dir).summary}", markup=False)
        result.raise_for_status()


def _check_rollouts(result: JobResult) -> None:
    """:class:`RewardError` (exit 6) when the job's rollouts failed as a whole (status
    ``rollouts_failed``: none got a real reward, or too many got the agent's floor reward)."""
    if result.status == ROLLOUTS_FAILED:
        raise RewardError(result.failure or "the job's rollouts failed")


def _play(config: RunConfig, console: Console, err: Console, *, live: bool) -> LocalRun:
    """Play the run to its end (or its graceful stop), with the live display when ``live``;
    the first signal is announced on stderr. Raises :class:`~agent_kit.errors.Aborted` after a
    second one."""

    stopping = announcer(err, config.grace)
    if not live:
        return play_local(config, on_stop=stopping)
    display = LiveProgress(console)
    with display:
        return play_local(config, progress=display.show, on_stop=stopping)


#: The job's settings' defaults, which ``run``'s options default to (tests/cli pins them).
_JOB: Final = JobConfig()
_RUN: Final = RunConfig()


def run(
    ctx: typer.Context,
    entrypoint: EntrypointArgument = None,
    dataset: DatasetOption = None,
    policy: PolicyOption = _JOB.policy,
    aux_policy: AuxPolicyOption = None,
    group_size: GroupSizeOption = _JOB.group_size,
    batch_size: BatchSizeOption = None,
    steps: StepsOption = _JOB.steps,
    concurrency: ConcurrencyOption = _JOB.concurrency,
    rollout_timeout: RolloutTimeoutOption = _JOB.rollout_timeout,
    max_retries: MaxRetriesOption = _JOB.max_retries,
    temperature: TemperatureOption = _JOB.temperature,
    top_p: TopPOption = _JOB.top_p,
    max_tokens: MaxTokensOption = _JOB.max_tokens,
    success_threshold: SuccessThresholdOption = _JOB.success_threshold,
    fail_fast: FailFastOption = _JOB.fail_fast,
    report_grace: ReportGraceOption = _JOB.report_grace,
    seed: SeedOption = _JOB.seed,
    out: OutOption = _RUN.out,
    name: NameOption = None,
    resume: ResumeOption = None,
    workers: WorkersOption = None,
    rate: RateOption = None,
    endpoint_url: EndpointUrlOption = None,
    advertise_url: AdvertiseUrlOption = None,
    emulator_port: EmulatorPortOption = None,
    grace: GraceOption = DEFAULT_STOP_GRACE_S,
    max_floor_rate: MaxFloorRateOption = None,
    lenient_auth: LenientAuthOption = False,
    agent_memory: AgentMemoryOption = None,
    chaos: ChaosOption = None,
    contract: ContractOption = _JOB.contract,
    mlflow: MlflowOption = False,
    mlflow_uri: MlflowUriOption = None,
    mlflow_experiment: MlflowExperimentOption = None,
    as_json: AsJsonOption = False,
) -> None:
    """Play a dataset against an agent the way a SageMaker MTRL job does, locally.

    The first Ctrl-C (or SIGTERM) stops starting rollouts, gives the ones in flight --grace
    seconds, writes the summary (status interrupted) and exits 130 (143 for SIGTERM); a second
    one aborts at once. ``--resume RUN_DIR`` then plays the remaining slots.
    """
    options = {k: v for k, v in locals().items() if k != "ctx"}
    job = settings_of(JobConfig, options)
    config = settings_of(  # refuses a negative --grace
        RunConfig,
        options,
        job=job if resume is None else None,  # a resumed run plays with its recorded settings
        agent_memory=None if agent_memory is None else _memory(agent_memory),
        settings=door_settings(ctx),
    )
    for flag, given in (("--chaos", chaos is not None), ("--contract", contract != _JOB.contract)):
        if resume is not None and given:
            raise UsageError(f"{flag} cannot change a resumed run (it keeps its recorded settings)")
    export_to = MlflowTarget.from_options(mlflow, mlflow_uri, mlflow_experiment)
    config.check()  # after the settings' own checks: nothing is created for a bad setting
    named = [p for p in (policy, aux_policy) if p is not None]
    tune_process(policies=named if resume is None else resumed_policies(resume))
    _play_and_exit(config, as_json=as_json, mlflow=export_to)


def resumed_policies(run_dir: Path) -> list[str]:
    """The policy specs (``--policy``, ``--aux-policy``) a run to resume recorded, which the
    process is tuned for (a resumed run plays with its recorded settings, not the options'
    defaults); none when the run cannot be read: resuming it then says why."""
    try:
        verify(run_dir)  # no store, or a damaged one: refused by the resume, left as it is
        with RunStore.open(run_dir, readonly=True) as store:
            jobs = store.list_jobs()
        job = JobConfig.from_record(jobs[-1].config, run_dir) if jobs else None
    except AgentKitError:
        return []
    return [] if job is None else [p for p in (job.policy, job.aux_policy) if p]


def _play_and_exit(config: RunConfig, *, as_json: bool, mlflow: MlflowTarget | None) -> None:
    """Play the run, print its outcome and exit with its code."""
    console = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    with aborts_exit(err):
        played = _play(config, console, err, live=console.is_terminal and not as_json)
    _print_result(played.result, console, err, as_json=as_json, mlflow=mlflow)
    if played.result.status == "interrupted":
        exit_interrupted(played.stopped_by, err)
    _check_rollouts(played.result)


def register(app: typer.Typer) -> None:
    """Add the ``run`` command to the ``agent-kit`` Typer app."""
    app.command("run")(run)
