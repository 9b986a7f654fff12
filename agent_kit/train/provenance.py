"""Which adapter sampled what, and whether an update moved the weights.

A training run's policy changes at every step; a run that samples with an old adapter, or whose
update leaves the weights where they were, learns nothing and says nothing (OpenPipe/ART #661:
rollouts kept using the step-0 adapter). So ``agent-kit train`` names every adapter the policy
has had — ``base`` (the model before training: the adapter switched off, or a new LoRA adapter,
whose B matrices are zero), ``warm`` (the warm start's), ``step-NNNN`` (after that step's
update) — by the digest of its LoRA tensors (:func:`lora_fingerprint`), in an
:class:`AdapterLedger`:

- before a step samples, the digest of the model the policy samples is looked up: the name it
  finds is the adapter every rollout of that step is recorded with (the store's
  ``trajectories.adapter``, :meth:`~agent_kit.store.RunStore.set_adapter`; the holdout,
  preflight and refill runs record theirs too), and one that is not the latest is a stale
  adapter: a ``warning:`` line;
- a step whose rollouts name another adapter than the one it should have sampled with is a
  warning line (:func:`stale_line`);
- the digest before and after an update is compared: equal digests are a warning line, the
  weights did not move (:func:`unmoved_line`).

Warnings go to the terminal and to the step's record (train.json's ``warnings``).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from agent_kit.store import RunStore, load_rollouts

__all__ = [
    "UNKNOWN_LABEL",
    "AdapterLedger",
    "lora_fingerprint",
    "stale_line",
    "tag_run",
    "unmoved_line",
]

#: A digest no saved adapter had.
UNKNOWN_LABEL: Final = "unknown"


def lora_fingerprint(model: Any) -> str:
    """A digest of the model's LoRA tensors (their names and exact bytes; ``""`` without any)."""
    digest = hashlib.blake2b(digest_size=16)
    found = False
    for name, tensor in sorted(model.named_parameters(), key=lambda item: item[0]):
        if "lora_" not in name:
            continue
        found = True
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu").float().contiguous().numpy().tobytes())
    return digest.hexdigest() if found else ""


class AdapterLedger:
    """The adapters a run's policy has had, by :func:`lora_fingerprint`; the last one recorded
    is the latest."""

    def __init__(self) -> None:
        self._labels: dict[str, str] = {}
        self.latest: str | None = None

    def record(self, label: str, fingerprint: str) -> None:
        """Name the adapter with this digest (the latest from now on). Weights an earlier
        adapter had too (an update that did not move them) take the new name: the same weights
        are the same policy, so sampling them is not stale."""
        self._labels[fingerprint] = label
        self.latest = label

    def label_of(self, fingerprint: str) -> str:
        """The name of the adapter with this digest, :data:`UNKNOWN_LABEL` if none had it."""
        return self._labels.get(fingerprint, UNKNOWN_LABEL)


def stale_line(step: int, expected: str, adapters: Iterable[str | None]) -> str | None:
    """A warning when some of a step's rollouts were sampled by another adapter than
    ``expected`` (their recorded ``adapters``), else None."""
    other = Counter(a or UNKNOWN_LABEL for a in adapters if a != expected)
    if not other:
        return None
    names = ", ".join(f"{name} ×{count}" for name, count in sorted(other.items()))
    return (
        f"warning: step {step}: {sum(other.values())} rollouts were sampled by a stale adapter "
        f"({names}), not {expected}: they train the policy on another policy's samples"
    )


def unmoved_line(step: int, why: str = "") -> str:
    """The warning for a step whose update left the LoRA weights exactly as they were."""
    cause = f" ({why})" if why else ""
    return (
        f"warning: step {step}: the LoRA weights did not move{cause}; the next step samples "
        "the same policy"
    )


def tag_run(run_dir: Path, label: str) -> None:
    """Record ``label`` as the adapter of every rollout of a run directory's last job (a holdout,
    the preflight, a refill: the policy held one adapter throughout)."""
    with RunStore.open(run_dir) as store:
        jobs = store.list_jobs()
        if jobs:
            store.set_adapter([r.id for r in load_rollouts(store, jobs[-1].arn)], label)
