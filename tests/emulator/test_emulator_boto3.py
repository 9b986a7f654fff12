"""A raw boto3 ``sagemakerjobruntime`` client against the emulator on a real loopback socket.

Drives every cell of docs/contract.md §4's table (turn / CompleteRollout / UpdateReward × OPEN,
READY, FAILED, TIMED_OUT, REWARDED, unknown id) and checks the exception class botocore raises,
or the ``{}`` result, plus the job-level errors (unknown job, other account, bad ARN, no auth).
"""

from __future__ import annotations

import datetime
import json
import math
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore import UNSIGNED
from conftest import RunningEmulator
from fakes.clients import runtime_client

from agent_kit.contract import CompleteRolloutBody, TrajectoryState
from agent_kit.emulator.sse import chunks_from_completion
from agent_kit.store import RunStore

BODY = json.dumps(
    {
        "model": "default",
        "messages": [{"role": "user", "content": "guess"}],
        "tools": [{"type": "function", "function": {"name": "guess", "parameters": {}}}],
    }
).encode()


@pytest.fixture
def sm(running_emulator: RunningEmulator) -> Iterator[Any]:
    """A boto3 sagemakerjobruntime client pointed at the emulator (retries off)."""
    client = runtime_client(running_emulator.url)
    yield client
    client.close()


def _into_state(run: RunningEmulator, sm: Any, state: str) -> str:
    """A trajectory id in ``state`` (with one recorded turn), or an unknown id."""
    if state == "unknown":
        return f"traj-{uuid.uuid4().hex}"
    tid = run.mint()["metadata"]["rolloutId"]
    sm.sample(JobArn=run.job_arn, TrajectoryId=tid, Body=BODY)
    if state in ("READY", "REWARDED"):
        sm.complete_rollout(JobArn=run.job_arn, TrajectoryId=tid, Status="ready")
    if state == "REWARDED":
        sm.update_reward(JobArn=run.job_arn, TrajectoryId=tid, Rewards=[1.0])
    if state == "FAILED":
        sm.complete_rollout(JobArn=run.job_arn, TrajectoryId=tid, Status="failed")
    if state == "TIMED_OUT":
        assert run.emulator.expire(tid, "rollout_timeout") is TrajectoryState.TIMED_OUT
    assert run.emulator.state(tid) in (None, TrajectoryState(state))
    return tid


TURN_ROWS = [
    ("OPEN", None),
    ("READY", "ValidationException"),
    ("FAILED", "ValidationException"),
    ("TIMED_OUT", "ValidationException"),
    ("REWARDED", "ValidationException"),
    ("unknown", "ResourceNotFoundException"),
]


@pytest.mark.parametrize(("state", "error"), TURN_ROWS)
@pytest.mark.parametrize("operation", ["sample", "sample_with_response_stream"])
def test_turn_row(
    running_emulator: RunningEmulator, sm: Any, state: str, error: str | None, operation: str
) -> None:
    """A turn is accepted only on OPEN; sealed states give 400, an unknown id 404."""
    tid = _into_state(running_emulator, sm, state)
    call: Callable[..., Any] = getattr(sm, operation)
    before = running_emulator.emulator.turn_count(tid)
    if error is None:
        out = call(JobArn=running_emulator.job_arn, TrajectoryId=tid, Body=BODY)
        data = out["Body"].read()
        assert data
        assert running_emulator.emulator.turn_count(tid) == before + 1
        return
    with pytest.raises(getattr(sm.exceptions, error)) as info:
        call(JobArn=running_emulator.job_arn, TrajectoryId=tid, Body=BODY)
    if state not in ("unknown", "OPEN"):
        assert "not in valid status" in info.value.response["Error"]["Message"]
    assert running_emulator.emulator.turn_count(tid) == before


COMPLETE_ROWS = [
    ("OPEN", "ready", None, "READY"),
    ("OPEN", "failed", None, "FAILED"),
    ("READY", "ready", None, "READY"),
    ("READY", "failed", "ConflictException", "READY"),
    ("FAILED", "failed", None, "FAILED"),
    ("FAILED", "ready", "ConflictException", "FAILED"),
    ("TIMED_OUT", "ready", "ConflictException", "TIMED_OUT"),
    ("TIMED_OUT", "failed", "ConflictException", "TIMED_OUT"),
    ("REWARDED", "ready", "ConflictException", "REWARDED"),
    ("REWARDED", "failed", "ConflictException", "REWARDED"),
    ("unknown", "ready", "ResourceNotFoundException", None),
]


@pytest.mark.parametrize(("state", "status", "error", "after"), COMPLETE_ROWS)
def test_complete_rollout_row(
    running_emulator: RunningEmulator,
    sm: Any,
    state: str,
    status: str,
    error: str | None,
    after: str | None,
) -> None:
    """CompleteRollout follows the §4 row: same status is idempotent, other transitions 409."""
    tid = _into_state(running_emulator, sm, state)
    if error is None:
        assert (
            _strip(
                sm.complete_rollout(
                    JobArn=running_emulator.job_arn, TrajectoryId=tid, Status=status
                )
            )
            == {}
        )
    else:
        with pytest.raises(getattr(sm.exceptions, error)) as info:
            sm.complete_rollout(JobArn=running_emulator.job_arn, TrajectoryId=tid, Status=status)
        if error == "ConflictException":
            assert "Cannot transition trajectory" in info.value.response["Error"]["Message"]
    state_now = running_emulator.emulator.state(tid)
    assert (state_now.value if state_now else None) == after


REWARD_ROWS = [
    ("OPEN", "ConflictException", "OPEN"),
    ("READY", None, "REWARDED"),
    ("FAILED", "ConflictException", "FAILED"),
    ("TIMED_OUT", "ConflictException", "TIMED_OUT"),
    ("REWARDED", "ConflictException", "REWARDED"),
    ("unknown", "ResourceNotFoundException", None),
]


@pytest.mark.parametrize(("state", "error", "after"), REWARD_ROWS)
def test_update_reward_row(
    running_emulator: RunningEmulator, sm: Any, state: str, error: str | None, after: str | None
) -> None:
    """UpdateReward is accepted only on READY; OPEN says 'not in valid status' (409)."""
    tid = _into_state(running_emulator, sm, state)
    if error is None:
        out = sm.update_reward(JobArn=running_emulator.job_arn, TrajectoryId=tid, Rewards=[0.5])
        assert _strip(out) == {}
        reward = running_emulator.run_store.get_reward(tid)
        assert reward is not None
        assert reward.rewards == [0.5]
    else:
        with pytest.raises(getattr(sm.exceptions, error)) as info:
            sm.update_reward(JobArn=running_emulator.job_arn, TrajectoryId=tid, Rewards=[0.5])
        if error == "ConflictException":
            assert "not in valid status" in info.value.response["Error"]["Message"]
    state_now = running_emulator.emulator.state(tid)
    assert (state_now.value if state_now else None) == after


def test_client_token_replays(running_emulator: RunningEmulator, sm: Any) -> None:
    """Same ClientToken + same body → cached {} even on REWARDED; a different body → 400."""
    run = running_emulator
    tid = _into_state(run, sm, "READY")
    token = str(uuid.uuid4())
    sm.update_reward(JobArn=run.job_arn, TrajectoryId=tid, Rewards=[0.25], ClientToken=token)
    again = sm.update_reward(
        JobArn=run.job_arn, TrajectoryId=tid, Rewards=[0.25], ClientToken=token
    )
    assert _strip(again) == {}
    with pytest.raises(sm.exceptions.ValidationException, match="different request"):
        sm.update_reward(JobArn=run.job_arn, TrajectoryId=tid, Rewards=[0.75], ClientToken=token)
    with pytest.raises(sm.exceptions.ConflictException):
        sm.update_reward(JobArn=run.job_arn, TrajectoryId=tid, Rewards=[0.25])
    reward = run.run_store.get_reward(tid)
    assert reward is not None
    assert reward.rewards == [0.25]
    assert reward.client_token == token
    ctoken = str(uuid.uuid4())
    tid2 = _into_state(run, sm, "OPEN")
    sm.complete_rollout(JobArn=run.job_arn, TrajectoryId=tid2, Status="ready", ClientToken=ctoken)
    sm.update_reward(JobArn=run.job_arn, TrajectoryId=tid2, Rewards=[1.0])
    replay = sm.complete_rollout(
        JobArn=run.job_arn, TrajectoryId=tid2, Status="ready", ClientToken=ctoken
    )
    assert _strip(replay) == {}


def test_reward_validation(running_emulator: RunningEmulator, sm: Any) -> None:
    """Rewards must be finite and hold 1 value or one per turn; the total is their sum."""
    run = running_emulator
    tid = _into_state(run, sm, "OPEN")
    sm.sample(JobArn=run.job_arn, TrajectoryId=tid, Body=BODY)
    sm.complete_rollout(JobArn=run.job_arn, TrajectoryId=tid)
    for bad in ([1.0, 2.0, 3.0], [math.nan], [math.inf]):
        with pytest.raises(sm.exceptions.ValidationException):
            sm.update_reward(JobArn=run.job_arn, TrajectoryId=tid, Rewards=bad)
    assert run.emulator.state(tid) is TrajectoryState.READY
    sm.update_reward(JobArn=run.job_arn, TrajectoryId=tid, Rewards=[0.5, 0.25])
    reward = run.run_store.get_reward(tid)
    assert reward is not None
    assert reward.total == pytest.approx(0.75)


def test_job_level_errors(running_emulator: RunningEmulator, sm: Any) -> None:
    """Unknown job → 400 'Could not find job'; another account → 403; malformed ARN → 400."""
    run = running_emulator
    tid = run.mint()["metadata"]["rolloutId"]
    unknown = run.job_arn.rsplit("/", 1)[0] + "/no-such-job"
    with pytest.raises(sm.exceptions.ValidationException, match="Could not find job"):
        sm.sample(JobArn=unknown, TrajectoryId=tid, Body=BODY)
    other = run.job_arn.replace("123456789012", "210987654321")
    with pytest.raises(sm.exceptions.AccessDeniedException):
        sm.complete_rollout(JobArn=other, TrajectoryId=tid)
    with pytest.raises(sm.exceptions.ValidationException, match="Invalid JobArn"):
        sm.update_reward(JobArn="arn:bad", TrajectoryId=tid, Rewards=[1.0])
    assert run.emulator.state(tid) is TrajectoryState.OPEN


def test_unsigned_request_is_access_denied(running_emulator: RunningEmulator) -> None:
    """A request without Authorization gets 403 AccessDeniedException."""
    client = runtime_client(running_emulator.url, signature_version=UNSIGNED)
    tid = running_emulator.mint()["metadata"]["rolloutId"]
    with pytest.raises(client.exceptions.AccessDeniedException):
        client.sample(JobArn=running_emulator.job_arn, TrajectoryId=tid, Body=BODY)
    assert running_emulator.emulator.turn_count(tid) == 0


def test_policy_failure_is_internal_service_error(
    running_emulator: RunningEmulator, sm: Any, emulator_policy: Any
) -> None:
    """A policy backend that raises gives 500 InternalServiceError and a recorded event, no turn."""
    emulator_policy.fail_with = RuntimeError("model fell over")
    tid = running_emulator.mint()["metadata"]["rolloutId"]
    with pytest.raises(sm.exceptions.InternalServiceError, match="model fell over"):
        sm.sample(JobArn=running_emulator.job_arn, TrajectoryId=tid, Body=BODY)
    events = running_emulator.run_store.list_events(tid, kind="policy_error")
    assert len(events) == 1
    assert events[0].detail["error"] == "RuntimeError"
    assert running_emulator.emulator.turn_count(tid) == 0


def test_sample_with_response_stream_yields_the_emulator_chunks(
    running_emulator: RunningEmulator, sm: Any
) -> None:
    """boto3's streaming body yields the SSE chunks of the recorded completion, then [DONE]."""
    run = running_emulator
    tid = run.mint()["metadata"]["rolloutId"]
    body = json.loads(BODY)
    body |= {"stream": True, "stream_options": {"include_usage": True}}
    out = sm.sample_with_response_stream(
        JobArn=run.job_arn, TrajectoryId=tid, Body=json.dumps(body).encode()
    )
    assert out["ContentType"].startswith("text/event-stream")
    lines = [line for line in out["Body"].iter_lines() if line]
    assert lines[-1] == b"data: [DONE]"
    chunks = [json.loads(line[len(b"data: ") :]) for line in lines[:-1]]
    (turn,) = run.run_store.list_turns(tid)
    assert turn.stream
    assert turn.route == "/sample-with-response-stream"
    assert chunks == chunks_from_completion(turn.response, include_usage=True)
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 3
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    call = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
    assert call["function"]["name"] == "guess"


def test_sample_records_request_without_secrets(running_emulator: RunningEmulator, sm: Any) -> None:
    """The store holds the exact request body and response, and no Authorization material."""
    run = running_emulator
    tid = run.mint()["metadata"]["rolloutId"]
    out = sm.sample(JobArn=run.job_arn, TrajectoryId=tid, Body=BODY)
    response = json.loads(out["Body"].read())
    (turn,) = run.run_store.list_turns(tid)
    assert turn.request == json.loads(BODY)
    assert turn.response == response
    raw = b"".join(p.read_bytes() for p in Path(run.run_store.path).parent.glob("run.sqlite*"))
    assert b"guess" in raw  # the body is there...
    assert b"AWS4-HMAC-SHA256" not in raw
    assert b"AKIDEXAMPLE" not in raw


def _strip(out: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in out.items() if k != "ResponseMetadata"}


def test_verify_mode_checks_real_sigv4(emulator: Any, run_store: RunStore) -> None:
    """With the run's credentials, a boto3 client signing with them works end to end and one
    signing with a wrong secret key is refused with AccessDeniedException naming the lenient way."""
    from conftest import serve_app

    from agent_kit.emulator.server import create_app

    app = create_app(emulator, credentials={"AKIDEXAMPLE": "secret"})
    with serve_app(app) as url:
        good = runtime_client(url)
        bad = runtime_client(url, secret="forged")
        arn = emulator.default_job_arn
        tid = emulator.open_trajectory(arn, "{}").id
        with pytest.raises(bad.exceptions.AccessDeniedException, match="lenient"):
            bad.sample(JobArn=arn, TrajectoryId=tid, Body=BODY)
        good.sample(JobArn=arn, TrajectoryId=tid, Body=BODY)
        good.complete_rollout(JobArn=arn, TrajectoryId=tid, Status="ready")
        with pytest.raises(bad.exceptions.AccessDeniedException):
            bad.update_reward(JobArn=arn, TrajectoryId=tid, Rewards=[99.0])
        good.update_reward(JobArn=arn, TrajectoryId=tid, Rewards=[1.0])
        assert run_store.get_reward(tid).rewards == [1.0]
        assert emulator.turn_count(tid) == 1


def test_rollout_token_acts_on_its_own_trajectory_only(emulator: Any, run_store: RunStore) -> None:
    """A rollout token minted for trajectory A is 403 AccessDeniedException on trajectory B's
    chat completions, CompleteRollout and UpdateReward (B untouched, no 99.0 stored), a forged
    or altered token is 403, and A's token works on A."""
    import httpx
    from conftest import serve_app

    from agent_kit.emulator.run_keys import RunKeys
    from agent_kit.emulator.server import create_app

    keys = RunKeys.generate()
    with serve_app(create_app(emulator, keys=keys)) as url:

        def mint() -> dict[str, Any]:
            r = httpx.post(url + "/_emulator/rollouts", json={"prompt": "{}"})
            assert r.status_code == 200, r.text
            return dict(r.json()["metadata"])

        a, b = mint(), mint()
        assert a["apiKey"] != b["apiKey"]

        def call(route: str, token: str, tid: str, body: dict[str, Any]) -> httpx.Response:
            headers = {
                "authorization": f"Bearer {token}",
                "x-amzn-sagemaker-job-arn": a["jobArn"],
                "x-amzn-sagemaker-trajectory-id": tid,
            }
            return httpx.post(url + route, json=body, headers=headers)

        chat = {"messages": [{"role": "user", "content": "hi"}]}
        forged = a["apiKey"][:-4] + ("AAAA" if not a["apiKey"].endswith("AAAA") else "BBBB")
        other_run = RunKeys.generate().mint(a["jobArn"], b["rolloutId"])
        for token in (forged, other_run, "agent-kit-rollout-garbage"):
            r = call("/v1/chat/completions", token, b["rolloutId"], chat)
            assert r.status_code == 403, r.text
            assert r.headers["x-amzn-errortype"] == "AccessDeniedException"
        tid_b = b["rolloutId"]
        cross = [
            ("/v1/chat/completions", chat),
            ("/complete-rollout", {"TrajectoryId": tid_b, "Status": "ready"}),
            ("/update-reward", {"TrajectoryId": tid_b, "Rewards": [99.0]}),
        ]
        for route, body in cross:
            r = call(route, a["apiKey"], tid_b, body)
            assert r.status_code == 403, (route, r.text)
            assert r.headers["x-amzn-errortype"] == "AccessDeniedException"
            assert "may not act on" in r.text
        # A's token with A's header, but B in the body: refused too.
        r = call("/update-reward", a["apiKey"], a["rolloutId"], cross[2][1])
        assert r.status_code == 403, r.text
        assert emulator.turn_count(tid_b) == 0
        assert run_store.get_reward(tid_b) is None
        assert emulator.state(tid_b) is TrajectoryState.OPEN
        tid_a = a["rolloutId"]
        assert call("/v1/chat/completions", a["apiKey"], tid_a, chat).status_code == 200
        done = call("/complete-rollout", a["apiKey"], tid_a, {"TrajectoryId": tid_a})
        assert done.status_code == 200, done.text
        reward = {"TrajectoryId": tid_a, "Rewards": [1.0]}
        assert call("/update-reward", a["apiKey"], tid_a, reward).status_code == 200
        assert run_store.get_reward(tid_a).rewards == [1.0]


@pytest.fixture
def verifying(emulator: Any) -> Iterator[str]:
    """The emulator served on loopback verifying SigV4 against AKIDEXAMPLE's secret."""
    from conftest import serve_app

    from agent_kit.emulator.server import create_app

    with serve_app(create_app(emulator, credentials={"AKIDEXAMPLE": "secret"})) as url:
        yield url


def _signed_at(
    url: str, emulator: Any, at: datetime.datetime, monkeypatch: Any, service: str = "sagemaker"
) -> Any:
    """POST one Sample signed by botocore's SigV4Auth (for ``service``) as if its clock read
    ``at``; the response (httpx) and the trajectory id."""
    import botocore.auth
    import httpx
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    tid = emulator.open_trajectory(emulator.default_job_arn, "{}").id
    request = AWSRequest(
        method="POST",
        url=url + "/sample",
        data=BODY,
        headers={
            "X-Amzn-SageMaker-Job-Arn": emulator.default_job_arn,
            "X-Amzn-SageMaker-Trajectory-Id": tid,
        },
    )
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: at)
    botocore.auth.SigV4Auth(Credentials("AKIDEXAMPLE", "secret"), service, "us-west-2").add_auth(
        request
    )
    monkeypatch.undo()
    return httpx.post(request.url, headers=dict(request.headers), content=BODY), tid


@pytest.mark.parametrize(
    "skew",
    [
        datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc),
        datetime.timedelta(days=3),
        datetime.timedelta(minutes=6),
        datetime.timedelta(minutes=-6),
    ],
)
def test_verify_refuses_a_request_dated_outside_five_minutes(
    emulator: Any, verifying: str, monkeypatch: pytest.MonkeyPatch, skew: Any
) -> None:
    """A request signed (botocore's SigV4Auth) with an X-Amz-Date in 2020, 3 days ahead or 6
    minutes either way is 403 AccessDeniedException naming X-Amz-Date (AWS: within five
    minutes); no turn is recorded."""
    now = datetime.datetime.now(datetime.timezone.utc)
    at = skew if isinstance(skew, datetime.datetime) else now + skew
    response, tid = _signed_at(verifying, emulator, at, monkeypatch)
    assert response.status_code == 403, response.text
    assert response.headers["x-amzn-ErrorType"] == "AccessDeniedException"
    assert "X-Amz-Date" in response.json()["Message"]
    assert emulator.turn_count(tid) == 0


def test_verify_accepts_a_request_dated_within_five_minutes(
    emulator: Any, verifying: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clock 4 minutes off either way is within AWS's window: the turns are recorded."""
    for minutes in (4, -4):
        at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=minutes)
        response, tid = _signed_at(verifying, emulator, at, monkeypatch)
        assert response.status_code == 200, response.text
        assert emulator.turn_count(tid) == 1


def test_verify_refuses_a_scope_of_another_region(emulator: Any, verifying: str) -> None:
    """A request signed for eu-west-1 (a correct signature, another region's scope) is 403
    naming the emulator's region."""
    client = runtime_client(verifying, region="eu-west-1")
    tid = emulator.open_trajectory(emulator.default_job_arn, "{}").id
    with pytest.raises(client.exceptions.AccessDeniedException, match="us-west-2"):
        client.sample(JobArn=emulator.default_job_arn, TrajectoryId=tid, Body=BODY)
    assert emulator.turn_count(tid) == 0


def test_verify_refuses_a_scope_of_another_service(
    emulator: Any, verifying: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request signed (botocore's SigV4Auth) for ``s3`` — a correct signature, another
    service's scope — is 403 in AWS's words ("Credential should be scoped to correct service:
    'sagemaker'", IAM's SigV4 troubleshooting page); no turn is recorded."""
    now = datetime.datetime.now(datetime.timezone.utc)
    for service in ("s3", "bedrock-agentcore"):
        response, tid = _signed_at(verifying, emulator, now, monkeypatch, service=service)
        assert response.status_code == 403, response.text
        assert response.headers["x-amzn-ErrorType"] == "AccessDeniedException"
        message = response.json()["Message"]
        assert "Credential should be scoped to correct service: 'sagemaker'" in message
        assert emulator.turn_count(tid) == 0


def test_verify_refuses_a_bearer_token_presigned_for_another_service(
    emulator: Any, verifying: str
) -> None:
    """A ``sagemaker-api-key-…`` token whose presigned URL is scoped to ``s3`` (botocore's
    SigV4QueryAuth, the right key and region) is 403 naming the service; ``sagemaker``'s is
    accepted."""
    import httpx
    from botocore.credentials import Credentials

    from agent_kit.emulator.loader import load_module

    # the test agents' token (tests/agents/_tokens.py), as the SDK signs it
    presigned_token = load_module(
        Path(__file__).parents[1] / "agents" / "_tokens.py"
    ).presigned_token
    keys = Credentials("AKIDEXAMPLE", "secret")
    for service, status in (("s3", 403), ("sagemaker", 200)):
        tid = emulator.open_trajectory(emulator.default_job_arn, "{}").id
        token = presigned_token(keys, "us-west-2", service=service, expires=600)
        headers = {
            "Authorization": f"Bearer {token}",
            "X-Amzn-SageMaker-Job-Arn": emulator.default_job_arn,
            "X-Amzn-SageMaker-Trajectory-Id": tid,
        }
        r = httpx.post(verifying + "/sample", headers=headers, content=BODY)
        assert r.status_code == status, r.text
        if status == 403:
            assert "scoped to correct service: 'sagemaker'" in r.json()["Message"]


def test_verify_refuses_the_scope_date_disagreeing_with_x_amz_date(
    emulator: Any, verifying: str
) -> None:
    """A credential scope dated another day than X-Amz-Date is 403."""
    import httpx

    captured = _captured_sample(verifying, emulator)
    auth = captured["headers"]["Authorization"]
    day = auth.split("/")[1]
    headers = captured["headers"] | {"Authorization": auth.replace(day, "20200101", 1)}
    r = httpx.post(captured["url"], headers=headers, content=captured["body"])
    assert r.status_code == 403
    assert r.headers["x-amzn-ErrorType"] == "AccessDeniedException"
    assert "disagree" in r.json()["Message"]


def _captured_sample(url: str, emulator: Any) -> dict[str, Any]:
    """One Sample request as botocore signed and sent it (sent once, accepted)."""
    captured: dict[str, Any] = {}

    def keep(request: Any, **_: Any) -> None:
        headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        captured.update(url=request.url, headers=headers, body=request.body)

    client = runtime_client(url)
    client.meta.events.register("before-send", keep)
    tid = emulator.open_trajectory(emulator.default_job_arn, "{}").id
    client.sample(JobArn=emulator.default_job_arn, TrajectoryId=tid, Body=BODY)
    captured["tid"] = tid
    return captured


def test_verify_lets_a_refused_request_be_sent_again(emulator: Any, verifying: str) -> None:
    """A signed request answered with an error (UpdateReward before CompleteRollout: 409) and
    sent again with the very same signature (botocore's retry within one second) is answered
    by the state it finds: 200 once the rollout is complete."""
    import httpx

    captured: dict[str, Any] = {}

    def keep(request: Any, **_: Any) -> None:
        headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        captured.update(url=request.url, headers=headers, body=request.body)

    client = runtime_client(verifying)
    client.meta.events.register("before-send", keep)
    arn = emulator.default_job_arn
    tid = emulator.open_trajectory(arn, "{}").id
    client.sample(JobArn=arn, TrajectoryId=tid, Body=BODY)
    with pytest.raises(client.exceptions.ConflictException):
        client.update_reward(JobArn=arn, TrajectoryId=tid, Rewards=[1.0])
    emulator.complete_rollout(arn, CompleteRolloutBody(trajectory_id=tid))
    again = httpx.post(captured["url"], headers=captured["headers"], content=captured["body"])
    assert again.status_code == 200, again.text
    assert emulator.state(tid) is TrajectoryState.REWARDED
