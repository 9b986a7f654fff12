"""From a step's recorded rollouts to the samples GRPO trains on.

**Sample construction: one sample per rollout, prefix-merged.** The ``hf`` policy continues a
rollout's prompt from its previous turn (token-in, token-out: the continuation rule of
:mod:`agent_kit.model.continuation`), so turn ``k+1``'s prompt ids start with turn ``k``'s
prompt and sampled completion. A rollout becomes one sequence: the first turn's prompt, then every
turn's sampled tokens (trained on: ``env_mask`` 1) with the tokens the environment added between
turns (tool results, the next assistant header: ``env_mask`` 0, never trained on) in between.
Every trained token carries the rollout's advantage. A turn whose prompt does not continue the
previous one (the agent rewrote its history) ends the sample there; its turns and the later ones
are not trained (counted in ``dropped_turns``).

Advantages are agent_kit's (:func:`~agent_kit.reporting.metrics.build_groups`, the service's
``group_based`` estimator): a degenerate group (equal rewards, or fewer than two) gives 0 to all
its rollouts; the agent's floor reward is a reward like any other. A slot without a usable
rollout (lost, or its tokens not recorded) keeps its place in the group as a one-token sample
with an all-zero mask and advantage 0: it adds nothing to the loss.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_kit.model.continuation import Chain
from agent_kit.model.turns import TurnTokens
from agent_kit.reporting.metrics import GroupResult, build_groups
from agent_kit.store import RunStore, load_rollouts
from agent_kit.store.events import TRAIN_TOKENS_EVENT

__all__ = [
    "Advantages",
    "Sample",
    "StepBatch",
    "blank_sample",
    "group_rewards",
    "group_samples",
    "merge_turns",
    "no_gradient_note",
    "recorded_turns",
    "reward_advantages",
    "step_batch",
    "step_groups",
]


@dataclass(frozen=True)
class Sample:
    """One rollout as a training sequence (see the module docstring)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    advantage: float
    dropped_turns: int = 0

    @property
    def trained_tokens(self) -> int:
        """Tokens the loss sees (``env_mask`` 1)."""
        return sum(self.env_mask)


def merge_turns(turns: list[TurnTokens], advantage: float) -> Sample:
    """Prefix-merge a rollout's turns (in turn order) into one :class:`Sample`."""
    first = turns[0]
    completion = list(first.completion_ids)
    mask = [1] * len(completion)
    logprobs = list(first.logprobs)
    chain = Chain((*first.prompt_ids, *first.completion_ids))
    dropped = 0
    for index, turn in enumerate(turns[1:], start=1):
        if not chain.continued_by(turn.prompt_ids):
            dropped = len(turns) - index
            break
        between = list(turn.prompt_ids[len(chain.ids) :])
        completion += between + list(turn.completion_ids)
        mask += [0] * len(between) + [1] * len(turn.completion_ids)
        logprobs += [0.0] * len(between) + list(turn.logprobs)
        chain = Chain((*turn.prompt_ids, *turn.completion_ids))
    return Sample(list(first.prompt_ids), completion, mask, logprobs, advantage, dropped)


def blank_sample(pad_id: int) -> Sample:
    """A place in a group without a usable rollout: one all-masked token, advantage 0."""
    return Sample([pad_id], [pad_id], [0], [0.0], 0.0)


@dataclass
class StepBatch:
    """A step's samples in group order (``group_size`` consecutive samples per prompt), with
    what was left out; ``rewards`` are the step's own rollouts' (its groups', not a refill's)."""

    step: int
    samples: list[Sample]
    rewards: list[float | None] = field(default_factory=list)
    missing: int = 0

    def rollout_output(self) -> dict[str, Any]:
        """What TRL's ``rollout_func`` returns: ids, env mask, logprobs, and the advantage each
        sample's reward function reads (``agent_kit_advantage``)."""
        return {
            "prompt_ids": [s.prompt_ids for s in self.samples],
            "completion_ids": [s.completion_ids for s in self.samples],
            "logprobs": [s.logprobs for s in self.samples],
            "env_mask": [s.env_mask for s in self.samples],
            "agent_kit_advantage": [s.advantage for s in self.samples],
        }

    @property
    def trained_tokens(self) -> int:
        """Tokens through the backward pass: prompt and completion of every sample with a
        non-zero advantage (the service's ``train`` category)."""
        return sum(
            len(s.prompt_ids) + len(s.completion_ids) for s in self.samples if s.advantage != 0.0
        )

    @property
    def dropped_turns(self) -> int:
        """Turns left out because they did not continue their rollout's tokens."""
        return sum(s.dropped_turns for s in self.samples)


def recorded_turns(store: RunStore, trajectory_ids: set[str]) -> dict[str, list[TurnTokens]]:
    """The token records of these rollouts, each list in turn order (a turn recorded twice, the
    last record)."""
    found: dict[str, dict[int, TurnTokens]] = defaultdict(dict)
    for event in store.list_events(kind=TRAIN_TOKENS_EVENT):
        tid = event.trajectory_id
        if tid is not None and tid in trajectory_ids:
            tokens = TurnTokens.from_dict(tid, event.detail)
            found[tid][tokens.turn] = tokens
    return {tid: [turns[i] for i in sorted(turns)] for tid, turns in found.items()}


#: A group's advantages, in its rollouts' order (the service's: ``GroupResult.advantages``; the
#: outcome gate's: :func:`~agent_kit.train.outcomes.gated_advantages`).
Advantages = Callable[[GroupResult], Sequence[float]]


def reward_advantages(group: GroupResult) -> Sequence[float]:
    """The service's advantages: ``group_based`` over the rewards."""
    return group.advantages


def step_groups(store: RunStore, job_arn: str, step: int) -> dict[int, GroupResult]:
    """The groups of one step of a job, by prompt index."""
    records = [r for r in load_rollouts(store, job_arn) if r.step == step]
    return {g.prompt_index: g for g in build_groups(records)}


def group_samples(
    group: GroupResult | None,
    group_size: int,
    tokens: Mapping[str, list[TurnTokens]],
    pad_id: int,
    advantages: Advantages = reward_advantages,
) -> tuple[list[Sample], int]:
    """One group's ``group_size`` samples in sample order (``tokens``: its rollouts' recorded
    turns) and how many are blank (see the module docstring)."""
    by_sample: dict[int, tuple[Any, float]] = {}
    if group is not None:
        for rollout, advantage in zip(group.rollouts, advantages(group), strict=True):
            by_sample[rollout.sample_index] = (rollout, advantage)
    samples: list[Sample] = []
    missing = 0
    for sample_index in range(group_size):
        rollout, advantage = by_sample.get(sample_index, (None, 0.0))
        turns = tokens.get(rollout.id, [])[: rollout.turns] if rollout is not None else []
        if not turns:
            samples.append(blank_sample(pad_id))
            missing += 1
            continue
        samples.append(merge_turns(turns, advantage))
    return samples, missing


def group_rewards(group: GroupResult | None, group_size: int) -> list[float | None]:
    """A group's rewards in sample order (None for a slot without one)."""
    found = {r.sample_index: r.reward for r in group.rollouts} if group is not None else {}
    return [found.get(k) for k in range(group_size)]


def step_batch(
    store: RunStore,
    job_arn: str,
    step: int,
    *,
    group_size: int,
    prompts: list[int],
    pad_id: int,
    advantages: Advantages = reward_advantages,
) -> StepBatch:
    """The samples of one step: for each of the step's ``prompts`` (dataset indices, in plan
    order) ``group_size`` samples in sample order (see the module docstring)."""
    groups = step_groups(store, job_arn, step)
    tokens = recorded_turns(store, {r.id for g in groups.values() for r in g.rollouts})
    batch = StepBatch(step, [])
    for prompt_index in prompts:
        group = groups.get(prompt_index)
        samples, missing = group_samples(group, group_size, tokens, pad_id, advantages)
        batch.samples += samples
        batch.missing += missing
        batch.rewards += group_rewards(group, group_size)
    return batch


def no_gradient_note(batch: StepBatch) -> str:
    """Why a step's loss is 0, for its progress line: ``""`` when some sample has a non-zero
    advantage, else that no group had signal (no gradient)."""
    if any(s.advantage != 0.0 for s in batch.samples):
        return ""
    return "; loss 0: no group had signal (all advantages 0), nothing to learn this step"
