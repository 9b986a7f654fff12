"""``agent-kit doctor reward RUN_DIR --policy SPEC``: the training preflight as a finding.

The recorded run names its entrypoint, dataset and job settings; one probe step of them is
played with the given policy (``hf:MODEL[+ADAPTER]``, ``openai:URL``, ``scripted:…``) as
``RUN_DIR/preflight`` (:func:`agent_kit.train.preflight.run_preflight`), and its share of
all-equal groups and tool-call rate become one finding: an error when every group is equal
(nothing for GRPO to learn from that policy), a warning when most groups differ only by the
reward's shaping (the shaping dominates the outcome), else a note.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from agent_kit.doctor.findings import Finding, Severity
from agent_kit.driver.config import JobConfig, RunConfig, recorded_agent_env
from agent_kit.emulator.policies import load_policy
from agent_kit.errors import UsageError
from agent_kit.reporting.summary_schema import flat_config
from agent_kit.settings import DEFAULTS, Settings
from agent_kit.store import RunStore
from agent_kit.train.preflight import run_preflight

__all__ = ["policy_preflight", "probe_run"]


def probe_run(run_dir: Path, settings: Settings = DEFAULTS) -> RunConfig:
    """The recorded run's entrypoint, dataset and job settings as the probe's :class:`RunConfig`
    (under ``settings``, the ``AGENT_KIT_*`` ones the CLI read); a UsageError when the run does
    not name them."""
    store = RunStore.open(run_dir, readonly=True)
    try:
        config = store.list_jobs()[-1].config
    finally:
        store.close()
    entrypoint, dataset = config.get("entrypoint"), config.get("dataset")
    if not entrypoint or not dataset or not Path(str(dataset)).is_file():
        raise UsageError(f"{run_dir}: the run names no entrypoint and readable dataset to probe")
    flat = flat_config(config)
    names = {f.name for f in dataclasses.fields(JobConfig)} - {"name", "policy", "steps", "chaos"}
    job: dict[str, Any] = {k: flat[k] for k in names if k in flat}
    return RunConfig(
        entrypoint=str(entrypoint),
        dataset=Path(str(dataset)),
        job=JobConfig(**job),
        out=run_dir,
        workers=config.get("workers"),
        extra_env=recorded_agent_env(config) or None,
        settings=settings,
    )


def policy_preflight(run_dir: Path, spec: str, settings: Settings = DEFAULTS) -> Finding:
    """Play the preflight probe of the run with policy ``spec`` (built with ``settings``); its
    verdict as a finding."""
    run = probe_run(run_dir, settings)
    backend = load_policy(spec, base_dir=Path.cwd(), settings=settings)

    async def probe() -> Any:
        try:
            return await run_preflight(run, backend, run_dir)
        finally:
            await backend.aclose()

    result = asyncio.run(probe())
    hint = ""
    if result.nothing_to_learn:
        hint = f"try {result.remedies()}"
    elif result.shaping_dominates:
        hint = "train with agent-kit train --outcome-gate, or make the outcome term dominant"
    severity: Severity = "info"
    if result.nothing_to_learn:
        severity = "error"
    elif result.shaping_dominates:
        severity = "warn"
    return Finding(
        "preflight",
        severity,
        result.line(),
        hint=hint,
        evidence={"policy": spec, **result.to_dict()},
    )
