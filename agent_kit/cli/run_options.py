"""The options of ``agent-kit run``, one annotated type each (name, help text, parsing).

:func:`agent_kit.cli.run.run` declares its parameters with these types and its defaults, and
parses them into a :class:`~agent_kit.driver.config.RunConfig`; the job's own settings are
named like the fields of :class:`~agent_kit.driver.rollouts.JobConfig`. Other commands take the
options they share from here too (``train``, ``eval``, and ``RUN_DIR``/``--job``/``--pricing`` of
the commands that read a recorded run), with :func:`settings_of` to build their records,
:func:`key_values` to parse a repeatable ``KEY=VALUE`` option and :func:`quiet_option` for an
option whose help says its default in words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from agent_kit.driver.config import GROUP_SIZE, MAX_RETRIES
from agent_kit.emulator.policies.registry import POLICY_HELP
from agent_kit.errors import UsageError
from agent_kit.settings import DEFAULTS, Settings
from agent_kit.store.layout import RUN_FILE

__all__ = [
    "AdvertiseUrlOption",
    "AgentMemoryOption",
    "AsJsonOption",
    "AuxPolicyOption",
    "BatchSizeOption",
    "ChaosOption",
    "ConcurrencyOption",
    "ContractOption",
    "DatasetOption",
    "EmulatorPortOption",
    "EndpointUrlOption",
    "EntrypointArgument",
    "FailFastOption",
    "GraceOption",
    "GroupSizeOption",
    "JobOfRunOption",
    "LenientAuthOption",
    "MaxFloorRateOption",
    "MaxRetriesOption",
    "MaxTokensOption",
    "MlflowExperimentOption",
    "MlflowOption",
    "MlflowUriOption",
    "NameOption",
    "OutOption",
    "PolicyOption",
    "PricingOption",
    "RateOption",
    "ReportGraceOption",
    "ResumeOption",
    "RolloutTimeoutOption",
    "RunDirArgument",
    "SeedOption",
    "StepsOption",
    "SuccessThresholdOption",
    "TemperatureOption",
    "TopPOption",
    "WorkersOption",
    "door_settings",
    "key_values",
    "quiet_option",
    "settings_of",
]

_Settings = TypeVar("_Settings")


def door_settings(ctx: typer.Context) -> Settings:
    """The ``AGENT_KIT_*`` settings the root command read at the CLI's door (every default for
    a command invoked without the root, as an embedding program may)."""
    found = ctx.find_root().obj
    return found if isinstance(found, Settings) else DEFAULTS


def settings_of(cls: type[_Settings], options: Mapping[str, Any], **given: Any) -> _Settings:
    """A settings record (a dataclass such as :class:`~agent_kit.driver.config.JobConfig`)
    from a command's parameters: every field whose name is a parameter takes its value (the
    options are named like the fields), ``given`` overrides; the rest keep their defaults."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    values = {k: v for k, v in options.items() if k in names}
    return cls(**{**values, **given})


def quiet_option(text: str, *flags: str) -> Any:
    """A typer option (``flags``, else ``--`` + the parameter's name) whose help ``text`` says
    its default in words, so ``--help`` shows none of its own."""
    return typer.Option(*flags, help=text, show_default=False)


def key_values(items: list[str] | None, refusal: str) -> dict[str, str]:
    """``["K=V", ...]`` (a repeatable option) → ``{K: V}``, the key stripped, a later key
    overriding an earlier one; a :class:`UsageError` ``"<refusal>, got '<item>'"`` for an item
    without ``=`` or with a blank key."""
    pairs: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{refusal}, got {item!r}")
        pairs[key.strip()] = value
    return pairs


EntrypointArgument = Annotated[
    str | None,
    typer.Argument(
        help="Agent: entrypoint .py file, http:// URL, AgentCore runtime ARN or Lambda ARN "
        "(optional with --resume)."
    ),
]
DatasetOption = Annotated[
    Path | None, typer.Option(help="Prompts: .jsonl, .json, .csv or .parquet.")
]

# -- the job's settings (JobConfig) ----------------------------------------------------------

PolicyOption = Annotated[str, typer.Option(help=POLICY_HELP)]
AuxPolicyOption = Annotated[
    str | None,
    quiet_option(
        "The model of the agent's LLM judge and simulated user (the emulator's /aux route): "
        "any policy spec, e.g. scripted:FILE.py:NAME, local, hf:MODEL, openai:URL "
        "(docs/judges.md). Without it those calls are refused.",
        "--aux-policy",
    ),
]
GroupSizeOption = Annotated[int, typer.Option(help=f"Rollouts per prompt ({GROUP_SIZE.words()}).")]
BatchSizeOption = Annotated[
    int | None,
    typer.Option(help="Prompts per step (global_batch_size; run: all by default, at most 128)."),
]
StepsOption = Annotated[int, typer.Option(help="Training steps to play.")]
ConcurrencyOption = Annotated[int, typer.Option(help="Rollouts in flight at most.")]
RolloutTimeoutOption = Annotated[
    float, typer.Option(help="Seconds before a rollout is failed and retried.")
]
MaxRetriesOption = Annotated[
    int, typer.Option(help=f"Retries of a timed-out rollout ({MAX_RETRIES.words()}).")
]
TemperatureOption = Annotated[float, typer.Option(help="inferenceParams.temperature")]
TopPOption = Annotated[float, typer.Option(help="inferenceParams.topP")]
MaxTokensOption = Annotated[int, typer.Option(help="inferenceParams.maxTokens")]
SuccessThresholdOption = Annotated[
    float, typer.Option(help="A rollout succeeds when its reward is at least this.")
]
FailFastOption = Annotated[
    bool,
    typer.Option(
        help="Stop the job at the first job-killing failure, as the service does "
        "(--no-fail-fast only flags it and goes on)."
    ),
]
ReportGraceOption = Annotated[
    float,
    typer.Option(help="Seconds to wait for CompleteRollout/UpdateReward after the answer."),
]
SeedOption = Annotated[int, typer.Option(help="Seed of the policy and of the run.")]
NameOption = Annotated[
    str | None, typer.Option(help="Job name (default: <entrypoint>-<timestamp>).")
]
ChaosOption = Annotated[
    str | None,
    quiet_option(
        "Inject faults, reproducibly by --seed: a preset (service, heavy) or "
        "FAULT=RATE[@SECONDS],… e.g. policy_5xx=0.05,latency=0.1@2 (docs/emulator.md).",
        "--chaos",
    ),
]
ContractOption = Annotated[
    str,
    typer.Option(
        "--contract",
        help="How rollouts reach the agent: mtrl (the SageMaker MTRL payload) or rl-toolkit "
        "(agentcore-rl-toolkit's _rollout payload, the result polled from a local S3; needs "
        "moto) (docs/trainers.md).",
    ),
]

# -- where and how the run plays (RunConfig) -------------------------------------------------

OutOption = Annotated[Path, typer.Option(help="Parent directory of run directories.")]
ResumeOption = Annotated[
    Path | None,
    typer.Option(help="Continue the run in this directory (its recorded settings are used)."),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        help="Agent processes for a .py entrypoint (default: one per usable CPU core, "
        "at most --concurrency)."
    ),
]
AgentMemoryOption = Annotated[
    str | None,
    quiet_option(
        "Memory cap of each agent process of a .py entrypoint, all it started included "
        "(e.g. 512M, 2G): past it the process is killed and restarted, and its rollouts end "
        "with a limit reason.",
    ),
]
RateOption = Annotated[
    float | None, typer.Option(help="Invocations per second cap (AgentCore default 25).")
]
EndpointUrlOption = Annotated[
    str | None, typer.Option(help="AWS endpoint override for ARN targets (local fakes).")
]
AdvertiseUrlOption = Annotated[
    str | None,
    typer.Option(
        help="Public https URL of a tunnel to the emulator, for a deployed agent; payloads "
        "get <URL>/<random token> and the emulator serves only under the token."
    ),
]
EmulatorPortOption = Annotated[
    int | None,
    typer.Option(
        help="Fixed loopback port of the emulator (the port your tunnel forwards to; "
        "default: ephemeral, or the one recorded by --resume)."
    ),
]
GraceOption = Annotated[
    float,
    typer.Option(
        help="Seconds in-flight rollouts get to finish after the first Ctrl-C or SIGTERM "
        "(a second one aborts at once)."
    ),
]

# -- what the command does with the outcome ----------------------------------------------------

LenientAuthOption = Annotated[
    bool,
    typer.Option(
        "--lenient-auth",
        help="Check only the shape of the agents' credentials, not their signatures (by "
        "default agents the run starts must sign with the per-run AWS keys it gives them).",
    ),
]
MaxFloorRateOption = Annotated[
    float | None,
    typer.Option(
        help="Exit 6 (status rollouts_failed) when more than this fraction (0..1) of the "
        "finished rollouts got the agent's floor reward (default 0.5; 1 accepts any share). "
        "A run where no rollout got a real reward exits 6 whatever the rate."
    ),
]
MlflowOption = Annotated[
    bool,
    typer.Option(
        "--mlflow",
        help="Log the run to MLflow when it ends, as the real job does (the mlflow extra; "
        "default store sqlite:///<--out>/mlflow.db).",
    ),
]
MlflowUriOption = Annotated[
    str | None,
    quiet_option(
        "MLflow tracking URI for --mlflow (implies it).",
        "--mlflow-uri",
    ),
]
MlflowExperimentOption = Annotated[
    str | None,
    quiet_option(
        "MLflow experiment for --mlflow (default agent-kit; implies --mlflow).",
        "--mlflow-experiment",
    ),
]
AsJsonOption = Annotated[
    bool, typer.Option("--json", help="No live display; summary JSON as the last stdout line.")
]

# -- the options of the commands that read a recorded run ------------------------------------

RunDirArgument = Annotated[Path, typer.Argument(help=f"Run directory holding {RUN_FILE}.")]
JobOfRunOption = Annotated[
    str | None, typer.Option(help="Job name or ARN (default: the run's latest job).")
]
PricingOption = Annotated[
    Path | None,
    typer.Option(help="Pricing file (JSON/TOML); default: the published blended estimate."),
]
