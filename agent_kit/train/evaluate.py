"""Before and after: the holdout played by the base model and by the trained adapter.

Each evaluation is an ordinary local job (``RUN_DIR/eval/base``, ``RUN_DIR/eval/adapter``: a
run directory each, with its store, summary.json and report.html) played through the same
driver, agent processes and emulator as training, with the ``hf`` policy on the run's model
(the adapter switched off for ``base``). Every holdout prompt is played ``eval_samples`` times at
the training temperature; the figures are the service's ``eval/reward/*`` (pass@k over those
samples) and the mean reward ± its standard error over prompts (the standard deviation of the
per-prompt mean rewards / √prompts: samples of one prompt are not independent).
"""

from __future__ import annotations

import math
import shutil
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent_kit.driver.job import JobResult
from agent_kit.driver.local import run_local
from agent_kit.emulator.policies.hf import HFPolicyBackend
from agent_kit.reporting.metrics import build_groups, eval_metrics
from agent_kit.store import RunStore, load_rollouts
from agent_kit.store.layout import EVAL_DIR, RunLayout
from agent_kit.train.config import TrainConfig

__all__ = ["EVAL_DIR", "eval_figures", "mean_and_se", "run_eval"]


def mean_and_se(groups: dict[int, list[float]]) -> tuple[float | None, float | None]:
    """Mean reward and its standard error over prompts (see the module docstring)."""
    means = [math.fsum(v) / len(v) for v in groups.values() if v]
    if not means:
        return None, None
    mean = math.fsum(means) / len(means)
    if len(means) < 2:
        return mean, None
    var = math.fsum((m - mean) ** 2 for m in means) / (len(means) - 1)
    return mean, math.sqrt(var / len(means))


def eval_figures(run_dir: Path, k: int) -> dict[str, Any]:
    """The figures of a finished evaluation run (see the module docstring)."""
    store = RunStore.open(run_dir, readonly=True)
    try:
        job = store.list_jobs()[-1]
        records = load_rollouts(store, job.arn)
    finally:
        store.close()
    groups = build_groups(records)
    per_prompt: dict[int, list[float]] = defaultdict(list)
    for group in groups:
        per_prompt[group.prompt_index].extend(group.rewards)
        per_prompt[group.prompt_index].extend([0.0] * group.lost)
    mean, se = mean_and_se(per_prompt)
    figures: dict[str, Any] = {
        "mean": mean,
        "se": se,
        "prompts": len(per_prompt),
        "rollouts": sum(len(v) for v in per_prompt.values()),
        "status": job.status,
    }
    figures.update(eval_metrics(groups, ks=sorted({1, k})))
    return figures


async def run_eval(
    config: TrainConfig, backend: HFPolicyBackend, run_dir: Path, label: str
) -> dict[str, Any]:
    """Play the holdout with ``backend`` as ``RUN_DIR/eval/<label>`` and return its figures;
    a finished evaluation of the same label is read back, an unfinished one played again."""
    if config.eval is None:
        return {}
    out = RunLayout(run_dir).evals
    target = out / label
    if target.is_dir():
        try:
            figures = eval_figures(target, config.eval_samples)
        except Exception:  # noqa: BLE001 - an unreadable or unfinished one is played again
            figures = {}
        if figures.get("status") == "completed":
            return figures
        shutil.rmtree(target)
    job = replace(
        config.job,
        name=label,
        policy=backend.name,
        group_size=config.eval_samples,
        batch_size=None,
        steps=1,
    )
    run = replace(config.run, dataset=config.eval, job=job, out=out, resume=None)
    result: JobResult = await run_local(run, policy=backend)
    return eval_figures(result.run_dir, config.eval_samples)
