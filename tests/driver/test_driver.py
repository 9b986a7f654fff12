"""The job driver end to end: real uvicorn emulator, real agent subprocesses, real store.

Agents live in ``tests/agents/``: hand-written contract agents (raw ``BedrockAgentCoreApp`` +
httpx) whose fault variants misbehave only on tasks marked ``"bad": true``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent_kit.driver.attempt import trajectory_id_for
from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.hooks import JobHooks, Progress
from agent_kit.driver.invokers import make_invoker
from agent_kit.driver.job import JobResult
from agent_kit.driver.job_setup import default_workers
from agent_kit.driver.local import run_local
from agent_kit.errors import AgentKitError, JobFailed, UsageError
from agent_kit.store import RunStore
from agent_kit.store.events import FAILED_REASON, NO_REWARD_REASON, NO_SAMPLE_REASON

pytestmark = pytest.mark.e2e

AGENTS = Path(__file__).parents[1] / "agents"
EXAMPLE = Path(__file__).parents[1] / "example_counter.py"  # the foundation example


def _dataset(path: Path, tasks: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps({"prompt": json.dumps(t)}) + "\n" for t in tasks))
    return path


def _slots(store: RunStore, job_arn: str) -> dict[tuple[int, int, int], list[Any]]:
    out: dict[tuple[int, int, int], list[Any]] = {}
    for row in store.list_trajectories(job_arn=job_arn):
        out.setdefault((row.step, row.prompt_index, row.sample_index), []).append(row)
    return out


async def _run_bad_then_good(tmp_path: Path, agent: str, *, rollout_timeout: float) -> JobResult:
    """Play a bad task then a good one (group of 2) on ``agent``; every slot must end rewarded."""
    data = _dataset(tmp_path / "d.jsonl", [{"bad": True, "turns": 1}, {"turns": 1}])
    name = agent.removesuffix("_agent.py")
    config = JobConfig(name=name, group_size=2, concurrency=4, rollout_timeout=rollout_timeout)
    result = await run_local(
        RunConfig(entrypoint=str(AGENTS / agent), dataset=data, job=config, out=tmp_path)
    )
    assert result.status == "completed"
    assert result.succeeded == 4
    return result


async def test_full_run_accounts_for_every_rollout(tmp_path: Path) -> None:
    """8 prompts × group 4: every rollout REWARDED with its turns, tokens and ids recorded."""
    tasks = [{"id": i, "turns": 1 + i % 3, "reward": i / 8} for i in range(8)]
    data = _dataset(tmp_path / "train.jsonl", tasks)
    seen: list[Progress] = []
    config = JobConfig(name="full", group_size=4, concurrency=8, rollout_timeout=60, seed=3)
    result = await run_local(
        RunConfig(entrypoint=str(AGENTS / "good_agent.py"), dataset=data, job=config, out=tmp_path),
        JobHooks(progress=seen.append),
    )
    assert result.status == "completed"
    assert (result.total, result.succeeded, result.failed) == (32, 32, 0)
    assert result.run_dir == tmp_path / "full"
    with RunStore.open(result.run_dir, readonly=True) as store:
        rows = store.list_trajectories(job_arn=result.job_arn)
        assert len(rows) == 32
        total_prompt = total_completion = 0
        for row in rows:
            assert row.state == "REWARDED"
            assert row.id == trajectory_id_for("full", 0, row.prompt_index, row.sample_index, 0)
            turns = store.list_turns(row.id)
            assert len(turns) == tasks[row.prompt_index]["turns"]
            total_prompt += sum(t.prompt_tokens for t in turns)
            total_completion += sum(t.completion_tokens for t in turns)
            reward = store.get_reward(row.id)
            assert reward is not None
            assert reward.total == pytest.approx(tasks[row.prompt_index]["reward"])
            assert row.payload is not None
            assert row.payload["metadata"]["endpoint"].startswith("http://127.0.0.1:")
            assert row.payload["inferenceParams"] == {
                "temperature": 1.0,
                "topP": 1.0,
                "maxTokens": 4096,
            }
            assert json.loads(row.payload["prompt"]) == tasks[row.prompt_index]
        assert len(_slots(store, result.job_arn)) == 32
        assert len(store.list_events(kind="rollout_done")) == 32
        job = store.get_job(result.job_arn)
        assert job is not None
        assert job.status == "completed"
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["run"]["prompt_tokens"] == total_prompt
    assert summary["run"]["completion_tokens"] == total_completion
    assert summary["run"]["turns"] == sum(tasks[r.prompt_index]["turns"] for r in rows)
    assert summary["run"]["trajectories_by_state"] == {"REWARDED": 32}
    assert (result.run_dir / "logs" / "agent-0.log").is_file()
    assert seen[-1].done == 32
    assert seen[-1].reward_mean == pytest.approx(sum(t["reward"] for t in tasks) / 8)


async def test_crashed_agent_is_restarted_and_rollout_retried(tmp_path: Path) -> None:
    """A process that dies mid-rollout is restarted; the rollout is retried under a linked id."""
    result = await _run_bad_then_good(tmp_path, "crash_agent.py", rollout_timeout=30)
    with RunStore.open(result.run_dir, readonly=True) as store:
        for slot, rows in _slots(store, result.job_arn).items():
            assert [r.state for r in rows].count("REWARDED") == 1, slot
            final = rows[-1]
            assert final.state == "REWARDED"
            for earlier, later in itertools.pairwise(rows):
                assert earlier.state == "TIMED_OUT"
                assert later.retry_of == earlier.id
        slots = _slots(store, result.job_arn)
        firsts = [slots[(0, 0, k)][0] for k in range(2)]
        assert all(r.state == "TIMED_OUT" and "crashed" in (r.reason or "") for r in firsts)
        # the turn the crashing rollout made before dying is kept
        assert sum(store.count_turns(r.id) for r in firsts) >= 1
        assert len(store.list_events(kind="agent_exit")) >= 1
        assert len(store.list_events(kind="rollout_retry")) >= 2
    first = result.written_summary().document()["run"]
    assert first["retries"] >= 2
    # Resuming the finished run plays nothing and reports the same totals, read from the store.
    again = (await run_local(RunConfig(resume=result.run_dir))).written_summary().document()["run"]
    for key in ("retries", "slots_total", "slots_succeeded", "slots_failed", "turns"):
        assert again[key] == first[key], key


async def test_hanging_agent_times_out_and_is_retried(tmp_path: Path) -> None:
    """A rollout with no answer within rollout_timeout is TIMED_OUT, then retried and rewarded.

    The hung attempt never answers (whatever the timeout); 10 s leaves a busy box time to
    sample before it and to play the retry and the good rollouts within it."""
    result = await _run_bad_then_good(tmp_path, "hang_agent.py", rollout_timeout=10)
    with RunStore.open(result.run_dir, readonly=True) as store:
        slots = _slots(store, result.job_arn)
        for k in range(2):
            first, second = slots[(0, 0, k)]
            assert first.state == "TIMED_OUT"
            assert "rollout_timeout" in (first.reason or "")
            assert store.count_turns(first.id) == 1
            assert second.state == "REWARDED"
            assert second.retry_of == first.id
        assert all(len(slots[(0, 1, k)]) == 1 for k in range(2))


@pytest.mark.parametrize(
    ("agent", "reason", "state"),
    [
        ("nosample_agent.py", NO_SAMPLE_REASON, "TIMED_OUT"),
        ("failed_agent.py", FAILED_REASON, "FAILED"),
        ("noreward_agent.py", NO_REWARD_REASON, "TIMED_OUT"),
    ],
)
async def test_job_killing_faults_are_flagged(
    tmp_path: Path, agent: str, reason: str, state: str
) -> None:
    """Without fail-fast, each job-killing fault is recorded in the service's words; others run."""
    data = _dataset(tmp_path / "d.jsonl", [{"bad": True}, {"turns": 1}])
    config = JobConfig(name="flag", group_size=2, concurrency=4, fail_fast=False, report_grace=1.0)
    result = await run_local(
        RunConfig(entrypoint=str(AGENTS / agent), dataset=data, job=config, out=tmp_path)
    )
    assert result.status == "completed"
    assert (result.succeeded, result.failed) == (2, 2)
    with RunStore.open(result.run_dir, readonly=True) as store:
        slots = _slots(store, result.job_arn)
        for k in range(2):
            (bad,) = slots[(0, 0, k)]  # job-killing faults are not retried
            assert bad.state == state
            assert (bad.reason or "").startswith(reason)
            (good,) = slots[(0, 1, k)]
            assert good.state == "REWARDED"
        failures = store.list_events(kind="job_failure")
        assert sorted(e.trajectory_id or "" for e in failures) == [
            trajectory_id_for("flag", 0, 0, k, 0) for k in range(2)
        ]
        assert all(e.detail["reason"].startswith(reason) for e in failures)
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert len(summary["run"]["job_failures"]) == 2


async def test_fail_fast_stops_the_job(tmp_path: Path) -> None:
    """With fail-fast (the default) the first job-killing failure stops the job, as the service."""
    data = _dataset(tmp_path / "d.jsonl", [{"bad": True}, {"turns": 1}, {"turns": 1}])
    config = JobConfig(name="stop", group_size=2, concurrency=1, report_grace=1.0)
    result = await run_local(
        RunConfig(
            entrypoint=str(AGENTS / "failed_agent.py"), dataset=data, job=config, out=tmp_path
        )
    )
    assert result.status == "failed"
    assert result.failure == FAILED_REASON
    with pytest.raises(JobFailed, match="The agent signaled that the trajectory failed"):
        result.raise_for_status()
    with RunStore.open(result.run_dir, readonly=True) as store:
        rows = store.list_trajectories(job_arn=result.job_arn)
        assert rows[0].state == "FAILED"
        assert len(rows) < 6  # the job stopped before playing every slot
        assert not store.list_trajectories(job_arn=result.job_arn, states=["OPEN", "READY"])
        job = store.get_job(result.job_arn)
        assert job is not None
        assert job.status == "failed"
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["run"]["failure_reason"] == FAILED_REASON
    with pytest.raises(UsageError, match="a failed job is not resumed"):
        await run_local(RunConfig(resume=result.run_dir))


async def test_exhausted_retries_fail_the_job(tmp_path: Path) -> None:
    """A rollout that times out on every attempt fails the job after max_retries retries (the
    hung attempt never answers; 10 s leaves a busy box time to sample before the timeout)."""
    data = _dataset(tmp_path / "d.jsonl", [{"bad": True}])
    config = JobConfig(
        name="exhaust", group_size=2, concurrency=2, rollout_timeout=10, max_retries=0
    )
    result = await run_local(
        RunConfig(entrypoint=str(AGENTS / "hang_agent.py"), dataset=data, job=config, out=tmp_path)
    )
    assert result.status == "failed"
    assert (result.failure or "").startswith("Rollout failed after 1 attempts")


async def test_cancelled_run_resumes_without_duplicates(tmp_path: Path) -> None:
    """A run cancelled mid-job continues with --resume: same slots, no duplicate rewards."""
    tasks = [{"id": i, "turns": 2} for i in range(6)]
    data = _dataset(tmp_path / "d.jsonl", tasks)
    config = JobConfig(name="resume", group_size=2, concurrency=2)
    some_done = asyncio.Event()

    def hook(p: Progress) -> None:
        if p.done >= 3:
            some_done.set()

    task = asyncio.create_task(
        run_local(
            RunConfig(
                entrypoint=str(AGENTS / "good_agent.py"), dataset=data, job=config, out=tmp_path
            ),
            JobHooks(progress=hook),
        )
    )
    await asyncio.wait_for(some_done.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    run_dir = tmp_path / "resume"
    with RunStore.open(run_dir, readonly=True) as store:
        before = len(store.list_trajectories(states=["REWARDED"]))
        (job,) = store.list_jobs()
        assert job.status == "interrupted"
    assert 3 <= before < 12
    result = await run_local(RunConfig(resume=run_dir))
    assert result.status == "completed"
    assert (result.total, result.succeeded) == (12, 12)
    with RunStore.open(run_dir, readonly=True) as store:
        slots = _slots(store, result.job_arn)
        assert len(slots) == 12
        for rows in slots.values():
            assert [r.state for r in rows].count("REWARDED") == 1
        assert not store.list_trajectories(states=["OPEN", "READY"])
        assert len(store.list_jobs()) == 1


async def test_rollout_app_agent(tmp_path: Path) -> None:
    """The foundation's RolloutApp example (Strands + agent_kit runtime) runs under the driver."""
    data = _dataset(tmp_path / "d.jsonl", [{"target": 3}, {"target": 5}])
    config = JobConfig(name="counter", group_size=2, concurrency=4, rollout_timeout=60)
    result = await run_local(
        RunConfig(entrypoint=str(EXAMPLE), dataset=data, job=config, out=tmp_path)
    )
    assert result.status == "completed", result.failure
    with RunStore.open(result.run_dir, readonly=True) as store:
        rows = store.list_trajectories(job_arn=result.job_arn)
        assert [r.state for r in rows] == ["REWARDED"] * 4
        assert all(store.count_turns(r.id) >= 1 for r in rows)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"group_size": 1}, "--group-size must be 2..32"),
        ({"group_size": 33}, "--group-size must be 2..32"),
        ({"steps": 0}, "--steps must be"),
        ({"concurrency": 0}, "--concurrency must be 1..1024"),
        ({"concurrency": 100_000}, "--concurrency must be 1..1024, got 100000"),
        ({"rollout_timeout": 0}, "--rollout-timeout must be"),
        ({"rollout_timeout": 90_000}, "--rollout-timeout must be > 0 and ≤ 86400"),
        ({"max_retries": 11}, "--max-retries must be 0..10"),
        ({"temperature": 3.0}, "--temperature must be 0..2"),
        ({"batch_size": 0}, "--batch-size must be"),
        ({"name": "bad_name!"}, "job name 'bad_name!' is not valid"),
    ],
)
def test_config_validation(changes: dict[str, Any], message: str) -> None:
    """Out-of-range job settings are UsageErrors that name the flag as the user types it."""
    with pytest.raises(UsageError, match=message):
        JobConfig(**changes).validated(4)


def test_default_batch_is_all_prompts_capped() -> None:
    """The default batch is every prompt, at most the service's 128."""
    assert JobConfig().validated(10).batch_size == 10
    assert JobConfig().validated(1000).batch_size == 128


def test_default_job_name_uses_the_directory_for_generic_file_names() -> None:
    """examples/wordle/agent.py runs as wordle-…; a specific file name is kept."""
    from agent_kit.driver.config import default_job_name

    assert default_job_name("examples/wordle/agent.py").startswith("wordle-")
    assert default_job_name("tests/example_counter.py").startswith("example-counter-")
    assert default_job_name("http://127.0.0.1:8080").startswith("agent-")


async def test_several_agent_workers_share_a_job(tmp_path: Path) -> None:
    """--workers 2 starts two agent processes; both serve rollouts and every slot is REWARDED."""
    tasks = [{"id": i, "turns": 2, "reward": 0.5} for i in range(6)]
    data = _dataset(tmp_path / "w.jsonl", tasks)
    config = JobConfig(name="workers", group_size=2, concurrency=6, rollout_timeout=60)
    result = await run_local(
        RunConfig(
            entrypoint=str(AGENTS / "good_agent.py"),
            dataset=data,
            job=config,
            out=tmp_path,
            workers=2,
        )
    )
    assert result.status == "completed", result.failure
    with RunStore.open(result.run_dir, readonly=True) as store:
        rows = store.list_trajectories(job_arn=result.job_arn)
        assert len(rows) == 12
        assert {r.state for r in rows} == {"REWARDED"}
    logs = sorted((result.run_dir / "logs").glob("agent-*.log"))
    assert [p.name for p in logs] == ["agent-0.log", "agent-1.log"]
    served = [
        p.read_text(encoding="utf-8", errors="replace").count("Invocation completed") for p in logs
    ]
    assert all(n > 0 for n in served), served


@pytest.mark.parametrize(
    ("agent", "policy", "message"),
    [
        ("good_agent.py", "nope:x", "unknown policy spec"),
        ("broken_import_agent.py", "random", "exited with code 2"),
        ("no_app_agent.py", "random", "exited with code 2"),
    ],
)
async def test_a_run_that_fails_before_it_starts_leaves_no_directory(
    tmp_path: Path, agent: str, policy: str, message: str
) -> None:
    """A bad policy spec or an agent that cannot start raises, and no run directory remains."""
    data = _dataset(tmp_path / "d.jsonl", [{"id": 0}])
    config = JobConfig(name="prestart", group_size=2, policy=policy)
    with pytest.raises(AgentKitError, match=message):
        await run_local(
            RunConfig(
                entrypoint=str(AGENTS / agent), dataset=data, job=config, out=tmp_path / "runs"
            )
        )
    assert not (tmp_path / "runs" / "prestart").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"workers": 0}, "--workers must be 1..64, got 0"),
        ({"workers": 1000}, "--workers must be 1..64, got 1000"),
        ({"rate": 0.0}, "--rate must be > 0"),
        ({"rate": 1e6}, "--rate must be > 0 and ≤ 1000"),
    ],
)
def test_invoker_bounds_name_the_flag(options: dict[str, Any], message: str) -> None:
    """--workers and --rate have upper bounds, and a bad value names the flag."""
    with pytest.raises(UsageError, match=message):
        make_invoker(str(AGENTS / "good_agent.py"), **options)


@pytest.mark.parametrize("grace", [30.0, 0.0])
async def test_graceful_stop_then_resume_finishes_every_slot_once(
    tmp_path: Path, grace: float
) -> None:
    """A stop request ends the job 'interrupted' (in-flight ones finish within the grace, or are
    cut as interrupted); --resume then plays every remaining slot exactly once."""
    tasks = [{"id": i, "turns": 2} for i in range(8)]
    data = _dataset(tmp_path / "d.jsonl", tasks)
    config = JobConfig(name="stop", group_size=2, concurrency=2)
    stop = asyncio.Event()

    def hook(p: Progress) -> None:
        if p.done >= 2:
            stop.set()

    agent = str(AGENTS / "good_agent.py")
    result = await run_local(
        RunConfig(entrypoint=agent, dataset=data, job=config, out=tmp_path, grace=grace),
        JobHooks(progress=hook, stop=stop),
    )
    assert result.status == "interrupted"
    assert 2 <= result.succeeded < 16
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    with RunStore.open(result.run_dir, readonly=True) as store:
        assert not store.list_trajectories(states=["OPEN", "READY"])
        cut = store.list_trajectories(states=["TIMED_OUT"])
        assert all(t.reason == "job stopped: interrupted" for t in cut)
        assert store.list_events(kind="job_interrupt")
        (job,) = store.list_jobs()
        assert job.status == "interrupted"
    if grace > 0:
        assert cut == []  # a generous grace lets every in-flight rollout finish
    resumed = await run_local(RunConfig(resume=result.run_dir))
    assert resumed.status == "completed"
    assert (resumed.total, resumed.succeeded) == (16, 16)
    with RunStore.open(result.run_dir, readonly=True) as store:
        for rows in _slots(store, resumed.job_arn).values():
            assert [r.state for r in rows].count("REWARDED") == 1
    assert (
        resumed.written_summary().document()["run"]["retries"] == 0
    )  # interrupted attempts are free retries


def test_default_workers_follow_the_cores_and_the_concurrency(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without --workers a job starts one agent process per usable core, at most concurrency."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert default_workers(32) == 4
    assert default_workers(2) == 2
    assert default_workers(1) == 1


async def test_workers_default_is_recorded_with_the_job(tmp_path: Path) -> None:
    """A run started without workers records (and starts) the default number of processes."""
    data = _dataset(tmp_path / "d.jsonl", [{"id": 0}])
    config = JobConfig(name="dflt", group_size=2, concurrency=2)
    result = await run_local(
        RunConfig(entrypoint=str(AGENTS / "good_agent.py"), dataset=data, job=config, out=tmp_path)
    )
    with RunStore.open(result.run_dir, readonly=True) as store:
        (job,) = store.list_jobs()
        starts = store.list_events(kind="agent_start")
    assert job.config["workers"] == default_workers(2)
    assert len(starts) == default_workers(2)


async def test_agents_stop_beside_the_writes_and_are_gone_when_the_job_returns(
    tmp_path: Path,
) -> None:
    """The agents' shutdown overlaps the writing of summary.json and report.html, but run_job
    returns only once every agent process has exited, with both files written."""
    data = _dataset(tmp_path / "d.jsonl", [{"id": i} for i in range(3)])
    config = JobConfig(name="closing", group_size=2, concurrency=2)
    result = await run_local(
        RunConfig(
            entrypoint=str(AGENTS / "good_agent.py"),
            dataset=data,
            job=config,
            out=tmp_path,
            workers=2,
        )
    )
    with RunStore.open(result.run_dir, readonly=True) as store:
        pids = [int(e.detail["pid"]) for e in store.list_events(kind="agent_start")]
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # exited and reaped
    assert (result.run_dir / "summary.json").is_file()
    assert (result.run_dir / "report.html").is_file()
    assert result.written_summary().counts.rewarded == 6


def test_the_rollout_payload_is_the_contract_body_byte_for_byte() -> None:
    """The driver's payload (the one builder, RolloutPayload.for_rollout) is the §2 body with
    camelCase names in the documented order."""
    from agent_kit.contract import RolloutPayload

    arn = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/p"
    config = JobConfig(name="p", temperature=0.5, top_p=1, max_tokens=9, region="eu-west-1")
    expected = {
        "prompt": '{"q": 1}',
        "metadata": {
            "jobArn": arn,
            "rolloutId": "p-s0-p0-g0-a0",
            "endpoint": "http://127.0.0.1:9/tok",
            "region": "eu-west-1",
        },
        "inferenceParams": {"temperature": 0.5, "topP": 1, "maxTokens": 9},
    }
    payload = RolloutPayload.for_rollout(
        '{"q": 1}',
        job_arn=arn,
        trajectory_id="p-s0-p0-g0-a0",
        endpoint="http://127.0.0.1:9/tok",
        region=config.region,
        inference_params=config.inference,
    ).wire()
    assert json.dumps(payload) == json.dumps(expected)


async def test_agent_signing_with_other_keys_is_refused_unless_lenient(tmp_path: Path) -> None:
    """The run hands its agents per-run AWS keys and verifies signatures: an agent signing with
    keys of its own gets 403 on its first policy call (no turn recorded, nothing rewarded), and
    the same agent plays through with lenient_auth."""
    data = _dataset(tmp_path / "d.jsonl", [{"turns": 1}])
    # report_grace 1: a refused agent never reports, so the grace is only waited out (30 s by
    # default); nothing that is asserted depends on it.
    strict = JobConfig(
        name="strict", group_size=2, concurrency=2, max_retries=1, fail_fast=False, report_grace=1
    )
    agent = str(AGENTS / "stray_keys_agent.py")
    refused = await run_local(RunConfig(entrypoint=agent, dataset=data, job=strict, out=tmp_path))
    assert refused.succeeded == 0
    with RunStore.open(refused.run_dir, readonly=True) as store:
        rows = store.list_trajectories(job_arn=refused.job_arn)
        assert rows
        assert all(store.count_turns(r.id) == 0 for r in rows)
        assert all(store.get_reward(r.id) is None for r in rows)
    lenient = JobConfig(name="lenient", group_size=2, concurrency=2)
    ok = await run_local(
        RunConfig(entrypoint=agent, dataset=data, job=lenient, out=tmp_path, lenient_auth=True)
    )
    assert (ok.status, ok.succeeded) == ("completed", 2)
