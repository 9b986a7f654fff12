"""Process tuning at the process's door: the one place where agent_kit changes its whole process.

The library never does (importing or calling ``agent_kit.train``, loading a model or a policy
leaves the host's heap, threads, environment, TRL's constants and log levels as it found them).
The commands that train or load a local model call :func:`tune_process` once, before they
start, with what they will load: ``agent-kit train`` (``train_model=``), and ``run``,
``invoke``, ``eval``, ``emulate``, ``dev``, ``replay --fork-at`` and ``doctor reward`` with
their ``--policy`` (and ``--aux-policy``) specs (``policies=``). Benches that play
``play_train`` in-process call it as well. What it sets, each only where it applies:

- **an ``hf`` model** (``hf:`` policies, ``agent-kit train``): ``HF_HUB_OFFLINE=1`` (nothing is
  downloaded while a local model loads; not for a hub id ``OWNER/NAME``, which the hub client
  may fetch) and ``TRANSFORMERS_NO_ADVISORY_WARNINGS=1``, before transformers loads;
- **a ``local`` policy**: ``OMP_WAIT_POLICY=passive``, before llama.cpp loads: its OpenMP
  threads spin while they wait for each other, and on a busy machine (two cores shared with the
  agent, the emulator or another job) that made generation 30× slower (0.6 vs 21 tokens/s);
- **training**:

  - the C heap (glibc on Linux): the threads that load, sample and train share one malloc
    arena (:func:`bound_malloc`), and :attr:`Tuning.between_phases` hands the heap's free pages
    back (:func:`release_free_memory`), a hook the command gives ``play_train`` to call after
    the warm start, each holdout and each step. glibc gives each thread that allocates its own
    arena, so what the warm start freed stayed resident in its arena while the sampler and the
    GRPO step grew theirs; and a heap keeps the pages a phase freed (the sampler's caches and a
    step's activations, interleaved, left a Wordle run resting at 4 GB). ``AGENT_KIT_MALLOC=
    glibc`` leaves the C library's defaults, and a user's ``MALLOC_ARENA_MAX`` stands
    (measured in ``bench/train_memory.py``: 3.2 GB with the bounds, 4.3 GB without);
  - TRL's fused LM head in :data:`~agent_kit.train.passes.LM_HEAD_TILE` tiles on a CPU
    (:func:`agent_kit.model.seam.set_lm_head_tiles`; :mod:`agent_kit.train.passes` says why);
  - ``TRL_EXPERIMENTAL_SILENCE=1`` (the ``rollout_func`` hook's notice), transformers' and
    datasets' progress bars off and transformers' log at errors: the run prints its own lines.

An environment variable the user set is left as it is. Nothing here imports torch unless
training asks for it (and then only where the ``train`` extra is installed).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent_kit.settings import DEFAULTS

__all__ = [
    "Tuning",
    "bound_malloc",
    "release_free_memory",
    "tune_process",
]

#: glibc's ``mallopt`` parameter for the most heaps (arenas) the threads may have.
_M_ARENA_MAX: Final = -8


def _glibc(malloc: str) -> Any:
    """The process's C library where it is glibc on Linux and ``malloc`` (``AGENT_KIT_MALLOC``)
    is not ``"glibc"`` (the C library's defaults: a bench's reference), else None."""
    if not sys.platform.startswith("linux") or malloc == "glibc":
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt, libc.malloc_trim  # noqa: B018 - both or neither
    except (OSError, AttributeError):
        return None
    return libc


def bound_malloc(malloc: str = DEFAULTS.malloc) -> bool:
    """Make the threads that allocate from now on share the C heap's one arena (glibc on Linux;
    False, nothing changed, elsewhere, where ``MALLOC_ARENA_MAX`` is set — the user's own
    choice stands — or ``malloc`` is ``"glibc"``: ``AGENT_KIT_MALLOC``). Call it before the
    threads that load and train the model start."""
    libc = _glibc(malloc)
    if libc is None or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    return bool(libc.mallopt(_M_ARENA_MAX, 1))


def release_free_memory(malloc: str = DEFAULTS.malloc) -> bool:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``): the resting size
    of the process falls to what it holds. False where nothing was released or can be (``malloc``
    as :func:`bound_malloc`'s)."""
    libc = _glibc(malloc)
    return libc is not None and bool(libc.malloc_trim(0))


@dataclass(frozen=True)
class Tuning:
    """What :func:`tune_process` did: the names of what it set (``applied``) and the hook a
    training run calls between its phases (``between_phases``; None when not training)."""

    applied: tuple[str, ...] = ()
    between_phases: Callable[[], object] | None = None


def _schemes(policies: Sequence[str]) -> list[tuple[str, str]]:
    """``(scheme, rest)`` of each policy spec, the scheme in lower case."""
    out = []
    for spec in policies:
        scheme, _, rest = spec.strip().partition(":")
        out.append((scheme.strip().lower(), rest))
    return out


def _setdefault(name: str, value: str, applied: list[str]) -> None:
    if name not in os.environ:
        os.environ[name] = value
        applied.append(f"{name}={value}")


def _on_cpu(device: str) -> bool:
    """Whether a training run on ``device`` (``auto``, ``cpu``, ``cuda[:N]``) trains on the CPU;
    a device it cannot tell is not (the run refuses it later, in its own words)."""
    choice = (device or "auto").strip().lower()
    if choice == "cpu":
        return True
    if choice != "auto":
        return False
    try:
        import torch
    except ImportError:
        return False
    return not torch.cuda.is_available()


def _quiet_trainer_libraries(applied: list[str]) -> None:
    """Progress bars off and transformers' log at errors, where the libraries are installed."""
    try:
        import datasets
        import transformers
    except ImportError:
        return
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    transformers.utils.logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    applied.append("quiet trainer libraries")


def _train(device: str, malloc: str, applied: list[str]) -> Callable[[], object]:
    from agent_kit.model.seam import set_lm_head_tiles
    from agent_kit.train.passes import LM_HEAD_TILE

    if bound_malloc(malloc):
        applied.append("one malloc arena")
    _setdefault("TRL_EXPERIMENTAL_SILENCE", "1", applied)
    _quiet_trainer_libraries(applied)
    if _on_cpu(device) and set_lm_head_tiles(LM_HEAD_TILE) is not None:
        applied.append(f"TRL LM head tiles {LM_HEAD_TILE}")
    return functools.partial(release_free_memory, malloc)


def tune_process(
    *,
    policies: Sequence[str] = (),
    train_model: str | None = None,
    device: str = "auto",
    malloc: str = DEFAULTS.malloc,
) -> Tuning:
    """Tune this process for what the command loads (see the module docstring): ``policies``,
    its ``--policy`` specs; ``train_model``, the model ``agent-kit train`` trains (on
    ``device``), with the C heap as ``malloc`` says (``AGENT_KIT_MALLOC``, read at the CLI's
    door). Call it once, before anything loads."""
    from agent_kit.model.loading import is_hub_id

    applied: list[str] = []
    schemes = _schemes(policies)
    models = [rest for scheme, rest in schemes if scheme == "hf"]
    if train_model is not None:
        models.append(train_model)
    if models:
        if not any(is_hub_id(model) for model in models):
            _setdefault("HF_HUB_OFFLINE", "1", applied)
        _setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1", applied)
    if any(scheme == "local" for scheme, _ in schemes):
        _setdefault("OMP_WAIT_POLICY", "passive", applied)
    between = _train(device, malloc, applied) if train_model is not None else None
    return Tuning(tuple(applied), between)
