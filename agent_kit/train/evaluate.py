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
import re
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from agent_kit.driver.hooks import JobHooks, Progress, ProgressHook
from agent_kit.driver.job import JobResult
from agent_kit.driver.local import run_local
from agent_kit.emulator import HFPolicyBackend
from agent_kit.reporting.metrics import build_groups, eval_metrics, mean_and_se
from agent_kit.reporting.words import first_line
from agent_kit.store import Rollout, RunStore, load_rollouts
from agent_kit.store.layout import RunLayout
from agent_kit.train.config import TrainConfig
from agent_kit.train.passes import release_free_memory

__all__ = [
    "eval_figures",
    "holdout_cuts",
    "holdout_failure",
    "progress_lines",
    "run_eval",
    "tool_call_rate",
]


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


#: A failure reason that says the policy's answer was cut at ``--max-tokens``.
_TOKEN_LIMIT = re.compile(r"MaxTokensReached|max_tokens|token limit", re.IGNORECASE)
#: An exception's name within a failure reason (``policy: MaxTokensReachedException: …``).
_EXCEPTION = re.compile(r"\b[A-Z]\w*(?:Exception|Error)\b")


#: How a line names an evaluation (its label otherwise).
_NAMES: Final = {"base": "base model", "warm": "warm start", "adapter": "trained adapter"}


def _most_frequent(reasons: Counter[str]) -> tuple[str, int]:
    """The most frequent reason and its count (ties: the first in sorted order)."""
    return min(reasons.items(), key=lambda item: (-item[1], item[0]))


def holdout_failure(records: Sequence[Rollout], max_tokens: int | None) -> str | None:
    """Why an evaluation failed as a whole, in one phrase, from its rollouts' most frequent
    failure reason (the agent's own for a floor reward, the rollout's for a lost one); it names
    ``--max-tokens`` when that reason is the token limit. None when some rollout got a real
    reward (or there is none)."""
    if not records or any(r.rewarded and not r.floor_reward for r in records):
        return None
    reasons = Counter(
        first_line(r.agent_failure or r.reason or "no reason recorded").removeprefix("agent: ")
        for r in records
    )
    reason, count = _most_frequent(reasons)
    named = _EXCEPTION.search(reason)
    name = named.group(0) if named else reason
    if _TOKEN_LIMIT.search(reason) and count * 2 > len(records):
        which = "every" if count == len(records) else f"{count} of {len(records)}"
        return (
            f"{which} rollout ended at the token limit (--max-tokens {max_tokens}: {name} "
            f"×{count}); raise --max-tokens"
        )
    return f"every rollout failed; most often: {reason} ×{count} of {len(records)}"


def holdout_cuts(records: Sequence[Rollout]) -> str | None:
    """How many of an evaluation's rewarded rollouts the agent ended early (a limit, an error
    it scored anyway), with the most frequent reason, in one phrase; for the wall-clock budget
    it names the remedy (the rollouts in flight share the machine). None when none was."""
    reasons = Counter(
        first_line(r.agent_failure).removeprefix("agent: ")
        for r in records
        if r.rewarded and not r.floor_reward and r.agent_failure
    )
    if not reasons:
        return None
    reason, count = _most_frequent(reasons)
    text = f"{sum(reasons.values())} of {len(records)} rollouts ended early; most often: {reason}"
    text += f" ×{count}"
    if "wall-clock budget" in reason:
        text += " (the rollouts in flight share the machine: lower --concurrency"
        text += " or raise --rollout-timeout)"
    return text


def eval_figures(run_dir: Path, k: int, max_tokens: int | None = None) -> dict[str, Any]:
    """The figures of a finished evaluation run (see the module docstring), with the share of
    its turns that called a tool (``tool_call_rate``) and, when its rollouts failed as a whole,
    why (``failure``: :func:`holdout_failure`; ``max_tokens`` is the cap its policy had), and
    when some of its rewarded rollouts were ended early, how many and why (``cut``:
    :func:`holdout_cuts`)."""
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
    failure = holdout_failure(records, max_tokens)
    if failure is not None:
        figures["failure"] = failure
    cut = holdout_cuts(records)
    if cut is not None:
        figures["cut"] = cut
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
            figures = eval_figures(target, config.eval_samples, config.job.max_tokens)
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
    release_free_memory(config.run.settings.malloc)  # the sampler's caches, before the next
    figures = eval_figures(result.run_dir, config.eval_samples, config.job.max_tokens)
    if echo is not None and figures.get("failure"):
        echo(f"{_NAMES.get(label, label)} holdout: {figures['failure']}")
    return figures
