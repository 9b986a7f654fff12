"""Every ``AGENT_KIT_*`` environment variable, declared once and read once.

Each variable is one field of :class:`Settings`: its name is ``AGENT_KIT_`` + the field's name in
upper case, its type the field's annotation, its default the field's default, its range and its
one-line help the field's metadata (:func:`setting`). Two doors read the environment, once each,
and hand the record down as an argument:

- the CLI (``agent_kit.cli``'s root command), for everything that runs on the developer's machine
  (the emulator, its policies, the driver, ``agent-kit train``);
- the agent's entry (:class:`agent_kit.app.RolloutApp`), for what an agent process reads (its
  policy transport, its auxiliary model, its port, the forwarder's secret).

Library code never reads the environment for these: it takes the values (or a :class:`Settings`)
as arguments, and a caller that gives none gets the defaults below. A malformed value is one
:class:`~agent_kit.errors.UsageError` line naming the variable. ``docs/settings.md`` lists every
variable from these declarations (:func:`settings_table`).

Nothing here imports anything outside the standard library and :mod:`agent_kit.errors`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from agent_kit.errors import UsageError

__all__ = [
    "DEFAULTS",
    "PREFIX",
    "Door",
    "SettingSpec",
    "Settings",
    "env_name",
    "setting",
    "settings_table",
]

#: The prefix every variable declared here carries.
PREFIX: Final = "AGENT_KIT_"

#: Which door reads a variable: the CLI's (``tooling``) or the agent process's (``agent``).
Door = Literal["tooling", "agent"]


@dataclass(frozen=True)
class SettingSpec:
    """One variable's declaration beyond its type and default (kept in the field's metadata).

    ``low`` / ``high`` bound a number (inclusive); ``choices`` lists a text's allowed values (in
    lower case; the value read is lower-cased); ``none_at`` is the number that means "no limit"
    (read as None); ``fallback`` names another variable read when this one is unset or empty
    (``OPENAI_API_KEY`` for a key); ``secret`` keeps the value out of ``repr`` and the docs'
    examples; ``door`` is the door that reads it.
    """

    help: str
    door: Door = "tooling"
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    none_at: int | None = None
    fallback: str | None = None
    secret: bool = False
    unit: str = ""


def setting(default: Any, help: str, **spec: Any) -> Any:
    """A :class:`Settings` field: its default and its :class:`SettingSpec` (``help`` and the
    keywords ``spec`` passes on: ``door``, ``low``, ``high``, ``choices``, ``none_at``,
    ``fallback``, ``secret``, ``unit``; an unknown keyword fails when this module is imported)."""
    declared = SettingSpec(help, **spec)
    return field(default=default, repr=not declared.secret, metadata={"spec": declared})


def _byte_cap(default: int, help: str) -> Any:
    """A :func:`setting` for a cap in bytes, where 0 means no cap."""
    return setting(default, help, low=0, none_at=0, unit="bytes")


@dataclass(frozen=True)
class Settings:
    """The ``AGENT_KIT_*`` variables as one typed, immutable record (module docstring).

    ``Settings()`` is every default; :meth:`from_environ` reads a mapping (the doors pass
    ``os.environ``); :func:`dataclasses.replace` makes a variant in tests.
    """

    # --- the agent process (RolloutApp's door) -------------------------------------------------
    port: int = setting(
        8080, "port the agent's HTTP server listens on", door="agent", low=1, high=65535
    )
    policy_transport: str = setting(
        "openai",
        "how the agent reaches the policy: 'openai' (chat completions) or 'sample' (boto3 Sample)",
        door="agent",
        choices=("openai", "sample"),
    )
    policy_stream: bool = setting(
        False, "stream policy answers as SSE (default: one JSON body a turn)", door="agent"
    )
    policy_timeout: float = setting(
        300.0, "read timeout of one policy call", door="agent", low=0.001, unit="s"
    )
    policy_max_retries: int = setting(
        2, "retries of one policy call on 429/5xx/connection errors", door="agent", low=0
    )
    policy_url: str | None = setting(
        None,
        "OpenAI-compatible base URL for payloads without metadata",
        door="agent",
        fallback="OPENAI_BASE_URL",
    )
    policy_model: str | None = setting(
        None, "model id sent for payloads without metadata", door="agent"
    )
    policy_api_key: str | None = setting(
        None,
        "API key for payloads without metadata",
        door="agent",
        fallback="OPENAI_API_KEY",
        secret=True,
    )
    aux_url: str | None = setting(
        None,
        "OpenAI-compatible base URL of the judges' and simulated users' model (else the emulator's "
        "route, or Bedrock with AGENT_KIT_AUX_MODEL)",
        door="agent",
    )
    aux_model: str | None = setting(
        None, "model id of the auxiliary calls (alone: a Bedrock model id)", door="agent"
    )
    aux_api_key: str | None = setting(
        None, "API key of AGENT_KIT_AUX_URL", door="agent", secret=True
    )
    forwarder_secret: str | None = setting(
        None,
        "shared secret a Lambda forwarder sends (RolloutApp(..., forwarder=True))",
        door="agent",
        secret=True,
    )
    # --- the emulator and its policies (the CLI's door) ----------------------------------------
    emulator_secret: str | None = setting(
        None, "shared secret of `agent-kit emulate` on a non-loopback address", secret=True
    )
    tokenizer: str = setting(
        "auto",
        "token counter for turns without usage: auto, estimate, an encoding name, tiktoken[:ENC]",
    )
    upstream_api_key: str | None = setting(
        None,
        "API key of an `openai:URL` policy",
        fallback="OPENAI_API_KEY",
        secret=True,
    )
    upstream_timeout: float = setting(
        120.0, "timeout of one `openai:URL` policy call", low=0.001, unit="s"
    )
    hf_device: str | None = setting(
        None, "torch device of the `hf` policy (default: cuda where present, else cpu)"
    )
    hf_max_tokens: int = setting(256, "cap of one `hf` policy answer", low=1, unit="tokens")
    hf_batch: int = setting(32, "most turns the `hf` policy samples together", low=1)
    hf_cache_mb: int = setting(
        512, "most key/value cache the `hf` sampler holds", low=1, unit="MiB"
    )
    hf_prefix_cache: bool = setting(
        True, "keep a rollout's key/value cache between its turns (prefill only new tokens)"
    )
    local_max_tokens: int = setting(256, "cap of one `local` policy answer", low=1, unit="tokens")
    local_ctx: int = setting(4096, "context of the `local` policy", low=256, unit="tokens")
    local_threads: int | None = setting(
        None, "CPU threads of the `local` policy (0 or unset: the usable cores)", low=0, none_at=0
    )
    # --- the driver ----------------------------------------------------------------------------
    max_answer_bytes: int | None = _byte_cap(
        1 << 20, "most of one agent answer the driver reads (0: no cap)"
    )
    max_log_bytes: int | None = _byte_cap(
        50 << 20, "cap of one agent worker's log over the run (0: no cap)"
    )
    max_result_bytes: int | None = _byte_cap(
        4 << 20, "cap of one rl-toolkit result object read from S3 (0: no cap)"
    )
    # --- agent-kit train -----------------------------------------------------------------------
    malloc: str = setting(
        "bounded",
        "'glibc' leaves the C heap's defaults in `agent-kit train` (default: one arena, trimmed)",
        choices=("bounded", "glibc"),
    )

    def __post_init__(self) -> None:
        """A value given in Python is held to its variable's range too (UsageError naming
        the variable)."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None or isinstance(value, bool) or not isinstance(value, int | float | str):
                continue
            spec: SettingSpec = f.metadata["spec"]
            if isinstance(value, str) and not spec.choices:
                continue
            _parse(env_name(f.name), str(value), f.type, spec)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *, door: Door | None = None) -> Settings:
        """The record from ``environ``: unset or empty variables keep their defaults; a malformed
        value is a :class:`UsageError` naming the variable. With ``door``, only that door's
        variables are read (the others keep their defaults): the CLI does not refuse to start
        over a variable only the agent reads, nor the agent over one of the CLI's."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            spec: SettingSpec = f.metadata["spec"]
            if door is not None and spec.door != door:
                continue
            name = env_name(f.name)
            raw = environ.get(name, "").strip()
            if not raw and spec.fallback:
                raw, name = environ.get(spec.fallback, "").strip(), spec.fallback
            if raw:
                values[f.name] = _parse(name, raw, f.type, spec)
        return cls(**values)

    def variables(self) -> dict[str, str]:
        """The variables that give this record (non-default values only), for a child process."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            spec: SettingSpec = f.metadata["spec"]
            if value is None:
                value = spec.none_at if spec.none_at is not None else ""
            out[env_name(f.name)] = (
                ("true" if value else "false") if isinstance(value, bool) else str(value)
            )
        return out


def env_name(field_name: str) -> str:
    """``hf_batch`` → ``AGENT_KIT_HF_BATCH``."""
    return PREFIX + field_name.upper()


_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})


def _parse(name: str, raw: str, annotation: Any, spec: SettingSpec) -> Any:
    kind = str(annotation)
    if kind == "bool":
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        raise UsageError(f"{name} must be true or false, not {raw!r}")
    if kind.startswith(("int", "float")):
        number: float
        try:
            number = int(raw) if kind.startswith("int") else float(raw)
        except ValueError:
            raise UsageError(f"{name} must be {_kind_words(kind, spec)}, not {raw!r}") from None
        if not math.isfinite(number):
            raise UsageError(f"{name} must be a finite number, not {raw!r}")
        if spec.low is not None and number < spec.low:
            raise UsageError(f"{name} must be at least {_num(spec.low)}, not {raw}")
        if spec.high is not None and number > spec.high:
            raise UsageError(f"{name} must be at most {_num(spec.high)}, not {raw}")
        if spec.none_at is not None and number == spec.none_at:
            return None
        return number
    if spec.choices:
        value = raw.lower()
        if value not in spec.choices:
            raise UsageError(f"{name} must be one of {', '.join(spec.choices)}, not {raw!r}")
        return value
    return raw


def _kind_words(kind: str, spec: SettingSpec) -> str:
    """``an integer`` (``an integer (bytes)``), ``a number`` or ``a number of seconds``."""
    if kind.startswith("int"):
        return "an integer" + (f" ({spec.unit})" if spec.unit else "")
    return "a number of seconds" if spec.unit == "s" else "a number"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


#: Every default: what library code uses when its caller gives no value.
DEFAULTS: Final = Settings()


def settings_table() -> list[dict[str, str]]:
    """One row per variable (name, door, type, default, range, help), in declaration order: the
    source of docs/settings.md."""
    rows = []
    for f in dataclasses.fields(Settings):
        spec: SettingSpec = f.metadata["spec"]
        bounds = ", ".join(spec.choices)
        if spec.low is not None and spec.high is not None:
            bounds = f"{_num(spec.low)}..{_num(spec.high)}"
        elif spec.low is not None:
            bounds = f"≥ {_num(spec.low)}"
        help_text = spec.help + (f" (else ${spec.fallback})" if spec.fallback else "")
        default = f.default
        shown = "unset" if default is None else str(default)
        if isinstance(default, bool):
            shown = "true" if default else "false"
        rows.append(
            {
                "name": env_name(f.name),
                "door": spec.door,
                "type": str(f.type).replace(" | None", ""),
                "default": shown,
                "range": bounds,
                "unit": spec.unit,
                "help": help_text,
            }
        )
    return rows
