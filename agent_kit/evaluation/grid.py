"""The grid's spec: what is evaluated under which settings, and the cells that makes.

A grid is one agent (``entrypoint``) and one holdout (``dataset``) played by every policy of
``policies`` under every combination of the values of ``axes``, each prompt ``samples`` times
(the group size). An axis is one of:

- ``temperature``, ``top_p``, ``max_tokens``: the inference settings of every policy call
  (``payload.inferenceParams``, :data:`INFERENCE_AXES`);
- ``env.NAME``: the environment variable ``NAME`` of the agent's processes (the agent's own
  settings, e.g. ``env.REASONING_EFFORT=low,medium``), never one the driver sets for the agent
  (``AWS_*``, ``RFT_RUNTIME_ENDPOINT``, ``AGENT_KIT_PORT``: :data:`DRIVER_ENV`).

The policy is an axis too, listed first: a cell is one policy and one *setting* (one value of
every other axis). ``base`` holds the run settings every cell shares (the job's settings, named
like :class:`~agent_kit.driver.config.JobConfig`'s fields: ``concurrency``,
``success_threshold``, ``seed`` …, and the inference settings that are no axis).

A cell's id is its policy's label and its setting, made a job name (``solver-temperature-0``,
``sloppy-temperature-0-7``): stable across invocations, so a grid re-run in the same directory
finds its cells again. Labels come from the policy specs (:func:`policy_label`) and are made
unique; an id that would be too long or collide is shortened with a hash of the cell.

Everything here is pure and checked before anything runs: :func:`parse_axis` and
:func:`grid_spec` raise :class:`~agent_kit.errors.UsageError` naming the bad axis or value. A
grid holds at most :data:`MAX_CELLS` cells (counted before they are listed): every cell is a run
of its own, and the table and the page list them all.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from agent_kit.contract import ENDPOINT_ENV, MAX_TOKENS, TEMPERATURE, TOP_P, Bounds
from agent_kit.emulator.policies.registry import policy_schemes
from agent_kit.errors import UsageError
from agent_kit.settings import env_name

__all__ = [
    "DRIVER_ENV",
    "ENV_PREFIX",
    "GRID_SCHEMA",
    "INFERENCE_AXES",
    "MAX_CELLS",
    "Axis",
    "Cell",
    "GridSpec",
    "grid_spec",
    "parse_axis",
    "policy_label",
]

#: The ``schema`` tag of a grid's spec document (``grid.json``).
GRID_SCHEMA: Final = "agent_kit.eval_grid/1"
#: The prefix of an axis that sets an environment variable of the agent.
ENV_PREFIX: Final = "env."
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: What the driver sets in every agent process's environment, which an ``env.`` axis may not
#: set: the AWS SDK's settings (``AWS_*``: the run's keys, region, ``AWS_ENDPOINT_URL_*``), the
#: emulator's address (``RFT_RUNTIME_ENDPOINT``) and the agent's port (``AGENT_KIT_PORT``). A
#: name ending in ``*`` is a prefix.
DRIVER_ENV: Final = ("AWS_*", ENDPOINT_ENV, env_name("port"))
#: The most cells a grid holds (policies × every axis's values).
MAX_CELLS: Final = 1000
_JOB_NAME_LIMIT: Final = 63
_LABEL_LIMIT: Final = 24


_V = TypeVar("_V", int, float)


def _temperature(text: str) -> float:
    return _checked(TEMPERATURE, "temperature", float(text))


def _top_p(text: str) -> float:
    return _checked(TOP_P, "top_p", float(text))


def _max_tokens(text: str) -> int:
    return _checked(MAX_TOKENS, "max_tokens", int(text))


def _checked(bounds: Bounds[Any], name: str, value: _V) -> _V:
    """``value`` when ``bounds`` (the contract's, declared once) hold it, else ValueError."""
    if not bounds.holds(value):
        raise ValueError(f"{name} must be {bounds.words()}")
    return value


#: The inference axes and the parser of one value each (ValueError for a bad one).
INFERENCE_AXES: Final[Mapping[str, Callable[[str], float | int]]] = {
    "temperature": _temperature,
    "top_p": _top_p,
    "max_tokens": _max_tokens,
}


@dataclass(frozen=True)
class Axis:
    """One axis of the grid: a name (``temperature``, ``top_p``, ``max_tokens`` or
    ``env.NAME``) and its values, in the order given."""

    name: str
    values: tuple[float | int | str, ...]

    @property
    def is_env(self) -> bool:
        """True for an ``env.NAME`` axis (an environment variable of the agent)."""
        return self.name.startswith(ENV_PREFIX)


def parse_axis(text: str) -> Axis:
    """``NAME=V1,V2,…`` (a ``--grid`` value) as an :class:`Axis`; UsageError for an unknown
    axis, no values, an empty or repeated value, or a value out of range."""
    name, eq, raw = text.partition("=")
    name = name.strip()
    known = ", ".join([*INFERENCE_AXES, f"{ENV_PREFIX}NAME"])
    if not eq or not name:
        raise UsageError(f"--grid {text!r}: give NAME=V1,V2,… (axes: {known})")
    if name.startswith(ENV_PREFIX):
        if not _ENV_NAME.match(name[len(ENV_PREFIX) :]):
            raise UsageError(f"--grid {name}: not an environment variable name")
        _check_not_driver_env(name)
        parse: Callable[[str], float | int | str] = str
    elif name in INFERENCE_AXES:
        parse = INFERENCE_AXES[name]
    else:
        raise UsageError(f"--grid: unknown axis {name!r} (axes: {known})")
    parts = [p.strip() for p in raw.split(",")]
    if not raw.strip() or any(not p for p in parts):
        raise UsageError(f"--grid {name}: empty value in {raw!r} (give V1,V2,…)")
    values: list[float | int | str] = []
    for part in parts:
        try:
            value = parse(part)
        except ValueError as exc:
            reason = str(exc) if not str(exc).startswith(("could not", "invalid")) else "a number"
            raise UsageError(f"--grid {name}: bad value {part!r} ({reason})") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"--grid {name}: bad value {part!r} (not finite)")
        if value in values:
            raise UsageError(f"--grid {name}: value {part!r} given twice")
        values.append(value)
    return Axis(name, tuple(values))


def _check_not_driver_env(axis: str) -> None:
    """UsageError when an ``env.NAME`` axis names what the driver sets (:data:`DRIVER_ENV`)."""
    name = axis[len(ENV_PREFIX) :].upper()
    for taken in DRIVER_ENV:
        if name == taken or (taken.endswith("*") and name.startswith(taken[:-1])):
            raise UsageError(
                f"--grid {axis}: {taken} is what the driver sets for the agent (its emulator "
                "address, AWS keys and region, its port): an env. axis may not set it"
            )


def policy_label(spec: str) -> str:
    """A short readable label of a policy spec: the scripted policy's name, the model of an
    ``openai:`` or ``hf:`` spec (its adapter's folder when it has one), else the scheme."""
    scheme, _, rest = spec.strip().partition(":")
    rest = rest.strip()
    if scheme == "scripted":
        label = rest.rsplit(":", 1)[-1] if ":" in rest else Path(rest).stem
    elif scheme == "openai":
        label = rest.partition("#")[2] or "openai"
    elif scheme == "hf":
        model, _, adapter = rest.partition("+")
        label = Path(adapter.rstrip("/")).name if adapter else (Path(model).name or "hf")
    elif scheme == "arn" or "+arn:" in spec:
        label = _arn_label(spec)
    elif scheme in ("local", "replay") and rest:
        label = f"{scheme}-{Path(rest.rstrip('/')).stem}"
    else:
        label = spec.strip()
    return label or scheme


def _arn_label(spec: str) -> str:
    """A model ARN's label: a model package's group and version (``wordle-3``), else a hub
    model's name."""
    base, _, package = spec.strip().partition("+")
    if "model-package/" in package:
        return "-".join(package.split("model-package/", 1)[1].split("/")[-2:])
    if "/Model/" in base:
        return base.split("/Model/", 1)[1].split("/")[0]
    return base.rsplit("/", 1)[-1] or "model"


def _slug(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-").lower()


def _value_text(value: float | int | str) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Cell:
    """One cell: a policy under one setting (a value of every other axis, in axis order)."""

    id: str
    policy: str
    label: str
    setting: tuple[tuple[str, float | int | str], ...]

    @property
    def setting_label(self) -> str:
        """``temperature=0, env.REASONING_EFFORT=low`` (``base`` for a grid without axes)."""
        if not self.setting:
            return "base"
        return ", ".join(f"{k}={_value_text(v)}" for k, v in self.setting)

    @property
    def inference(self) -> dict[str, float | int]:
        """The inference settings this cell sets (JobConfig field → value)."""
        return {k: v for k, v in self.setting if k in INFERENCE_AXES and not isinstance(v, str)}

    @property
    def env(self) -> dict[str, str]:
        """The environment variables this cell gives the agent's processes."""
        return {k[len(ENV_PREFIX) :]: str(v) for k, v in self.setting if k.startswith(ENV_PREFIX)}

    def document(self) -> dict[str, Any]:
        """The cell as JSON: id, policy, label, setting (axis → value) and its label."""
        return {
            "id": self.id,
            "policy": self.policy,
            "label": self.label,
            "setting": dict(self.setting),
            "setting_label": self.setting_label,
        }


@dataclass(frozen=True)
class GridSpec:
    """A grid: the agent, the holdout, the policies, the other axes, the samples per prompt and
    the base run settings (see the module docstring); ``names`` gives a policy spec its label
    (a training run's checkpoints: ``base``, ``warm``, ``step-0003``) instead of
    :func:`policy_label`'s. :meth:`cells` expands it."""

    entrypoint: str
    dataset: str
    policies: tuple[str, ...]
    axes: tuple[Axis, ...] = ()
    samples: int = 4
    base: Mapping[str, Any] = field(default_factory=dict)
    names: Mapping[str, str] = field(default_factory=dict)

    def labels(self) -> dict[str, str]:
        """Policy spec → its label, made unique (``-2``, ``-3`` … on a repeat)."""
        out: dict[str, str] = {}
        for spec in self.policies:
            given = (self.names.get(spec) or policy_label(spec))[:_LABEL_LIMIT]
            label, n = given, 2
            while label in out.values():
                label, n = f"{given}-{n}", n + 1
            out[spec] = label
        return out

    def settings(self) -> list[tuple[tuple[str, float | int | str], ...]]:
        """Every setting (one value per non-policy axis), the first axis varying slowest."""
        names = [a.name for a in self.axes]
        return [
            tuple(zip(names, combo, strict=True))
            for combo in itertools.product(*(a.values for a in self.axes))
        ]

    def cells(self) -> list[Cell]:
        """Every cell, setting by setting, the policies in the order given within each."""
        labels, seen, cells = self.labels(), set[str](), []
        for setting in self.settings():
            for spec in self.policies:
                ident = _cell_id(labels[spec], setting, spec)
                if ident in seen:
                    ident = _hashed(ident, spec, setting)
                seen.add(ident)
                cells.append(Cell(ident, spec, labels[spec], setting))
        return cells

    def document(self) -> dict[str, Any]:
        """The spec as JSON (``grid.json``, schema :data:`GRID_SCHEMA`), with its cells."""
        return {
            "schema": GRID_SCHEMA,
            "entrypoint": self.entrypoint,
            "dataset": self.dataset,
            "policies": list(self.policies),
            "axes": {a.name: list(a.values) for a in self.axes},
            "samples": self.samples,
            "base": dict(self.base),
            **({"names": dict(self.names)} if self.names else {}),
            "cells": [c.document() for c in self.cells()],
        }

    def identity(self) -> dict[str, Any]:
        """What cells of this grid share and a re-run must match: agent, holdout, samples and
        the base settings (not the axes: a re-run may add or drop policies and values)."""
        return {
            "entrypoint": self.entrypoint,
            "dataset": self.dataset,
            "samples": self.samples,
            "base": json.loads(json.dumps(dict(self.base), default=str)),
        }


def _cell_id(label: str, setting: Sequence[tuple[str, float | int | str]], spec: str) -> str:
    parts = [label]
    for name, value in setting:
        short = name[len(ENV_PREFIX) :] if name.startswith(ENV_PREFIX) else name
        parts.append(f"{short}-{_value_text(value)}")
    ident = _slug("-".join(parts)) or "cell"
    if len(ident) > _JOB_NAME_LIMIT:
        return _hashed(ident, spec, setting)
    return ident


def _hashed(ident: str, spec: str, setting: Sequence[tuple[str, float | int | str]]) -> str:
    digest = hashlib.blake2b(repr((spec, tuple(setting))).encode(), digest_size=4).hexdigest()
    return f"{ident[: _JOB_NAME_LIMIT - 9].rstrip('-')}-{digest}"


def _check_policy(spec: str) -> None:
    scheme, colon, rest = spec.strip().partition(":")
    if scheme.strip().lower() not in policy_schemes():
        known = ", ".join(f"{s}:" for s in policy_schemes())
        raise UsageError(f"--policy {spec!r}: unknown scheme (known: {known})")
    if scheme == "scripted":
        path = rest.rsplit(":", 1)[0] if ":" in rest else rest
        if not colon or not Path(path).is_file():
            raise UsageError(f"--policy {spec!r}: no file {path!r} (scripted:FILE.py:NAME)")


def grid_spec(
    entrypoint: str,
    dataset: str,
    policies: Sequence[str],
    axes: Sequence[str],
    samples: int,
    base: Mapping[str, Any],
    check_policy: Callable[[str], object] | None = None,
) -> GridSpec:
    """The grid the command line gives; UsageError for no policy, a bad policy spec (checked by
    ``check_policy``, default: a policy this machine plays), a bad or repeated axis, an axis
    that is also a base setting given apart, or a bad ``samples``."""
    if not policies:
        raise UsageError("the grid is empty: give at least one --policy")
    if len(set(policies)) != len(policies):
        raise UsageError("--policy: the same policy is given twice")
    for spec in policies:
        (check_policy or _check_policy)(spec)
    if not 2 <= samples <= 32:
        raise UsageError(f"--samples must be 2..32 (rollouts per prompt), got {samples}")
    parsed = [parse_axis(text) for text in axes]
    names = [a.name for a in parsed]
    for name in names:
        if names.count(name) > 1:
            raise UsageError(f"--grid {name} is given twice (give its values in one: {name}=A,B)")
    count = math.prod(len(a.values) for a in parsed) * len(policies)
    if count > MAX_CELLS:
        shape = " × ".join([f"{len(policies)} policies", *(f"{len(a.values)}" for a in parsed)])
        raise UsageError(
            f"the grid has {count:,} cells ({shape}); one grid holds at most {MAX_CELLS:,} "
            "(each cell is a run): split it over several --out directories"
        )
    return GridSpec(entrypoint, dataset, tuple(policies), tuple(parsed), samples, dict(base))
