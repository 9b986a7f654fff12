"""The settings of a local job, as values: :class:`JobConfig` (the service's hyper-parameters)
and :class:`RunConfig` (one run: the job's settings plus where it plays).

A run is the job's settings plus where it plays: the agent, the dataset, the run directory (new
or resumed), how the agent is reached and how long a graceful stop waits. The job's settings are
composed, not copied: a resumed run has none (it plays with the ones it recorded), and
``agent-kit train``'s :class:`~agent_kit.train.config.TrainConfig` holds a :class:`RunConfig`.
:func:`agent_kit.driver.job.run_job` plays a :class:`RunConfig` (with the
:class:`~agent_kit.driver.hooks.JobHooks` of its caller).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Final

from agent_kit.contract import MAX_TOKENS, TEMPERATURE, TOP_P, Bounds, InferenceParams
from agent_kit.driver.trainer_side import CONTRACTS
from agent_kit.emulator.chaos import parse_chaos
from agent_kit.errors import UsageError
from agent_kit.settings import DEFAULTS, Settings

__all__ = [
    "AGENT_ENV_KEY",
    "CONCURRENCY",
    "DEFAULT_MAX_FLOOR_RATE",
    "DEFAULT_STOP_GRACE_S",
    "GROUP_SIZE",
    "MAX_BATCH_SIZE",
    "MAX_CONCURRENCY",
    "MAX_RETRIES",
    "MAX_STEPS",
    "REPORT_GRACE",
    "ROLLOUT_TIMEOUT",
    "STEPS",
    "JobConfig",
    "RunConfig",
    "default_job_name",
    "recorded_agent_env",
    "recorded_spec",
    "resolve_spec",
]

#: The service's largest global batch; the default batch (all prompts) is capped here.
MAX_BATCH_SIZE: Final = 128
#: Upper bounds of a local job (the service allows at most 96 rollouts in flight).
MAX_CONCURRENCY: Final = 1024
MAX_STEPS: Final = 100_000
#: Seconds in-flight rollouts get to finish after a graceful stop (``agent-kit run --grace``).
DEFAULT_STOP_GRACE_S: Final = 5.0
#: The largest share of finished rollouts that may get the agent's floor reward before the
#: job's status is ``rollouts_failed`` (``agent-kit run --max-floor-rate``).
DEFAULT_MAX_FLOOR_RATE: Final = 0.5
#: The job's numeric settings, each declared once (default and range): :class:`JobConfig`'s
#: defaults, :meth:`JobConfig.validated` and the CLI's options read them; the inference ones
#: are the contract's (``agent_kit.contract.TEMPERATURE``, ``TOP_P``, ``MAX_TOKENS``).
GROUP_SIZE: Final = Bounds(8, 2, 32)
STEPS: Final = Bounds(1, 1, MAX_STEPS)
CONCURRENCY: Final = Bounds(32, 1, MAX_CONCURRENCY)
ROLLOUT_TIMEOUT: Final = Bounds(600.0, 0.0, 86_400.0, low_open=True)
MAX_RETRIES: Final = Bounds(3, 0, 10)
REPORT_GRACE: Final = Bounds(30.0, 0.0, 3600.0)
_NAME_RE: Final = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_SCRIPTED: Final = "scripted:"


def _scripted_file(spec: str) -> tuple[str, str] | None:
    """(file part, ``:NAME``) of a ``scripted:FILE.py:NAME`` spec, or None for another."""
    if not spec.startswith(_SCRIPTED):
        return None
    file_part, sep, attr = spec[len(_SCRIPTED) :].rpartition(":")
    return (file_part, sep + attr) if sep and file_part else None


def resolve_spec(spec: str, base_dir: Path | None = None) -> str:
    """``spec`` as a run stores it: a ``scripted:FILE.py:NAME`` spec with FILE absolute
    (relative to ``base_dir``, default the current directory), so the run's ``--resume``,
    ``doctor`` and ``replay`` load the same file from any directory; other specs unchanged."""
    parts = _scripted_file(spec)
    if parts is None:
        return spec
    path = Path(parts[0]).expanduser()
    if path.is_absolute():
        return spec
    return f"{_SCRIPTED}{((base_dir or Path.cwd()) / path).resolve()}{parts[1]}"


def recorded_spec(spec: str, record: Mapping[str, Any], run_dir: Path) -> str:
    """A policy spec a run recorded, resolved: stored absolute since 0.5; an older relative
    ``scripted:`` spec is read relative to the directory the run recorded (``record["cwd"]``)
    when it has one, else to the current directory when the file is there. Otherwise a
    :class:`~agent_kit.errors.UsageError` saying where to run from."""
    parts = _scripted_file(spec)
    if parts is None or Path(parts[0]).expanduser().is_absolute():
        return spec
    cwd = record.get("cwd")
    if isinstance(cwd, str) and cwd:
        return resolve_spec(spec, Path(cwd))
    if (Path.cwd() / parts[0]).is_file():
        return resolve_spec(spec)
    raise UsageError(
        f"run {run_dir} recorded the policy {spec!r} relative to the directory it was started "
        f"in, which it did not record, and there is no {parts[0]} here ({Path.cwd()}): run this "
        "command from the directory the run was started in"
    )


@dataclass(frozen=True)
class JobConfig:
    """Job settings, named like the service's hyper-parameters; :meth:`validated` checks them.

    ``batch_size`` None means "every prompt" (capped at :data:`MAX_BATCH_SIZE`); ``report_grace``
    is how long, after the agent's answer, the driver waits for CompleteRollout/UpdateReward
    (bounded by what is left of ``rollout_timeout``).
    """

    name: str | None = None
    policy: str = "random"
    group_size: int = GROUP_SIZE.default
    batch_size: int | None = None
    steps: int = STEPS.default
    concurrency: int = CONCURRENCY.default
    rollout_timeout: float = ROLLOUT_TIMEOUT.default
    max_retries: int = MAX_RETRIES.default
    temperature: float = TEMPERATURE.default
    top_p: float = TOP_P.default
    max_tokens: int = MAX_TOKENS.default
    success_threshold: float = 1.0
    fail_fast: bool = True
    seed: int = 0
    report_grace: float = REPORT_GRACE.default
    region: str = "us-west-2"
    #: ``--chaos SPEC``: faults the emulator injects (agent_kit.emulator.chaos); None for none.
    chaos: str | None = None
    #: ``--contract``: ``mtrl`` (the service's payload) or ``rl-toolkit`` (agentcore-rl-toolkit's
    #: ``_rollout`` payload, result objects in S3; see agent_kit.driver.trainer_side).
    contract: str = "mtrl"
    #: ``--aux-policy SPEC``: the model that answers the agent's auxiliary calls (an LLM judge,
    #: a simulated user) on the emulator's ``/aux`` route; None refuses them (docs/judges.md).
    aux_policy: str | None = None

    def validated(self, n_prompts: int) -> JobConfig:
        """A copy with ``batch_size`` resolved; UsageError naming the first bad setting by its
        ``agent-kit run`` flag."""
        timeout = f"> 0 and ≤ {ROLLOUT_TIMEOUT.high:g}"  # ROLLOUT_TIMEOUT's words, in seconds
        checks: list[tuple[bool, str]] = [
            _within(GROUP_SIZE, "--group-size", self.group_size),
            _within(STEPS, "--steps", self.steps),
            _within(CONCURRENCY, "--concurrency", self.concurrency),
            _within(
                ROLLOUT_TIMEOUT, "--rollout-timeout", self.rollout_timeout, timeout, " seconds"
            ),
            _within(MAX_RETRIES, "--max-retries", self.max_retries),
            _within(TEMPERATURE, "--temperature", self.temperature),
            _within(TOP_P, "--top-p", self.top_p),
            _within(MAX_TOKENS, "--max-tokens", self.max_tokens),
            _within(REPORT_GRACE, "--report-grace", self.report_grace, unit=" seconds"),
            (n_prompts >= 1, "the dataset has no prompts"),
            (
                self.contract in CONTRACTS,
                f"--contract must be one of {', '.join(CONTRACTS)}, got {self.contract!r}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
        if self.chaos is not None:
            parse_chaos(self.chaos, seed=self.seed)  # UsageError naming the bad item
        if self.name is not None and not _NAME_RE.match(self.name):
            raise UsageError(
                f"job name {self.name!r} is not valid: 1..63 letters, digits and hyphens, "
                "starting and ending with a letter or digit"
            )
        batch = self.batch_size
        if batch is None:
            batch = min(n_prompts, MAX_BATCH_SIZE)
        elif not 1 <= batch <= 1024:
            raise UsageError(f"--batch-size must be 1..1024, got {batch}")
        aux = None if self.aux_policy is None else resolve_spec(self.aux_policy)
        return replace(self, batch_size=batch, policy=resolve_spec(self.policy), aux_policy=aux)

    @property
    def inference(self) -> InferenceParams:
        """The job's sampling settings as every payload carries them (``inferenceParams``): one
        typed value from here to the policy call, made JSON only on the wire."""
        return InferenceParams(
            temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (stored in the job row)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobConfig:
        """The inverse of :meth:`to_dict`; unknown keys are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def from_record(cls, record: Mapping[str, Any], run_dir: Path) -> JobConfig:
        """The settings a run's job recorded (``record["job"]``), its policy specs resolved
        by :func:`recorded_spec` (UsageError for an old relative one that cannot be found)."""
        job = record.get("job")
        config = cls.from_dict(dict(job) if isinstance(job, Mapping) else {})
        aux = config.aux_policy
        return replace(
            config,
            policy=recorded_spec(config.policy, record, run_dir),
            aux_policy=None if aux is None else recorded_spec(aux, record, run_dir),
        )


#: The job config's key recording a run's :attr:`RunConfig.extra_env`.
AGENT_ENV_KEY: Final = "agent_env"


def recorded_agent_env(config: Mapping[str, Any]) -> dict[str, str]:
    """The agent environment a job config records (``agent_env``: names and values, the
    agent's own settings); empty when it records none or something that is not one."""
    found = config.get(AGENT_ENV_KEY)
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, str)}


def _within(
    bounds: Bounds[Any], flag: str, value: float, words: str | None = None, unit: str = ""
) -> tuple[bool, str]:
    """A check of :meth:`JobConfig.validated`: ``value`` in ``bounds``, else the message
    naming ``flag`` and the range."""
    shown = words if words is not None else bounds.words()
    return bounds.holds(value), f"{flag} must be {shown}{unit}, got {value}"


def default_job_name(entrypoint: str) -> str:
    """``<entrypoint stem>-<UTC timestamp>``, reduced to the characters a job name allows.

    A generic file name (``agent.py``, ``main.py``, ``app.py``) takes its directory's name, so
    ``examples/wordle/agent.py`` runs as ``wordle-…``.
    """
    path = Path(entrypoint)
    stem = path.stem if entrypoint.endswith(".py") else "agent"
    if entrypoint.endswith(".py") and stem in ("agent", "main", "app") and path.parent.name:
        stem = path.resolve().parent.name
    stem = re.sub(r"[^a-zA-Z0-9]+", "-", stem).strip("-")[:40] or "agent"
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"


@dataclass(frozen=True)
class RunConfig:
    """Everything one local run needs, checked before anything starts.

    ``job`` is None for a resumed run (``resume`` set): it keeps the settings it recorded, and
    ``entrypoint`` / ``dataset`` default to the recorded ones. ``out`` is the parent directory of
    new run directories; ``workers`` the agent processes of a ``.py`` entrypoint (None: one per
    usable core); ``rate`` an invocations-per-second cap; ``endpoint_url`` the AWS endpoint
    override of an ARN target; ``advertise_url`` / ``emulator_port`` the tunnel of a deployed
    agent (see :mod:`agent_kit.driver.tunnel`); ``grace`` the seconds in-flight rollouts get
    after a graceful stop; ``max_floor_rate`` the largest share of finished rollouts that may
    get the agent's floor reward before the job's status is ``rollouts_failed`` (None: the
    driver's default, :data:`DEFAULT_MAX_FLOOR_RATE`). Constructing one
    with a negative ``grace`` or a ``max_floor_rate`` outside 0..1 raises
    :class:`~agent_kit.errors.UsageError`. ``lenient_auth`` stops the emulator from verifying
    the signatures of the agents the run starts (only their shape is checked). ``settings``
    are the ``AGENT_KIT_*`` settings the CLI read at its door (the policies', the invokers'
    caps, the token counter; default: every default); never recorded with the run.
    """

    entrypoint: str | None = None
    dataset: Path | None = None
    job: JobConfig | None = None
    out: Path = Path("runs")
    resume: Path | None = None
    workers: int | None = None
    rate: float | None = None
    endpoint_url: str | None = None
    advertise_url: str | None = None
    emulator_port: int | None = None
    grace: float = DEFAULT_STOP_GRACE_S
    max_floor_rate: float | None = None
    lenient_auth: bool = False
    #: ``--agent-memory``: bytes each local agent process may hold, all it started included.
    agent_memory: int | None = None
    #: Environment variables added to the agent processes this run starts (a ``.py``
    #: entrypoint), over the caller's environment: an agent's own settings (``agent-kit eval
    #: --grid env.NAME=…``). Recorded with the run (its job config's ``agent_env``), so a
    #: resume and a replay give them again; a resume's own ``extra_env`` is laid over them.
    extra_env: Mapping[str, str] | None = None
    settings: Settings = DEFAULTS

    def __post_init__(self) -> None:
        if self.agent_memory is not None and self.agent_memory <= 0:
            raise UsageError(f"--agent-memory must be positive, got {self.agent_memory}")
        if self.grace < 0:
            raise UsageError(f"--grace must be ≥ 0, got {self.grace:g}")
        rate = self.max_floor_rate
        if rate is not None and not 0 <= rate <= 1:
            raise UsageError(f"--max-floor-rate must be 0..1, got {rate:g}")

    def check(self) -> None:
        """Refuse option combinations that cannot work, before anything starts; for a new run,
        make sure ``out`` is a directory this process can create and write run directories in
        (creating it). Raises :class:`~agent_kit.errors.UsageError` naming the option."""
        if self.resume is None and (self.entrypoint is None or self.dataset is None):
            raise UsageError("give ENTRYPOINT and --dataset (or --resume RUN_DIR)")
        if self.advertise_url is not None and self.resume is None and not self.emulator_port:
            raise UsageError(
                "--advertise-url needs --emulator-port N: the fixed local port your tunnel "
                "forwards to (e.g. ssh -R 443:127.0.0.1:N, cloudflared --url http://127.0.0.1:N)"
            )
        if self.resume is None:
            _check_out(self.out)


def _check_out(out: Path) -> None:
    """``--out`` must be a directory this process can create and write run directories in."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out} cannot be created: {exc.strerror or exc}") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out} is not writable")
