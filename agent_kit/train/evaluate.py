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
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent_kit.driver.hooks import JobHooks, Progress, ProgressHook
from agent_kit.driver.job import JobResult
from agent_kit.driver.local import run_local
from agent_kit.emulator import HFPolicyBackend
from agent_kit.reporting.metrics import build_groups, eval_metrics, mean_and_se
from agent_kit.store import Rollout, RunStore, load_rollouts
from agent_kit.store.layout import RunLayout
from agent_kit.train.config import TrainConfig

__all__ = ["eval_figures", "progress_lines", "run_eval", "tool_call_rate"]


def tool_call_rate(records: Sequence[Rollout]) -> float | None:
    """The share of the rollouts' turns whose answer called a tool (None: no turn)."""
    turns = [row for r in records for row in r.turn_rows]
    if not turns:
        return None
    calls = 0
    for row in turns:
        choices = row.response.get("choices") if isinstance(row.response, dict) else None
        message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        calls += bool(isinstance(message, dict) and message.get("tool_calls"))
    return calls / len(turns)


def eval_figures(run_dir: Path, k: int) -> dict[str, Any]:
    """The figures of a finished evaluation run (see the module docstring), with the share of
    its turns that called a tool (``tool_call_rate``)."""
    store = RunStore.open(run_dir, readonly=True)
    try:
        job = store.list_jobs()[-1]
        records = load_rollouts(store, job.arn, with_turns=True)
    finally:
        store.close()
    groups = build_groups(records)
    per_prompt: dict[int, list[float]] = defaultdict(list)
    for group in groups:
        per_prompt[group.prompt_index].extend(group.rewards)
        per_prompt[group.prompt_index].extend([0.0] * group.lost)
    mean, se = mean_and_se([math.fsum(v) / len(v) for v in per_prompt.values() if v])
    figures: dict[str, Any] = {
        "mean": mean,
        "se": se,
        "prompts": len(per_prompt),
        "rollouts": sum(len(v) for v in per_prompt.values()),
        "tool_call_rate": tool_call_rate(records),
        "status": job.status,
    }
    figures.update(eval_metrics(groups, ks=sorted({1, k})))
    return figures


def progress_lines(label: str, echo: Callable[[str], None]) -> ProgressHook:
    """A progress hook that echoes ``<label>: N/M rollouts`` each time a quarter more (or the
    last) of the job's rollouts are done."""
    shown = [-1]

    def hook(progress: Progress) -> None:
        total = max(1, progress.total)
        quarter = progress.done * 4 // total
        if progress.done and quarter > shown[0]:
            shown[0] = quarter
            echo(f"{label}: {progress.done}/{progress.total} rollouts")

    return hook


async def run_eval(
    config: TrainConfig,
    backend: HFPolicyBackend,
    run_dir: Path,
    label: str,
    echo: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Play the holdout with ``backend`` as ``RUN_DIR/eval/<label>`` and return its figures;
    a finished evaluation of the same label is read back, an unfinished one played again.
    ``echo`` gets its progress (:func:`progress_lines`)."""
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
    hooks = JobHooks(progress=progress_lines(f"holdout {label}", echo)) if echo else None
    result: JobResult = await run_local(run, hooks, policy=backend)
    return eval_figures(result.run_dir, config.eval_samples)
