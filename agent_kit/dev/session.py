"""One dev loop's state across its iterations, and one iteration: load, play, replay, audit.

:class:`DevSession` holds what outlives an iteration: the agent processes
(:class:`~agent_kit.dev.agents.KeptAgents`, restarted only when the code they run changed), the
policy backend (reloaded only when its own files changed), the baseline (read once), the
previous iteration's slots and findings. :meth:`DevSession.iterate` is one iteration:

1. **load** — the dataset is read; the policy is (re)loaded in this process when its files
   changed (its modules are dropped from ``sys.modules`` first, so the file is read again);
   the agent processes are restarted when the entrypoint or a module it imports changed (their
   start is the load; when they do not come up,
   :func:`~agent_kit.dev.loadcheck.check_entrypoint` says why in one line). A load error ends
   the iteration: nothing else runs;
2. **play** — the first ``prompts`` rows × ``samples``, one step, through the driver
   (:func:`~agent_kit.driver.local.run_local`, the job of ``agent-kit run``, writing
   summary.json and report.html) into the iteration's run directory, on the kept agents and the
   loaded policy;
3. **replay** — with a baseline, its recorded episodes of the grid's prompts through the replay
   engine (:func:`~agent_kit.replay.engine.replay_run`, continuing past a divergence so each
   episode gets its reward under the new code) on the same agents;
4. **audit** — the doctor's fast checks (:mod:`agent_kit.dev.audit`), and the comparisons
   (:mod:`agent_kit.dev.compare`) with the previous iteration and the baseline.

The verdict is written as the iteration's ``verdict.json``; then all but the last ``keep``
iterations are removed (:mod:`agent_kit.dev.runs`).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Collection
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from agent_kit.dev.agents import KeptAgents
from agent_kit.dev.audit import audit_change, fast_findings
from agent_kit.dev.compare import Comparison, Played, compare
from agent_kit.dev.loadcheck import LoadError, check_entrypoint, load_error
from agent_kit.dev.options import DevOptions
from agent_kit.dev.runs import (
    AGENT_LOGS,
    VERDICT_FILE,
    iteration_dir,
    next_number,
    prune,
    replay_dir,
)
from agent_kit.dev.sources import Changes, Sources, scripted_file
from agent_kit.dev.verdict import Verdict
from agent_kit.doctor.findings import Finding
from agent_kit.driver.config import JobConfig, RunConfig, recorded_agent_env
from agent_kit.driver.dataset import load_dataset
from agent_kit.driver.local import run_local
from agent_kit.emulator.policies import PolicyBackend, load_policy
from agent_kit.errors import AgentKitError, InvokerError, UsageError
from agent_kit.replay.engine import replay_run
from agent_kit.replay.recording import Recording, read_run
from agent_kit.replay.verdicts import ReplayReport
from agent_kit.reporting.breakdown import RunData, load_run_data
from agent_kit.store import RunStore, load_rollouts

__all__ = ["Baseline", "DevSession"]


@dataclass(frozen=True)
class Baseline:
    """A recorded run the loop compares with: its settings (policy resolved), its replayable
    episodes, its slots, the agent environment it recorded."""

    run_dir: Path
    job: JobConfig
    job_name: str
    recording: Recording
    played: Played
    agent_env: dict[str, str]

    @classmethod
    def read(cls, run_dir: Path) -> Baseline:
        """Read ``run_dir``'s latest job (UsageError when it holds none)."""
        recording = read_run(run_dir)
        with RunStore.open(run_dir, readonly=True) as store:
            row = store.list_jobs()[-1]
            data = load_run_data(store, row.arn)
        return cls(
            run_dir=run_dir,
            job=JobConfig.from_record(row.config, run_dir),
            job_name=row.name,
            recording=recording,
            played=Played.from_run(data, run_dir),
            agent_env=recorded_agent_env(row.config),
        )

    def episodes_of(self, prompts: Collection[str]) -> Recording:
        """The recorded episodes of the given prompts."""
        ids = [e.id for e in self.recording.episodes if e.prompt in prompts]
        return self.recording.select(ids) if ids else replace(self.recording, episodes=())


def _evict(files: Collection[Path]) -> None:
    """Drop the modules loaded from ``files`` from ``sys.modules`` (the next load reads them)."""
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and Path(path).resolve() in files:
            del sys.modules[name]


_A = TypeVar("_A")
_B = TypeVar("_B")


async def _timed(work: Awaitable[_A], name: str, timings: dict[str, float]) -> _A:
    """Await ``work``, noting its seconds as ``timings[name]``."""
    started = time.monotonic()
    try:
        return await work
    finally:
        timings[name] = time.monotonic() - started


async def _side_by_side(a: Awaitable[_A], b: Awaitable[_B]) -> tuple[_A, _B]:
    """Await both at once; when one raises, the other is cancelled before the error goes on."""
    first, second = asyncio.ensure_future(a), asyncio.ensure_future(b)
    try:
        return await first, await second
    except BaseException:
        for task in (first, second):
            task.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
        raise


class DevSession:
    """What a dev loop keeps across iterations (module docstring); :meth:`aclose` ends it."""

    def __init__(self, options: DevOptions) -> None:
        self.options = options
        self.baseline = Baseline.read(options.baseline) if options.baseline else None
        self.job = options.job(None if self.baseline is None else self.baseline.job)
        self.policy_file = scripted_file(self.job.policy)
        self.sources = Sources.scan(options.entrypoint, options.dataset, self.policy_file)
        #: The agents' own settings the baseline recorded (given again, and recorded per run).
        self.extra_env = self.baseline.agent_env if self.baseline is not None else {}
        self.agents = KeptAgents(
            options.entrypoint,
            region=self.job.region,
            workers=options.workers,
            concurrency=self.job.concurrency,
            log_dir=options.out / AGENT_LOGS,
            env=self.extra_env,
            settings=options.settings,
        )
        self.backend: PolicyBackend | None = None
        self.previous: tuple[int, Played] | None = None
        self.findings: tuple[Finding, ...] | None = None

    async def aclose(self) -> None:
        """End the agent processes and close the policy."""
        try:
            await self.agents.shutdown()
        finally:
            if self.backend is not None:
                backend, self.backend = self.backend, None
                await backend.aclose()

    async def iterate(self, changes: Changes | None = None) -> Verdict:
        """One iteration (module docstring); ``changes`` None: the first, everything loads."""
        options = self.options
        number = next_number(options.out)
        path = iteration_dir(options.out, number)
        trigger = changes.names if changes is not None else ()
        started = time.monotonic()
        starts = self.agents.starts
        error = await self._load(changes)
        restarted = self.agents.starts > starts
        self.sources = Sources.scan(options.entrypoint, options.dataset, self.policy_file)
        timings = {"reload": time.monotonic() - started}
        if error is not None:
            verdict = Verdict(number, path, trigger, restarted, load_error=error, timings=timings)
        else:
            verdict = await self._played(number, path, trigger, restarted, timings)
        self._write(verdict)
        prune(options.out, options.keep, protect=options.baseline)
        return verdict

    async def _load(self, changes: Changes | None) -> LoadError | None:
        """Read the dataset, reload the policy when its files changed, restart the agents when
        theirs did (or they are not running: the last start failed)."""
        try:
            load_dataset(self.options.dataset)
        except UsageError as exc:
            return LoadError("dataset", str(exc), str(self.options.dataset))
        if changes is None or changes.policy or self.backend is None:
            error = await self._reload_policy()
            if error is not None:
                return error
        if changes is None or changes.agent or not self.agents.running:
            try:
                await self.agents.restart()
            except InvokerError as exc:
                found = await check_entrypoint(self.agents.entrypoint, self.agents.env)
                first = str(exc).splitlines()[0]
                return found or LoadError("entrypoint", first, str(self.agents.entrypoint))
        return None

    async def _reload_policy(self) -> LoadError | None:
        """Close the loaded policy, forget its modules and load it again."""
        if self.backend is not None:
            backend, self.backend = self.backend, None
            await backend.aclose()
        _evict(self.sources.policy)
        try:
            self.backend = load_policy(
                self.job.policy,
                seed=self.job.seed,
                base_dir=Path.cwd(),
                settings=self.options.settings,
            )
        except UsageError as exc:
            file = self.policy_file
            return load_error(exc, file.parent if file else Path.cwd(), "policy", file)
        return None

    async def _played(
        self,
        number: int,
        path: Path,
        trigger: tuple[str, ...],
        restarted: bool,
        timings: dict[str, float],
    ) -> Verdict:
        """Play, replay and audit; the verdict (a failure that kept the grid from playing is
        one too)."""
        base = Verdict(number, path, trigger, restarted, timings=timings)
        rows = load_dataset(self.options.dataset).prompts[: self.options.prompts]
        try:
            (status, data), report = await _side_by_side(
                _timed(self._play(path.name, len(rows)), "play", timings),
                _timed(self._replay(number, set(rows)), "replay", timings),
            )
        except AgentKitError as exc:
            return replace(base, failure=exc.message, failure_code=exc.exit_code)
        if report is None:
            timings.pop("replay", None)
        played = Played.from_run(data, path)
        started = time.monotonic()
        findings = fast_findings(data)
        verdict = replace(
            base,
            status=status,
            grid=(len(played.prompts), self.job.group_size),
            figures=played.figures(),
            rewarded=played.rewarded,
            previous=None
            if self.previous is None
            else compare(played, self.previous[1], f"#{self.previous[0]}"),
            baseline=self._against_baseline(played),
            replay=report,
            baseline_job=None if self.baseline is None else self.baseline.job_name,
            audit=audit_change(findings, self.findings),
            notes=("the baseline holds none of the grid's prompts",)
            if self.baseline is not None and report is None
            else (),
        )
        timings["audit"] = time.monotonic() - started
        self.previous, self.findings = (number, played), findings
        return verdict

    def _against_baseline(self, played: Played) -> Comparison | None:
        if self.baseline is None:
            return None
        before = self.baseline.played.matching(played)
        if not before.slots:
            return None
        return compare(played, before, "baseline", slots=False)

    async def _play(self, name: str, rows: int) -> tuple[str, RunData]:
        """The grid's job of the dataset's first ``rows`` (module docstring): its status and
        what it played."""
        options = self.options
        job = replace(self.job, name=name, steps=1, batch_size=rows)
        config = RunConfig(
            entrypoint=str(self.agents.entrypoint),
            dataset=options.dataset,
            job=job,
            out=options.out,
            workers=options.workers,
            extra_env=self.extra_env or None,
            settings=options.settings,
        )
        result = await run_local(config, invoker=self.agents, policy=self.backend)
        with RunStore.open(result.run_dir, readonly=True) as store:
            records = load_rollouts(store, result.job_arn)
            data = load_run_data(store, result.job_arn, records=records)
        return result.status, data

    async def _replay(self, number: int, prompts: Collection[str]) -> ReplayReport | None:
        """The baseline's episodes of the grid's ``prompts``, replayed on the kept agents."""
        if self.baseline is None:
            return None
        recording = self.baseline.episodes_of(prompts)
        if not recording.episodes:
            return None
        return await replay_run(
            recording,
            entrypoint=self.agents.entrypoint,
            continue_on_divergence=True,
            out_dir=self.options.out,
            name=replay_dir(self.options.out, number).name,
            job=JobConfig(concurrency=self.job.concurrency),
            invoker=self.agents,
            settings=self.options.settings,
        )

    def _write(self, verdict: Verdict) -> None:
        verdict.path.mkdir(parents=True, exist_ok=True)
        text = json.dumps(verdict.document(), indent=2, ensure_ascii=False, default=str)
        (verdict.path / VERDICT_FILE).write_text(text + "\n", encoding="utf-8")
