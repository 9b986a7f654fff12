"""The step hook names the adapter the policy samples with by its weights: a policy whose model
is not the one being trained (the sampler kept an old adapter: OpenPipe/ART #661) is a stale
adapter, and an update that leaves the LoRA weights as they were is a warning."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

import torch

from agent_kit.driver.config import RunConfig
from agent_kit.driver.dataset import Dataset
from agent_kit.train.config import TrainConfig
from agent_kit.train.provenance import lora_fingerprint
from agent_kit.train.samples import StepBatch
from agent_kit.train.steps import TrainSteps


class _Lora(torch.nn.Module):
    """Two LoRA-named tensors and a base weight, as a PEFT-wrapped model names them."""

    def __init__(self) -> None:
        super().__init__()
        self.base = torch.nn.Parameter(torch.ones(2))
        self.lora_A = torch.nn.Parameter(torch.full((2, 2), 0.5))
        self.lora_B = torch.nn.Parameter(torch.zeros(2, 2))


def _steps(trained: torch.nn.Module, sampled: torch.nn.Module, lines: list[str]) -> TrainSteps:
    tokenizer = SimpleNamespace(pad_token_id=0, eos_token_id=2)
    backend = SimpleNamespace(loaded=SimpleNamespace(model=sampled, tokenizer=tokenizer))
    session = SimpleNamespace(model=trained, run_dir=Path("run"))
    data = Dataset(Path("data.jsonl"), "prompt", ("a", "b"))
    return TrainSteps(
        TrainConfig(run=RunConfig()),
        session,  # type: ignore[arg-type]
        backend,  # type: ignore[arg-type]
        data,
        first_step=0,
        start_label="base",
        echo=lines.append,
    )


def test_the_fingerprint_follows_the_lora_tensors_only() -> None:
    """A copy has the same digest; changing a LoRA tensor changes it, the base weight does not."""
    model = _Lora()
    twin = copy.deepcopy(model)
    assert lora_fingerprint(model) == lora_fingerprint(twin) != ""
    with torch.no_grad():
        twin.base.add_(1.0)
    assert lora_fingerprint(model) == lora_fingerprint(twin)
    with torch.no_grad():
        twin.lora_B[0, 0] = 1e-3
    assert lora_fingerprint(model) != lora_fingerprint(twin)
    assert lora_fingerprint(torch.nn.Linear(2, 2)) == ""


def test_a_sampler_holding_other_weights_than_the_trainers_is_a_stale_adapter() -> None:
    """The policy samples a model whose LoRA weights no saved adapter had: the step names it
    unknown, warns, and records the line for the step."""
    lines: list[str] = []
    trained = _Lora()
    sampled = copy.deepcopy(trained)
    with torch.no_grad():
        sampled.lora_B.fill_(0.25)
    steps = _steps(trained, sampled, lines)
    steps._name_sampler(0)
    assert steps.sampling == "unknown"
    assert lines == [
        "warning: step 0 samples with adapter unknown, not the latest (base): the policy is stale"
    ]
    assert steps.warnings[0] == lines


def test_the_trainers_own_model_is_the_latest_adapter_and_an_unmoved_update_warns() -> None:
    """The sampler holding the trained model names the latest adapter without a warning; a step
    whose weights did not move (no advantage) warns with the cause, and the next step, sampling
    those same weights, names the new adapter and is not stale."""
    lines: list[str] = []
    model = _Lora()
    steps = _steps(model, model, lines)
    steps._name_sampler(0)
    assert (steps.sampling, lines) == ("base", [])
    steps._check(0, StepBatch(0, []), [], moved=False)
    assert lines == [
        "warning: step 0: the LoRA weights did not move (every advantage was 0); the next step "
        "samples the same policy"
    ]
    steps.ledger.record("step-0000", lora_fingerprint(model))  # the unmoved update's adapter
    steps._name_sampler(1)
    assert steps.sampling == "step-0000"
    assert len(lines) == 1  # the same weights are not a stale adapter
