"""The seam with TRL's and transformers' internals holds for the pinned versions, and each use
puts back what it changed."""

from __future__ import annotations

import importlib.metadata
import re
import types
from pathlib import Path

import pytest

from agent_kit.model import seam

CONSTRAINTS = Path(__file__).parents[2] / "constraints.txt"


def test_the_seam_names_the_versions_constraints_pins_and_those_are_installed() -> None:
    """The seam's pinned versions are constraints.txt's, its docstring names them, and the
    installed libraries are those versions (an upgrade must re-check the seam first)."""
    pins = dict(re.findall(r"^([\w-]+)==(\S+)$", CONSTRAINTS.read_text(), re.MULTILINE))
    for name, version in seam.PINNED.items():
        assert pins[name] == version, name
        assert f"{name} {version}" in (seam.__doc__ or ""), name
        assert importlib.metadata.version(name) == version, name


@pytest.mark.e2e  # importing TRL's GRPO trainer starts a process
def test_every_internal_the_seam_uses_is_there() -> None:
    """Each module constant, class attribute and cache field named in the seam exists in the
    installed TRL and transformers."""
    assert seam.missing() == []


def test_the_lm_head_tiles_are_set_and_put_back() -> None:
    """Setting TRL's fused LM head tiles changes both constants and returns the old ones, which
    set back restore them."""
    before = seam.lm_head_tiles()
    assert before is not None
    assert seam.set_lm_head_tiles((512, 8192)) == before
    try:
        assert seam.lm_head_tiles() == (512, 8192)
    finally:
        seam.set_lm_head_tiles(before)
    assert seam.lm_head_tiles() == before


def test_the_gguf_bar_is_silenced_only_while_loading() -> None:
    """transformers' GGUF loader's tqdm is a pass-through inside the block and itself after."""
    module = importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    original = module.tqdm
    with seam.quiet_gguf_load(True):
        assert module.tqdm is not original
        assert list(module.tqdm([1, 2], desc="x")) == [1, 2]
    assert module.tqdm is original


def test_a_trl_that_does_not_scale_its_loss_is_refused() -> None:
    """The pass split is refused, naming the pinned TRL, for a GRPOTrainer whose loss is not
    already scaled for gradient accumulation."""
    fake = types.SimpleNamespace(GRPOTrainer=type("GRPOTrainer", (), {}))
    with pytest.raises(RuntimeError, match=r"loss_is_scaled_for_ga.*trl 1\.16\.0"):
        seam.pass_split_trainer(fake, lambda rows, width: [], lambda model, on: None)


def test_weights_version_sees_a_fused_optimiser_step_only_while_watched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fused AdamW step (which leaves the tensors' in-place counters alone) changes the
    weights' version while a sampler watches the optimiser steps, and not once the last
    watcher is gone (the global hook removed: the process as it was); an in-place write
    always does."""
    import torch

    monkeypatch.setattr(seam, "_STEPS", seam._StepCount())  # this test's watchers only
    layer = torch.nn.Linear(4, 4)
    optimiser = torch.optim.AdamW(layer.parameters(), lr=0.1, fused=True)

    def step() -> None:
        layer(torch.ones(1, 4)).sum().backward()
        optimiser.step()

    seam.watch_optimizer_steps()
    seam.watch_optimizer_steps()
    try:
        before = seam.weights_version(layer)
        step()
        assert seam.weights_version(layer) != before
    finally:
        seam.unwatch_optimizer_steps()
    assert seam._STEPS.handle is not None  # one watcher left
    seam.unwatch_optimizer_steps()
    assert seam._STEPS.handle is None
    before = seam.weights_version(layer)
    step()
    assert seam.weights_version(layer) == before  # unwatched: the fused step is not seen
    with torch.no_grad():
        layer.weight.add_(1.0)
    assert seam.weights_version(layer) != before
