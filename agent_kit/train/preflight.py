"""The preflight: is there anything to learn, said before paying for the training.

GRPO learns from the differences inside a group: a group whose rollouts all score alike gives
every one of them advantage 0, and a step made of such groups has loss 0 and no gradient (the
measured default: SmolLM2-135M on a tool-using agent, every rollout on the floor after one turn).
:func:`run_preflight` plays one probe step (``batch_size`` prompts × ``group_size`` rollouts of
the first step's prompts, with the policy as it would start training: the base model or the
warm-start adapter) as the run directory ``RUN_DIR/preflight`` and measures the share of
all-equal groups and the tool-call rate (:class:`Preflight`). When every group is equal,
``agent-kit train`` stops with :class:`NothingToLearn` unless ``--force``, with one line that
fits the run: when every probe rollout reached the success threshold the task is *solved* at
this size (harder prompts or a stricter reward); otherwise the remedies are a warm start (not
offered to a run that has one: more or better episodes, more epochs instead), a bigger or
tool-capable model, a graded reward;
``agent-kit doctor reward RUN_DIR --policy SPEC`` reports the same probe as a finding.

The probe also counts the groups whose rewards differ only by the reward's shaping, their
outcomes alike (:mod:`~agent_kit.train.outcomes`). When they are most of the groups, the
reward's shaping dominates its outcome: GRPO would learn the shaping, not what succeeds, and
the line says so with the rehearsal's remedies (``--outcome-gate``, ``--dynamic-sampling``;
the doctor's finding is then a warning). With ``--outcome-gate`` such groups carry no
advantage, so a probe whose every group is all equal or shaping only has nothing to learn.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Final

from agent_kit.driver.config import RunConfig
from agent_kit.driver.hooks import JobHooks
from agent_kit.driver.local import run_local
from agent_kit.emulator import PolicyBackend
from agent_kit.errors import NothingToLearn, UsageError
from agent_kit.evaluation.local_cells import progress_lines
from agent_kit.evaluation.rollouts import tool_call_rate
from agent_kit.reporting.metrics import build_groups
from agent_kit.reporting.summary_schema import flat_config
from agent_kit.store import RunStore, load_rollouts
from agent_kit.store.layout import PREFLIGHT_DIR, RunLayout
from agent_kit.train.outcomes import signal_shares

__all__ = [
    "REMEDIES",
    "Preflight",
    "preflight_figures",
    "preflight_or_stop",
    "run_preflight",
]

#: What to do when every probe group scores alike.
REMEDIES: Final = (
    "a warm start from good episodes (--warm-start RUN_DIR), a bigger or tool-capable model "
    "(--model), or a graded reward"
)


@dataclass(frozen=True)
class Preflight:
    """One probe step's figures: ``groups`` scored, ``equal_groups`` of them all-equal, the
    rewards seen (lowest, highest), the rollouts and the share of turns that called a tool;
    the job's success threshold, and whether the policy probed is a warm start's."""

    groups: int
    equal_groups: int
    rollouts: int
    reward_min: float | None
    reward_max: float | None
    tool_call_rate: float | None
    success_threshold: float | None = None
    warm: bool = False
    shaping_groups: int = 0
    outcome_gate: bool = False

    @property
    def nothing_to_learn(self) -> bool:
        """Every scored group is all-equal (or none was scored); with the outcome gate, every
        one is all-equal or differs only by shaping."""
        silent = self.equal_groups + (self.shaping_groups if self.outcome_gate else 0)
        return silent == self.groups

    @property
    def shaping_dominates(self) -> bool:
        """Most of the scored groups differ only by shaping (their outcomes alike)."""
        return self.groups > 0 and self.shaping_groups * 2 > self.groups

    def shaping_note(self) -> str:
        """The shaping warning of the line (``""`` when shaping does not dominate)."""
        if not self.shaping_dominates or self.outcome_gate:
            return ""
        return (
            f"; warning: {self.shaping_groups} of {self.groups} probe groups differ only by the "
            "reward's shaping (their outcomes alike): the shaping dominates the outcome, so "
            "GRPO would learn the shaping; try --outcome-gate (advantages on the outcome) or "
            "--dynamic-sampling N"
        )

    @property
    def solved(self) -> bool:
        """Every group is equal because every probe rollout reached the success threshold."""
        return (
            self.nothing_to_learn
            and self.reward_min is not None
            and self.success_threshold is not None
            and self.reward_min >= self.success_threshold
        )

    def remedies(self) -> str:
        """What to try when every group is equal, fitting this run (see the module docstring)."""
        if self.solved:
            return "harder prompts or a stricter reward"
        if self.warm:
            return (
                "a better warm start (more or better episodes, more --warm-start-epochs), a "
                "bigger or tool-capable model (--model), or a graded reward"
            )
        return REMEDIES

    def line(self) -> str:
        """One line: the figures, and when there is nothing to learn, why and the remedies."""
        rate = "no turn" if self.tool_call_rate is None else f"{self.tool_call_rate:.0%}"
        if not self.nothing_to_learn:
            return (
                f"preflight: {self.equal_groups} of {self.groups} probe groups all equal, "
                f"{self.shaping_groups} shaping only, tool-call rate {rate}: GRPO has a "
                f"gradient{self.shaping_note()}"
            )
        if self.solved:
            return (
                f"nothing to learn: the task is solved at this size: every probe rollout of "
                f"the {self.groups} groups reached the success threshold "
                f"{self.success_threshold:g} (rewards {self.reward_min:g} to "
                f"{self.reward_max:g}), tool-call rate {rate}, so every advantage is 0; use "
                f"{self.remedies()}; --force trains anyway"
            )
        if self.reward_min is None:
            alike = "no probe group was scored"
        elif self.outcome_gate and self.shaping_groups:
            alike = (
                f"every one of the {self.groups} probe groups has outcomes alike "
                f"({self.shaping_groups} differ only by shaping, which the outcome gate ignores)"
            )
        elif self.reward_min == self.reward_max:
            alike = f"all {self.groups} probe groups scored alike (reward {self.reward_min:g})"
        else:
            alike = f"every one of the {self.groups} probe groups scored alike within itself"
        return (
            f"nothing to learn: {alike}, tool-call rate {rate}, so every advantage is 0 and "
            f"GRPO has no gradient; try {self.remedies()}; --force trains anyway"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (train.json's ``preflight``)."""
        return {
            **asdict(self),
            "nothing_to_learn": self.nothing_to_learn,
            "shaping_dominates": self.shaping_dominates,
        }


def preflight_figures(run_dir: Path) -> Preflight:
    """The :class:`Preflight` figures of a finished probe run."""
    store = RunStore.open(run_dir, readonly=True)
    try:
        job = store.list_jobs()[-1]
        records = load_rollouts(store, job.arn, with_turns=True)
    finally:
        store.close()
    threshold = flat_config(job.config).get("success_threshold")
    groups = build_groups(records)
    scored = [g for g in groups if g.rewards]
    rewards = [r for g in scored for r in g.rewards if math.isfinite(r)]
    known = float(threshold) if isinstance(threshold, (int, float)) else None
    shares = signal_shares(scored, known if known is not None else 1.0)
    return Preflight(
        groups=len(scored),
        equal_groups=shares.equal,
        rollouts=len(records),
        reward_min=min(rewards) if rewards else None,
        reward_max=max(rewards) if rewards else None,
        tool_call_rate=tool_call_rate(records),
        success_threshold=known,
        shaping_groups=shares.shaping,
    )


async def run_preflight(
    run: RunConfig,
    backend: PolicyBackend,
    out: Path,
    echo: Callable[[str], None] | None = None,
) -> Preflight:
    """Play one probe step of ``run``'s job with ``backend`` as ``out/preflight`` (an earlier
    probe there is replaced) and return its figures."""
    target = RunLayout(out).preflight
    if target.is_dir():
        shutil.rmtree(target)
    if run.job is None:
        raise UsageError("the preflight needs the job's settings")
    job = replace(run.job, name=PREFLIGHT_DIR, policy=backend.name, steps=1)
    probe = replace(run, job=job, out=out, resume=None)
    hooks = JobHooks(progress=progress_lines("preflight", echo)) if echo else None
    result = await run_local(probe, hooks, policy=backend)
    return preflight_figures(result.run_dir)


async def preflight_or_stop(
    run: RunConfig,
    backend: PolicyBackend,
    run_dir: Path,
    *,
    force: bool,
    echo: Callable[[str], None],
    warm: bool = False,
    outcome_gate: bool = False,
) -> dict[str, Any]:
    """``agent-kit train``'s preflight (see the module docstring): play the probe step, echo its
    line when training goes on, raise :class:`NothingToLearn` with it when every group is equal
    and not ``force``; return its figures for train.json. ``warm``: the policy probed is the
    run's warm start (the line then does not suggest one); ``outcome_gate``: the run trains on
    the outcomes."""
    echo("preflight: one probe step before training")
    probe = await run_preflight(run, backend, run_dir, echo)
    probe = replace(probe, warm=warm, outcome_gate=outcome_gate)
    if probe.nothing_to_learn and not force:
        raise NothingToLearn(probe.line())
    echo(probe.line())
    return probe.to_dict()
