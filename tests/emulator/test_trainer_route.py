"""The emulator's trainer route: the per-trajectory base_url of the agentcore-rl-toolkit mode,
each guarded by its own api_key (HMAC of the run's trainer key, the job and the trajectory)."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from agent_kit.emulator.core import Emulator
from agent_kit.emulator.run_keys import trainer_api_key
from agent_kit.emulator.server import create_app

KEY = "per-run-trainer-key"
BODY: dict[str, Any] = {
    "model": "agent-kit-policy",
    "messages": [{"role": "user", "content": "hi"}],
}


def _client(emulator: Emulator, key: str | None = KEY) -> TestClient:
    return TestClient(create_app(emulator, trainer_key=key))


def _open(emulator: Emulator) -> str:
    job = emulator.default_job_arn
    assert job is not None
    return emulator.open_trajectory(job, '{"prompt": "hi"}').id


def _bearer(emulator: Emulator, tid: str, key: str = KEY) -> dict[str, str]:
    """The Authorization header of ``tid``'s base_url (its own api_key)."""
    job = emulator.default_job_arn
    assert job is not None
    return {"Authorization": f"Bearer {trainer_api_key(key, job, tid)}"}


def test_a_turn_on_the_trajectory_path_is_recorded(emulator: Emulator) -> None:
    """The path names the trajectory and the bearer is the run's key: the turn is recorded."""
    tid = _open(emulator)
    response = _client(emulator).post(
        f"/trainer/{tid}/v1/chat/completions", json=BODY, headers=_bearer(emulator, tid)
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "final answer"
    assert emulator.turn_count(tid) == 1
    turns = emulator.store.list_turns(tid)
    assert turns[0].route == "/v1/chat/completions"
    assert KEY not in str(turns[0].request)
    assert "agent-kit-trainer-" not in str(turns[0].request)


def test_a_wrong_or_missing_key_is_403_in_openai_shape(emulator: Emulator) -> None:
    """Another bearer, none, or the run's own trainer key is refused in OpenAI's error shape;
    no turn is recorded."""
    tid = _open(emulator)
    client = _client(emulator)
    for headers in ({"Authorization": "Bearer nope"}, {}, {"Authorization": f"Bearer {KEY}"}):
        response = client.post(f"/trainer/{tid}/v1/chat/completions", json=BODY, headers=headers)
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "AccessDeniedException"
    assert emulator.turn_count(tid) == 0


def test_an_unknown_trajectory_is_refused(emulator: Emulator) -> None:
    """A base_url naming no trajectory is refused (403): no api_key opens it, whatever the
    caller guessed."""
    response = _client(emulator).post(
        "/trainer/nobody/v1/chat/completions", json=BODY, headers=_bearer(emulator, "nobody")
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "AccessDeniedException"


def test_one_trajectorys_key_does_not_open_another_base_url(emulator: Emulator) -> None:
    """The api_key of trajectory A is 403 on B's base_url (B gets no turn); each key opens
    its own trajectory only, and keys of another run's trainer key open nothing."""
    a, b = _open(emulator), _open(emulator)
    client = _client(emulator)
    assert _bearer(emulator, a) != _bearer(emulator, b)
    crossed = client.post(
        f"/trainer/{b}/v1/chat/completions", json=BODY, headers=_bearer(emulator, a)
    )
    assert crossed.status_code == 403
    assert "api_key" in crossed.json()["error"]["message"]
    other_run = client.post(
        f"/trainer/{b}/v1/chat/completions", json=BODY, headers=_bearer(emulator, b, "other")
    )
    assert other_run.status_code == 403
    assert emulator.turn_count(b) == 0
    own = client.post(f"/trainer/{b}/v1/chat/completions", json=BODY, headers=_bearer(emulator, b))
    assert own.status_code == 200, own.text
    assert emulator.turn_count(b) == 1


def test_without_a_trainer_key_the_route_is_not_served(emulator: Emulator) -> None:
    """An emulator started without a trainer key has no trainer route."""
    tid = _open(emulator)
    response = _client(emulator, key=None).post(
        f"/trainer/{tid}/v1/chat/completions", json=BODY, headers=_bearer(emulator, tid)
    )
    assert response.status_code == 404
