"""``agent-kit train``: a GRPO + LoRA rehearsal on a small local model (see docs/train.md).

The options parse into one :class:`~agent_kit.train.TrainConfig`;
:func:`~agent_kit.train.play_train` runs it (the rollouts through the job driver, the updates
through TRL). One line per trained step goes to stderr; the end shows the holdout before and
after, the last adapter and the ``--policy`` spec that plays it. ``--json`` prints train.json
as the last line of stdout. Ctrl-C as for ``run``: the first stops after the rollouts in flight
(exit 130; ``--resume RUN_DIR`` continues from the last adapter), a second aborts. In the warm
start, the first stops it at its next step (exit 130): the line names the ``--resume`` command,
which starts the run over in its directory.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from rich.console import Console

from agent_kit.cli.export import MlflowTarget
from agent_kit.cli.process import tune_process
from agent_kit.cli.run_options import (
    AsJsonOption,
    BatchSizeOption,
    ConcurrencyOption,
    DatasetOption,
    EntrypointArgument,
    GroupSizeOption,
    MaxTokensOption,
    MlflowExperimentOption,
    MlflowOption,
    MlflowUriOption,
    NameOption,
    OutOption,
    ResumeOption,
    SeedOption,
    StepsOption,
    TemperatureOption,
    WorkersOption,
    door_settings,
    quiet_option,
    settings_of,
)
from agent_kit.cli.stopping import aborts_exit, announcer, exit_interrupted, warm_announcer
from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.job import JobResult
from agent_kit.errors import RewardError, UsageError, WarmStartStopped
from agent_kit.reporting.train_view import (
    difference_line,
    holdout_labels,
    holdout_notes,
    holdout_row,
)
from agent_kit.store.layout import RunLayout
from agent_kit.store.run_figures import ROLLOUTS_FAILED
from agent_kit.train import TrainConfig, TrainResult, play_train
from agent_kit.train.config import TRAIN_JOB

__all__ = ["register"]

ModelOption = Annotated[
    str,
    typer.Option(
        help="Model: smollm2-135m (the packaged GGUF, offline), a Hugging Face model directory, "
        "a .gguf file, or a hub id OWNER/NAME (from the local cache, or downloaded where the hub "
        "is reachable)."
    ),
]


def _fmt(figures: dict[str, Any], label: str = "") -> str:
    """One holdout row: mean ± SE, pass@k, tool-call rate, the task's own figures, then its
    notes (rollouts at the token limit, a failure as a whole, rollouts cut early)."""
    row = holdout_row(figures)
    mean, se = row["mean"], row["se"]
    if mean is None:
        text = "no reward"
    else:
        text = f"{mean:.3f}" + (f" ± se {se:.3f}" if se is not None else "")
        pass_k = row["pass_at_k"]
        text += f", pass@k {pass_k:.3f}" if pass_k is not None else ""
        rate = row["tool_call_rate"]
        text += f", tool-call rate {rate:.0%}" if rate is not None else ""
        for name, value in row["task"].items():
            text += f", {name} {value:.0%}" if 0 <= value <= 1 else f", {name} {value:.3g}"
    return text + "".join(f" ({note})" for note in holdout_notes(label or "holdout", row))


#: How the terminal names the holdout's cells (a checkpoint by its label).
_EVAL_NAMES = {"base": "base", "warm": "warm start", "adapter": "trained"}


def _print(result: TrainResult, model: str, console: Console, *, as_json: bool) -> None:
    doc = result.document
    if as_json:
        typer.echo(json.dumps(doc, ensure_ascii=False, default=str))
        return
    console.print(f"run directory: {result.run_dir} ({doc['status']})", markup=False)
    for label in holdout_labels(doc["eval"]):
        name = _EVAL_NAMES.get(label, label)
        console.print(f"holdout, {name}: {_fmt(doc['eval'][label], label)}", markup=False)
    for difference in doc.get("differences") or []:
        console.print(f"  {difference_line(difference)}", markup=False)
    where = doc.get("holdout") or {}
    if where.get("page"):
        console.print(f"holdout table: {where['page']}", markup=False)
    if doc.get("adapter"):
        console.print(f"adapter: {doc['adapter']}", markup=False)
        console.print(f"play it: --policy 'hf:{model}+{doc['adapter']}'", markup=False)


#: A training run's defaults, which ``train``'s options default to (tests/cli pins them).
_TRAIN: Final = TrainConfig(run=RunConfig())

_LoraR = Annotated[int, typer.Option(help="LoRA rank.")]
_LearningRate = Annotated[float, typer.Option(help="Learning rate (constant).")]
_Beta = Annotated[float, typer.Option(help="KL coefficient (0: no reference pass).")]
_MicroBatch = Annotated[
    int | None, typer.Option(help="Rollouts per forward/backward pass (default ≤ 4).")
]
_EvalFile = Annotated[
    Path | None,
    typer.Option(
        "--eval",
        help="Holdout prompts: an evaluation grid of the base model, the warm start and the "
        "trained adapter (RUN_DIR/eval/), with their paired differences.",
    ),
]
_EvalSamples = Annotated[int, typer.Option(help="Samples per holdout prompt (k).")]
_EvalEvery = Annotated[
    int | None,
    quiet_option(
        "Also play the holdout with every Nth step's checkpoint, during the run (a curve "
        "of the holdout reward over the steps in the report).",
    ),
]
_Device = Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")]
_WarmStart = Annotated[
    list[Path] | None,
    quiet_option(
        "Before GRPO, fine-tune the adapter on the good rollouts of this recorded run "
        "(repeatable; any policy recorded it).",
    ),
]
_WarmStartMinReward = Annotated[
    float | None,
    quiet_option(
        "Warm-start on rollouts with at least this reward (default: the run's success "
        "threshold, else its top quarter).",
    ),
]
_WarmStartEpochs = Annotated[int, typer.Option(help="Warm-start epochs.")]
_WarmStartLr = Annotated[float, typer.Option(help="Warm-start learning rate.")]
_MaxLength = Annotated[
    int | None,
    quiet_option(
        "The longest warm-start example, in tokens: a longer one is cut (or skipped "
        "when no reply is left), with a line (default: the model's context, at most 4096).",
    ),
]
_Force = Annotated[
    bool, typer.Option("--force", help="Train even when the preflight finds nothing to learn.")
]
_OutcomeGate = Annotated[
    bool,
    typer.Option(
        "--outcome-gate",
        help="Advantages on the rollouts' outcomes (the reward's outcome terms, else success), "
        "not their rewards: a group that differs only by shaping teaches nothing. The service "
        "trains on the rewards.",
    ),
]
_DynamicSampling = Annotated[
    int,
    typer.Option(
        help="Drop each step's groups without signal and fill their places with groups of "
        "fresh prompts, at most this many extra prompts a step (0: off; the service trains on "
        "every group).",
    ),
]
_FilterPrompts = Annotated[
    int,
    typer.Option(
        help="Before GRPO, play every train prompt this many times and train on those the "
        "policy solves sometimes (0: off, else 2..32).",
    ),
]


def train_cmd(
    ctx: typer.Context,
    entrypoint: EntrypointArgument = None,
    dataset: DatasetOption = None,
    model: ModelOption = _TRAIN.model,
    steps: StepsOption = TRAIN_JOB.steps,
    group_size: GroupSizeOption = TRAIN_JOB.group_size,
    batch_size: BatchSizeOption = TRAIN_JOB.batch_size,
    lora_r: _LoraR = _TRAIN.lora_r,
    learning_rate: _LearningRate = _TRAIN.learning_rate,
    beta: _Beta = _TRAIN.beta,
    temperature: TemperatureOption = TRAIN_JOB.temperature,
    max_tokens: MaxTokensOption = TRAIN_JOB.max_tokens,
    micro_batch: _MicroBatch = _TRAIN.micro_batch,
    eval_file: _EvalFile = _TRAIN.eval,
    eval_samples: _EvalSamples = _TRAIN.eval_samples,
    eval_every: _EvalEvery = _TRAIN.eval_every,
    device: _Device = _TRAIN.device,
    warm_start: _WarmStart = None,
    warm_start_min_reward: _WarmStartMinReward = _TRAIN.warm_start_min_reward,
    warm_start_epochs: _WarmStartEpochs = _TRAIN.warm_start_epochs,
    warm_start_lr: _WarmStartLr = _TRAIN.warm_start_lr,
    max_length: _MaxLength = _TRAIN.max_length,
    force: _Force = _TRAIN.force,
    outcome_gate: _OutcomeGate = _TRAIN.outcome_gate,
    dynamic_sampling: _DynamicSampling = _TRAIN.dynamic_sampling,
    filter_prompts: _FilterPrompts = _TRAIN.filter_prompts,
    concurrency: ConcurrencyOption = TRAIN_JOB.concurrency,
    seed: SeedOption = TRAIN_JOB.seed,
    out: OutOption = _TRAIN.run.out,
    name: NameOption = None,
    resume: ResumeOption = None,
    workers: WorkersOption = None,
    mlflow: MlflowOption = False,
    mlflow_uri: MlflowUriOption = None,
    mlflow_experiment: MlflowExperimentOption = None,
    as_json: AsJsonOption = False,
) -> None:
    """Train a LoRA adapter with GRPO against the agent's unchanged entrypoint, locally."""
    if resume is None and (entrypoint is None or dataset is None):
        raise UsageError("an entrypoint and --dataset are required (or --resume RUN_DIR)")
    options = {k: v for k, v in locals().items() if k != "ctx"}
    _refuse_changes_on_resume(options)
    job = settings_of(JobConfig, options)
    config = settings_of(
        TrainConfig,
        options,
        run=settings_of(RunConfig, options, job=job, settings=door_settings(ctx)),
        eval=eval_file,
        warm_start=tuple(warm_start or ()),
    )
    if resume is None:
        config.check()
    export_to = MlflowTarget.from_options(mlflow, mlflow_uri, mlflow_experiment)
    _train_and_exit(config, as_json=as_json, mlflow=export_to)


#: The flags that apply to a resumed run; every other one defines the run and is refused.
_APPLY_ON_RESUME: Final = (
    "resume",
    "device",
    "workers",
    "mlflow",
    "mlflow_uri",
    "mlflow_experiment",
    "as_json",
)
#: Flag spellings that are not ``--`` + the parameter's name.
_FLAGS: Final = {"entrypoint": "ENTRYPOINT", "eval_file": "--eval", "as_json": "--json"}


def _flag(name: str) -> str:
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def _refuse_changes_on_resume(options: dict[str, Any]) -> None:
    """With ``--resume``, a UsageError naming every given flag that defines the run (the run
    trains with the settings it recorded), and the flags that do apply."""
    if options.get("resume") is None:
        return
    defaults = {name: p.default for name, p in inspect.signature(train_cmd).parameters.items()}
    changed = [
        name
        for name, default in defaults.items()
        if name not in _APPLY_ON_RESUME and options.get(name, default) != default
    ]
    if changed:
        applied = ", ".join(_flag(name) for name in _APPLY_ON_RESUME[1:])
        raise UsageError(
            f"{', '.join(_flag(name) for name in changed)} cannot change a resumed run (it "
            f"trains with its recorded settings); with --resume only {applied} apply"
        )


def _check_rollouts(result: JobResult) -> None:
    """:class:`RewardError` (exit 6) when the training job's rollouts failed as a whole
    (status ``rollouts_failed``), as for ``agent-kit run``."""
    if result.status == ROLLOUTS_FAILED:
        raise RewardError(result.failure or "the job's rollouts failed")


def _warm_resume_hint(exc: WarmStartStopped) -> str:
    """What to do after a stopped warm start: the command that continues the run (kept), whose
    warm start starts over."""
    command = (
        RunLayout(exc.run_dir).resume_command()
        if exc.run_dir is not None
        else "agent-kit train --resume RUN_DIR"
    )
    return f"continue with {command} (the warm start starts over)"


def _train_and_exit(config: TrainConfig, *, as_json: bool, mlflow: MlflowTarget | None) -> None:
    """Tune the process for training (:mod:`agent_kit.cli.process`), train, print the outcome
    and exit with its code."""
    console = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    tuning = tune_process(
        train_model=config.model, device=config.device, malloc=config.run.settings.malloc
    )
    try:
        with aborts_exit(err), quiet_warnings():
            result = play_train(
                config,
                on_stop=announcer(err, config.run.grace),
                on_warm_stop=warm_announcer(err),
                echo=lambda line: err.print(line, markup=False),
                between_phases=tuning.between_phases,
            )
    except WarmStartStopped as exc:
        err.print(f"interrupted: {exc}; {_warm_resume_hint(exc)}", markup=False)
        exit_interrupted(exc.signum, err)
    _print(result, result.document["settings"]["model"], console, as_json=as_json)
    if mlflow is not None:
        mlflow.export(result.job, console, err, as_json=as_json)
    if result.job.status == "interrupted":
        exit_interrupted(result.stopped_by, err)
    result.job.raise_for_status()
    _check_rollouts(result.job)


@contextlib.contextmanager
def quiet_warnings() -> Iterator[None]:
    """Keep the libraries' deprecation and PEFT/TRL/transformers warnings off the terminal while
    training (they are about the libraries' own code, not the user's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", module=r"(peft|trl|transformers|accelerate|torch)\b")
        yield


def register(app: typer.Typer) -> None:
    """Add the ``train`` command to the ``agent-kit`` Typer app."""
    app.command("train")(train_cmd)
