"""The job driver: play a dataset against an agent the way the MTRL service does (CONTRACT.md §1).

:func:`run_job` runs a whole local job in the current event loop:

1. the run directory ``OUT/<job-name>/`` gets its store (``run.sqlite``) and ``logs/``;
2. the emulator (:class:`~agent_kit.emulator.core.Emulator` + the server of
   :func:`~agent_kit.emulator.server.create_app`) is served by uvicorn on 127.0.0.1 and an
   ephemeral port, inside this process;
3. the agent is reached through an :mod:`~agent_kit.emulator.invokers` invoker (for an
   entrypoint file: local processes whose environment points at the emulator);
4. each of ``steps`` steps plays ``batch_size`` prompts × ``group_size`` rollouts, at most
   ``concurrency`` at once. A rollout is one trajectory id
   (``{job}-s{step}-p{prompt}-g{sample}-a{attempt}``, so runs are reproducible) and the full
   payload of CONTRACT.md §2;
5. ``summary.json`` (and ``report.html`` when the report renderer is installed) are written.

Outcome of one rollout attempt, in the service's words (CONTRACT.md §1):

- REWARDED → done.
- ``Status: failed`` → job failure "The agent signaled that the trajectory failed".
- The invocation ended but no turn was recorded → job failure "No sampling requests were
  received for this rollout".
- READY but no reward within the grace period → job failure "The rollout completed but no
  reward was received in time".
- No answer within ``rollout_timeout``, the agent unreachable (crashed process, connection
  reset), or the agent returned without completing → the trajectory is TIMED_OUT and the
  rollout retried under a new id (``retry_of`` links it), up to ``max_retries``; when retries
  run out, the rollout fails the job (**[chosen]**: "Rollout failed after N attempts: …").

A job failure stops the job (``fail_fast=True``, the service's behaviour: in-flight rollouts are
expired with reason "job stopped") or is only flagged (``fail_fast=False``). Every failure is an
event ``job_failure`` in the store; every finished rollout slot an event ``rollout_done``.

``resume`` reopens a run directory: slots with a REWARDED or FAILED trajectory (or a
``rollout_done`` event) are kept, trajectories left OPEN/READY by the dead run are marked
TIMED_OUT with reason "resumed", and the remaining slots are played under the same job ARN.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

from agent_kit.contract import TrajectoryState
from agent_kit.emulator.core import FAILED_REASON, Emulator
from agent_kit.emulator.dataset import Dataset, load_dataset
from agent_kit.emulator.invokers import Invoker, InvokeResult, agent_env, make_invoker
from agent_kit.errors import AgentKitError, JobFailed, UsageError
from agent_kit.store import RUN_FILE, RunStore, TrajectoryRow

__all__ = [
    "FAILED_REASON",
    "MAX_BATCH_SIZE",
    "NO_REWARD_REASON",
    "NO_SAMPLE_REASON",
    "InvokeOutcome",
    "JobConfig",
    "JobResult",
    "Progress",
    "ProgressHook",
    "invoke_once",
    "run_job",
    "session_id_for",
    "trajectory_id_for",
]

NO_SAMPLE_REASON: Final = "No sampling requests were received for this rollout"
NO_REWARD_REASON: Final = "The rollout completed but no reward was received in time"
RESUMED_REASON: Final = "resumed"
#: The service's largest global batch; the default batch (all prompts) is capped here.
MAX_BATCH_SIZE: Final = 128
_NAME_RE: Final = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_TERMINAL_WAIT: Final = frozenset(
    {TrajectoryState.REWARDED, TrajectoryState.FAILED, TrajectoryState.TIMED_OUT}
)


# -- configuration -----------------------------------------------------------------------------


@dataclass(frozen=True)
class JobConfig:
    """Job settings, named like the service's hyper-parameters; :meth:`validated` checks them.

    ``batch_size`` None means "every prompt" (capped at :data:`MAX_BATCH_SIZE`); ``report_grace``
    is how long, after the agent's answer, the driver waits for CompleteRollout/UpdateReward
    (bounded by what is left of ``rollout_timeout``).
    """

    name: str | None = None
    policy: str = "random"
    group_size: int = 8
    batch_size: int | None = None
    steps: int = 1
    concurrency: int = 32
    rollout_timeout: float = 600.0
    max_retries: int = 3
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 4096
    success_threshold: float = 1.0
    fail_fast: bool = True
    seed: int = 0
    report_grace: float = 30.0
    region: str = "us-west-2"

    def validated(self, n_prompts: int) -> JobConfig:
        """A copy with ``batch_size`` resolved; UsageError naming the first bad setting."""
        checks: list[tuple[bool, str]] = [
            (2 <= self.group_size <= 32, f"group_size must be 2..32, got {self.group_size}"),
            (self.steps >= 1, f"steps must be ≥ 1, got {self.steps}"),
            (self.concurrency >= 1, f"concurrency must be ≥ 1, got {self.concurrency}"),
            (
                self.rollout_timeout > 0,
                f"rollout_timeout must be > 0 seconds, got {self.rollout_timeout}",
            ),
            (0 <= self.max_retries <= 10, f"max_retries must be 0..10, got {self.max_retries}"),
            (0 <= self.temperature <= 2, f"temperature must be 0..2, got {self.temperature}"),
            (0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p}"),
            (self.max_tokens >= 1, f"max_tokens must be ≥ 1, got {self.max_tokens}"),
            (self.report_grace >= 0, f"report_grace must be ≥ 0, got {self.report_grace}"),
            (n_prompts >= 1, "the dataset has no prompts"),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)
        if self.name is not None and not _NAME_RE.match(self.name):
            raise UsageError(
                f"job name {self.name!r} is not valid: 1..63 letters, digits and hyphens, "
                "starting and ending with a letter or digit"
            )
        batch = self.batch_size
        if batch is None:
            batch = min(n_prompts, MAX_BATCH_SIZE)
        elif not 1 <= batch <= 1024:
            raise UsageError(f"batch_size must be 1..1024, got {batch}")
        return replace(self, batch_size=batch)

    def inference_params(self) -> dict[str, Any]:
        """``payload.inferenceParams`` (CONTRACT.md §2 names)."""
        return {"temperature": self.temperature, "topP": self.top_p, "maxTokens": self.max_tokens}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (stored in the job row)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobConfig:
        """The inverse of :meth:`to_dict`; unknown keys are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def default_job_name(entrypoint: str) -> str:
    """``<entrypoint stem>-<UTC timestamp>``, reduced to the characters a job name allows."""
    stem = Path(entrypoint).stem if entrypoint.endswith(".py") else "agent"
    stem = re.sub(r"[^a-zA-Z0-9]+", "-", stem).strip("-")[:40] or "agent"
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"


def trajectory_id_for(job: str, step: int, prompt: int, sample: int, attempt: int) -> str:
    """The deterministic trajectory id of one rollout attempt."""
    return f"{job}-s{step}-p{prompt}-g{sample}-a{attempt}"


def session_id_for(trajectory_id: str) -> str:
    """A unique AgentCore session id (≥ 33 characters) derived from the trajectory id."""
    return "agent-kit-" + hashlib.sha256(trajectory_id.encode()).hexdigest()[:48]


# -- progress and results -----------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """A snapshot of a running job, handed to the progress hook after every change."""

    total: int
    done: int
    succeeded: int
    failed: int
    retried: int
    in_flight: int
    reward_mean: float | None
    elapsed: float
    rate: float
    eta: float | None
    step: int
    steps: int
    job_failures: int


ProgressHook = Callable[[Progress], None]


@dataclass(frozen=True)
class JobResult:
    """What a finished (or stopped) job left behind."""

    job_arn: str
    run_dir: Path
    status: str
    failure: str | None
    summary: dict[str, Any]
    total: int
    succeeded: int
    failed: int

    def raise_for_status(self) -> None:
        """Raise :class:`JobFailed` if the job failed."""
        if self.status == "failed":
            raise JobFailed(f"job {self.job_arn} failed: {self.failure}")


@dataclass
class _Stats:
    total: int = 0
    done: int = 0
    done_this_run: int = 0
    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    in_flight: int = 0
    reward_sum: float = 0.0
    reward_n: int = 0
    job_failures: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    step: int = 0


@dataclass(frozen=True)
class _Attempt:
    kind: str  # "rewarded" | "job_failure" | "retry"
    trajectory_id: str
    reason: str | None = None
    reward: float | None = None
    result: InvokeResult | None = None


# -- the emulator server inside this process ------------------------------------------------


class _EmbeddedServer:
    """uvicorn serving the emulator app on 127.0.0.1:0 as a task of the current loop."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        class _Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                # The driver owns SIGINT/SIGTERM; uvicorn must not swallow them.
                yield

        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_keep_alive=75,
        )
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None
        self.url = ""

    async def start(self) -> str:
        self._task = asyncio.create_task(self._server.serve())
        deadline = time.monotonic() + 15.0
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise AgentKitError("the emulator server stopped during startup")
            if time.monotonic() > deadline:
                raise AgentKitError("the emulator server did not start within 15 s")
            await asyncio.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self._task is None:
            return
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(self._task, 10.0)


# -- the job ------------------------------------------------------------------------------------


def _payload(
    trajectory_id: str, job_arn: str, prompt: str, endpoint: str, config: JobConfig
) -> dict[str, Any]:
    return {
        "prompt": prompt,
        "metadata": {
            "jobArn": job_arn,
            "rolloutId": trajectory_id,
            "endpoint": endpoint,
            "region": config.region,
        },
        "inferenceParams": config.inference_params(),
    }


class _Job:
    """One job's rollout loop (shared by :func:`run_job` and :func:`invoke_once`)."""

    def __init__(
        self,
        *,
        emu: Emulator,
        store: RunStore,
        invoker: Invoker,
        job_arn: str,
        job_name: str,
        endpoint: str,
        dataset: Dataset,
        config: JobConfig,
        progress: ProgressHook | None,
    ) -> None:
        self.emu = emu
        self.store = store
        self.invoker = invoker
        self.job_arn = job_arn
        self.job_name = job_name
        self.endpoint = endpoint
        self.dataset = dataset
        self.config = config
        self.progress = progress
        self.stats = _Stats()
        self.stop_reason: str | None = None
        self.sem = asyncio.Semaphore(config.concurrency)
        self.last: _Attempt | None = None

    # progress
    def emit(self) -> None:
        if self.progress is None:
            return
        s = self.stats
        elapsed = time.monotonic() - s.started
        rate = s.done_this_run / elapsed if elapsed > 0 else 0.0
        remaining = s.total - s.done
        self.progress(
            Progress(
                total=s.total,
                done=s.done,
                succeeded=s.succeeded,
                failed=s.failed,
                retried=s.retried,
                in_flight=s.in_flight,
                reward_mean=s.reward_sum / s.reward_n if s.reward_n else None,
                elapsed=elapsed,
                rate=rate,
                eta=remaining / rate if rate > 0 else None,
                step=s.step,
                steps=self.config.steps,
                job_failures=len(s.job_failures),
            )
        )

    def _job_failure(self, reason: str, trajectory_id: str, slot: tuple[int, int, int]) -> None:
        detail = {
            "reason": reason,
            "trajectory_id": trajectory_id,
            "step": slot[0],
            "prompt_index": slot[1],
            "sample_index": slot[2],
        }
        self.store.add_event("job_failure", detail, trajectory_id=trajectory_id)
        self.stats.job_failures.append(detail)
        if self.config.fail_fast and self.stop_reason is None:
            self.stop_reason = reason

    def _slot_done(
        self, slot: tuple[int, int, int], trajectory_id: str, outcome: str, reason: str | None
    ) -> None:
        self.store.add_event(
            "rollout_done",
            {
                "step": slot[0],
                "prompt_index": slot[1],
                "sample_index": slot[2],
                "outcome": outcome,
                "reason": reason,
            },
            trajectory_id=trajectory_id,
        )
        self.stats.done += 1
        self.stats.done_this_run += 1
        if outcome == "rewarded":
            self.stats.succeeded += 1
        else:
            self.stats.failed += 1
        self.emit()

    async def _attempt(
        self,
        slot: tuple[int, int, int],
        attempt: int,
        retry_of: str | None,
    ) -> _Attempt:
        step, p_idx, k = slot
        config = self.config
        tid = trajectory_id_for(self.job_name, step, p_idx, k, attempt)
        prompt = self.dataset[p_idx]
        payload = _payload(tid, self.job_arn, prompt, self.endpoint, config)
        self.emu.open_trajectory(
            self.job_arn,
            prompt,
            step=step,
            prompt_index=p_idx,
            sample_index=k,
            attempt=attempt,
            retry_of=retry_of,
            trajectory_id=tid,
            payload=payload,
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + config.rollout_timeout
        self.stats.in_flight += 1
        self.emit()
        try:
            result = await self.invoker.invoke(payload, session_id_for(tid), config.rollout_timeout)
            outcome = await self._classify(tid, result, deadline)
        except asyncio.CancelledError:
            with contextlib.suppress(AgentKitError):
                self.emu.expire(tid, f"job stopped: {self.stop_reason or 'cancelled'}")
            raise
        finally:
            self.stats.in_flight -= 1
        if outcome.kind == "retry":
            self.store.add_event(
                "rollout_retry",
                {"reason": outcome.reason, "attempt": attempt, "invoke_status": result.status},
                trajectory_id=tid,
            )
        return outcome

    async def _classify(self, tid: str, result: InvokeResult, deadline: float) -> _Attempt:
        emu = self.emu
        loop = asyncio.get_running_loop()
        if result.status in ("timeout", "unreachable"):
            state = emu.state(tid)
            if state is TrajectoryState.REWARDED:
                return self._rewarded(tid, result)
            if result.status == "timeout":
                reason = f"The rollout did not finish within rollout_timeout ({result.error})"
            else:
                reason = f"The agent could not be reached or crashed: {result.error}"
            state = emu.expire(tid, reason)
            if state is TrajectoryState.REWARDED:  # the reward raced the expiry
                return self._rewarded(tid, result)
            if state is TrajectoryState.FAILED:
                return _Attempt("job_failure", tid, FAILED_REASON, result=result)
            return _Attempt("retry", tid, reason, result=result)
        grace = max(0.0, min(deadline - loop.time(), self.config.report_grace))
        state = await emu.wait_state(tid, _TERMINAL_WAIT, grace)
        if state is TrajectoryState.REWARDED:
            return self._rewarded(tid, result)
        if state is TrajectoryState.FAILED:
            return _Attempt("job_failure", tid, FAILED_REASON, result=result)
        if state is TrajectoryState.TIMED_OUT:
            return _Attempt("retry", tid, "expired while waiting for the reward", result=result)
        if state is TrajectoryState.READY:
            final = emu.expire(tid, NO_REWARD_REASON)
            if final is TrajectoryState.REWARDED:
                return self._rewarded(tid, result)
            return _Attempt("job_failure", tid, NO_REWARD_REASON, result=result)
        # still OPEN after the agent answered
        if emu.turn_count(tid) == 0:
            final = emu.expire(tid, NO_SAMPLE_REASON)
            if final is TrajectoryState.REWARDED:
                return self._rewarded(tid, result)
            detail = f" (agent: {result.error})" if result.error else ""
            return _Attempt("job_failure", tid, NO_SAMPLE_REASON + detail, result=result)
        if loop.time() >= deadline:
            reason = "The rollout did not finish within rollout_timeout"
        else:
            reason = "The agent answered without completing the rollout"
            if result.error:
                reason += f" ({result.error})"
        final = emu.expire(tid, reason)
        if final is TrajectoryState.REWARDED:
            return self._rewarded(tid, result)
        return _Attempt("retry", tid, reason, result=result)

    def _rewarded(self, tid: str, result: InvokeResult) -> _Attempt:
        reward = self.store.get_reward(tid)
        return _Attempt(
            "rewarded", tid, reward=None if reward is None else reward.total, result=result
        )

    async def play_slot(self, slot: tuple[int, int, int], prior: list[TrajectoryRow]) -> None:
        """Play one (step, prompt, sample) slot to its final outcome, retrying as needed."""
        attempt = max((t.attempt for t in prior), default=-1) + 1
        retries_used = sum(1 for t in prior if t.reason != RESUMED_REASON)
        retry_of = prior[-1].id if prior else None
        last_reason = prior[-1].reason if prior else None
        while self.stop_reason is None:
            if retries_used > self.config.max_retries:
                reason = f"Rollout failed after {retries_used} attempts: {last_reason}"
                assert retry_of is not None
                self._job_failure(reason, retry_of, slot)
                self._slot_done(slot, retry_of, "failed", reason)
                return
            async with self.sem:
                if self.stop_reason is not None:
                    return
                outcome = await self._attempt(slot, attempt, retry_of)
            self.last = outcome
            if outcome.kind == "rewarded":
                if outcome.reward is not None:
                    self.stats.reward_sum += outcome.reward
                    self.stats.reward_n += 1
                self._slot_done(slot, outcome.trajectory_id, "rewarded", None)
                return
            if outcome.kind == "job_failure":
                assert outcome.reason is not None
                self._job_failure(outcome.reason, outcome.trajectory_id, slot)
                self._slot_done(slot, outcome.trajectory_id, "failed", outcome.reason)
                return
            retries_used += 1
            attempt += 1
            retry_of = outcome.trajectory_id
            last_reason = outcome.reason
            if retries_used <= self.config.max_retries:
                self.stats.retried += 1
                self.emit()

    async def play(self, plan: list[tuple[tuple[int, int, int], list[TrajectoryRow]]]) -> None:
        """Play the slots step by step (a step starts when the previous one is finished)."""
        by_step: dict[int, list[tuple[tuple[int, int, int], list[TrajectoryRow]]]] = {}
        for item in plan:
            by_step.setdefault(item[0][0], []).append(item)
        for step in sorted(by_step):
            if self.stop_reason is not None:
                break
            self.stats.step = step
            self.emit()
            tasks = [
                asyncio.create_task(self.play_slot(slot, prior)) for slot, prior in by_step[step]
            ]
            try:
                await self._until_done_or_stopped(tasks)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _until_done_or_stopped(self, tasks: list[asyncio.Task[None]]) -> None:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # a bug in the driver must surface, not vanish
            if self.stop_reason is not None:
                return


def _plan(
    store: RunStore, job_arn: str, job_name: str, config: JobConfig, n_prompts: int
) -> tuple[list[tuple[tuple[int, int, int], list[TrajectoryRow]]], int, dict[str, int]]:
    """Slots still to play (with their earlier attempts), the total, and what was already done."""
    assert config.batch_size is not None
    existing: dict[tuple[int, int, int], list[TrajectoryRow]] = {}
    for row in store.list_trajectories(job_arn=job_arn):
        existing.setdefault((row.step, row.prompt_index, row.sample_index), []).append(row)
    done_events = {
        (int(e.detail["step"]), int(e.detail["prompt_index"]), int(e.detail["sample_index"])): e
        for e in store.list_events(kind="rollout_done")
        if e.trajectory_id is not None and e.trajectory_id.startswith(f"{job_name}-")
    }
    plan: list[tuple[tuple[int, int, int], list[TrajectoryRow]]] = []
    counts = {"total": 0, "done": 0, "succeeded": 0, "failed": 0}
    for step in range(config.steps):
        for i in range(config.batch_size):
            p_idx = (step * config.batch_size + i) % n_prompts
            for k in range(config.group_size):
                slot = (step, p_idx, k)
                counts["total"] += 1
                rows = sorted(existing.get(slot, []), key=lambda r: r.attempt)
                states = {r.state for r in rows}
                if slot in done_events or states & {"REWARDED", "FAILED"}:
                    counts["done"] += 1
                    if "REWARDED" in states:
                        counts["succeeded"] += 1
                    else:
                        counts["failed"] += 1
                    continue
                plan.append((slot, rows))
    return plan, counts["total"], counts


def _expire_stale(emu: Emulator, store: RunStore, job_arn: str) -> int:
    stale = store.list_trajectories(job_arn=job_arn, states=["OPEN", "READY"])
    for row in stale:
        emu.expire(row.id, RESUMED_REASON)
    return len(stale)


def _absolute(path: str | Path) -> str:
    return str(Path(path).resolve())


def _dataset_digest(dataset: Dataset) -> str:
    h = hashlib.sha256()
    for prompt in dataset.prompts:
        h.update(prompt.encode())
        h.update(b"\0")
    return h.hexdigest()


def _summarize(
    store: RunStore, job_arn: str, config: JobConfig, stats: dict[str, Any]
) -> dict[str, Any]:
    """The metrics helper's summary plus this run's driver figures under ``run``."""
    try:
        from agent_kit.metrics import summarize
    except ImportError:
        summary: dict[str, Any] = {"summary_source": "driver (agent_kit.metrics unavailable)"}
    else:
        try:
            summary = summarize(store, job_arn, success_threshold=config.success_threshold)
        except ImportError:
            summary = {"summary_source": "driver (agent_kit.summary unavailable)"}
    summary = dict(summary)
    summary["run"] = stats
    return summary


def _driver_stats(
    store: RunStore,
    job_arn: str,
    status: str,
    failure: str | None,
    job: _Job | None,
    elapsed: float,
) -> dict[str, Any]:
    rows = store.list_trajectories(job_arn=job_arn)
    by_state: dict[str, int] = {}
    prompt_tokens = completion_tokens = turns = 0
    for row in rows:
        by_state[row.state] = by_state.get(row.state, 0) + 1
        for turn in store.list_turns(row.id):
            turns += 1
            prompt_tokens += turn.prompt_tokens
            completion_tokens += turn.completion_tokens
    rewards = [r.total for r in (store.get_reward(t.id) for t in rows) if r is not None]
    failures = [e.detail for e in store.list_events(kind="job_failure")]
    stats = job.stats if job is not None else None
    return {
        "job_arn": job_arn,
        "status": status,
        "failure_reason": failure,
        "trajectories": len(rows),
        "trajectories_by_state": by_state,
        "rollouts_total": stats.total if stats else None,
        "rollouts_succeeded": stats.succeeded if stats else None,
        "rollouts_failed": stats.failed if stats else None,
        "retries": stats.retried if stats else None,
        "rewarded": len(rewards),
        "reward_mean": sum(rewards) / len(rewards) if rewards else None,
        "turns": turns,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "job_failures": failures,
        "elapsed_s": round(elapsed, 3),
        "rollouts_per_s": round(stats.done_this_run / elapsed, 3)
        if stats and elapsed > 0
        else None,
    }


def _write_outputs(run_dir: Path, store: RunStore, summary: dict[str, Any]) -> None:
    """``summary.json`` and ``report.html`` (the report module's renderer when available)."""
    try:
        from agent_kit.report import write_reports

        write_reports(run_dir, summary, store)
    except Exception as exc:  # noqa: BLE001 - a report bug must not lose the run's summary
        store.add_event("report_error", {"error": f"{type(exc).__name__}: {exc}"})
        text = json.dumps(summary, indent=2, default=str) + "\n"
        (run_dir / "summary.json").write_text(text, encoding="utf-8")


async def run_job(
    entrypoint: str | None,
    dataset: str | Path | None,
    config: JobConfig | None = None,
    *,
    out_dir: str | Path = "runs",
    resume: str | Path | None = None,
    workers: int = 1,
    progress: ProgressHook | None = None,
    invoker: Invoker | None = None,
    endpoint_url: str | None = None,
    rate: float | None = None,
) -> JobResult:
    """Run (or, with ``resume``, continue) a local job; see the module docstring.

    ``entrypoint`` is an invoker target (``.py`` file, URL, AgentCore or Lambda ARN); with
    ``resume`` it, the dataset and the config default to what the run recorded. Raises
    :class:`UsageError` for bad settings and :class:`InvokerError` when the agent cannot be
    started; a failing *job* is not an exception: see :attr:`JobResult.status` and
    :meth:`JobResult.raise_for_status`.
    """
    started = time.monotonic()
    if resume is not None:
        run_dir = Path(resume)
        if not (run_dir / RUN_FILE).is_file():
            raise UsageError(f"nothing to resume: no {RUN_FILE} in {run_dir}")
        store = RunStore.open(run_dir)
        jobs = store.list_jobs()
        if not jobs:
            store.close()
            raise UsageError(f"nothing to resume: {run_dir} holds no job")
        job_row = jobs[-1]
        recorded = job_row.config
        if job_row.status == "failed":
            store.close()
            reason = (job_row.summary or {}).get("run", {}).get("failure_reason")
            raise UsageError(f"job {job_row.arn} failed ({reason}); a failed job is not resumed")
        config = JobConfig.from_dict(recorded.get("job", {}))
        entrypoint = entrypoint or recorded.get("entrypoint")
        dataset = dataset or recorded.get("dataset")
        if not entrypoint or not dataset:
            store.close()
            raise UsageError(f"{run_dir} does not record its entrypoint and dataset")
        data = load_dataset(dataset)
        if recorded.get("dataset_sha256") not in (None, _dataset_digest(data)):
            store.close()
            raise UsageError(f"dataset {dataset} changed since the run started; cannot resume")
        config = config.validated(len(data))
        job_name = job_row.name
    else:
        if entrypoint is None or dataset is None:
            raise UsageError("an entrypoint and a dataset are required")
        config = config or JobConfig()
        data = load_dataset(dataset)
        config = config.validated(len(data))
        job_name = config.name or default_job_name(entrypoint)
        config = replace(config, name=job_name)
        run_dir = Path(out_dir) / job_name
        if (run_dir / RUN_FILE).exists():
            raise UsageError(f"run directory {run_dir} already holds a run; use --resume or --name")
        store = RunStore.open(run_dir)
    assert config.batch_size is not None
    run_dir.mkdir(parents=True, exist_ok=True)

    from agent_kit.emulator.policies import load_policy
    from agent_kit.emulator.server import create_app

    try:
        policy = load_policy(config.policy, seed=config.seed, base_dir=Path.cwd())
    except BaseException:
        store.close()
        raise
    emu = Emulator(store, policy, region=config.region, seed=config.seed)
    job_config = {
        "job": config.to_dict(),
        "entrypoint": _absolute(entrypoint) if entrypoint.endswith(".py") else entrypoint,
        "dataset": _absolute(dataset),
        "dataset_sha256": _dataset_digest(data),
        "prompt_column": data.column,
        "workers": workers,
    }
    job_row = emu.create_job(job_name, job_config)
    job_arn = job_row.arn
    store.update_job(job_arn, status="running")
    server = _EmbeddedServer(create_app(emu))
    job: _Job | None = None
    status, failure = "failed", None
    try:
        endpoint = await server.start()
        if resume is not None:
            n = _expire_stale(emu, store, job_arn)
            store.add_event("job_resumed", {"stale_trajectories": n})
        plan, total, counts = _plan(store, job_arn, job_name, config, len(data))

        def on_event(kind: str, detail: dict[str, Any]) -> None:
            store.add_event(kind, detail)

        if invoker is None:
            invoker = make_invoker(
                entrypoint,
                env=agent_env(endpoint, config.region),
                workers=workers,
                log_dir=run_dir / "logs",
                concurrency=config.concurrency,
                rate=rate,
                endpoint_url=endpoint_url,
                on_event=on_event,
            )
        job = _Job(
            emu=emu,
            store=store,
            invoker=invoker,
            job_arn=job_arn,
            job_name=job_name,
            endpoint=endpoint,
            dataset=data,
            config=config,
            progress=progress,
        )
        job.stats.total = total
        job.stats.done = counts["done"]
        job.stats.succeeded = counts["succeeded"]
        job.stats.failed = counts["failed"]
        await invoker.start()
        try:
            job.emit()
            await job.play(plan)
        finally:
            await invoker.aclose()
        if job.stop_reason is not None:
            status, failure = "failed", job.stop_reason
        else:
            status = "completed"
    except (asyncio.CancelledError, KeyboardInterrupt):
        status, failure = "stopped", "interrupted"
        raise
    except AgentKitError as exc:
        status, failure = "failed", str(exc)
        raise
    finally:
        await server.stop()
        with contextlib.suppress(Exception):
            await policy.aclose()
        elapsed = time.monotonic() - started
        stats = _driver_stats(store, job_arn, status, failure, job, elapsed)
        summary = _summarize(store, job_arn, config, stats)
        store.update_job(job_arn, status=status, summary=summary)
        _write_outputs(run_dir, store, summary)
        store.close()
    return JobResult(
        job_arn=job_arn,
        run_dir=run_dir,
        status=status,
        failure=failure,
        summary=summary,
        total=job.stats.total,
        succeeded=job.stats.succeeded,
        failed=job.stats.failed,
    )


# -- one rollout, for `agent-kit invoke` -----------------------------------------------------------


@dataclass(frozen=True)
class InvokeOutcome:
    """One debugging rollout: its trajectory, what the agent returned, and the run store path."""

    trajectory_id: str
    job_arn: str
    state: str
    reason: str | None
    reward: float | None
    result: InvokeResult | None
    store_path: Path


async def invoke_once(
    entrypoint: str,
    prompt: str,
    *,
    policy: str = "random",
    run_dir: str | Path,
    rollout_timeout: float = 120.0,
    report_grace: float = 10.0,
    temperature: float = 1.0,
    seed: int = 0,
    endpoint_url: str | None = None,
) -> InvokeOutcome:
    """Run a single rollout (no retries) and leave its transcript in ``run_dir/run.sqlite``."""
    from agent_kit.emulator.policies import load_policy
    from agent_kit.emulator.server import create_app

    run = Path(run_dir)
    if (run / RUN_FILE).exists():
        raise UsageError(f"{run} already holds a run")
    config = JobConfig(
        name="invoke",
        policy=policy,
        group_size=2,
        batch_size=1,
        concurrency=1,
        rollout_timeout=rollout_timeout,
        max_retries=0,
        temperature=temperature,
        seed=seed,
        fail_fast=False,
        report_grace=report_grace,
    ).validated(1)
    data = Dataset(path=Path("<prompt>"), column="prompt", prompts=(prompt,))
    store = RunStore.open(run)
    try:
        backend = load_policy(policy, seed=seed, base_dir=Path.cwd())
        emu = Emulator(store, backend, region=config.region, seed=seed)
        job_arn = emu.create_job("invoke", {"job": config.to_dict(), "entrypoint": entrypoint}).arn
        server = _EmbeddedServer(create_app(emu))
        endpoint = await server.start()
        try:
            invoker = make_invoker(
                entrypoint,
                env=agent_env(endpoint, config.region),
                log_dir=run / "logs",
                concurrency=1,
                endpoint_url=endpoint_url,
                on_event=lambda kind, detail: store.add_event(kind, detail),
            )
            job = _Job(
                emu=emu,
                store=store,
                invoker=invoker,
                job_arn=job_arn,
                job_name="invoke",
                endpoint=endpoint,
                dataset=data,
                config=config,
                progress=None,
            )
            await invoker.start()
            try:
                await job.play_slot((0, 0, 0), [])
            finally:
                await invoker.aclose()
        finally:
            await server.stop()
            with contextlib.suppress(Exception):
                await backend.aclose()
        last = job.last
        tid = last.trajectory_id if last else trajectory_id_for("invoke", 0, 0, 0, 0)
        row = store.get_trajectory(tid)
        reward = store.get_reward(tid)
        store.update_job(job_arn, status="completed")
        return InvokeOutcome(
            trajectory_id=tid,
            job_arn=job_arn,
            state=row.state if row else "UNKNOWN",
            reason=row.reason if row else None,
            reward=None if reward is None else reward.total,
            result=last.result if last else None,
            store_path=Path(store.path),
        )
    finally:
        store.close()
