"""Dynamic sampling (``--dynamic-sampling N``): a step's groups without signal are dropped and
their places filled with groups of fresh prompts, at most ``N`` extra prompts a step.

A group without signal is one whose advantages are all 0: all its rewards alike, or, with the
outcome gate (``--outcome-gate``), all its outcomes alike (:mod:`~agent_kit.train.outcomes`).
It adds nothing to the gradient but its tokens to the loss's normaliser. DAPO's dynamic
sampling (prime-rl's zero-advantage filter, verl's ``filter_groups``) plays more prompts until
the batch holds groups with signal only; here, after a step's rollouts are in:

1. the step's groups without signal are dropped (their places become blank samples, all
   masked: they add nothing to the loss, not even tokens);
2. a *round* plays as many fresh prompts as places are empty (and the cap leaves), each
   ``group_size`` times, with the policy the step sampled with, as a run directory of its own
   (``RUN_DIR/refill/step-NNNN-rK``); each of its groups with signal fills an empty place;
3. rounds go on until every place is filled, the cap of extra prompts is spent, or the run is
   stopped; the step line says what happened (``dynamic sampling: 2 of 4 groups without
   signal dropped, 3 extra prompts in 2 rounds (cap 4), 1 place filled, 1 left empty``).

Fresh prompts are the dataset's, read in a cycle from after the job's planned prompts, skipping
the step's own; a refill's turns are recorded in the run's own store, as the step's are. **The
service does not do this**: it trains on every group of every step. The option is for the
rehearsal: it shows what a step could learn when it keeps only groups that teach, at the cost
of the extra rollouts.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from agent_kit.driver.dataset import Dataset
from agent_kit.driver.hooks import JobHooks
from agent_kit.driver.job import run_job
from agent_kit.emulator import PolicyBackend
from agent_kit.reporting.metrics import GroupResult, build_groups
from agent_kit.reporting.words import plural
from agent_kit.store import RunStore, load_rollouts
from agent_kit.store.layout import RunLayout
from agent_kit.train.config import TrainConfig
from agent_kit.train.provenance import tag_run
from agent_kit.train.samples import Advantages

__all__ = ["Refill", "fresh_prompts", "has_signal", "refill_groups"]


def has_signal(group: GroupResult | None, advantages: Advantages) -> bool:
    """Whether a group adds to the gradient: some advantage is not 0."""
    return group is not None and any(a != 0.0 for a in advantages(group))


@dataclass
class Refill:
    """What dynamic sampling did at one step: the step's ``places`` (groups), ``dropped`` of
    them without signal, the extra ``prompts`` played in ``rounds`` (at most ``cap``), and
    the groups with signal found (``groups``, each filling a dropped place)."""

    places: int
    dropped: int
    cap: int
    prompts: int = 0
    rounds: int = 0
    groups: list[GroupResult] = field(default_factory=list)

    @property
    def filled(self) -> int:
        """Dropped places a refill group filled."""
        return len(self.groups)

    def phrase(self) -> str:
        """The step line's part (see the module docstring)."""
        if not self.dropped:
            return f"dynamic sampling: every one of the {self.places} groups has signal"
        return (
            f"dynamic sampling: {self.dropped} of {self.places} groups without signal dropped, "
            f"{plural(self.prompts, 'extra prompt')} in {plural(self.rounds, 'round')} (cap "
            f"{self.cap}), {plural(self.filled, 'place')} filled, "
            f"{self.dropped - self.filled} left empty"
        )

    def metrics(self) -> dict[str, float]:
        """The step's ``train/refill/*`` figures."""
        return {
            "train/refill/dropped_groups": float(self.dropped),
            "train/refill/prompts": float(self.prompts),
            "train/refill/rounds": float(self.rounds),
            "train/refill/filled": float(self.filled),
        }


def fresh_prompts(own: Sequence[int], n_prompts: int, start: int, count: int) -> list[int]:
    """``count`` dataset indices read in a cycle from ``start``, skipping the step's ``own``
    prompts (unless the dataset holds no other)."""
    skip = set(own) if len(set(own)) < n_prompts else set()
    found: list[int] = []
    index = start
    while len(found) < count:
        if index % n_prompts not in skip:
            found.append(index % n_prompts)
        index += 1
    return found


async def _play_round(
    config: TrainConfig,
    backend: PolicyBackend,
    run_dir: Path,
    prompts: list[str],
    where: tuple[int, int],
    stop: asyncio.Event | None,
) -> tuple[list[GroupResult], bool]:
    """Play one round's prompts ``group_size`` times each as ``refill/step-NNNN-rK``; its
    groups, and whether the round finished (not stopped)."""
    layout = RunLayout(run_dir)
    target, data = layout.refill(*where), layout.refill_prompts(*where)
    if target.is_dir():  # a step trained again after a resume plays its rounds again
        shutil.rmtree(target)
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts), encoding="utf-8")
    seed = config.job.seed + 7919 * (where[0] + 1) + where[1]  # not the step's own draws
    job = replace(
        config.job, name=target.name, policy=backend.name, steps=1, batch_size=None, seed=seed
    )
    run = replace(config.run, dataset=data, job=job, out=target.parent, resume=None)
    result = await run_job(run, JobHooks(stop=stop), policy=backend)
    with RunStore.open(result.run_dir, readonly=True) as store:
        groups = build_groups(load_rollouts(store, result.job_arn))
    return groups, result.status == "completed"


async def refill_groups(
    config: TrainConfig,
    backend: PolicyBackend,
    run_dir: Path,
    *,
    step: int,
    data: Dataset,
    own: Sequence[int],
    kept: int,
    used: int,
    advantages: Advantages,
    label: Callable[[], str],
    stop: asyncio.Event | None = None,
) -> Refill:
    """Fill the places of a step's dropped groups (``len(own) - kept`` of them) with groups of
    fresh prompts (see the module docstring); ``used`` is how many extra prompts the run's
    earlier steps played (where this step's fresh prompts start reading); ``label()`` names the
    adapter the policy samples with (recorded on the refill's rollouts)."""
    places, cap = len(own), config.dynamic_sampling
    refill = Refill(places=places, dropped=places - kept, cap=cap)
    start = (config.job.steps * places + used) % len(data)
    while refill.filled < refill.dropped and refill.prompts < cap:
        if stop is not None and stop.is_set():
            break
        count = min(refill.dropped - refill.filled, cap - refill.prompts)
        chosen = fresh_prompts(own, len(data), start + refill.prompts, count)
        refill.rounds += 1
        groups, finished = await _play_round(
            config, backend, run_dir, [data[i] for i in chosen], (step, refill.rounds), stop
        )
        await asyncio.to_thread(tag_run, RunLayout(run_dir).refill(step, refill.rounds), label())
        refill.prompts += count
        good = [g for g in groups if has_signal(g, advantages)]
        refill.groups += good[: refill.dropped - refill.filled]
        if not finished:
            break
    return refill
