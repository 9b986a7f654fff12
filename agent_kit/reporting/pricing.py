"""Token prices, cost estimates and cost projections for MTRL jobs.

MTRL bills per token in three categories (docs/contract.md §6): **prefill** (input tokens of every
policy call), **sample** (generated tokens) and **train** (tokens through the LoRA backward
pass). Per-category prices are not published, so they are configuration: a pricing file the user
provides (JSON, or TOML on Python ≥ 3.11)::

    {"currency": "USD", "label": "my negotiated rates",
     "prefill_per_million": 0.10, "sample_per_million": 0.40, "train_per_million": 0.30}

or, with a single rate for every category, ``{"blended_per_million": 0.25}``. Unknown keys are
refused (a typo must not silently price at zero).

Without a file, :func:`default_pricing` applies one blended rate *derived in code* from the
published reference run (GPT-OSS-20B Wordle, 100 steps: prefill 491.6 M + sample 159.7 M +
train 643.3 M tokens ≈ $339), labelled ``"blended rate of the published AWS reference run
(GPT-OSS-20B)"``.
It is an estimate, never a quote: every cost carries its label and source.

Auxiliary model calls (an LLM judge, a simulated user) are not MTRL tokens: in a job they run
in the agent's runtime on Bedrock, billed on demand per input and output token. They are priced
apart, at ``aux_input_per_million`` / ``aux_output_per_million`` (pricing-file keys, with
``aux_label``); without them, at the published Bedrock on-demand list price of Anthropic
Claude 3 Haiku (:data:`BEDROCK_AUX_DEFAULT`), labelled so.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent_kit.errors import UsageError

__all__ = [
    "BEDROCK_AUX_DEFAULT",
    "DEFAULT_PRICING_LABEL",
    "PUBLISHED_REFERENCE_RUN",
    "Cost",
    "Pricing",
    "TokenCounts",
    "default_pricing",
    "estimate_cost",
    "load_pricing",
]

DEFAULT_PRICING_LABEL: Final = "blended rate of the published AWS reference run (GPT-OSS-20B)"
#: The default price of auxiliary calls: Bedrock on-demand, Claude 3 Haiku (USD per million
#: input and output tokens, the published list price), with its label.
BEDROCK_AUX_DEFAULT: Final = (
    0.25,
    1.25,
    "Bedrock on-demand list price of Claude 3 Haiku (set aux_*_per_million for your model)",
)


@dataclass(frozen=True)
class TokenCounts:
    """Token counts in the service's three billing categories (non-negative integers)."""

    prefill: int = 0
    sample: int = 0
    train: int = 0

    @property
    def total(self) -> int:
        """prefill + sample + train."""
        return self.prefill + self.sample + self.train


@dataclass(frozen=True)
class PublishedRun:
    """The figures AWS published for its reference MTRL run (docs/contract.md §6)."""

    description: str
    tokens: TokenCounts
    cost: float
    currency: str

    @property
    def blended_per_million(self) -> float:
        """Cost per million tokens over all three categories: cost / (total tokens / 1e6)."""
        return self.cost / (self.tokens.total / 1e6)


#: GPT-OSS-20B Wordle, 100 steps, 12 h 40 min, 105,486 rollouts (docs/contract.md §6).
PUBLISHED_REFERENCE_RUN: Final = PublishedRun(
    description="AWS MTRL reference run: GPT-OSS-20B Wordle, 100 steps, 105,486 rollouts",
    tokens=TokenCounts(prefill=491_600_000, sample=159_700_000, train=643_300_000),
    cost=339.0,
    currency="USD",
)


class Pricing(BaseModel):
    """Prices per million tokens for each billing category, with a currency and a label.

    Guarantees: every price is finite and ≥ 0; ``label`` says what the prices are (shown next
    to every cost); ``source`` is the pricing file's path or ``"default"``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    prefill_per_million: float = Field(ge=0, allow_inf_nan=False)
    sample_per_million: float = Field(ge=0, allow_inf_nan=False)
    train_per_million: float = Field(ge=0, allow_inf_nan=False)
    currency: str = Field(default="USD", min_length=1, max_length=16)
    label: str = Field(default="user pricing file", max_length=200)
    source: str = "default"
    #: Auxiliary calls (judge, simulated user): Bedrock on-demand per million tokens.
    aux_input_per_million: float = Field(default=BEDROCK_AUX_DEFAULT[0], ge=0, allow_inf_nan=False)
    aux_output_per_million: float = Field(default=BEDROCK_AUX_DEFAULT[1], ge=0, allow_inf_nan=False)
    aux_label: str = Field(default=BEDROCK_AUX_DEFAULT[2], max_length=200)

    @property
    def is_default(self) -> bool:
        """True for the built-in blended estimate (no pricing file given)."""
        return self.source == "default"


class _PricingFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prefill_per_million: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    sample_per_million: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    train_per_million: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    blended_per_million: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    currency: str = Field(default="USD", min_length=1, max_length=16)
    label: str = Field(default="user pricing file", max_length=200)
    aux_input_per_million: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    aux_output_per_million: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    aux_label: str | None = Field(default=None, max_length=200)

    @model_validator(mode="after")
    def _one_way(self) -> _PricingFile:
        per = (self.prefill_per_million, self.sample_per_million, self.train_per_million)
        if self.blended_per_million is not None:
            if any(p is not None for p in per):
                raise ValueError("give either blended_per_million or the three per-category prices")
        elif any(p is None for p in per):
            raise ValueError(
                "give prefill_per_million, sample_per_million and train_per_million "
                "(or blended_per_million alone)"
            )
        if (self.aux_input_per_million is None) != (self.aux_output_per_million is None):
            given = "aux_input" if self.aux_output_per_million is None else "aux_output"
            missing = "aux_output" if given == "aux_input" else "aux_input"
            raise ValueError(
                f"{given}_per_million is given without {missing}_per_million: give both "
                "auxiliary prices (judge and simulated-user calls), or neither for the default"
            )
        return self


def default_pricing() -> Pricing:
    """The labelled default: the published run's blended rate (≈ $0.262 per million tokens)."""
    rate = PUBLISHED_REFERENCE_RUN.blended_per_million
    return Pricing(
        prefill_per_million=rate,
        sample_per_million=rate,
        train_per_million=rate,
        currency=PUBLISHED_REFERENCE_RUN.currency,
        label=DEFAULT_PRICING_LABEL,
        source="default",
    )


def _read_table(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read pricing file {path}: {exc.strerror or exc}") from None
    if path.suffix.lower() == ".toml":
        if sys.version_info < (3, 11):
            raise UsageError("TOML pricing files need Python 3.11 or newer; use a .json file")
        import tomllib

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"pricing file {path} is not valid TOML: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"pricing file {path} is not valid JSON: {exc}") from None


def load_pricing(path: str | Path) -> Pricing:
    """Read and validate a pricing file (``.json``, or ``.toml`` on Python ≥ 3.11).

    Raises :class:`~agent_kit.errors.UsageError` naming the file and the bad field when the
    file is missing, unparsable, has unknown keys, negative or non-finite prices, or neither
    all three per-category prices nor ``blended_per_million``.
    """
    file = Path(path)
    data = _read_table(file)
    if not isinstance(data, dict):
        raise UsageError(f"pricing file {file} must hold an object/table of prices")
    try:
        parsed = _PricingFile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}"
            for err in exc.errors()
        )
        raise UsageError(f"invalid pricing file {file}: {problems}") from None
    blended = parsed.blended_per_million
    aux: dict[str, Any] = {}
    if parsed.aux_input_per_million is not None or parsed.aux_output_per_million is not None:
        aux = {
            "aux_input_per_million": parsed.aux_input_per_million or 0.0,
            "aux_output_per_million": parsed.aux_output_per_million or 0.0,
            "aux_label": parsed.aux_label or parsed.label,
        }
    return Pricing(
        prefill_per_million=blended if blended is not None else parsed.prefill_per_million or 0.0,
        sample_per_million=blended if blended is not None else parsed.sample_per_million or 0.0,
        train_per_million=blended if blended is not None else parsed.train_per_million or 0.0,
        currency=parsed.currency,
        label=parsed.label,
        source=str(file),
        **aux,
    )


@dataclass(frozen=True)
class Cost:
    """A cost estimate per billing category, in ``currency``, with the pricing's label."""

    prefill: float
    sample: float
    train: float
    currency: str
    label: str
    source: str

    @property
    def total(self) -> float:
        """prefill + sample + train."""
        return self.prefill + self.sample + self.train

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the amounts, their total, currency, label and source."""
        return {
            "currency": self.currency,
            "prefill": self.prefill,
            "sample": self.sample,
            "train": self.train,
            "total": self.total,
            "label": self.label,
            "source": self.source,
        }


def estimate_cost(tokens: TokenCounts, pricing: Pricing) -> Cost:
    """Cost of ``tokens`` at ``pricing``: Σ category tokens / 1e6 × category price."""
    amounts = (
        tokens.prefill / 1e6 * pricing.prefill_per_million,
        tokens.sample / 1e6 * pricing.sample_per_million,
        tokens.train / 1e6 * pricing.train_per_million,
    )
    return Cost(*amounts, pricing.currency, pricing.label, pricing.source)
