"""Shared fixtures: an in-test policy backend and a real emulator served by uvicorn on loopback.

- ``emulator_policy`` (override per module): the policy backend the emulator uses; the default
  is :class:`CannedPolicy`, a tiny backend implementing the PolicyBackend protocol.
- ``emulator_options`` (override per module): extra keyword arguments for ``Emulator``.
- ``emulator``: an in-process ``Emulator`` on a temporary run store, with one job created.
- ``running_emulator``: that emulator served by uvicorn on 127.0.0.1 (ephemeral port) in a
  background thread; yields a :class:`RunningEmulator` (``url``, ``emulator``, ``job_arn``).
- ``offline_aws``: dummy AWS credentials in the environment, no profile or config files, no
  instance metadata, no policy endpoint settings (``usefixtures`` it in a module).
- ``serve_app(app)``: context manager serving any ASGI app the same way, yielding its URL.
"""

from __future__ import annotations

import shutil
import signal
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_kit.emulator.core import Emulator
from agent_kit.emulator.schemas import PolicyRequest
from agent_kit.emulator.server import create_app
from agent_kit.emulator.serving import serve_in_thread
from agent_kit.store import RunStore


@dataclass
class CannedUsage:
    """Token usage of a canned turn (same fields as the policies module's Usage)."""

    prompt_tokens: int
    completion_tokens: int
    estimated: bool = True


@dataclass
class CannedResult:
    """A PolicyResult look-alike: chat.completion, usage, optional upstream chunks."""

    response: dict[str, Any]
    usage: CannedUsage
    chunks: list[dict[str, Any]] | None = None


@dataclass
class CannedPolicy:
    """In-test backend: calls the first offered tool once (arguments from ``args``), then answers.

    It records every request it saw, and raises ``fail_with`` if set (to test 5xx handling).
    """

    name: str = "canned"
    answer: str = "final answer"
    args: dict[str, Any] = field(default_factory=lambda: {"word": "crane"})
    seen: list[PolicyRequest] = field(default_factory=list)
    fail_with: Exception | None = None
    closed: bool = False

    async def complete(self, request: PolicyRequest) -> CannedResult:
        """Tool call when tools are offered and no tool result exists yet; else text."""
        self.seen.append(request)
        if self.fail_with is not None:
            raise self.fail_with
        message: dict[str, Any]
        if request.tools and not request.tool_results():
            tool = request.tools[0]["function"]["name"]
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{request.turn}",
                        "type": "function",
                        "function": {"name": tool, "arguments": _json(self.args)},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": self.answer}
            finish = "stop"
        response = {
            "id": f"chatcmpl-{request.trajectory_id}-{request.turn}",
            "object": "chat.completion",
            "created": 0,
            "model": "canned",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        return CannedResult(response, CannedUsage(len(request.messages) * 5, 3))

    async def aclose(self) -> None:
        """Mark the backend closed."""
        self.closed = True


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


@dataclass
class RunningEmulator:
    """An emulator served on loopback: base ``url``, the ``emulator`` and its default job."""

    url: str
    emulator: Emulator
    job_arn: str
    #: The run store the emulator writes (every trajectory, turn, reward and event).
    run_store: RunStore

    def mint(self, prompt: str = '{"prompt": "hi"}') -> dict[str, Any]:
        """Open a trajectory in the default job; return the rollout payload pointing at ``url``."""
        traj = self.emulator.open_trajectory(self.job_arn, prompt)
        return self.emulator.rollout_payload(traj, self.url)


serve_app = serve_in_thread


@pytest.fixture
def emulator_policy() -> Any:
    """The policy backend of ``emulator``; override in a module to use another."""
    return CannedPolicy()


@pytest.fixture
def emulator_options() -> dict[str, Any]:
    """Extra ``Emulator`` keyword arguments; override in a module."""
    return {}


@pytest.fixture
def run_store(tmp_path: Path) -> Iterator[RunStore]:
    """A fresh run store in ``tmp_path/run`` (the one ``emulator`` writes)."""
    store = RunStore.open(tmp_path / "run")
    yield store
    store.close()


@pytest.fixture
def emulator(
    run_store: RunStore, emulator_policy: Any, emulator_options: dict[str, Any]
) -> Emulator:
    """An Emulator on ``run_store`` with one job (``default_job_arn``)."""
    emu = Emulator(run_store, emulator_policy, **emulator_options)
    emu.create_job("test-job", {"purpose": "tests"})
    return emu


@pytest.fixture
def running_emulator(emulator: Emulator, run_store: RunStore) -> Iterator[RunningEmulator]:
    """``emulator`` served by uvicorn on loopback (SigV4/bearer auth on, no secret)."""
    with serve_app(create_app(emulator)) as url:
        assert emulator.default_job_arn is not None
        yield RunningEmulator(url, emulator, emulator.default_job_arn, run_store)


@pytest.fixture
def http_client(running_emulator: RunningEmulator) -> Iterator[httpx.Client]:
    """A plain httpx client with the emulator's base URL."""
    with httpx.Client(base_url=running_emulator.url, timeout=30) as client:
        yield client


@pytest.fixture(autouse=True)
def _fresh_shared_aws_state() -> Iterator[None]:
    """Each test starts and ends without the process-wide botocore session, clients or token
    provider, so credentials one test sets in the environment never leak into the next."""
    from agent_kit.testing import reset_shared_state as clear

    clear()
    yield
    clear()


@pytest.fixture
def offline_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Dummy AWS credentials only (secret ``dummy-secret``, session token
    ``dummy-session-token``, us-west-2); no profile files, no instance metadata, no policy env."""
    for name in ("AWS_PROFILE", "RFT_RUNTIME_ENDPOINT", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("URL", "MODEL", "API_KEY", "TRANSPORT", "STREAM", "TIMEOUT", "MAX_RETRIES"):
        monkeypatch.delenv(f"AGENT_KIT_POLICY_{name}", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTESTTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "dummy-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "dummy-session-token")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


# -- the e2e marker, kept honest ------------------------------------------------------------------

#: Modules whose tests use real sockets or processes throughout.
E2E_MODULES = frozenset(
    {
        "test_agentcore_cli",
        "test_app_e2e",
        "test_cli_main",
        "test_cli_run",
        "test_deploy",
        "test_driver",
        "test_emulator_boto3",
        "test_emulator_fuzz",
        "test_emulator_sdk",
        "test_final_outcomes",
        "test_forwarder",
        "test_invokers",
        "test_jobs",
        "test_layout",
        "test_package",
        "test_policy_client",
        "test_public_api",
        "test_replay",
        "test_reproducibility",
        "test_runtime_client",
        "test_scaffold",
        "test_testing_kit",
        "test_tunnel",
        "test_wordle_e2e",
    }
)
#: Single tests (node-id prefixes) with real sockets or processes in otherwise in-process modules.
E2E_TESTS = (
    "tests/emulator/test_emulator_server.py::test_cli_serves_until_terminated",
    "tests/emulator/test_policies.py::test_openai_proxy_",
    "tests/emulator/test_policies.py::test_default_counter_does_not_import_the_python_package",
    "tests/store/test_store.py::test_kill_minus_nine_keeps_committed_turns_and_other_process_reads",
    "tests/store/test_store.py::test_other_process_reads_while_writer_is_open",
)
#: Fixtures that serve something on a real loopback socket.
SOCKET_FIXTURES = frozenset({"running_emulator", "http_client"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark e2e every test of an E2E module, every named test, every test using a socket
    fixture; the guard below fails any other test that opens a socket or a process."""
    for item in items:
        module = item.module.__name__.rpartition(".")[2] if item.module else ""
        fixtures = set(getattr(item, "fixturenames", ()))
        named = item.nodeid.startswith(E2E_TESTS)
        if module in E2E_MODULES or fixtures & SOCKET_FIXTURES or named:
            item.add_marker(pytest.mark.e2e)
    _e2e_files_first(items)


def _e2e_files_first(items: list[pytest.Item]) -> None:
    """Order the files with an e2e test (processes, sockets: every slow test) before the
    in-process ones, each group in collection order: ``make test``'s workers take whole files
    in this order (``--dist loadfile``), so the last files handed out are short and a slow one
    does not run alone at the end while the other workers idle."""
    slow = {item.path for item in items if item.get_closest_marker("e2e") is not None}
    items.sort(key=lambda item: item.path not in slow)  # stable: collection order within each


class _RealIOInFastTest(AssertionError):
    """A test not marked e2e opened a network socket or started a process."""


@pytest.fixture(autouse=True)
def _in_process_unless_e2e(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Tests not marked e2e may not bind/connect inet sockets or start processes (so
    ``pytest -m "not e2e"`` really is the in-process suite)."""
    if request.node.get_closest_marker("e2e") is not None:
        yield
        return
    import subprocess

    real_bind, real_connect = socket.socket.bind, socket.socket.connect

    def guard(real: Any) -> Any:
        def call(sock: socket.socket, address: Any) -> Any:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                raise _RealIOInFastTest(f"{request.node.nodeid}: inet socket {address}")
            return real(sock, address)

        return call

    def no_process(*args: Any, **kwargs: Any) -> Any:
        raise _RealIOInFastTest(f"{request.node.nodeid}: started a process {args[:1]}")

    monkeypatch.setattr(socket.socket, "bind", guard(real_bind))
    monkeypatch.setattr(socket.socket, "connect", guard(real_connect))
    monkeypatch.setattr(subprocess.Popen, "__init__", no_process)
    yield


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama with SmolLM2's tokenizer, as a Hugging Face model directory (the
    training tests' model; built once per session, torch imported only when asked for)."""
    from hf_tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="module")
def hf_backend(tiny_model: Path) -> Iterator[Any]:
    """The ``hf`` policy backend on the tiny model (batching on: up to 32 turns together), one
    per test module; its ``sampler`` is the one-sequence reference batched turns are checked
    against (``hf_tiny.check_sampled_as_alone``)."""
    import asyncio

    from agent_kit.emulator.policies import load_policy
    from agent_kit.emulator.policies.hf import HFPolicyBackend

    policy = load_policy(f"hf:{tiny_model}")
    assert isinstance(policy, HFPolicyBackend)
    yield policy
    asyncio.run(policy.aclose())


@pytest.fixture(scope="session")
def mlflow_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow SQLite tracking store with its schema migrated (creating a store costs
    seconds), made once per session for :func:`mlflow_store` to copy."""
    import warnings

    from agent_kit.export.tracking import mlflow_quiet, require_mlflow

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    with mlflow_quiet(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The ``noload`` loader strategy")
        require_mlflow().MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def mlflow_store(mlflow_template: Path) -> Callable[[Path], str]:
    """``store(path)``: a copy of the empty migrated tracking store at ``path``; its URI. For
    tests about what lands in a store, not about creating one (tests/export does that)."""

    def store(path: Path) -> str:
        shutil.copyfile(mlflow_template, path)
        return f"sqlite:///{path}"

    return store


@pytest.fixture
def handled_signals() -> Iterator[None]:
    """SIGINT and SIGTERM with Python's own handlers for the test, whatever the parent left
    (a shell's background job inherits SIGINT ignored), the parent's given back afterwards."""
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)
