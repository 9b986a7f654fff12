"""Replay: re-run recorded episodes through the real entrypoint and report what changed.

Why one module of ~450 lines: it owns a single thing, a replay through the emulator. Its
settings (:class:`_Plan`, run-directory naming, the replay job's config) exist only to feed
:func:`replay_run`, and the in-process variant, the recording, the policy backend and the
verdicts already live in their own modules (:mod:`~agent_kit.replay.inprocess`,
:mod:`~agent_kit.replay.recording` / :mod:`~agent_kit.replay.cassette`,
:mod:`~agent_kit.replay.policy`, :mod:`~agent_kit.replay.verdicts`).

The policy is replaced by the recording: every policy call of a replayed episode is answered
with the response recorded for that turn (same ``chat.completion``, same token usage; streamed
callers get it as SSE chunks). Before answering, the request is compared with the recorded
request after :class:`Normalization` (volatile fields); the first mismatch is a **divergence**
at that turn, reported with a unified diff of the two requests. By default the diverging
episode is stopped there (the agent receives a 400 ValidationException, which it treats as a
policy failure); ``continue_on_divergence`` keeps serving the recorded responses. A turn past
the end of the recording is always a divergence.

Pieces, in the order data flows:

- :class:`ReplayBackend`: the emulator policy backend (spec ``replay:RUN_DIR_OR_CASSETTE[#id,…]``,
  registered with :func:`~agent_kit.emulator.policies.register_policy_scheme` on import). It
  finds the recorded episode through the trajectory's ``replay_of`` (set by the replay runner),
  or, standalone, by prompt and sample index. With ``fork_at=K`` and a ``live`` backend it
  replays turns < K and hands later turns to the live policy (counterfactual runs).
- :func:`replay_run`: replays a recording through the same machinery as ``agent-kit run`` (the
  emulator on loopback, the invoker for the entrypoint, a new run directory whose trajectories
  link to the originals through ``replay_of``; the agent processes get the environment the run
  recorded, its ``agent_env``) and compares each episode: identical, diverged at
  turn k, reward changed (old → new, per component) or error → :class:`ReplayReport`.
- :func:`~agent_kit.replay.inprocess.replay_in_process`: the same
  comparison without HTTP or processes (the entrypoint's ``RolloutApp`` driven by
  :class:`~agent_kit.driver.inprocess.ScriptedModel`); faster, checks messages and tools only
  (sampling parameters and transport fields never reach it).

:func:`replay_run` reads as its steps: resolve the settings into a :class:`_Plan`, build the
replay backend, open the new run's store and its :class:`~agent_kit.driver.session.Session` (the
emulator, the job and the agents, as every runner has them), play every episode through it
(:func:`_play_episodes`, one :func:`_replay_episode` each), then record the report.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from agent_kit.contract import InferenceParams, TrajectoryState
from agent_kit.emulator.policies import load_policy
from agent_kit.errors import UsageError
from agent_kit.replay.cassette import open_recording
from agent_kit.replay.divergence import Divergence, Normalization
from agent_kit.replay.policy import ReplayBackend
from agent_kit.replay.recording import Recording
from agent_kit.replay.verdicts import (
    EpisodeReport,
    ReplayReport,
    judge,
)
from agent_kit.settings import DEFAULTS, Settings
from agent_kit.store import Rollout
from agent_kit.store.events import DIVERGENCE_EVENT
from agent_kit.store.layout import REPLAY_REPORT_FILE, RunLayout

if TYPE_CHECKING:
    from agent_kit.driver.attempt import Attempts
    from agent_kit.driver.config import JobConfig, RunConfig
    from agent_kit.driver.invokers import Invoker
    from agent_kit.driver.session import Session
    from agent_kit.emulator.core import Emulator

__all__ = ["replay_run"]

logger = logging.getLogger("agent_kit.replay")

#: Report file written into the replay's run directory.
REPORT_FILE: Final = REPLAY_REPORT_FILE
_NAME_CHARS: Final = re.compile(r"[^a-zA-Z0-9]+")


# -- settings --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """A replay's resolved settings: what is replayed, through which entrypoint, into which run."""

    recording: Recording
    target: str
    run_dir: Path
    job_name: str
    mode: str
    normalization: Normalization
    continue_on_divergence: bool
    fork_at: int | None
    policy: str | None
    #: The one settings record: seed, region, rollouts in flight, timeouts (``JobConfig``).
    job: JobConfig
    #: How the agents are reached (``workers``; its ``job`` is not read).
    config: RunConfig


def _run_name(prefix: str, recording: Recording) -> str:
    stem = recording.job_name or recording.source.stem or "run"
    stem = _NAME_CHARS.sub("-", stem).strip("-")[:30] or "run"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{prefix}-{stem}-{stamp}"


def _fresh_dir(parent: Path, name: str) -> tuple[Path, str]:
    candidate, n = name, 1
    while RunLayout(parent / candidate).store.exists():
        n += 1
        candidate = f"{name}-{n}"
    return parent / candidate, candidate


def _new_ids(job_name: str, episodes: Sequence[Rollout]) -> list[str]:
    """The replay's trajectory ids: each episode's slot under the driver's id scheme, the
    attempt raised where two episodes share a slot."""
    from agent_kit.driver.attempt import trajectory_id_for

    seen: set[str] = set()
    out = []
    for e in episodes:
        attempt = 0
        while True:
            tid = trajectory_id_for(job_name, e.step, e.prompt_index, e.sample_index, attempt)
            if tid not in seen:
                break
            attempt += 1
        seen.add(tid)
        out.append(tid)
    return out


def _prepare(
    source: str | Path | Recording,
    entrypoint: str | Path | None,
    trajectories: Sequence[str] | None,
    limit: int | None,
    out_dir: str | Path | None,
    name: str | None,
    mode: str,
) -> tuple[Recording, str, Path, str]:
    """Load the recording, resolve the entrypoint and pick a fresh run directory."""
    recording = open_recording(source, trajectories, limit)
    target = str(entrypoint) if entrypoint is not None else None
    if target is None:
        if recording.entrypoint is None:
            raise UsageError(f"{recording.source} does not record its entrypoint; pass one")
        target = str(recording.entrypoint)
    if target.endswith(".py"):
        if not Path(target).is_file():
            raise UsageError(f"entrypoint not found: {target}")
        target = str(Path(target).resolve())
    if out_dir is not None:
        parent = Path(out_dir)
    elif recording.kind == "run":
        parent = recording.source.resolve().parent
    else:
        parent = Path("runs")
    run_dir, job_name = _fresh_dir(parent, name or _run_name(mode, recording))
    return recording, target, run_dir, job_name


def _seed(recording: Recording, seed: int | None) -> int:
    """The replay's seed: the one given, else the one the recording's job ran with."""
    return int(recording.job.get("seed", 0) or 0) if seed is None else seed


def _check_settings(fork_at: int | None, policy: str | None, workers: int | None) -> None:
    if (fork_at is None) != (policy is None):
        raise UsageError("--fork-at and --policy go together (fork onto a live policy)")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be ≥ 1, got {workers}")


def _replay_backend(plan: _Plan) -> ReplayBackend:
    """The ``replay:`` backend serving the recording (and the live policy of a fork)."""
    seed = plan.job.seed
    live = (
        load_policy(plan.policy, seed=seed, base_dir=Path.cwd(), settings=plan.config.settings)
        if plan.policy
        else None
    )
    return ReplayBackend(
        plan.recording,
        normalization=plan.normalization,
        continue_on_divergence=plan.continue_on_divergence,
        fork_at=plan.fork_at,
        live=live,
    )


def _job_config(plan: _Plan, backend_name: str) -> dict[str, Any]:
    """The replay job's config: the recorded settings, the entrypoint, and what it replays."""
    from agent_kit.driver.job_setup import job_record

    recording = plan.recording
    origin = {
        "source": str(recording.source.resolve()),
        "kind": recording.kind,
        "job_arn": recording.job_arn,
    }
    details: dict[str, Any] = {
        "replay_of": origin,
        "replay": {
            "continue_on_divergence": plan.continue_on_divergence,
            "normalization": plan.normalization.to_dict(),
        },
    }
    policy: str | None = backend_name
    if plan.fork_at is not None:
        details["forked_from"] = {**origin, "fork_at": plan.fork_at, "policy": plan.policy}
        policy = plan.policy
    settings = {**recording.job, "name": plan.job_name, "policy": policy}
    return job_record(settings, plan.target, agent_env=recording.agent_env, **details)


def _divergence_recorder(store: Any) -> Callable[[Divergence], None]:
    """A callback recording each divergence as a :data:`DIVERGENCE_EVENT` of its trajectory."""

    def note(divergence: Divergence) -> None:
        store.add_event(
            DIVERGENCE_EVENT,
            {
                "turn": divergence.turn,
                "where": divergence.where,
                "diff": divergence.diff,
                "replay_of": divergence.original_id,
            },
            divergence.trajectory_id,
        )

    return note


# -- replay through the real entrypoint (subprocess / URL invokers) -----------------------------


async def replay_run(
    source: str | Path | Recording,
    *,
    entrypoint: str | Path | None = None,
    trajectories: Sequence[str] | None = None,
    limit: int | None = None,
    continue_on_divergence: bool = False,
    normalization: Normalization | None = None,
    fork_at: int | None = None,
    policy: str | None = None,
    out_dir: str | Path | None = None,
    name: str | None = None,
    job: JobConfig | None = None,
    workers: int | None = None,
    seed: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    settings: Settings = DEFAULTS,
    invoker: Invoker | None = None,
) -> ReplayReport:
    """Replay recorded episodes through an entrypoint and compare them (module docstring).

    ``source`` is a run directory, a cassette or a loaded :class:`Recording`; ``entrypoint``
    defaults to the recorded one. The replay is a new run directory (``out_dir`` / ``name``;
    default beside a source run, else ``runs/``) whose job config names the source
    (``replay_of``, and ``forked_from`` for a fork) and whose trajectories carry ``replay_of``.
    ``fork_at=K`` with ``policy=SPEC`` replays turns < K and continues live. ``job`` is the one
    settings record (:class:`~agent_kit.driver.config.JobConfig`, its defaults when None): the
    episodes in flight (``concurrency``), ``rollout_timeout``, ``report_grace`` and ``region``
    come from it; ``seed`` (the emulator's and a fork's live policy's) is the recorded one
    unless given (``job.seed`` is not read); ``workers`` are the agent processes
    of a ``.py`` entrypoint (None: as ``agent-kit run``, one per usable core, at most
    ``concurrency``); ``settings`` the ``AGENT_KIT_*`` ones the CLI read (a fork's live policy,
    the agents' caps); ``invoker`` reaches agents the caller started and keeps (``agent-kit
    dev``'s: the session plays through it and closes it as its own). The JSON report is also
    written to ``RUN_DIR/replay_report.json``.
    Raises UsageError for bad settings and InvokerError when the agent cannot be started;
    changed episodes are data, see :meth:`ReplayReport.raise_for_mismatch`.
    """
    from agent_kit.driver.config import JobConfig, RunConfig

    started = time.monotonic()
    _check_settings(fork_at, policy, workers)
    mode = "fork" if fork_at is not None else "replay"
    recording, target, run_dir, job_name = _prepare(
        source, entrypoint, trajectories, limit, out_dir, name, mode
    )
    plan = _Plan(
        recording=recording,
        target=target,
        run_dir=run_dir,
        job_name=job_name,
        mode=mode,
        normalization=normalization or Normalization(),
        continue_on_divergence=continue_on_divergence,
        fork_at=fork_at,
        policy=policy,
        job=replace(job or JobConfig(), seed=_seed(recording, seed)).validated(1),
        config=RunConfig(workers=workers, extra_env=recording.agent_env or None, settings=settings),
    )
    return await _replay(plan, progress, started, invoker)


async def _replay(
    plan: _Plan,
    progress: Callable[[int, int], None] | None,
    started: float,
    invoker: Invoker | None = None,
) -> ReplayReport:
    """Serve the replay backend, play every episode, record and write the report."""
    from agent_kit.driver.session import Session, open_session
    from agent_kit.replay.policy import AuxReplay
    from agent_kit.store import RunStore

    backend = _replay_backend(plan)
    store = RunStore.open(plan.run_dir)
    try:
        backend.on_divergence = _divergence_recorder(store)
        session = Session(store, plan.run_dir, plan.target, plan.job, plan.config, invoker=invoker)
        record = _job_config(plan, backend.name)
        service = {"aux_policy": AuxReplay(backend), "own_policy": False}
        async with open_session(session, backend, plan.job_name, record, **service):
            reports = await _play_episodes(session, plan, progress)
        report = ReplayReport(
            source=str(plan.recording.source),
            run_dir=str(plan.run_dir),
            entrypoint=plan.target,
            mode=plan.mode,
            episodes=tuple(reports),
            fork_at=plan.fork_at,
            policy=plan.policy,
            elapsed_s=time.monotonic() - started,
        )
        session.finish_job("completed", {"replay": report.to_dict()})
        RunLayout(plan.run_dir).replay_report.write_text(
            json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        return report
    finally:
        await _close_backend(backend, plan.job_name)
        store.close()


async def _close_backend(backend: ReplayBackend, job_name: str) -> None:
    """Close the replay backend (and its live policy); a failure is logged, never raised."""
    try:
        await backend.aclose()
    except Exception:  # closing must not mask the replay's own outcome
        logger.debug("closing the replay policy of job %s failed", job_name, exc_info=True)


async def _play_episodes(
    session: Session, plan: _Plan, progress: Callable[[int, int], None] | None
) -> list[EpisodeReport]:
    """Replay every episode through the session's started agents, ``plan.job.concurrency`` at
    a time; reports in the recording's order."""
    from agent_kit.driver.attempt import Attempts

    emu, url = session.svc.emulator, session.svc.endpoint
    episodes = plan.recording.episodes
    ids = _new_ids(plan.job_name, episodes)
    done = 0
    attempts = Attempts(
        emu=emu,
        store=session.store,
        invoker=session.agents(),
        job_arn=session.job_arn,
        job_name=plan.job_name,
        endpoint=url,
        config=plan.job,
        grace_after_error=False,  # a failed answer is judged as it is, against the recording
    )
    sem = asyncio.Semaphore(plan.job.concurrency)

    async def one(episode: Rollout, tid: str) -> EpisodeReport:
        nonlocal done
        async with sem:
            report = await _replay_episode(emu, attempts, plan, episode, tid)
        done += 1
        if progress is not None:
            progress(done, len(episodes))
        return report

    return list(await asyncio.gather(*(one(e, t) for e, t in zip(episodes, ids, strict=True))))


async def _replay_episode(
    emu: Emulator, attempts: Attempts, plan: _Plan, episode: Rollout, tid: str
) -> EpisodeReport:
    """Play one recorded episode again through the attempt path and judge it: an attempt
    that does not end where the recording did (rewarded, or failed by the agent) is an
    error."""
    from agent_kit.driver.attempt import AttemptSpec

    params = episode.inference_params or InferenceParams.service_defaults()
    spec = AttemptSpec(
        trajectory_id=tid,
        prompt=episode.prompt,
        step=episode.step,
        prompt_index=episode.prompt_index,
        sample_index=episode.sample_index,
        inference_params=InferenceParams.model_validate(params),
        replay_of=episode.id,
    )
    attempt = await attempts.play(spec, attempts.open(spec))
    state = emu.state(tid)
    error: str | None = None
    if attempt.kind != "rewarded" and not (
        state is TrajectoryState.FAILED and episode.trajectory.state == TrajectoryState.FAILED
    ):
        error = attempt.reason or f"the rollout ended {getattr(state, 'value', state)}"
    result = attempt.result
    reward = emu.store.get_reward(tid)
    body = result.body if result is not None and isinstance(result.body, dict) else None
    breakdown = body.get("reward_breakdown") if body is not None else None
    backend = cast(ReplayBackend, emu.policy)
    return judge(
        episode,
        tid,
        divergence=backend.divergences.get(tid),
        replayed_turns=emu.turn_count(tid),
        new_rewards=None if reward is None else reward.rewards,
        new_breakdown=breakdown if isinstance(breakdown, dict) else None,
        error=error,
        fork_at=plan.fork_at,
    )
