"""``agent-kit train``: a GRPO + LoRA rehearsal of the service's training on a small local model.

The rollouts are ``agent-kit run``'s (the job driver, the agent processes running the unchanged
entrypoint, the emulator, the store); the update is TRL's ``GRPOTrainer`` on a PEFT LoRA adapter
of a transformers model that the ``hf`` policy samples. torch, transformers, peft and trl load
only when a run starts (the ``train`` extra). See docs/train.md.

- :mod:`~agent_kit.train.config`: :class:`TrainConfig`, the settings and their bounds.
- :mod:`~agent_kit.train.samples`: rollouts → training samples (prefix-merged, ``env_mask``).
- :mod:`~agent_kit.train.grpo`: TRL's trainer fed one step at a time; adapters per step.
- :mod:`~agent_kit.train.steps`: the step hook (a finished step → one update), with
  :mod:`~agent_kit.train.outcomes` (a step's signal, the outcome gate),
  :mod:`~agent_kit.train.refill` (dynamic sampling), :mod:`~agent_kit.train.provenance` (which
  adapter sampled what) and :mod:`~agent_kit.train.prompt_filter` (prompts that can teach).
- :mod:`~agent_kit.train.evaluate`: the holdout, an evaluation grid played by the live model.
- :mod:`~agent_kit.train.session`: :func:`play_train`, the whole run;
  :mod:`~agent_kit.train.outputs` its ``train.json`` and ``train.html``.
"""

from agent_kit.train.config import TrainConfig
from agent_kit.train.session import TrainResult, play_train, train

__all__ = ["TrainConfig", "TrainResult", "play_train", "train"]
