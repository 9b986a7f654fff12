"""How a micro-batch is split into passes by length, and that the split changes no gradient."""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_kit.cli.process import bound_malloc, release_free_memory
from agent_kit.model import seam
from agent_kit.settings import Settings
from agent_kit.train.passes import (
    CHECKPOINT_FROM,
    CHECKPOINT_KWARGS,
    LM_HEAD_TILE,
    PASS_TOKENS,
    checkpoint_pass,
    pass_rows,
)


def test_passes_follow_the_length() -> None:
    """Short rows share a pass, long ones pass alone, every row exactly once and in order."""
    assert pass_rows([100] * 8) == [list(range(8))]
    assert pass_rows([1500] * 4) == [[0, 1], [2, 3]]
    assert pass_rows([3000] * 4) == [[0], [1], [2], [3]]
    assert pass_rows([9000, 10]) == [[0], [1]]  # longer than the budget: alone, not dropped
    assert pass_rows([1000, 1000, 3000, 1000], budget=4096) == [[0, 1], [2], [3]]
    assert pass_rows([]) == []
    assert sum(len(p) for p in pass_rows([700, 2100, 50, 4000, 900] * 3)) == 15


def test_checkpointing_where_a_pass_is_long() -> None:
    assert not checkpoint_pass(4, 120)  # a one-turn task keeps its activations
    assert checkpoint_pass(1, 3000)  # a Wordle rollout recomputes them
    assert checkpoint_pass(1, 10, forced=True)
    assert checkpoint_pass(2, CHECKPOINT_FROM // 2 + 1)
    assert CHECKPOINT_FROM < PASS_TOKENS


@pytest.fixture
def small_tiles() -> Iterator[None]:
    """TRL's LM head in the CPU's small tiles for the test (as ``agent-kit train``'s door sets
    them), its own tiles put back after."""
    default = seam.set_lm_head_tiles(LM_HEAD_TILE)
    assert default is not None
    yield
    seam.set_lm_head_tiles(default)


@pytest.mark.e2e  # importing TRL's GRPO trainer starts a process
@pytest.mark.usefixtures("small_tiles")
def test_a_micro_batch_split_into_passes_gives_the_same_gradient(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trainer's micro-batch of 4 rollouts in one pass and in four checkpointed passes, TRL's
    LM head in the CPU's small tiles (as ``agent-kit train``'s door sets them): the same loss and
    the same LoRA gradients."""
    import torch

    from agent_kit.driver.config import RunConfig
    from agent_kit.model.loading import load_model, parse_model_spec
    from agent_kit.train import grpo
    from agent_kit.train.config import TrainConfig

    loaded = load_model(parse_model_spec(str(tiny_model)), "cpu")
    config = TrainConfig(run=RunConfig(), device="cpu", micro_batch=4).with_job(
        group_size=2, batch_size=2
    )
    session = grpo.GRPOSession(config, loaded, tmp_path, steps=1)
    trainer = session.trainer
    from trl.kernels import chunked_logprob
    from trl.trainer import utils

    tiles = (chunked_logprob.TOKEN_CHUNK_SIZE, utils._CHUNKED_LOGPROB_CHUNK_SIZE)
    assert tiles == LM_HEAD_TILE  # the CPU's small tiles: what bounds a long pass's memory
    monkeypatch.setattr(trainer, "_prepare_inputs", lambda batch: batch)  # no rollout hook
    trainer.current_gradient_accumulation_steps = 2  # as train() sets it
    gen = torch.Generator().manual_seed(0)
    completion_mask = torch.ones(4, 12, dtype=torch.long)
    completion_mask[1, 7:] = 0
    inputs = {
        "prompt_ids": torch.randint(10, 1000, (4, 6), generator=gen),
        "prompt_mask": torch.ones(4, 6, dtype=torch.long),
        "completion_ids": torch.randint(10, 1000, (4, 12), generator=gen),
        "completion_mask": completion_mask,
        "advantages": torch.tensor([1.0, -1.0, 0.5, -0.5]),
        "num_items_in_batch": completion_mask.sum().float(),
    }

    def grads(budget: int, checkpoint_from: int) -> tuple[float, list[torch.Tensor]]:
        monkeypatch.setattr(grpo, "PASS_TOKENS", budget)
        monkeypatch.setattr("agent_kit.train.passes.CHECKPOINT_FROM", checkpoint_from)
        trainer.model.zero_grad()
        trainer.model.train()
        items = inputs["num_items_in_batch"]
        loss = float(trainer.training_step(trainer.model, dict(inputs), items))
        lora = [p for n, p in trainer.model.named_parameters() if "lora_B" in n or "lora_A" in n]
        return loss, [p.grad.detach().clone() for p in lora if p.grad is not None]

    whole_loss, whole = grads(4096, 4096)
    split_loss, split = grads(18, 17)  # one row a pass, each recomputing its activations
    assert whole
    assert len(split) == len(whole)
    assert split_loss == pytest.approx(whole_loss, abs=1e-6)
    assert any(float(g.abs().sum()) > 0 for g in whole)
    for a, b in zip(whole, split, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    session.close()


def test_the_heap_bounds_apply_on_glibc_and_step_aside_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On Linux with glibc the threads share one arena and free pages are handed back (the
    calls report success); ``AGENT_KIT_MALLOC=glibc`` leaves the C library's defaults, and a
    user's own ``MALLOC_ARENA_MAX`` stands."""
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert bound_malloc() is glibc
    release_free_memory()  # True only when pages were free to hand back
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert bound_malloc() is False
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    glibc_defaults = Settings.from_environ({"AGENT_KIT_MALLOC": "glibc"}).malloc
    assert bound_malloc(glibc_defaults) is False
    assert release_free_memory(glibc_defaults) is False


def test_a_long_pass_recomputes_reentrantly_even_when_checkpointing_was_left_on(
    tiny_model: Path,
) -> None:
    """A model whose checkpointing was left on in the non-reentrant form (a warm start's
    trainer, TRL's re-enable around its scoring) is switched to the reentrant form for a long
    pass, and off again after."""
    import peft

    from agent_kit.model.loading import load_model, parse_model_spec
    from agent_kit.model.lora import lora_config
    from agent_kit.train import grpo

    loaded = load_model(parse_model_spec(str(tiny_model)), "cpu")
    model = peft.get_peft_model(loaded.model, lora_config(4))
    model.activation_checkpointing_enable({"use_reentrant": False})

    def forms() -> set[object]:
        return {
            m._gradient_checkpointing_func.keywords.get("use_reentrant")
            for m in model.modules()
            if getattr(m, "gradient_checkpointing", False)
            and hasattr(getattr(m, "_gradient_checkpointing_func", None), "keywords")
        }

    assert forms() == {False}
    grpo._checkpointing(model, True)
    assert forms() == {CHECKPOINT_KWARGS["use_reentrant"]} == {True}
    grpo._checkpointing(model, False)
    assert not model.is_activation_checkpointing
