"""Replay: re-run recorded episodes through the real entrypoint and report what changed.

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
  link to the originals through ``replay_of``) and compares each episode: identical, diverged at
  turn k, reward changed (old → new, per component) or error → :class:`ReplayReport`.
- :func:`replay_in_process`: the same comparison without HTTP or processes (the entrypoint's
  ``RolloutApp`` driven by :class:`~agent_kit.harness.inprocess.ScriptedModel`); faster, checks
  messages
  and tools only (sampling parameters and transport fields never reach it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from agent_kit.contract import TrajectoryState
from agent_kit.emulator.policies import load_policy
from agent_kit.emulator.schemas import PolicyReply, PolicyRequest
from agent_kit.emulator.serving import EmbeddedServer
from agent_kit.emulator.store import INVOCATION_EVENT
from agent_kit.errors import UsageError
from agent_kit.replay.cassette import RecordedEpisode, Recording, load_recording
from agent_kit.replay.policy import (
    DEFAULT_IGNORED_FIELDS,
    Divergence,
    Normalization,
    ReplayBackend,
    ReplayDivergenceError,
    first_difference,
    render_request,
    reply_from_completion,
    request_diff,
)
from agent_kit.replay.verdicts import (
    REPORT_FORMAT,
    EpisodeReport,
    ReplayReport,
    compare_rewards,
    describe,
    judge,
)

__all__ = [
    "DEFAULT_IGNORED_FIELDS",
    "DIVERGENCE_EVENT",
    "REPORT_FORMAT",
    "Divergence",
    "EpisodeReport",
    "Normalization",
    "ReplayBackend",
    "ReplayDivergenceError",
    "ReplayReport",
    "compare_rewards",
    "describe",
    "render_request",
    "replay_in_process",
    "replay_run",
    "request_diff",
]

#: Event kind recorded in the replay run for each divergence.
DIVERGENCE_EVENT: Final = "replay_divergence"
_NAME_CHARS: Final = re.compile(r"[^a-zA-Z0-9]+")
_TERMINAL: Final = frozenset(
    {TrajectoryState.REWARDED, TrajectoryState.FAILED, TrajectoryState.TIMED_OUT}
)


# -- replay through the real entrypoint (subprocess / URL invokers) -----------------------------


def _run_name(prefix: str, recording: Recording) -> str:
    stem = recording.job_name or recording.source.stem or "run"
    stem = _NAME_CHARS.sub("-", stem).strip("-")[:30] or "run"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{prefix}-{stem}-{stamp}"


def _fresh_dir(parent: Path, name: str) -> tuple[Path, str]:
    from agent_kit.emulator.store import RUN_FILE

    candidate, n = name, 1
    while (parent / candidate / RUN_FILE).exists():
        n += 1
        candidate = f"{name}-{n}"
    return parent / candidate, candidate


def _new_ids(job_name: str, episodes: Sequence[RecordedEpisode]) -> list[str]:
    seen: set[str] = set()
    out = []
    for e in episodes:
        attempt = 0
        while True:
            tid = f"{job_name}-s{e.step}-p{e.prompt_index}-g{e.sample_index}-a{attempt}"
            if tid not in seen:
                break
            attempt += 1
        seen.add(tid)
        out.append(tid)
    return out


def _recording(
    source: str | Path | Recording, trajectories: Sequence[str] | None, limit: int | None
) -> Recording:
    if isinstance(source, Recording):
        return source.select(trajectories, limit)
    return load_recording(source, trajectories, limit)


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
    recording = _recording(source, trajectories, limit)
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
    concurrency: int = 16,
    workers: int = 1,
    rollout_timeout: float = 120.0,
    report_grace: float = 10.0,
    seed: int | None = None,
    region: str = "us-west-2",
    progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Replay recorded episodes through an entrypoint and compare them (module docstring).

    ``source`` is a run directory, a cassette or a loaded :class:`Recording`; ``entrypoint``
    defaults to the recorded one. The replay is a new run directory (``out_dir`` / ``name``;
    default beside a source run, else ``runs/``) whose job config names the source
    (``replay_of``, and ``forked_from`` for a fork) and whose trajectories carry ``replay_of``.
    ``fork_at=K`` with ``policy=SPEC`` replays turns < K and continues live. The JSON report is
    also written to ``RUN_DIR/replay_report.json``. Raises UsageError for bad settings and
    InvokerError when the agent cannot be started; changed episodes are data, see
    :meth:`ReplayReport.raise_for_mismatch`.
    """
    from agent_kit.emulator.core import Emulator
    from agent_kit.emulator.driver import session_id_for
    from agent_kit.emulator.invokers import agent_env, make_invoker
    from agent_kit.emulator.server import create_app
    from agent_kit.emulator.store import RunStore

    started = time.monotonic()
    if (fork_at is None) != (policy is None):
        raise UsageError("--fork-at and --policy go together (fork onto a live policy)")
    if concurrency < 1 or workers < 1:
        raise UsageError("concurrency and workers must be ≥ 1")
    mode = "fork" if fork_at is not None else "replay"
    recording, target, run_dir, job_name = _prepare(
        source, entrypoint, trajectories, limit, out_dir, name, mode
    )
    norm = normalization or Normalization()
    run_seed = int(recording.job.get("seed", 0) or 0) if seed is None else seed
    live = load_policy(policy, seed=run_seed, base_dir=Path.cwd()) if policy else None
    backend = ReplayBackend(
        recording,
        normalization=norm,
        continue_on_divergence=continue_on_divergence,
        fork_at=fork_at,
        live=live,
    )
    store = RunStore.open(run_dir)
    reports: list[EpisodeReport] = []
    try:

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

        backend.on_divergence = note
        emu = Emulator(store, backend, region=region, seed=run_seed)
        origin = {
            "source": str(recording.source.resolve()),
            "kind": recording.kind,
            "job_arn": recording.job_arn,
        }
        job_config: dict[str, Any] = {
            "job": {**recording.job, "name": job_name, "policy": backend.name},
            "entrypoint": target,
            "replay_of": origin,
            "replay": {
                "continue_on_divergence": continue_on_divergence,
                "normalization": norm.to_dict(),
            },
        }
        if fork_at is not None:
            job_config["forked_from"] = {**origin, "fork_at": fork_at, "policy": policy}
            job_config["job"]["policy"] = policy
        job_arn = emu.create_job(job_name, job_config).arn
        ids = _new_ids(job_name, recording.episodes)
        done = 0
        async with EmbeddedServer(create_app(emu)) as url:
            invoker = make_invoker(
                target,
                env=agent_env(url, region),
                workers=workers,
                log_dir=run_dir / "logs",
                concurrency=concurrency,
                on_event=lambda kind, detail: store.add_event(kind, detail),
            )
            sem = asyncio.Semaphore(concurrency)

            async def one(episode: RecordedEpisode, tid: str) -> EpisodeReport:
                nonlocal done
                async with sem:
                    report = await _replay_episode(
                        emu,
                        invoker,
                        job_arn,
                        url,
                        region,
                        episode,
                        tid,
                        session_id_for(tid),
                        rollout_timeout,
                        report_grace,
                        fork_at,
                    )
                done += 1
                if progress is not None:
                    progress(done, len(recording.episodes))
                return report

            await invoker.start()
            try:
                reports = list(
                    await asyncio.gather(
                        *(one(e, t) for e, t in zip(recording.episodes, ids, strict=True))
                    )
                )
            finally:
                await invoker.aclose()
        report = ReplayReport(
            source=str(recording.source),
            run_dir=str(run_dir),
            entrypoint=target,
            mode=mode,
            episodes=tuple(reports),
            fork_at=fork_at,
            policy=policy,
            elapsed_s=time.monotonic() - started,
        )
        store.update_job(job_arn, status="completed", summary={"replay": report.to_dict()})
        (run_dir / "replay_report.json").write_text(
            json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        return report
    finally:
        with contextlib.suppress(Exception):
            await backend.aclose()
        store.close()


async def _replay_episode(
    emu: Any,
    invoker: Any,
    job_arn: str,
    url: str,
    region: str,
    episode: RecordedEpisode,
    tid: str,
    session_id: str,
    timeout: float,
    grace: float,
    fork_at: int | None,
) -> EpisodeReport:
    """Play one recorded episode again and judge it."""
    store = emu.store
    params = episode.inference_params or {"temperature": 1.0, "topP": 1.0, "maxTokens": 4096}
    payload = {
        "prompt": episode.prompt,
        "metadata": {"jobArn": job_arn, "rolloutId": tid, "endpoint": url, "region": region},
        "inferenceParams": params,
    }
    emu.open_trajectory(
        job_arn,
        episode.prompt,
        step=episode.step,
        prompt_index=episode.prompt_index,
        sample_index=episode.sample_index,
        replay_of=episode.trajectory_id,
        trajectory_id=tid,
        payload=payload,
    )
    result = await invoker.invoke(payload, session_id, timeout)
    store.add_event(
        INVOCATION_EVENT,
        {
            "status": result.status,
            "http_status": result.http_status,
            "body": result.body,
            "error": result.error,
        },
        tid,
    )
    state = await emu.wait_state(tid, _TERMINAL, grace if result.ok else 0.0)
    error: str | None = None
    if state not in _TERMINAL:
        error = result.error or f"the agent left the rollout {state.value} (no reward reported)"
        emu.expire(tid, f"replay: {error}")
    elif state is not TrajectoryState.REWARDED and episode.state == "REWARDED":
        row = store.get_trajectory(tid)
        error = f"the rollout ended {state.value}: {getattr(row, 'reason', None)}"
    reward = store.get_reward(tid)
    body = result.body if isinstance(result.body, dict) else None
    breakdown = body.get("reward_breakdown") if body is not None else None
    backend: ReplayBackend = emu.policy
    return judge(
        episode,
        tid,
        divergence=backend.divergences.get(tid),
        replayed_turns=emu.turn_count(tid),
        new_rewards=None if reward is None else reward.rewards,
        new_breakdown=breakdown if isinstance(breakdown, dict) else None,
        error=error,
        fork_at=fork_at,
    )


# -- replay in process (no HTTP, no subprocess) -------------------------------------------------


class _InProcessPolicy:
    """A scripted policy serving one recorded episode to :class:`ScriptedModel`."""

    def __init__(self, episode: RecordedEpisode, normalization: Normalization) -> None:
        self.episode = episode
        self.normalization = normalization
        self.divergence: Divergence | None = None

    def __call__(self, request: PolicyRequest) -> PolicyReply:
        turn = request.turn
        now = self.normalization.view(request.raw)
        if turn >= len(self.episode.turns):
            self._stop(turn, f"turn {turn} is beyond the recording", request_diff({}, now))
        before = self.normalization.view(self.episode.turns[turn].request)
        if before != now:
            self._stop(turn, first_difference(before, now), request_diff(before, now))
        return reply_from_completion(self.episode.turns[turn].response)

    def _stop(self, turn: int, where: str, diff: str) -> None:
        if self.divergence is None:
            self.divergence = Divergence(
                self.episode.trajectory_id, self.episode.trajectory_id, turn, where, diff
            )
        raise ReplayDivergenceError(f"replay diverged at turn {turn}: {where}")


def replay_in_process(
    source: str | Path | Recording,
    entrypoint: str | Path | None = None,
    *,
    trajectories: Sequence[str] | None = None,
    limit: int | None = None,
    normalization: Normalization | None = None,
    concurrency: int = 8,
) -> ReplayReport:
    """Replay episodes through the entrypoint's ``RolloutApp`` in this process and compare them.

    No emulator, HTTP or subprocess: the app's episode runner plays each episode in one event
    loop (``concurrency`` at a time) with a :class:`~agent_kit.harness.inprocess.ScriptedModel`
    serving
    the recording. Only ``messages`` and ``tools`` of each request are compared
    (sampling parameters never reach an in-process model); rewards are compared bit for bit
    with the recorded ones (and per component when the recording has a breakdown). Works for
    entrypoints whose ``app`` is a :class:`~agent_kit.app.RolloutApp`. Not usable from inside
    a running event loop.
    """
    from agent_kit.harness.inprocess import load_app

    started = time.monotonic()
    recording = _recording(source, trajectories, limit)
    path = entrypoint if entrypoint is not None else recording.entrypoint
    if path is None:
        raise UsageError(f"{recording.source} does not record its entrypoint; pass one")
    app = load_app(path)
    norm = normalization or Normalization(only=frozenset({"messages", "tools"}))
    reports = asyncio.run(_play_in_process(app, recording.episodes, norm, concurrency))
    return ReplayReport(
        source=str(recording.source),
        run_dir=None,
        entrypoint=str(path),
        mode="in-process",
        episodes=tuple(reports),
        elapsed_s=time.monotonic() - started,
    )


async def _play_in_process(
    app: Any,
    episodes: Sequence[RecordedEpisode],
    norm: Normalization,
    concurrency: int,
) -> list[EpisodeReport]:
    """Play every episode through the app's episode runner in one event loop."""
    from agent_kit.contract import parse_payload
    from agent_kit.harness.inprocess import scripted_model_factory
    from agent_kit.runner import run_episode

    sem = asyncio.Semaphore(concurrency)

    async def one(episode: RecordedEpisode) -> EpisodeReport:
        policy = _InProcessPolicy(episode, norm)
        payload = parse_payload(
            {"prompt": episode.prompt, "inferenceParams": episode.inference_params or {}}
        )
        async with sem:
            outcome = await run_episode(
                payload,
                environment=app.environment,
                reward=app.reward_fn,
                settings=app.settings,
                model_factory=scripted_model_factory(policy),
            )
        body = outcome.body()
        breakdown = body.get("reward_breakdown")
        turns = outcome.episode.turns
        return judge(
            episode,
            None,
            divergence=policy.divergence,
            replayed_turns=turns
            if policy.divergence is not None
            else min(turns, len(episode.turns)),
            new_rewards=outcome.reward.wire_values(turns),
            new_breakdown=breakdown if isinstance(breakdown, dict) else None,
            error=None,
            fork_at=None,
        )

    return list(await asyncio.gather(*(one(e) for e in episodes)))
