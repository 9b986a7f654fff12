"""RolloutReporter and the shared Job Runtime client (agent_kit.runtime_client).

The reporter talks to :class:`fakes.job_runtime.FakeJobRuntime` over real loopback sockets with
a real boto3 ``sagemakerjobruntime`` client and dummy credentials; the fake plays the
docs/contract.md
§4 state machine, so conflicts and ClientToken replays behave like the service's.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from fakes.job_runtime import FakeJobRuntime

from agent_kit.runtime_client import (
    ReportResult,
    RolloutReporter,
    _already_done,
    job_runtime_client,
    shared_session,
)

JOB_ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/my-job"
COMPLETE = "/complete-rollout"
REWARD = "/update-reward"


pytestmark = pytest.mark.usefixtures("offline_aws")


@pytest.fixture
def fake() -> Iterator[FakeJobRuntime]:
    """A running fake Job Runtime."""
    with FakeJobRuntime() as server:
        yield server


class Sleeps(list[float]):
    """Records backoff delays instead of sleeping."""

    def __call__(self, delay: float) -> None:
        self.append(delay)


def reporter(url: str, tid: str = "traj-1", **kwargs: Any) -> RolloutReporter:
    """A reporter against the fake with recorded (not slept) backoff."""
    kwargs.setdefault("sleep", Sleeps())
    return RolloutReporter(JOB_ARN, tid, url, "us-west-2", **kwargs)


def test_report_completes_then_rewards_with_client_tokens(fake: FakeJobRuntime) -> None:
    """CompleteRollout(ready) precedes UpdateReward; both carry the job ARN and a ClientToken."""
    rep = reporter(fake.url)
    result = rep.report([0.75])
    assert result == ReportResult(True, None, 2, True, True)
    assert [r.path for r in fake.requests] == [COMPLETE, REWARD]
    complete, reward = (r.json() for r in fake.requests)
    assert complete == {
        "TrajectoryId": "traj-1",
        "Status": "ready",
        "ClientToken": rep.client_token("CompleteRollout"),
    }
    assert reward == {
        "TrajectoryId": "traj-1",
        "Rewards": [0.75],
        "ClientToken": rep.client_token("UpdateReward"),
    }
    assert all(r.header("X-Amzn-SageMaker-Job-Arn") == JOB_ARN for r in fake.requests)
    assert all(r.header("Authorization").startswith("AWS4-HMAC-SHA256") for r in fake.requests)
    assert fake.states["traj-1"] == "REWARDED"
    assert fake.rewards["traj-1"] == [0.75]


def test_client_tokens_are_stable_per_trajectory_and_operation() -> None:
    """Tokens are the same for every reporter of a trajectory and differ across operations."""
    a, b = reporter("http://x"), reporter("http://x")
    other = reporter("http://x", tid="traj-2")
    assert a.client_token("UpdateReward") == b.client_token("UpdateReward")
    assert a.client_token("CompleteRollout") != a.client_token("UpdateReward")
    assert a.client_token("CompleteRollout") != a.client_token("CompleteRollout", "failed")
    assert a.client_token("UpdateReward") != other.client_token("UpdateReward")


def test_throttles_and_5xx_are_retried_with_the_same_token(fake: FakeJobRuntime) -> None:
    """Two throttles and a 500 are retried with backoff; every retry resends the same token."""
    fake.throttle(COMPLETE, times=2)
    fake.fail(REWARD, 500)
    sleeps = Sleeps()
    result = reporter(fake.url, sleep=sleeps, base_delay=0.1).report([1.0])
    assert result.reported
    assert result.attempts == 5
    completes, rewards = fake.requests_to(COMPLETE), fake.requests_to(REWARD)
    assert len(completes) == 3
    assert len(rewards) == 2
    assert len({r.json()["ClientToken"] for r in completes}) == 1
    assert len({r.json()["ClientToken"] for r in rewards}) == 1
    assert len(sleeps) == 3
    assert 0.05 <= sleeps[0] <= 0.1
    assert 0.1 <= sleeps[1] <= 0.2
    assert fake.states["traj-1"] == "REWARDED"


def test_dropped_connection_is_retried(fake: FakeJobRuntime) -> None:
    """A connection closed without an answer is retried and the report succeeds."""
    fake.drop(REWARD)
    result = reporter(fake.url).report([0.5])
    assert result.reported
    assert len(fake.requests_to(REWARD)) == 2


def test_gives_up_after_max_attempts_and_logs(
    fake: FakeJobRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    """Persistent 500s end after max_attempts: reported False, reason returned and logged."""
    fake.fail(COMPLETE, 500, times=10)
    with caplog.at_level(logging.WARNING, logger="agent_kit.runtime_client"):
        result = reporter(fake.url, max_attempts=3).report([1.0])
    assert not result.reported
    assert not result.complete_ok
    assert not result.reward_ok
    assert result.attempts == 3
    assert result.error is not None
    assert "InternalServiceError" in result.error
    assert "gave up after 3 attempts" in result.error
    assert fake.requests_to(REWARD) == []
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "traj-1" in errors[0].getMessage()
    assert "dummy-secret" not in caplog.text


def test_botocore_retries_are_off_so_attempts_are_exact(fake: FakeJobRuntime) -> None:
    """With max_attempts=1 exactly one HTTP request is made (botocore does not retry on its own)."""
    fake.fail(COMPLETE, 500, times=5)
    result = reporter(fake.url, max_attempts=1).report([1.0])
    assert result.attempts == 1
    assert len(fake.requests) == 1


def test_validation_errors_are_not_retried(fake: FakeJobRuntime) -> None:
    """A 400 ValidationException fails at once with its message."""
    fake.fail(REWARD, 400, "ValidationException", "Rewards must hold 1 value")
    result = reporter(fake.url).report([1.0, 2.0])
    assert not result.reported
    assert result.complete_ok
    assert result.attempts == 2
    assert result.error is not None
    assert "ValidationException" in result.error
    assert "Rewards must hold 1 value" in result.error


def test_already_rewarded_conflicts_count_as_success(fake: FakeJobRuntime) -> None:
    """On a REWARDED trajectory both 409s say the work is done, so the report succeeds."""
    fake.set_state("traj-1", "REWARDED")
    result = reporter(fake.url).report([1.0])
    assert result == ReportResult(True, None, 2, True, True)
    assert [r.path for r in fake.requests] == [COMPLETE, REWARD]


@pytest.mark.parametrize("state", ["TIMED_OUT", "FAILED"])
def test_conflicts_on_dead_trajectories_are_failures(fake: FakeJobRuntime, state: str) -> None:
    """A 409 naming FAILED or TIMED_OUT is not success: reported False, no UpdateReward."""
    fake.set_state("traj-1", state)
    result = reporter(fake.url).report([1.0])
    assert not result.reported
    assert result.attempts == 1
    assert result.error is not None
    assert f"Cannot transition trajectory traj-1 from {state}" in result.error
    assert fake.requests_to(REWARD) == []


def test_a_repeated_report_replays_idempotently(fake: FakeJobRuntime) -> None:
    """Reporting the same reward twice (another reporter, same trajectory) is a 200 replay."""
    assert reporter(fake.url).report([0.25]).reported
    again = reporter(fake.url).report([0.25])
    assert again == ReportResult(True, None, 2, True, True)
    assert fake.rewards["traj-1"] == [0.25]


def test_failed_status_sends_only_complete_rollout(fake: FakeJobRuntime) -> None:
    """status="failed" sends CompleteRollout(failed) and no UpdateReward."""
    result = reporter(fake.url).report([], status="failed")
    assert result == ReportResult(True, None, 1, True, False)
    (request,) = fake.requests
    assert request.path == COMPLETE
    assert request.json()["Status"] == "failed"
    assert fake.states["traj-1"] == "FAILED"


@pytest.mark.parametrize("rewards", [[], [math.nan], [1.0, math.inf]])
def test_invalid_rewards_are_refused_without_calls(fake: FakeJobRuntime, rewards: Any) -> None:
    """Empty or non-finite rewards return reported False and send nothing."""
    result = reporter(fake.url).report(rewards)
    assert not result.reported
    assert result.attempts == 0
    assert fake.requests == []


def test_unreachable_endpoint_never_raises() -> None:
    """A closed port: every attempt fails to connect, the result says so, nothing raises."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = reporter(f"http://127.0.0.1:{port}", max_attempts=2).report([1.0])
    assert not result.reported
    assert result.attempts == 2
    assert result.error is not None
    assert "cannot reach the Job Runtime" in result.error


def test_unexpected_client_errors_are_returned(fake: FakeJobRuntime) -> None:
    """Even a broken client object gives a ReportResult instead of an exception."""

    class Broken:
        def complete_rollout(self, **kwargs: Any) -> None:
            raise RuntimeError("boom")

    result = reporter(fake.url, client=Broken()).report([1.0])
    assert not result.reported
    assert result.error == "RuntimeError: boom"


async def test_areport_runs_in_a_thread(fake: FakeJobRuntime) -> None:
    """areport leaves the event loop free: a task releases the hung call while it is in flight."""
    fake.hang(COMPLETE)
    released = False

    async def release_when_hung() -> None:
        nonlocal released
        assert await asyncio.to_thread(fake.wait_for, COMPLETE)
        fake.release()
        released = True

    task = asyncio.create_task(release_when_hung())
    result = await reporter(fake.url).areport([1.0])
    assert released
    await task
    assert result.reported
    assert len(fake.requests_to(COMPLETE)) == 2


def test_shared_session_and_client_cache() -> None:
    """One botocore session per process; one cached client per setting, reused across threads."""
    sessions: list[Any] = []
    threads = [threading.Thread(target=lambda: sessions.append(shared_session())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(s) for s in sessions}) == 1
    a = job_runtime_client("us-west-2", "http://127.0.0.1:9", max_attempts=1)
    assert job_runtime_client("us-west-2", "http://127.0.0.1:9", max_attempts=1) is a
    assert job_runtime_client("us-west-2", "http://127.0.0.1:9") is not a
    assert a.meta.config.max_pool_connections == 128
    assert a.meta.config.retries["total_max_attempts"] == 1


def test_injected_client_is_used(fake: FakeJobRuntime) -> None:
    """A caller-supplied boto3 client is used as is (its own endpoint and retry config)."""
    client = boto3.client(
        "sagemakerjobruntime",
        region_name="us-west-2",
        endpoint_url=fake.url,
        config=Config(retries={"total_max_attempts": 1}),
    )
    result = RolloutReporter(JOB_ARN, "t-9", None, "us-west-2", client=client).report([2.0])
    assert result.reported
    assert fake.rewards["t-9"] == [2.0]


@pytest.mark.parametrize(
    ("operation", "status", "message", "done"),
    [
        ("CompleteRollout", "ready", "Cannot transition trajectory t from REWARDED to READY", True),
        ("CompleteRollout", "ready", "Cannot transition trajectory t from READY to FAILED", True),
        (
            "CompleteRollout",
            "ready",
            "Cannot transition trajectory t from TIMED_OUT to READY",
            False,
        ),
        ("CompleteRollout", "failed", "Cannot transition trajectory t from FAILED to READY", True),
        ("CompleteRollout", "failed", "Cannot transition trajectory t from READY to FAILED", False),
        (
            "UpdateReward",
            "ready",
            "Trajectory t is not in valid status for UpdateReward: REWARDED",
            True,
        ),
        (
            "UpdateReward",
            "ready",
            "Trajectory t is not in valid status for UpdateReward: OPEN",
            False,
        ),
        ("UpdateReward", "ready", "Trajectory t is not in valid status", False),
    ],
)
def test_conflict_messages_are_read_precisely(
    operation: Any, status: str, message: str, done: bool
) -> None:
    """Only a conflict naming a state where the work is done counts as already done."""
    assert _already_done(operation, status, message) is done


def _sdk_attempts(requests: list[Any]) -> list[tuple[int, int]]:
    """(attempt, max) of the ``amz-sdk-request`` header botocore puts on each attempt."""
    out = []
    for request in requests:
        fields = dict(p.strip().split("=", 1) for p in request.header("amz-sdk-request").split(";"))
        out.append((int(fields["attempt"]), int(fields["max"])))
    return out


def test_botocore_retries_the_500s_inside_one_call(
    fake: FakeJobRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    """Two 500s then 200 are three attempts of one botocore call (one invocation id, attempt=N)."""
    fake.fail(COMPLETE, 500, times=2)
    sleeps = Sleeps()
    with caplog.at_level(logging.WARNING, logger="agent_kit.runtime_client"):
        result = reporter(fake.url, sleep=sleeps).report([1.0])
    assert result == ReportResult(True, None, 4, True, True)
    completes = fake.requests_to(COMPLETE)
    assert _sdk_attempts(completes) == [(1, 5), (2, 5), (3, 5)]
    assert len({r.header("amz-sdk-invocation-id") for r in completes}) == 1
    assert len(sleeps) == 2
    retries = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(retries) == 2
    assert all("traj-1" in m and "InternalServiceError (HTTP 500)" in m for m in retries)


def test_botocore_retries_a_throttle_inside_one_call(fake: FakeJobRuntime) -> None:
    """A 429 ThrottlingException on UpdateReward is retried by botocore with the same invocation."""
    fake.throttle(REWARD)
    result = reporter(fake.url).report([0.5])
    assert result == ReportResult(True, None, 3, True, True)
    rewards = fake.requests_to(REWARD)
    assert _sdk_attempts(rewards) == [(1, 5), (2, 5)]
    assert len({r.header("amz-sdk-invocation-id") for r in rewards}) == 1
    assert len({r.json()["ClientToken"] for r in rewards}) == 1
    assert fake.rewards["traj-1"] == [0.5]


def test_persistent_500s_end_with_botocores_last_attempt(fake: FakeJobRuntime) -> None:
    """With max_attempts=3 botocore makes exactly three attempts of one call, then it fails."""
    fake.fail(COMPLETE, 500, times=10)
    result = reporter(fake.url, max_attempts=3).report([1.0])
    assert not result.reported
    completes = fake.requests_to(COMPLETE)
    assert _sdk_attempts(completes) == [(1, 3), (2, 3), (3, 3)]
    assert len({r.header("amz-sdk-invocation-id") for r in completes}) == 1


def test_injected_client_retries_with_its_own_botocore_config(fake: FakeJobRuntime) -> None:
    """An injected standard-mode client retries two 500s itself, and every request is counted."""
    client = boto3.client(
        "sagemakerjobruntime",
        region_name="us-west-2",
        endpoint_url=fake.url,
        config=Config(retries={"mode": "standard", "total_max_attempts": 3}),
    )
    fake.fail(COMPLETE, 500, times=2)
    result = RolloutReporter(JOB_ARN, "t-7", None, "us-west-2", client=client).report([1.0])
    assert result == ReportResult(True, None, 4, True, True)
    completes = fake.requests_to(COMPLETE)
    assert _sdk_attempts(completes) == [(1, 3), (2, 3), (3, 3)]
    assert fake.states["t-7"] == "REWARDED"
