"""The ``hf`` sampler drops its kept prefixes when training changes the weights it samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_kit.model.batch import BatchSampler, SampleJob
from agent_kit.model.sampling import pick


@pytest.mark.e2e  # importing TRL's GRPO trainer starts a process
def test_a_grpo_step_and_the_adapter_switch_drop_the_kept_prefixes(
    tiny_model: Path, tmp_path: Path
) -> None:
    """A prefix kept before a GRPO step is not reused after it (the LoRA weights moved), nor
    one kept with the adapter on once it is switched off for a holdout (or back on); a prefix
    kept under the same weights is reused."""
    from agent_kit.driver.config import RunConfig
    from agent_kit.model.loading import LoadedModel, load_model, parse_model_spec
    from agent_kit.train.config import TrainConfig
    from agent_kit.train.grpo import GRPOSession
    from agent_kit.train.samples import Sample, StepBatch

    loaded = load_model(parse_model_spec(str(tiny_model)), "cpu")
    config = TrainConfig(run=RunConfig(), device="cpu", micro_batch=2, learning_rate=1e-2)
    session = GRPOSession(config.with_job(group_size=2, batch_size=1), loaded, tmp_path, steps=1)
    model = session.model
    trained = LoadedModel(model, loaded.tokenizer, loaded.device, loaded.name)
    stop_ids = {loaded.tokenizer.eos_token_id}
    sampler = BatchSampler(trained, pick=pick, stop_ids=stop_ids, max_rows=4)
    prompt = tuple(range(100, 140))
    turn = 0

    def play(key: str) -> None:
        """One turn of rollout ``key``, continuing its previous turn when there was one."""
        nonlocal prompt, turn
        turn += 1
        job = SampleJob(prompt, 1.0, 1.0, 4, turn, key)
        sampler.submit(job)
        ids, _ = job.future.result(timeout=120)
        prompt = (*prompt, *ids, 200, 201)

    def reused(key: str) -> bool:
        before = sampler.reused_tokens
        play(key)
        return sampler.reused_tokens > before

    try:
        play("r")
        assert reused("r")  # the same weights: the prefix serves
        session.start()
        half = [Sample([1, 2, 3], [4, 5, 6], [1, 1, 1], [-1.0] * 3, a) for a in (1.0, -1.0)]
        session.train_step(StepBatch(0, half))
        assert not reused("r")  # the step moved the LoRA weights
        assert reused("r")
        with model.disable_adapter():
            assert not reused("r")  # the holdout's base model
            assert reused("r")
        assert not reused("r")  # the adapter back on
    finally:
        sampler.close()
        session.close()
