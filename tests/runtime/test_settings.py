"""The settings record (agent_kit/settings.py) and the agent's door (RolloutApp reads it once).

The CLI's door is tested in tests/cli/test_settings_door.py; the guard that no library module
reads an ``AGENT_KIT_*`` variable, and the docs page, in tests/test_settings_guard.py.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from agent_kit import RolloutApp
from agent_kit.auxiliary import target_for
from agent_kit.contract import RolloutPayload
from agent_kit.errors import UsageError
from agent_kit.policy_client import PolicyConfig
from agent_kit.reward import Reward
from agent_kit.settings import DEFAULTS, Settings, env_name, settings_table
from agent_kit.testing import load_app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "example_counter.py"


# -- the record ----------------------------------------------------------------------------------


def test_every_field_is_one_declared_variable() -> None:
    """Each field names AGENT_KIT_<FIELD>, has help text and a door; the defaults are the
    documented ones (a few pinned: the values the code used before the record)."""
    for f in dataclasses.fields(Settings):
        spec = f.metadata["spec"]
        assert spec.help, f.name
        assert spec.door in ("tooling", "agent"), f.name
        assert env_name(f.name) == "AGENT_KIT_" + f.name.upper()
    assert (DEFAULTS.port, DEFAULTS.policy_timeout, DEFAULTS.policy_max_retries) == (8080, 300, 2)
    assert (DEFAULTS.hf_batch, DEFAULTS.hf_cache_mb, DEFAULTS.hf_max_tokens) == (32, 512, 256)
    assert (DEFAULTS.local_ctx, DEFAULTS.local_threads, DEFAULTS.tokenizer) == (4096, None, "auto")
    assert DEFAULTS.max_answer_bytes == 1 << 20
    assert DEFAULTS.max_log_bytes == 50 << 20
    assert Settings.from_environ({}) == DEFAULTS == Settings()


def test_values_are_parsed_by_their_type() -> None:
    """Numbers, flags and choices are parsed (blank values keep the default, choices are
    case-blind), 0 means "no limit" where declared, and a fallback variable fills in."""
    read = Settings.from_environ(
        {
            "AGENT_KIT_PORT": " 9090 ",
            "AGENT_KIT_POLICY_STREAM": "Yes",
            "AGENT_KIT_POLICY_TIMEOUT": "2.5",
            "AGENT_KIT_POLICY_TRANSPORT": "SAMPLE",
            "AGENT_KIT_HF_BATCH": "",
            "AGENT_KIT_MAX_ANSWER_BYTES": "0",
            "AGENT_KIT_LOCAL_THREADS": "3",
            "OPENAI_API_KEY": "sk-fallback",
        }
    )
    assert (read.port, read.policy_stream, read.policy_timeout) == (9090, True, 2.5)
    assert (read.policy_transport, read.hf_batch, read.max_answer_bytes) == ("sample", 32, None)
    assert read.local_threads == 3
    assert read.policy_api_key == read.upstream_api_key == "sk-fallback"
    own = Settings.from_environ({"OPENAI_API_KEY": "sk-x", "AGENT_KIT_POLICY_API_KEY": "sk-own"})
    assert own.policy_api_key == "sk-own"
    assert Settings.from_environ({"AGENT_KIT_LOCAL_THREADS": "0"}).local_threads is None


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("AGENT_KIT_PORT", "eighty", "AGENT_KIT_PORT must be an integer, not 'eighty'"),
        ("AGENT_KIT_PORT", "0", "AGENT_KIT_PORT must be at least 1, not 0"),
        ("AGENT_KIT_PORT", "70000", "AGENT_KIT_PORT must be at most 65535, not 70000"),
        ("AGENT_KIT_HF_BATCH", "many", "AGENT_KIT_HF_BATCH must be an integer, not 'many'"),
        ("AGENT_KIT_HF_BATCH", "0", "AGENT_KIT_HF_BATCH must be at least 1, not 0"),
        ("AGENT_KIT_MAX_LOG_BYTES", "-1", "AGENT_KIT_MAX_LOG_BYTES must be at least 0, not -1"),
        ("AGENT_KIT_POLICY_TIMEOUT", "nan", "AGENT_KIT_POLICY_TIMEOUT must be a finite number"),
        ("AGENT_KIT_POLICY_STREAM", "maybe", "must be true or false, not 'maybe'"),
        ("AGENT_KIT_MALLOC", "jemalloc", "AGENT_KIT_MALLOC must be one of bounded, glibc"),
        ("AGENT_KIT_LOCAL_CTX", "100", "AGENT_KIT_LOCAL_CTX must be at least 256, not 100"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(name: str, value: str, words: str) -> None:
    """A malformed or out-of-range value is a UsageError (one line) naming the variable."""
    with pytest.raises(UsageError) as caught:
        Settings.from_environ({name: value})
    assert words in caught.value.message
    assert "\n" not in caught.value.message


def test_values_given_in_python_keep_their_ranges() -> None:
    """A record built in Python is held to the same ranges and choices as one read."""
    with pytest.raises(UsageError, match="AGENT_KIT_HF_BATCH must be at least 1, not 0"):
        Settings(hf_batch=0)
    with pytest.raises(UsageError, match="AGENT_KIT_POLICY_TRANSPORT must be one of"):
        Settings(policy_transport="pigeon")
    assert Settings(hf_batch=4, max_answer_bytes=None).hf_batch == 4


def test_a_door_reads_only_its_own_variables() -> None:
    """With ``door``, a variable of the other door is neither read nor refused."""
    env = {"AGENT_KIT_PORT": "bad", "AGENT_KIT_HF_BATCH": "4"}
    assert Settings.from_environ(env, door="tooling").hf_batch == 4
    with pytest.raises(UsageError, match="AGENT_KIT_PORT"):
        Settings.from_environ(env, door="agent")
    assert Settings.from_environ({"AGENT_KIT_HF_BATCH": "x"}, door="agent").hf_batch == 32


def test_secrets_stay_out_of_the_repr() -> None:
    """The API keys and shared secrets are not shown by repr (nor in the docs' defaults)."""
    read = Settings.from_environ(
        {
            "AGENT_KIT_POLICY_API_KEY": "sk-policy-secret",
            "AGENT_KIT_AUX_API_KEY": "sk-aux-secret",
            "AGENT_KIT_FORWARDER_SECRET": "fwd-secret",
            "AGENT_KIT_EMULATOR_SECRET": "emu-secret",
            "AGENT_KIT_UPSTREAM_API_KEY": "sk-upstream-secret",
        }
    )
    shown = repr(read)
    for value in ("sk-policy-secret", "sk-aux-secret", "fwd-secret", "emu-secret", "sk-upstream"):
        assert value not in shown
    assert "hf_batch=32" in shown
    assert read.forwarder_secret == "fwd-secret"


def test_variables_give_the_same_record_back() -> None:
    """``variables()`` names exactly the non-default values, and reading them back gives the
    same record (a child process started with them sees what the parent saw)."""
    assert DEFAULTS.variables() == {}
    read = Settings.from_environ(
        {
            "AGENT_KIT_POLICY_STREAM": "on",
            "AGENT_KIT_POLICY_TIMEOUT": "12.5",
            "AGENT_KIT_MAX_ANSWER_BYTES": "0",
            "AGENT_KIT_TOKENIZER": "estimate",
            "AGENT_KIT_AUX_URL": "http://127.0.0.1:9/v1",
        }
    )
    variables = read.variables()
    assert variables["AGENT_KIT_POLICY_STREAM"] == "true"
    assert variables["AGENT_KIT_MAX_ANSWER_BYTES"] == "0"
    assert len(variables) == 5
    assert Settings.from_environ(variables) == read


def test_the_table_has_a_row_per_variable() -> None:
    """settings_table() lists every variable once, in declaration order, with its range."""
    rows = settings_table()
    assert [r["name"] for r in rows] == [env_name(f.name) for f in dataclasses.fields(Settings)]
    port = next(r for r in rows if r["name"] == "AGENT_KIT_PORT")
    assert (port["door"], port["default"], port["range"]) == ("agent", "8080", "1..65535")


def test_the_aux_target_comes_from_the_settings() -> None:
    """The auxiliary target is the settings' URL (model, key), else a Bedrock model id, else
    the emulator's route for a payload with metadata."""
    given = Settings(aux_url="http://127.0.0.1:9/v1/", aux_model="judge", aux_api_key="k")
    target = target_for(None, given)
    assert target is not None
    assert (target.base_url, target.model_id, target.api_key) == (
        "http://127.0.0.1:9/v1",
        "judge",
        "k",
    )
    bedrock = target_for(None, Settings(aux_model="anthropic.claude"))
    assert bedrock is not None
    assert bedrock.base_url is None
    assert target_for(None) is None


# -- the agent's door ----------------------------------------------------------------------------


def _app(**options: object) -> RolloutApp:
    """A one-line app: what it plays does not matter here."""
    from agent_kit import Environment

    return RolloutApp(Environment, reward=lambda env, episode: Reward(0.0), **options)  # type: ignore[arg-type]


def test_rolloutapp_reads_the_environment_when_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app reads AGENT_KIT_* once, at construction: its policy config, its port and its
    auxiliary target come from that read, and a later change of the environment changes
    nothing."""
    monkeypatch.setenv("AGENT_KIT_POLICY_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("AGENT_KIT_POLICY_TIMEOUT", "12")
    monkeypatch.setenv("AGENT_KIT_PORT", "9123")
    monkeypatch.setenv("AGENT_KIT_AUX_MODEL", "bedrock-judge")
    monkeypatch.setenv("AGENT_KIT_HF_BATCH", "not the agent's")  # the CLI's, not read here
    app = _app()
    assert app.policy_config.base_url == "http://127.0.0.1:9/v1"
    assert app.policy_config.timeout_s == 12.0
    assert app.agent_settings.port == 9123
    monkeypatch.setenv("AGENT_KIT_POLICY_URL", "http://127.0.0.1:10/v1")
    assert app.policy_config.base_url == "http://127.0.0.1:9/v1"
    aux = target_for(RolloutPayload.for_rollout("p"), app.agent_settings)
    assert aux is not None
    assert aux.model_id == "bedrock-judge"
    given = _app(agent_settings=Settings(policy_model="m"), policy=PolicyConfig(max_retries=0))
    assert given.agent_settings.policy_model == "m"
    assert given.policy_config.max_retries == 0


def test_rolloutapp_refuses_a_bad_value_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A malformed agent variable stops the app's construction with one line naming it."""
    monkeypatch.setenv("AGENT_KIT_POLICY_MAX_RETRIES", "twice")
    with pytest.raises(UsageError, match="AGENT_KIT_POLICY_MAX_RETRIES must be an integer"):
        _app()


def test_the_forwarder_secret_is_read_with_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """RolloutApp(forwarder=True) guards /rollout with the secret its door read."""
    monkeypatch.setenv("AGENT_KIT_FORWARDER_SECRET", "door-secret")
    app = load_app(EXAMPLE)
    forwarded = RolloutApp(
        app.environment, reward=app.reward_fn, forwarder=True, model_factory=app._model_factory
    )
    monkeypatch.delenv("AGENT_KIT_FORWARDER_SECRET")
    with TestClient(forwarded) as client:
        wrong = client.post("/rollout", json={}, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        right = client.post("/rollout", json={}, headers={"Authorization": "Bearer door-secret"})
        assert right.status_code == 400  # past the secret: the entrypoint refused the payload


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.e2e
def test_an_agent_process_serves_on_the_port_its_door_read(tmp_path: Path) -> None:
    """A real agent process started with AGENT_KIT_PORT answers /ping on that port."""
    port = _free_port()
    entry = tmp_path / "agent.py"
    entry.write_text(EXAMPLE.read_text() + '\nif __name__ == "__main__":\n    app.run()\n')
    env = {**os.environ, "AGENT_KIT_PORT": str(port), "PYTHONPATH": str(ROOT)}
    with (tmp_path / "agent.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, str(entry)], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        answer = None
        while answer is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/ping", timeout=1.0)
            except httpx.TransportError:
                time.sleep(0.1)
        assert answer is not None, (tmp_path / "agent.log").read_text()
        assert answer.status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
