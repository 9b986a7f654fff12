"""boto3's own client retrying against a verifying emulator, as AWS answers it.

AWS refuses no request for having been seen before: its protection is the time window (a
signed request must arrive within five minutes of its X-Amz-Date), and botocore signs two
identical calls made within one second to the very same signature. Each test here pins
botocore's signing clock to one instant, so the calls are identical to the byte (the tests
check the signatures are equal), and checks the emulator answers them as the service does:
a retried CompleteRollout / UpdateReward with its ClientToken succeeds again, a repeated
Sample gets the state's answer, never AccessDeniedException.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import json
import uuid
from collections.abc import Iterator
from typing import Any

import botocore.auth
import pytest
from fakes.clients import runtime_client

from agent_kit.contract import TrajectoryState
from agent_kit.emulator.core import Emulator
from agent_kit.store import RunStore

pytestmark = pytest.mark.e2e

BODY = json.dumps({"model": "default", "messages": [{"role": "user", "content": "guess"}]}).encode()


@pytest.fixture
def verifying(emulator: Emulator) -> Iterator[str]:
    """The emulator served on loopback verifying SigV4 against AKIDEXAMPLE's secret."""
    from conftest import serve_app

    from agent_kit.emulator.server import create_app

    with serve_app(create_app(emulator, credentials={"AKIDEXAMPLE": "secret"})) as url:
        yield url


@pytest.fixture
def one_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore signs every request of the test at one instant (now): same-second calls.
    Both signers' clocks are pinned: botocore's own and the CRT one it uses where awscrt is
    installed (as here)."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)

    def clock(remove_tzinfo: bool = True) -> datetime.datetime:
        return now.replace(tzinfo=None) if remove_tzinfo else now

    monkeypatch.setattr(botocore.auth, "get_current_datetime", clock)
    if importlib.util.find_spec("awscrt") is not None:
        monkeypatch.setattr(
            importlib.import_module("botocore.crt.auth"), "get_current_datetime", clock
        )


@pytest.fixture
def signatures() -> list[str]:
    """The Authorization header of every request the ``sm`` client sent, in order."""
    return []


@pytest.fixture
def sm(verifying: str, one_second: None, signatures: list[str]) -> Iterator[Any]:
    """A boto3 sagemakerjobruntime client signing with the emulator's keys (retries off)."""
    client = runtime_client(verifying)

    def keep(request: Any, **_: Any) -> None:
        value = request.headers["Authorization"]
        signatures.append(value.decode() if isinstance(value, bytes) else value)

    client.meta.events.register("before-send", keep)
    yield client
    client.close()


def _open(emulator: Emulator, sm: Any) -> tuple[str, str]:
    """The job ARN and a trajectory with one recorded turn."""
    arn = emulator.default_job_arn
    assert arn is not None
    tid = emulator.open_trajectory(arn, "{}").id
    sm.sample(JobArn=arn, TrajectoryId=tid, Body=BODY)["Body"].read()
    return arn, tid


def test_complete_rollout_retried_with_its_client_token_succeeds_twice(
    emulator: Emulator, sm: Any, signatures: list[str]
) -> None:
    """CompleteRollout sent twice with one ClientToken in one second: {} both times (the
    second carries the first's very signature); the trajectory is READY."""
    arn, tid = _open(emulator, sm)
    token = str(uuid.uuid4())
    for _ in range(2):
        out = sm.complete_rollout(JobArn=arn, TrajectoryId=tid, Status="ready", ClientToken=token)
        assert out["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert signatures[-1] == signatures[-2]
    assert emulator.state(tid) is TrajectoryState.READY


def test_update_reward_retried_with_its_client_token_succeeds_twice(
    emulator: Emulator, sm: Any, signatures: list[str], run_store: RunStore
) -> None:
    """UpdateReward sent twice with one ClientToken and body in one second: {} both times;
    the reward is stored once, as sent."""
    arn, tid = _open(emulator, sm)
    sm.complete_rollout(JobArn=arn, TrajectoryId=tid, Status="ready")
    token = str(uuid.uuid4())
    for _ in range(2):
        out = sm.update_reward(JobArn=arn, TrajectoryId=tid, Rewards=[0.5], ClientToken=token)
        assert out["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert signatures[-1] == signatures[-2]
    reward = run_store.get_reward(tid)
    assert reward is not None
    assert reward.rewards == [0.5]
    assert emulator.state(tid) is TrajectoryState.REWARDED


def test_same_token_other_body_and_other_token_same_body_answer_as_the_contract(
    emulator: Emulator, sm: Any
) -> None:
    """docs/contract.md: the same ClientToken with another body is 400 ValidationException;
    the same body with another token is a new call, answered by the state table (a repeated
    CompleteRollout of the current status 200, an UpdateReward on REWARDED 409)."""
    arn, tid = _open(emulator, sm)
    token = str(uuid.uuid4())
    sm.complete_rollout(JobArn=arn, TrajectoryId=tid, Status="ready", ClientToken=token)
    with pytest.raises(sm.exceptions.ValidationException, match="different request"):
        sm.complete_rollout(JobArn=arn, TrajectoryId=tid, Status="failed", ClientToken=token)
    again = sm.complete_rollout(JobArn=arn, TrajectoryId=tid, Status="ready", ClientToken="other")
    assert again["ResponseMetadata"]["HTTPStatusCode"] == 200
    sm.update_reward(JobArn=arn, TrajectoryId=tid, Rewards=[0.5], ClientToken="r1")
    with pytest.raises(sm.exceptions.ValidationException, match="different request"):
        sm.update_reward(JobArn=arn, TrajectoryId=tid, Rewards=[0.75], ClientToken="r1")
    with pytest.raises(sm.exceptions.ConflictException, match="not in valid status"):
        sm.update_reward(JobArn=arn, TrajectoryId=tid, Rewards=[0.5], ClientToken="r2")
    assert emulator.state(tid) is TrajectoryState.REWARDED


def test_an_identical_sample_in_one_second_gets_the_services_answer(
    emulator: Emulator, sm: Any, signatures: list[str]
) -> None:
    """The same Sample twice in one second on an OPEN trajectory: two turns recorded; on a
    completed one: ValidationException "not in valid status" both times — never
    AccessDeniedException for being a repeat."""
    arn = emulator.default_job_arn
    tid = emulator.open_trajectory(arn, "{}").id
    for _ in range(2):
        assert sm.sample(JobArn=arn, TrajectoryId=tid, Body=BODY)["Body"].read()
    assert signatures[-1] == signatures[-2]
    assert emulator.turn_count(tid) == 2
    sm.complete_rollout(JobArn=arn, TrajectoryId=tid, Status="ready")
    for _ in range(2):
        with pytest.raises(sm.exceptions.ValidationException, match="not in valid status"):
            sm.sample(JobArn=arn, TrajectoryId=tid, Body=BODY)
    assert signatures[-1] == signatures[-2]
    assert emulator.turn_count(tid) == 2
