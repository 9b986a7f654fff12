"""The CLI's defaults are the records': every option named like a setting of the job
(``JobConfig``), the run (``RunConfig``) or a training run (``TrainConfig``, ``TRAIN_JOB``)
defaults to that record's default, read from the click commands themselves; the inference
settings' defaults and ranges are declared once (``agent_kit.contract``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import typer

from agent_kit.cli import app
from agent_kit.contract import MAX_TOKENS, TEMPERATURE, TOP_P, InferenceParams
from agent_kit.dev.options import DevOptions
from agent_kit.driver.config import GROUP_SIZE, JobConfig, RunConfig
from agent_kit.errors import UsageError
from agent_kit.evaluation.grid import INFERENCE_AXES
from agent_kit.train.config import TRAIN_JOB, TrainConfig

#: (command path, the records its options default to (first one naming the option wins),
#: option → field where the names differ, options whose default means "not given").
CASES: list[tuple[tuple[str, ...], tuple[Any, ...], dict[str, str], frozenset[str]]] = [
    (("run",), (JobConfig(), RunConfig()), {}, frozenset()),
    (
        ("train",),
        (TRAIN_JOB, TrainConfig(run=RunConfig()), RunConfig()),
        {"eval_file": "eval"},
        frozenset({"warm_start"}),  # None: no run directories (the record's empty tuple)
    ),
    (("invoke",), (JobConfig(),), {"timeout": "rollout_timeout"}, frozenset()),
    (
        ("dev",),
        (DevOptions(Path("agent.py"), Path("d.jsonl")),),
        {},
        frozenset({"entrypoint", "dataset"}),  # required
    ),
    (
        ("replay", "run"),
        (JobConfig(), RunConfig()),
        {"timeout": "rollout_timeout"},
        frozenset({"policy", "out"}),  # a fork's live policy; the run beside the source
    ),
    (
        ("eval",),
        (JobConfig(),),
        {},
        # None: every cell samples with the grid's base (the job's defaults); a list of specs;
        # --region is the submitted jobs' (None: the AWS configuration's), not a cell's
        frozenset({"temperature", "top_p", "max_tokens", "policy", "region"}),
    ),
]


def _defaults(path: tuple[str, ...]) -> dict[str, Any]:
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return {p.name: p.default for p in command.params if p.name != "ctx"}


@pytest.mark.parametrize(("path", "records", "renamed", "not_given"), CASES)
def test_every_option_defaults_to_its_records_default(
    path: tuple[str, ...],
    records: tuple[Any, ...],
    renamed: dict[str, str],
    not_given: frozenset[str],
) -> None:
    """Each option named like a field of the command's records has that field's default."""
    compared = 0
    for option, default in _defaults(path).items():
        field = renamed.get(option, option)
        owner = next((r for r in records if field in {f.name for f in dataclasses.fields(r)}), None)
        if owner is None or option in not_given:
            continue
        assert default == getattr(owner, field), f"agent-kit {' '.join(path)} --{option}"
        compared += 1
    assert compared >= 3, path


def test_the_inference_settings_are_declared_once() -> None:
    """The job's defaults, the service's defaults of a payload and the range checks of the job,
    the payload and the eval grid are the contract's declarations."""
    job = JobConfig()
    assert (job.temperature, job.top_p, job.max_tokens) == (
        TEMPERATURE.default,
        TOP_P.default,
        MAX_TOKENS.default,
    )
    assert job.inference == InferenceParams.service_defaults()
    for bad in (-0.1, 2.5, float("nan")):
        assert not TEMPERATURE.holds(bad)
        with pytest.raises(UsageError, match=r"--temperature must be 0\.\.2"):
            JobConfig(temperature=bad).validated(1)
        with pytest.raises(ValueError, match=r"temperature must be 0\.\.2"):
            INFERENCE_AXES["temperature"](str(bad))
    with pytest.raises(UsageError, match=r"--top-p must be in \(0, 1\]"):
        JobConfig(top_p=0.0).validated(1)
    with pytest.raises(UsageError, match="--max-tokens must be ≥ 1"):
        JobConfig(max_tokens=0).validated(1)
    assert (GROUP_SIZE.default, GROUP_SIZE.words()) == (8, "2..32")
    with pytest.raises(UsageError, match=r"--group-size must be 2\.\.32, got 33"):
        JobConfig(group_size=33).validated(1)


def test_old_job_rows_read_back() -> None:
    """A job row stored by an older run (flat temperature/top_p/max_tokens keys, unknown keys
    beside them) reads back into the same settings, and a new row has the same flat keys."""
    old = {"name": "r", "temperature": 0.7, "top_p": 0.9, "max_tokens": 512, "gone": 1}
    config = JobConfig.from_dict(old)
    assert (config.temperature, config.top_p, config.max_tokens) == (0.7, 0.9, 512)
    assert config.inference.to_openai() == {"temperature": 0.7, "top_p": 0.9, "max_tokens": 512}
    assert JobConfig.from_dict(config.to_dict()) == config
    assert {"temperature", "top_p", "max_tokens"} <= set(config.to_dict())
