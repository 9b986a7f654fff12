"""Service rules at the emulator's edge: the sealed-turn re-check, a session that names another
trajectory, and chat bodies the real endpoint would refuse (docs/contract.md §3–§4)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from conftest import CannedPolicy, CannedResult, RunningEmulator
from test_emulator_server import CHAT, SIGV4, Harness, _harness, assert_error

from agent_kit.contract import TrajectoryState
from agent_kit.emulator.core import Emulator
from agent_kit.emulator.schemas import PolicyRequest


class GatedPolicy(CannedPolicy):
    """A canned policy that, while ``gate`` is set up, signals ``entered`` and waits for
    ``release`` before answering (so a test can seal the trajectory mid-call)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(self, request: PolicyRequest) -> CannedResult:
        """Answer like CannedPolicy once released."""
        self.entered.set()
        await self.release.wait()
        return await super().complete(request)


@pytest.fixture
def emulator_policy() -> GatedPolicy:
    """The emulator of this module answers through a gate."""
    return GatedPolicy()


@pytest.fixture
async def h(emulator: Emulator) -> AsyncIterator[Harness]:
    """In-process harness (ASGI transport, default auth)."""
    async for harness in _harness(emulator):
        yield harness


async def _in_flight(h: Harness, policy: GatedPolicy, tid: str) -> asyncio.Task[httpx.Response]:
    """Start a chat turn and return once the policy is answering it."""
    task = asyncio.ensure_future(h.chat(tid))
    await asyncio.wait_for(policy.entered.wait(), 10)
    return task


@pytest.mark.parametrize("seal", ["expire", "complete", "fail"])
async def test_turn_sealed_while_the_policy_answers_is_refused_and_not_stored(
    h: Harness, emulator_policy: GatedPolicy, seal: str
) -> None:
    """A trajectory timed out / completed / failed during the policy call: the turn is a 400
    "not in valid status" and no turn is recorded; the trajectory keeps its sealed state."""
    tid = h.open()
    pending = await _in_flight(h, emulator_policy, tid)
    if seal == "expire":
        h.emu.expire(tid, "rollout_timeout")
        expected = TrajectoryState.TIMED_OUT
    else:
        status = "ready" if seal == "complete" else "failed"
        done = await h.client.post(
            "/complete-rollout",
            json={"TrajectoryId": tid, "Status": status, "JobArn": h.job_arn},
            headers={"authorization": SIGV4},
        )
        assert done.status_code == 200, done.text
        expected = TrajectoryState.READY if seal == "complete" else TrajectoryState.FAILED
    assert not pending.done()
    emulator_policy.release.set()
    response = await asyncio.wait_for(pending, 10)
    assert_error(response, 400, "ValidationException", f"not in valid status.*{expected.value}")
    assert h.emu.turn_count(tid) == 0
    assert h.emu.store.list_turns(tid) == []
    assert h.emu.state(tid) is expected
    (event,) = h.emu.store.list_events(tid, kind="turn_discarded")
    assert event.detail["state"] == expected.value
    if seal == "complete":
        reward = await h.client.post(
            "/update-reward",
            json={"TrajectoryId": tid, "Rewards": [1.0], "JobArn": h.job_arn},
            headers={"authorization": SIGV4},
        )
        assert reward.status_code == 200, reward.text


async def test_turn_answered_before_sealing_is_stored(
    h: Harness, emulator_policy: GatedPolicy
) -> None:
    """The same gate released before any seal: the turn is a 200 and stored (the re-check is
    not a blanket refusal)."""
    tid = h.open()
    pending = await _in_flight(h, emulator_policy, tid)
    emulator_policy.release.set()
    assert (await asyncio.wait_for(pending, 10)).status_code == 200
    assert h.emu.turn_count(tid) == 1
    assert len(h.emu.store.list_turns(tid)) == 1


# -- chat bodies the endpoint refuses ----------------------------------------------------------


def _history(role: str) -> dict[str, Any]:
    return dict(CHAT, messages=[{"role": "user", "content": "hi"}, {"role": role, "content": "x"}])


@pytest.mark.parametrize(
    ("content", "param", "match"),
    [
        (
            json.dumps(_history("wizard")),
            "messages[1].role",
            "messages\\[1\\].role: Input should be",
        ),
        (json.dumps(dict(CHAT, model=7)), "model", "model: Input should be a valid string"),
        (json.dumps(dict(CHAT, model=None, stream=1)), "stream", "stream"),
        (
            json.dumps(CHAT)[:-1] + ', "user": "\\ud800"}',
            None,
            "invalid UTF-16 surrogate",
        ),
        (
            json.dumps(_history("user")).replace('"x"', '"\\udc00 tail"'),
            None,
            "invalid UTF-16 surrogate",
        ),
    ],
    ids=["unknown-role", "non-string-model", "non-bool-stream", "lone-high", "lone-low"],
)
async def test_chat_bodies_the_endpoint_refuses(
    h: Harness,
    emulator_policy: GatedPolicy,
    caplog: pytest.LogCaptureFixture,
    content: str,
    param: str | None,
    match: str,
) -> None:
    """Unknown role, non-string model, lone surrogates → 400 in OpenAI's shape naming the
    param, one INFO log line without a traceback, the policy never asked, nothing stored."""
    tid = h.open()
    emulator_policy.release.set()
    with caplog.at_level(logging.INFO, logger="agent_kit.emulator"):
        response = await h.client.post(
            "/v1/chat/completions", content=content.encode(), headers=h.headers(tid)
        )
    assert_error(response, 400, "ValidationException", match)
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    records = [r for r in caplog.records if r.name == "agent_kit.emulator"]
    assert len(records) == 1, [r.getMessage() for r in records]
    assert records[0].levelno == logging.INFO
    assert records[0].exc_info is None
    assert "/v1/chat/completions -> 400 ValidationException" in records[0].getMessage()
    assert emulator_policy.seen == []
    assert h.emu.turn_count(tid) == 0


async def test_sample_route_refuses_the_same_bodies_in_the_contract_shape(h: Harness) -> None:
    """/sample applies the same validation but answers in the contract's {"Message"} shape."""
    tid = h.open()
    response = await h.client.post(
        "/sample", content=json.dumps(_history("wizard")).encode(), headers=h.headers(tid)
    )
    assert_error(response, 400, "ValidationException", "messages\\[1\\].role")


async def test_paired_surrogates_and_known_roles_are_accepted(
    h: Harness, emulator_policy: GatedPolicy
) -> None:
    """A valid surrogate pair (an emoji as \\ud83d\\ude00) and every OpenAI role pass."""
    tid = h.open()
    emulator_policy.release.set()
    messages = [
        {"role": role, "content": "x"} for role in ("system", "developer", "user", "assistant")
    ]
    messages.append({"role": "tool", "tool_call_id": "c", "content": "\U0001f600"})
    text = json.dumps(dict(CHAT, messages=messages))  # ASCII: the emoji as a surrogate pair
    assert "\\ud83d\\ude00" in text
    response = await h.client.post(
        "/v1/chat/completions", content=text.encode(), headers=h.headers(tid)
    )
    assert response.status_code == 200, response.text
    assert emulator_policy.seen[-1].messages[-1]["content"] == "\U0001f600"


# -- a session for one trajectory cannot complete or reward another (real HTTP) -----------------


def test_session_of_one_trajectory_cannot_complete_or_reward_another(
    running_emulator: RunningEmulator,
) -> None:
    """Over a real socket: CompleteRollout / UpdateReward whose trajectory header (the session's
    trajectory A) differs from the body's B → 403 AccessDeniedException; B is untouched; the
    same calls for A itself succeed."""
    run = running_emulator
    emu = run.emulator
    a = run.mint()["metadata"]["rolloutId"]
    b = run.mint()["metadata"]["rolloutId"]
    session = {"authorization": SIGV4, "x-amzn-sagemaker-trajectory-id": a}
    with httpx.Client(base_url=run.url, timeout=30) as client:
        for route, body in [
            ("/complete-rollout", {"TrajectoryId": b, "Status": "ready", "JobArn": run.job_arn}),
            ("/complete-rollout", {"TrajectoryId": b, "Status": "failed", "JobArn": run.job_arn}),
            ("/update-reward", {"TrajectoryId": b, "Rewards": [1.0], "JobArn": run.job_arn}),
        ]:
            refused = client.post(route, json=body, headers=session)
            assert_error(refused, 403, "AccessDeniedException", f"trajectory {a}.*{b}")
        assert emu.state(b) is TrajectoryState.OPEN
        assert emu.store.get_reward(b) is None
        for route, body in [
            ("/complete-rollout", {"TrajectoryId": a, "Status": "ready", "JobArn": run.job_arn}),
            ("/update-reward", {"TrajectoryId": a, "Rewards": [0.5], "JobArn": run.job_arn}),
        ]:
            assert client.post(route, json=body, headers=session).status_code == 200
    assert emu.state(a) is TrajectoryState.REWARDED
    assert emu.state(b) is TrajectoryState.OPEN


# -- a bug of the emulator itself --------------------------------------------------------------


@pytest.mark.parametrize("route", ["/sample", "/v1/chat/completions"])
async def test_a_bug_is_one_logged_traceback_and_a_500_in_the_route_shape(
    h: Harness,
    emulator_policy: GatedPolicy,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    route: str,
) -> None:
    """An exception no handler knows (here: the store fails) is logged once with its traceback
    and answered 500 InternalServiceError in the route's shape; the app keeps serving."""
    tid = h.open()
    emulator_policy.release.set()

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(h.emu.store, "record_turn", broken)
    with caplog.at_level(logging.INFO, logger="agent_kit.emulator"):
        response = await h.client.post(route, content=json.dumps(CHAT), headers=h.headers(tid))
    assert_error(response, 500, "InternalServiceError", "Internal error in the emulator")
    records = [r for r in caplog.records if r.name == "agent_kit.emulator"]
    assert len(records) == 1
    assert records[0].levelno == logging.ERROR
    assert records[0].exc_info is not None
    monkeypatch.undo()
    assert (await h.chat(tid)).status_code == 200


async def test_each_turn_is_one_store_write(
    h: Harness, emulator_policy: GatedPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn reaches the store in one write holding its row and the events it noted (here the
    first connection); a turn discarded after sealing writes its events in one write too."""
    writes: list[tuple[list[str], bool]] = []
    record_turn = h.emu.store.record_turn

    def counted(trajectory_id: str, events: Any, turn: Any = None, **kw: Any) -> None:
        writes.append(([e.kind for e in events], turn is not None))
        record_turn(trajectory_id, events, turn, **kw)

    def no_event(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a turn wrote an event on its own")

    monkeypatch.setattr(h.emu.store, "record_turn", counted)
    monkeypatch.setattr(h.emu.store, "add_event", no_event)
    emulator_policy.release.set()
    tid = h.open()
    assert (await h.chat(tid)).status_code == 200
    assert (await h.chat(tid)).status_code == 200
    assert writes == [(["policy_connection"], True), ([], True)]
    emulator_policy.release.clear()
    sealed = h.open()
    pending = await _in_flight(h, emulator_policy, sealed)
    h.emu.expire(sealed, "rollout_timeout")
    emulator_policy.release.set()
    assert (await asyncio.wait_for(pending, 10)).status_code == 400
    assert writes[2:] == [(["policy_connection", "turn_discarded"], False)]
    kinds = [e.kind for e in h.emu.store.list_events(sealed)]
    assert kinds[-2:] == ["policy_connection", "turn_discarded"]
