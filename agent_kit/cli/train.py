"""``agent-kit train``: a GRPO + LoRA rehearsal on a small local model (see docs/train.md).

The options parse into one :class:`~agent_kit.train.TrainConfig`;
:func:`~agent_kit.train.play_train` runs it (the rollouts through the job driver, the updates
through TRL). One line per trained step goes to stderr; the end shows the holdout before and
after, the last adapter and the ``--policy`` spec that plays it. ``--json`` prints train.json
as the last line of stdout. Ctrl-C as for ``run``: the first stops after the rollouts in flight
(exit 130; ``--resume RUN_DIR`` continues from the last adapter), a second aborts.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from rich.console import Console

from agent_kit.cli.export import MlflowTarget
from agent_kit.cli.run_options import (
    AsJsonOption,
    DatasetOption,
    EntrypointArgument,
    MlflowExperimentOption,
    MlflowOption,
    MlflowUriOption,
    NameOption,
    OutOption,
    ResumeOption,
    SeedOption,
    WorkersOption,
)
from agent_kit.driver.stop import Aborted
from agent_kit.errors import UsageError
from agent_kit.train import TrainConfig, TrainResult, play_train

__all__ = ["register"]

_SIGNAL_EXIT: Final = {signal.SIGINT: 130, signal.SIGTERM: 143}

ModelOption = Annotated[
    str,
    typer.Option(
        help="Model: smollm2-135m (the packaged GGUF, offline), a Hugging Face model directory "
        "or a .gguf file."
    ),
]


def _fmt(figures: dict[str, Any]) -> str:
    mean, se = figures.get("mean"), figures.get("se")
    if mean is None:
        return "no reward"
    text = f"{mean:.3f}" + (f" ± {se:.3f}" if se is not None else "")
    pass_k = figures.get("eval/reward/pass_at_k")
    return text + (f", pass@k {pass_k:.3f}" if pass_k is not None else "")


def _print(result: TrainResult, model: str, console: Console, *, as_json: bool) -> None:
    doc = result.document
    if as_json:
        typer.echo(json.dumps(doc, ensure_ascii=False, default=str))
        return
    console.print(f"run directory: {result.run_dir} ({doc['status']})", markup=False)
    for label in ("base", "adapter"):
        if label in doc["eval"]:
            console.print(f"holdout, {label}: {_fmt(doc['eval'][label])}", markup=False)
    comparison = doc.get("comparison")
    if comparison is not None:
        verdict = "beats" if comparison["beats_base_by_2se"] else "does not beat"
        console.print(
            f"the adapter {verdict} the base by two standard errors "
            f"(difference {comparison['difference']:+.3f} ± {comparison['se']:.3f})",
            markup=False,
        )
    if doc.get("adapter"):
        console.print(f"adapter: {doc['adapter']}", markup=False)
        console.print(f"play it: --policy 'hf:{model}+{doc['adapter']}'", markup=False)


def train(
    entrypoint: EntrypointArgument = None,
    dataset: DatasetOption = None,
    model: ModelOption = "smollm2-135m",
    steps: Annotated[int, typer.Option(help="Training steps (max_steps).")] = 10,
    group_size: Annotated[int, typer.Option(help="Rollouts per prompt (2..32).")] = 8,
    batch_size: Annotated[int, typer.Option(help="Prompts per step (global_batch_size).")] = 4,
    lora_r: Annotated[int, typer.Option(help="LoRA rank.")] = 8,
    learning_rate: Annotated[float, typer.Option(help="Learning rate (constant).")] = 5e-5,
    beta: Annotated[float, typer.Option(help="KL coefficient (0: no reference pass).")] = 0.0,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 1.0,
    max_tokens: Annotated[
        int, typer.Option(help="Tokens per turn at most (sampling_max_tokens).")
    ] = 128,
    micro_batch: Annotated[
        int | None, typer.Option(help="Rollouts per forward/backward pass (default ≤ 4).")
    ] = None,
    eval_file: Annotated[
        Path | None,
        typer.Option("--eval", help="Holdout prompts, played by the base model and the adapter."),
    ] = None,
    eval_samples: Annotated[int, typer.Option(help="Samples per holdout prompt (k).")] = 4,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    concurrency: Annotated[int, typer.Option(help="Rollouts in flight at most.")] = 8,
    seed: SeedOption = 0,
    out: OutOption = Path("runs"),
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
    config = TrainConfig(
        entrypoint=entrypoint or "",
        dataset=dataset or Path(),
        model=model,
        steps=steps,
        group_size=group_size,
        batch_size=batch_size,
        lora_r=lora_r,
        learning_rate=learning_rate,
        beta=beta,
        temperature=temperature,
        max_tokens=max_tokens,
        micro_batch=micro_batch,
        eval=eval_file,
        eval_samples=eval_samples,
        device=device,
        concurrency=concurrency,
        seed=seed,
        out=out,
        name=name,
        resume=resume,
        workers=workers,
    )
    if resume is None:
        config.check()
    export_to = MlflowTarget.from_options(mlflow, mlflow_uri, mlflow_experiment)
    console = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)

    def stopping(signum: signal.Signals) -> None:
        err.print(f"{signum.name}: stopping after the rollouts in flight", markup=False)

    try:
        result = play_train(
            config, on_stop=stopping, echo=lambda line: err.print(line, markup=False)
        )
    except Aborted as exc:
        err.print("aborted: the run directory can be resumed with --resume", markup=False)
        raise typer.Exit(_SIGNAL_EXIT.get(exc.signum, 130)) from None
    _print(result, result.document["settings"]["model"], console, as_json=as_json)
    if export_to is not None:
        export_to.export(result.job, console, err, as_json=as_json)
    if result.job.status == "interrupted":
        raise typer.Exit(_SIGNAL_EXIT.get(result.stopped_by, 130))
    result.job.raise_for_status()


def register(app: typer.Typer) -> None:
    """Add the ``train`` command to the ``agent-kit`` Typer app."""
    app.command("train")(train)
