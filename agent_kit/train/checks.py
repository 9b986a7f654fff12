"""What ``agent-kit train`` checks before it writes anything or loads its model (20–30 s), and
how it holds and keeps its run directory.

- :func:`read_recorded` reads a run's ``train_config.json`` back for ``--resume``: a file that
  is not a JSON object of settings of the right types is a
  :class:`~agent_kit.errors.RunStoreError` naming it (exit 14), never a traceback.
- :func:`check_inputs` loads the dataset and the holdout (``--eval``), so a file that cannot be
  read is refused (UsageError) before anything is written (the ``AGENT_KIT_*`` settings were
  checked at the CLI's door, before any of this); it checks the warm start's inputs
  (:func:`check_warm_start`: each ``--warm-start`` a run directory whose store holds a job, a
  finite ``--warm-start-min-reward``) before the model loads (40–60 s), and hands on a line
  when a warm-start run was recorded with another agent than the one trained: what a policy
  saw of it (its system prompt and its tools' names, read from the run's first recorded turn)
  differs from the trained entrypoint's (its ``RolloutApp``, imported), unless the run recorded
  the same entrypoint contents (``entrypoint_sha256``); file names are compared only where
  neither can be read. Each
  recorded run is checked once (:func:`recorded_run`); the :class:`RecordedRun` is handed on
  (:class:`Inputs`) to the warm start's examples, which read its job's rollouts.
- :func:`claim` takes the run directory's lock (:class:`~agent_kit.store.runlock.RunLock`;
  :class:`~agent_kit.errors.RunInUse` while another process plays the run) before the model
  loads and before anything else is written: a new run refuses a directory that holds a run, a
  resume checks the store (and the caller the last adapter: :func:`check_adapter`). A refusal
  leaves the directory as it was; :func:`drop_unstarted` removes a new run's directory when the
  run fails before its job was recorded (a stopped one is kept: its ``--resume`` starts it over
  in place, :func:`holds_job` telling the two apart).
- :func:`save_adapter` saves an adapter whole or not at all (a folder beside it, renamed into
  place); one that cannot be written (disk full, file size limit) is a ``RunStoreError``: the run
  stops resumably, as it does when its store cannot be written.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Final

from agent_kit.driver.dataset import Dataset, load_dataset
from agent_kit.driver.job_setup import file_digest
from agent_kit.errors import RunStoreError, UsageError
from agent_kit.reporting.summary_schema import flat_config
from agent_kit.store import RUN_FILE, JobRow, RunStore
from agent_kit.store.layout import TRAIN_CONFIG_FILE, RunLayout
from agent_kit.store.runlock import RunLock
from agent_kit.store.store_file import verify
from agent_kit.train.config import TRAIN_JOB, TrainConfig

__all__ = [
    "ADAPTER_CONFIG",
    "ADAPTER_WEIGHTS",
    "Inputs",
    "RecordedRun",
    "check_adapter",
    "check_inputs",
    "check_warm_start",
    "claim",
    "drop_unstarted",
    "holds_job",
    "read_recorded",
    "recorded_config",
    "recorded_run",
    "save_adapter",
]

#: The files PEFT writes into an adapter folder.
ADAPTER_CONFIG: Final = "adapter_config.json"
ADAPTER_WEIGHTS: Final = "adapter_model.safetensors"
#: The suffix of an adapter folder being written (never taken for a saved adapter).
_PARTIAL: Final = ".partial"


def _damaged(path: Path, why: str) -> RunStoreError:
    return RunStoreError(f"{path} is damaged: {why}; the run cannot be resumed from it")


def read_recorded(run_dir: Path) -> dict[str, Any]:
    """The settings a training run recorded (``train_config.json``): UsageError when there is
    none (nothing to resume), RunStoreError naming the file when it cannot be read back."""
    path = RunLayout(run_dir).train_config
    if not path.is_file():
        raise UsageError(f"nothing to resume: no {TRAIN_CONFIG_FILE} in {run_dir}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise _damaged(path, "not UTF-8 text") from None
    except ValueError as exc:
        raise _damaged(path, f"not JSON ({exc})") from None
    except OSError as exc:
        raise RunStoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not isinstance(data, dict):
        raise _damaged(path, "not a JSON object")
    why = _wrong_setting(data)
    if why is not None:
        raise _damaged(path, why)
    return data


def recorded_config(run_dir: Path, *, device: str, **run_changes: Any) -> TrainConfig:
    """:func:`read_recorded` as a checked :class:`TrainConfig` to resume on ``device``, with
    ``run_changes`` applied to its run; a setting it cannot take is a RunStoreError naming the
    file, one out of range the UsageError of :meth:`TrainConfig.check`."""
    data = read_recorded(run_dir)
    try:
        return replace(TrainConfig.from_dict(data, **run_changes), device=device).check()
    except (TypeError, ValueError) as exc:
        raise _damaged(RunLayout(run_dir).train_config, str(exc)) from None


def _defaults() -> dict[str, Any]:
    """The default of every setting a training run records (None where any type goes)."""
    own = {f.name: f.default for f in fields(TrainConfig) if f.default is not MISSING}
    return {**asdict(TRAIN_JOB), **own}


def _wrong_setting(data: dict[str, Any]) -> str | None:
    """Why ``data`` is not a record of settings (a missing entrypoint or dataset, a value of
    the wrong type), or None."""
    for key in ("entrypoint", "dataset"):
        if not isinstance(data.get(key), str) or not data[key]:
            return f"it records no {key}"
    for key, default in _defaults().items():
        value = data.get(key)
        if value is None or default is None:
            continue
        if isinstance(default, tuple):  # a JSON list (e.g. warm_start's run directories)
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        elif isinstance(default, bool) or not isinstance(default, int | float):
            ok = isinstance(value, type(default))
        else:
            kinds = (int, float) if isinstance(default, float) else (int,)
            ok = isinstance(value, kinds) and not isinstance(value, bool)
        if not ok:
            return f"{key} is {value!r}, not {type(default).__name__}"
    return None


@dataclass(frozen=True)
class RecordedRun:
    """A ``--warm-start`` run directory, checked (:func:`recorded_run`): its store holds a job,
    and ``job`` is its last one (the job the warm start learns from)."""

    path: Path
    job: JobRow

    @property
    def entrypoint(self) -> str | None:
        """The entrypoint the run recorded, if it recorded one."""
        entrypoint = flat_config(self.job.config).get("entrypoint")
        return entrypoint if isinstance(entrypoint, str) and entrypoint else None


@dataclass(frozen=True)
class Inputs:
    """What :func:`check_inputs` checked, handed on: the training dataset and the warm start's
    recorded runs (none when there is no warm start, or its adapter is already trained)."""

    data: Dataset
    warm_start: tuple[RecordedRun, ...] = ()


def check_inputs(config: TrainConfig, echo: Callable[[str], None] | None = None) -> Inputs:
    """The training dataset, loaded, with the holdout (``--eval``) read too: UsageError naming
    the file that cannot be read, or a ``--batch-size`` larger than the dataset; then the warm
    start's inputs (:func:`check_warm_start`, its lines to ``echo``)."""
    dataset = config.run.dataset
    if dataset is None:
        raise UsageError("an entrypoint and --dataset are required (or --resume RUN_DIR)")
    data = load_dataset(dataset)
    batch = config.job.batch_size or 1
    if batch > len(data):
        raise UsageError(f"--batch-size {batch} is more than the dataset's {len(data)} prompts")
    if config.eval is not None:
        try:
            load_dataset(config.eval)
        except UsageError as exc:
            raise UsageError(f"--eval: {exc.message}") from None
    recorded, lines = check_warm_start(config)
    for line in lines:
        if echo is not None:
            echo(line)
    return Inputs(data, recorded)


def check_warm_start(config: TrainConfig) -> tuple[tuple[RecordedRun, ...], list[str]]:
    """Refuse (UsageError, one line) the warm start's inputs before the model loads: a
    ``--warm-start-min-reward`` that is not a finite number, a ``--warm-start`` that is not a
    run directory with a store holding a job. Returns the runs, checked, and a warning line for
    each run recorded with another entrypoint than the one trained: another file name with
    other contents (the same file name elsewhere, or a copy, is taken for the same agent, moved
    or edited), or another agent (module docstring). Nothing to check when the run being
    resumed already holds its warm adapter."""
    if not config.warm_start:
        return (), []
    resume = config.run.resume
    if resume is not None and (RunLayout(resume).warm_adapter / ADAPTER_CONFIG).is_file():
        return (), []
    minimum = config.warm_start_min_reward
    if minimum is not None and not math.isfinite(minimum):
        raise UsageError(f"--warm-start-min-reward must be a finite number, got {minimum}")
    runs = tuple(recorded_run(run) for run in config.warm_start)
    lines = []
    for run in runs:
        line = _other_agent(run, config.run.entrypoint)
        lines += [line] if line else []
    return runs, lines


def recorded_run(run: Path) -> RecordedRun:
    """The one check of a recorded run the warm start learns from (before the model loads; the
    examples take its result): UsageError when ``run`` is not a run directory whose store holds
    a job."""
    if not run.is_dir():
        raise UsageError(f"--warm-start run directory {run} not found")
    if not RunLayout(run).store.is_file():
        raise UsageError(
            f"--warm-start {run}: not a run directory (no {RUN_FILE}); give a directory "
            "`agent-kit run` recorded"
        )
    with RunStore.open(run, readonly=True) as store:
        jobs = store.list_jobs()
    if not jobs:
        raise UsageError(
            f"--warm-start {run}: its store holds no job (the run never started); record one "
            "with `agent-kit run ENTRYPOINT --dataset … --policy …`"
        )
    return RecordedRun(run, jobs[-1])


@dataclass(frozen=True)
class AgentFace:
    """What a policy sees of an agent: its system prompt and its tools' names (sorted)."""

    system_prompt: str
    tools: tuple[str, ...]

    def differences(self, other: AgentFace) -> list[str]:
        """What differs from ``other``, in words (``its tools (guess) …``); empty if nothing."""
        out = []
        if self.tools != other.tools:
            mine, theirs = ", ".join(self.tools) or "none", ", ".join(other.tools) or "none"
            out.append(f"its tools ({mine}) are not this agent's ({theirs})")
        if self.system_prompt != other.system_prompt:
            out.append("its system prompt is not this agent's")
        return out


def _other_agent(run: RecordedRun, trained: str | None) -> str | None:
    """A warning line when ``run`` was recorded with another agent than ``trained`` (the
    module docstring's order: the recorded contents, then what a policy saw, then names)."""
    recorded = run.entrypoint
    if recorded is None or trained is None:
        return None
    mine = Path(trained).resolve()
    digest = flat_config(run.job.config).get("entrypoint_sha256")
    if isinstance(digest, str) and digest == file_digest(mine):
        return None  # the very same contents
    seen, ours = _recorded_face(run), _trained_face(mine)
    if seen is None or ours is None:
        return _other_entrypoint(run.path, recorded, trained)
    differ = seen.differences(ours)
    if not differ:
        return None
    return (
        f"warning: --warm-start {run.path} was recorded with another agent ({recorded}) than "
        f"the one trained ({mine}): {'; '.join(differ)}; its episodes may not match this "
        "agent's prompts and tools"
    )


def _recorded_face(run: RecordedRun) -> AgentFace | None:
    """The agent ``run`` recorded, as its first recorded turn's request shows it (None without
    a turn, or a request that does not list its tools)."""
    with RunStore.open(run.path, readonly=True) as store:
        for trajectory in store.list_trajectories(run.job.arn):
            turns = store.list_turns(trajectory.id)
            if turns:
                request = turns[0].request
                break
        else:
            return None
    tools, messages = request.get("tools"), request.get("messages")
    if not isinstance(tools, list) or not isinstance(messages, list):
        return None
    names = (t.get("function") for t in tools if isinstance(t, dict))
    first = messages[0] if messages and isinstance(messages[0], dict) else {}
    content = first.get("content") if first.get("role") == "system" else ""
    if isinstance(content, list):  # text parts
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return AgentFace(
        str(content or ""),
        tuple(sorted(str(f.get("name", "")) for f in names if f)),
    )


def _trained_face(entrypoint: Path) -> AgentFace | None:
    """The trained entrypoint's agent (its ``RolloutApp``, imported; None when it cannot be:
    the check never stops a run)."""
    from agent_kit.driver.inprocess import load_app

    try:
        app = load_app(entrypoint)
        tools = app.environment().tool_names()
    except Exception:  # noqa: BLE001 - any failure of the author's code: compare names instead
        return None
    return AgentFace(app.settings.system_prompt or "", tuple(sorted(tools)))


def _other_entrypoint(run: Path, recorded: str | None, trained: str | None) -> str | None:
    """A warning line when ``recorded`` (a warm-start run's entrypoint) is not ``trained``."""
    if recorded is None or trained is None:
        return None
    mine = str(Path(trained).resolve()) if trained.endswith(".py") else trained
    if recorded == mine:
        return None
    theirs, ours = Path(recorded), Path(mine)
    if theirs.name == ours.name or _same_file_contents(theirs, ours):
        return None  # the same agent, moved or edited
    return (
        f"warning: --warm-start {run} was recorded with another entrypoint ({recorded}) than "
        f"the one trained ({mine}): its episodes may not match this agent's prompts and tools"
    )


def _same_file_contents(a: Path, b: Path) -> bool:
    try:
        return a.is_file() and b.is_file() and a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def holds_job(run_dir: Path) -> bool:
    """Whether ``run_dir``'s store records a job (a run stopped before it recorded its job, in
    its warm start for one, holds none)."""
    if not RunLayout(run_dir).store.is_file():
        return False
    with RunStore.open(run_dir, readonly=True) as store:
        return bool(store.list_jobs())


def _refuse_taken(run_dir: Path) -> None:
    """UsageError when ``run_dir`` holds a run (a store with a job); a directory a run left
    before it recorded its job is taken over."""
    if holds_job(run_dir):
        raise UsageError(f"run directory {run_dir} already holds a run; use --resume or --name")


def _check_resumable(run_dir: Path) -> None:
    """The store is there and readable (the caller checks the last adapter: it knows which)."""
    if not RunLayout(run_dir).store.is_file():
        raise UsageError(f"nothing to resume: no {RUN_FILE} in {run_dir}")
    verify(run_dir)


def claim(run_dir: Path, *, resume: bool) -> tuple[RunLock, bool]:
    """Lock ``run_dir`` for a training run and check it (see the module docstring); returns
    the held lock and whether this call created the directory. RunInUse while another process
    holds it; a refusal releases the lock and removes a directory this call created."""
    if not resume:
        _refuse_taken(run_dir)  # before anything is written, the lock file included
    created = not run_dir.exists()
    lock = RunLock.acquire(run_dir)
    try:
        if resume:
            _check_resumable(run_dir)
        else:
            _refuse_taken(run_dir)  # again, now that no other process can start it
    except BaseException:
        lock.release()
        if created:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return lock, created


def drop_unstarted(run_dir: Path) -> None:
    """Remove a new run's directory when its job was never recorded (the run failed before it
    started playing): a new run that did not start leaves nothing. The caller keeps the
    directory of a run a signal stopped there (its ``--resume`` starts it over in place)."""
    if not RunLayout(run_dir).store.exists():
        shutil.rmtree(run_dir, ignore_errors=True)


def check_adapter(folder: Path) -> None:
    """RunStoreError naming ``folder`` when its adapter cannot be loaded: a config that is
    not a JSON object, a weights file missing or cut short."""
    config = folder / ADAPTER_CONFIG
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _damaged(folder, f"{ADAPTER_CONFIG} cannot be read ({exc})") from None
    if not isinstance(data, dict):
        raise _damaged(folder, f"{ADAPTER_CONFIG} is not a JSON object")
    weights = folder / ADAPTER_WEIGHTS
    if not weights.is_file():
        raise _damaged(folder, f"no {ADAPTER_WEIGHTS}")
    why = _safetensors_damage(weights)
    if why is not None:
        raise _damaged(folder, f"{ADAPTER_WEIGHTS} {why}")


def _safetensors_damage(path: Path) -> str | None:
    """Why a safetensors file is not whole (its header unreadable, or the file shorter than the
    tensors its header lists), or None. Reads only the header."""
    size = path.stat().st_size
    try:
        with path.open("rb") as file:
            length = int.from_bytes(file.read(8), "little")
            if size < 8 + length:
                return f"is cut short ({size} bytes, its header alone is {8 + length})"
            header = json.loads(file.read(length))
        ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        return f"has no readable header ({exc})"
    need = 8 + length + max(ends, default=0)
    return f"is cut short ({size} of {need} bytes)" if size < need else None


def _write_errors() -> tuple[type[BaseException], ...]:
    """What a save that could not write raises: OSError, and safetensors' own error (its
    writer reports a full disk as a SafetensorError)."""
    try:
        from safetensors import SafetensorError
    except ImportError:  # pragma: no cover - installed with the train extra
        return (OSError,)
    return (OSError, SafetensorError)


def save_adapter(model: Any, folder: Path, run_dir: Path, *, then: str | None = None) -> None:
    """Save ``model``'s adapter (PEFT format) as ``folder``, whole or not at all; RunStoreError
    when it cannot be written (the adapters saved before are kept, the run resumable). ``then``
    replaces what the message says to do (default: make room and resume)."""
    partial = folder.with_name(folder.name + _PARTIAL)
    try:
        shutil.rmtree(partial, ignore_errors=True)
        model.save_pretrained(str(partial))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(partial, folder)
    except _write_errors() as exc:
        shutil.rmtree(partial, ignore_errors=True)
        why = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        then = then or (
            "the steps trained before are kept; make room and continue with "
            + RunLayout(run_dir).resume_command()
        )
        raise RunStoreError(f"cannot save adapter {folder}: {why} ({then})") from None
