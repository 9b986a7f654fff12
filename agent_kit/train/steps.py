"""The training job's step hook: every finished step becomes one TRL update before the next
step samples.

At each step boundary the driver awaits :class:`TrainSteps`; it trains every finished step not
trained yet: the step's groups are read from the store, their signal counted
(:mod:`~agent_kit.train.outcomes`), with ``--dynamic-sampling`` the groups without signal
dropped and refilled (:mod:`~agent_kit.train.refill`), the samples built
(:mod:`~agent_kit.train.samples`; advantages on the rewards, or on the outcomes with
``--outcome-gate``), TRL makes the update, and the step is recorded (event ``train_step``: the
trainer's ``train/*`` metrics, the signal shares, the refill's figures, the seconds spent
sampling and updating, the adapter saved, the step's warnings) and printed as one line. Before a
step samples, the adapter the policy holds is named and checked against the latest one
(:mod:`~agent_kit.train.provenance`); every turn's tokens are stored (event ``train_tokens``) and
its rollout recorded with that adapter's name.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_kit.driver.dataset import Dataset
from agent_kit.driver.hooks import StepBoundary
from agent_kit.driver.job_setup import step_prompts
from agent_kit.emulator import HFPolicyBackend
from agent_kit.model.turns import TurnTokens
from agent_kit.reporting.metrics import GroupResult
from agent_kit.store import RunStore
from agent_kit.store.events import TRAIN_STEP_EVENT, TRAIN_TOKENS_EVENT
from agent_kit.train.config import TrainConfig
from agent_kit.train.evaluate import HoldoutPlayer
from agent_kit.train.grpo import GRPOSession, StepUpdate
from agent_kit.train.outcomes import gated_advantages, signal_shares
from agent_kit.train.provenance import AdapterLedger, lora_fingerprint, stale_line, unmoved_line
from agent_kit.train.refill import Refill, has_signal, refill_groups
from agent_kit.train.samples import (
    Advantages,
    StepBatch,
    blank_sample,
    group_rewards,
    group_samples,
    no_gradient_note,
    recorded_turns,
    reward_advantages,
    step_groups,
)

__all__ = ["TrainSteps", "step_advantages"]

Echo = Callable[[str], None]


def step_advantages(config: TrainConfig) -> Advantages:
    """The advantages a run trains on: the service's, or the outcome gate's."""
    if not config.outcome_gate:
        return reward_advantages
    threshold = config.job.success_threshold
    return lambda group: gated_advantages(group, threshold)


def _batch(
    step: int,
    prompts: list[int],
    groups: dict[int, GroupResult],
    refill: Refill | None,
    tokens: dict[str, list[TurnTokens]],
    *,
    group_size: int,
    pad_id: int,
    advantages: Advantages,
) -> StepBatch:
    """The step's samples in plan order; with a ``refill``, a group without signal gives its
    place to the next refill group, or to blank samples when none is left."""
    fill = list(refill.groups) if refill is not None else []
    batch = StepBatch(step, [])
    for prompt_index in prompts:
        group = groups.get(prompt_index)
        batch.rewards += group_rewards(group, group_size)
        if refill is not None and not has_signal(group, advantages):
            if not fill:
                batch.samples += [blank_sample(pad_id) for _ in range(group_size)]
                continue
            group = fill.pop(0)
        samples, missing = group_samples(group, group_size, tokens, pad_id, advantages)
        batch.samples += samples
        batch.missing += missing
    return batch


class TrainSteps:
    """The driver's step hook (see the module docstring)."""

    def __init__(
        self,
        config: TrainConfig,
        session: GRPOSession,
        backend: HFPolicyBackend,
        data: Dataset,
        *,
        first_step: int,
        start_label: str,
        echo: Echo,
        stop: asyncio.Event | None = None,
        holdout: HoldoutPlayer | None = None,
    ) -> None:
        self.config, self.session, self.backend, self.data = config, session, backend, data
        self.first_step, self.echo, self.stop = first_step, echo, stop
        self.holdout = holdout
        tokenizer = backend.loaded.tokenizer
        self.pad_id = int(tokenizer.pad_token_id or tokenizer.eos_token_id or 0)
        self.advantages = step_advantages(config)
        self.ledger = AdapterLedger()
        self.ledger.record(start_label, lora_fingerprint(session.model))
        self.sampling = start_label
        self.expected: dict[int, str] = {}
        self.warnings: dict[int, list[str]] = {}
        self.started = time.monotonic()

    @property
    def run_dir(self) -> Path:
        """The training run's directory."""
        return self.session.run_dir

    def prompts(self, step: int) -> list[int]:
        """The dataset indices of a step's prompts, in the driver's plan order."""
        return step_prompts(step, self.config.job.batch_size or 1, len(self.data))

    def _recorder(self, store: RunStore) -> Callable[[TurnTokens], None]:
        def record(tokens: TurnTokens) -> None:
            store.add_event(TRAIN_TOKENS_EVENT, tokens.to_dict(), tokens.trajectory_id)
            store.set_adapter([tokens.trajectory_id], self.sampling)

        return record

    async def __call__(self, boundary: StepBoundary) -> None:
        store = boundary.store
        if self.backend.recorder is None:
            self.backend.recorder = self._recorder(store)
        done = {int(e.detail["step"]) for e in store.list_events(kind=TRAIN_STEP_EVENT)}
        for step in range(self.first_step, boundary.step):
            if step not in done:
                await self._train(store, boundary.job_arn, step, boundary.steps)
                if self.holdout is not None:  # --eval-every: the model holds this step's now
                    await self.holdout.checkpoint(step)
        if boundary.step < boundary.steps:
            await asyncio.to_thread(self._name_sampler, boundary.step)
        self.started = time.monotonic()

    def _name_sampler(self, step: int) -> None:
        """Name the adapter the policy samples ``step`` with; warn when it is not the latest."""
        self.sampling = self.ledger.label_of(lora_fingerprint(self.backend.loaded.model))
        latest = self.ledger.latest or self.sampling
        self.expected[step] = latest
        if self.sampling != latest:
            self._warn(
                step,
                f"warning: step {step} samples with adapter {self.sampling}, not the latest "
                f"({latest}): the policy is stale",
            )

    def _warn(self, step: int, line: str) -> None:
        self.warnings.setdefault(step, []).append(line)
        self.echo(line)

    def _refill_used(self, store: RunStore) -> int:
        """Extra prompts the run's earlier steps played (where the next fresh prompts start)."""
        return sum(
            int(e.detail.get("train/refill/prompts", 0))
            for e in store.list_events(kind=TRAIN_STEP_EVENT)
        )

    async def _train(self, store: RunStore, job_arn: str, step: int, steps: int) -> None:
        config, prompts = self.config, self.prompts(step)
        groups = await asyncio.to_thread(step_groups, store, job_arn, step)
        own = [groups[p] for p in prompts if p in groups]
        shares = signal_shares(own, config.job.success_threshold)
        refill = None
        if config.dynamic_sampling:
            refill = await refill_groups(
                config,
                self.backend,
                self.run_dir,
                step=step,
                data=self.data,
                own=prompts,
                kept=sum(has_signal(groups.get(p), self.advantages) for p in prompts),
                used=self._refill_used(store),
                advantages=self.advantages,
                label=lambda: self.sampling,
                stop=self.stop,
            )
        found = [*own, *(refill.groups if refill is not None else [])]
        ids = {r.id for g in found for r in g.rollouts}
        tokens = await asyncio.to_thread(recorded_turns, store, ids)
        batch = _batch(
            step,
            prompts,
            groups,
            refill,
            tokens,
            group_size=config.job.group_size,
            pad_id=self.pad_id,
            advantages=self.advantages,
        )
        sampled = time.monotonic()
        before = await asyncio.to_thread(lora_fingerprint, self.session.model)
        update: StepUpdate = await asyncio.to_thread(self.session.train_step, batch)
        after = await asyncio.to_thread(lora_fingerprint, self.session.model)
        self.ledger.record(update.adapter.name, after)
        self._check(step, batch, own, moved=after != before)
        sampling, updating = sampled - self.started, time.monotonic() - sampled
        self.started = time.monotonic()
        detail: dict[str, Any] = {
            "step": step,
            **update.metrics,
            "train/tokens": float(batch.trained_tokens),
            "train/missing_samples": float(batch.missing),
            "train/dropped_turns": float(batch.dropped_turns),
            **shares.metrics(),
            **(refill.metrics() if refill is not None else {}),
            "timing_s/train_step": sampling + updating,
            "timing_s/sample": sampling,
            "timing_s/update": updating,
            "adapter": str(update.adapter.relative_to(self.run_dir)),
            "sampled_by": self.expected.get(step, self.sampling),
            "warnings": self.warnings.get(step, []),
        }
        store.add_event(TRAIN_STEP_EVENT, detail)
        self.echo(self._line(step, steps, batch, update, detail, shares.phrase(), refill))

    def _check(self, step: int, batch: StepBatch, own: list[GroupResult], *, moved: bool) -> None:
        """The step's warnings: rollouts sampled by a stale adapter, weights that did not move."""
        expected = self.expected.get(step, self.ledger.latest or self.sampling)
        stale = stale_line(step, expected, [r.adapter for g in own for r in g.rollouts])
        if stale is not None:
            self._warn(step, stale)
        if not moved:
            no_gradient = not any(s.advantage != 0.0 for s in batch.samples)
            self._warn(step, unmoved_line(step, "every advantage was 0" if no_gradient else ""))

    @staticmethod
    def _line(
        step: int,
        steps: int,
        batch: StepBatch,
        update: StepUpdate,
        detail: dict[str, Any],
        signal: str,
        refill: Refill | None,
    ) -> str:
        rewards = [r for r in batch.rewards if r is not None]
        mean = sum(rewards) / len(rewards) if rewards else float("nan")
        extra = f"; {refill.phrase()}" if refill is not None else ""
        return (
            f"step {step} (of 0-{steps - 1}): reward {mean:.3f}, "
            f"loss {update.metrics.get('train/loss', float('nan')):.4f}, "
            f"grad norm {update.metrics.get('train/grad_norm', float('nan')):.3g}, "
            f"{detail['timing_s/train_step']:.1f}s (sampling {detail['timing_s/sample']:.1f}s, "
            f"update {detail['timing_s/update']:.1f}s), {detail['adapter']}; {signal}{extra}"
            f"{no_gradient_note(batch)}"
        )
