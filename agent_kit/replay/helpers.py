"""Replay regression tests for your own agent: record once, then assert the replay is unchanged.

Typical use in a project's test suite (the cassette is checked into the repository)::

    # once, or whenever the change is intended:
    #   agent-kit run agent.py --dataset tasks.jsonl --policy scripted:policies.py:Solver
    #   agent-kit replay export runs/<run> --out tests/golden.cassette.jsonl
    from agent_kit.replay.helpers import assert_replays

    def test_agent_replays_unchanged():
        assert_replays("tests/golden.cassette.jsonl")      # entrypoint recorded in the cassette

Or record inside the test session (a module-scoped fixture, no files to check in)::

    from agent_kit.replay.helpers import assert_replays, recorded_run

    recording = recorded_run("agent.py", [{"target": 3}], policy="scripted:policies.py:Policy")

    def test_replay_is_identical(recording):
        assert_replays(recording, in_process=True)

:func:`record` runs a local job against the emulator (``agent-kit run``) and optionally exports
a cassette; :func:`assert_replays` replays a run directory or cassette and raises
``AssertionError`` with the readable report (first divergence diffs, reward deltas) unless every
episode is identical. These helpers call ``asyncio.run``: use them from synchronous tests.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from agent_kit.contract import TEMPERATURE
from agent_kit.replay.cassette import load_recording, write_cassette
from agent_kit.replay.divergence import Normalization
from agent_kit.replay.engine import replay_run
from agent_kit.replay.inprocess import replay_in_process
from agent_kit.replay.recording import Recording
from agent_kit.replay.verdicts import ReplayReport
from agent_kit.settings import DEFAULTS, Settings

__all__ = ["assert_replays", "record", "recorded_run"]

Prompts = str | Path | Sequence[str | dict[str, Any]]


def _dataset(prompts: Prompts, out_dir: Path, name: str) -> Path:
    if isinstance(prompts, (str, Path)):
        path = Path(prompts)
        if path.is_file():
            return path.resolve()
        raise FileNotFoundError(f"dataset not found: {path}")
    rows = [p if isinstance(p, str) else json.dumps(p, sort_keys=True) for p in prompts]
    if not rows:
        raise ValueError("record() needs at least one prompt")
    path = out_dir / f"{name}.prompts.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"prompt": r}) + "\n" for r in rows), encoding="utf-8")
    return path.resolve()


def record(
    entrypoint: str | Path,
    prompts: Prompts,
    *,
    policy: str,
    out_dir: str | Path,
    name: str = "recording",
    group_size: int = 2,
    temperature: float = TEMPERATURE.default,
    seed: int = 0,
    concurrency: int = 8,
    cassette: str | Path | None = None,
    settings: Settings = DEFAULTS,
) -> Path:
    """Record a run of ``entrypoint`` (a local job, as ``agent-kit run``); return its run dir.

    ``prompts`` is a dataset file or a list of prompts (dicts are JSON-packed, as the service
    expects); every prompt is played ``group_size`` times with ``policy`` (a policy spec such as
    ``scripted:policies.py:Solver``, built with ``settings``: the ``AGENT_KIT_*`` settings,
    every default unless given). With ``cassette`` the episodes are also exported there.
    Raises :class:`~agent_kit.errors.JobFailed` when the job fails.
    """
    from agent_kit.driver.config import JobConfig, RunConfig
    from agent_kit.driver.local import run_local

    out = Path(out_dir)
    data = _dataset(prompts, out, name)
    config = JobConfig(
        name=name,
        policy=policy,
        group_size=group_size,
        temperature=temperature,
        seed=seed,
        concurrency=concurrency,
        rollout_timeout=120.0,
        max_retries=1,
    )
    run = RunConfig(
        entrypoint=str(entrypoint), dataset=data, job=config, out=out, settings=settings
    )
    result = asyncio.run(run_local(run))
    result.raise_for_status()
    if cassette is not None:
        write_cassette(cassette, load_recording(result.run_dir))
    return result.run_dir


def assert_replays(
    source: str | Path | Recording,
    entrypoint: str | Path | None = None,
    *,
    in_process: bool = False,
    trajectories: Sequence[str] | None = None,
    limit: int | None = None,
    normalization: Normalization | None = None,
    continue_on_divergence: bool = False,
    workers: int = 1,
    diffs: int = 3,
) -> ReplayReport:
    """Replay ``source`` (run dir, cassette or Recording) and return the report if unchanged.

    Raises ``AssertionError`` whose message is the readable report (counts, one line per
    changed episode, the first ``diffs`` request diffs) unless every episode is identical.
    ``in_process=True`` skips the emulator and agent processes (RolloutApp entrypoints only;
    compares messages and tools). The replay run goes to a temporary directory, removed when
    the replay is identical and kept (its path is in the message) when not.
    """
    if in_process:
        report = replay_in_process(
            source,
            entrypoint,
            trajectories=trajectories,
            limit=limit,
            normalization=normalization,
        )
        if not report.ok:
            raise AssertionError(report.text(diffs=diffs))
        return report
    tmp = Path(tempfile.mkdtemp(prefix="agent-kit-replay-"))
    report = asyncio.run(
        replay_run(
            source,
            entrypoint=entrypoint,
            trajectories=trajectories,
            limit=limit,
            normalization=normalization,
            continue_on_divergence=continue_on_divergence,
            out_dir=tmp,
            workers=workers,
        )
    )
    if not report.ok:
        raise AssertionError(f"{report.text(diffs=diffs)}\n(replay run kept in {report.run_dir})")
    shutil.rmtree(tmp, ignore_errors=True)
    return report


def recorded_run(
    entrypoint: str | Path,
    prompts: Prompts,
    *,
    policy: str,
    group_size: int = 2,
    temperature: float = TEMPERATURE.default,
    seed: int = 0,
    scope: Literal["session", "package", "module", "class", "function"] = "module",
) -> Callable[..., Path]:
    """A pytest fixture that records once per ``scope`` and yields the run directory.

    Assign it to a module-level name; the name is the fixture's name::

        recording = recorded_run("agent.py", [{"target": 3}], policy="scripted:p.py:P")
    """
    import pytest

    entry = Path(entrypoint).resolve()

    def _recorded(tmp_path_factory: Any) -> Path:
        out = tmp_path_factory.mktemp("agent-kit-recording")
        return record(
            entry,
            prompts,
            policy=policy,
            out_dir=out,
            group_size=group_size,
            temperature=temperature,
            seed=seed,
        )

    fixture: Callable[..., Path] = pytest.fixture(scope=scope)(_recorded)
    return fixture
