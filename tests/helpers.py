"""Helpers shared across test rooms: the repo's paths, small Wordle runs, agent sources.

- ``play_wordle(dataset, out, config)``: one real local run (agent subprocesses, the emulator)
  of ``examples/wordle/agent.py`` (or another entrypoint), returning its run directory;
  ``wordle_config(name, …)`` is the small job those runs use, ``holdout(path, rows)`` writes the
  first ``rows`` holdout prompts.
- ``WORDLE_IMPORT``: the lines an inline agent starts with to load the Wordle agent by path
  (``wordle``), for agents that wrap its environment or reward.
- ``SAY_AGENT``, ``SAY_POLICY``, ``SAY_RAISES_AT``: a one-tool agent whose reward raises or is
  NaN as ``task["bad"]`` says, the policy that plays it, and where its reward raises.
- ``pid_alive(pid)``, ``wait_gone(pids, what)``: whether a process runs; wait (with a deadline)
  for processes to exit, failing with ``what``.
- ``MINIMAL_AGENT``: the smallest contract entrypoint (a raw ``BedrockAgentCoreApp`` that answers
  reward 1.0), the source of ``tests/agents/minimal_agent.py``.
- ``mlflow_client(uri)``: an MlflowClient on a test's tracking store, MLflow's own deprecation
  warning silenced while it is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.hooks import JobHooks
from agent_kit.driver.local import run_local

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ROOT / "tests" / "agents"
WORDLE = ROOT / "examples" / "wordle"
WORDLE_AGENT = WORDLE / "agent.py"
HOLDOUT = WORDLE / "holdout.jsonl"
MINIMAL_AGENT = (AGENTS / "minimal_agent.py").read_text(encoding="utf-8")
#: The one-tool agent whose reward acts on ``task["bad"]`` ("raise" or true: raises; "nan").
SAY_AGENT = AGENTS / "say_agent.py"
#: The ``--policy`` spec that plays ``SAY_AGENT`` (say 3, then "done").
SAY_POLICY = f"scripted:{AGENTS / 'say_policy.py'}:policy"
#: The tool agent of the training tests (it must call ``submit``) and its expert policy.
SUBMIT_AGENT = str(AGENTS / "submit_agent.py")
SUBMIT_EXPERT = f"scripted:{AGENTS / 'submit_expert.py'}:expert"
_SAY_RAISE = '        raise ValueError("the reward function broke on purpose")'
#: Where ``SAY_AGENT``'s reward raises, as a failure line names it (file, line, function).
SAY_RAISES_AT = (
    f"(at say_agent.py:{SAY_AGENT.read_text(encoding='utf-8').splitlines().index(_SAY_RAISE) + 1}"
    " in reward)"
)

#: Loads the Wordle agent as ``wordle`` from the path that replaces ``__AGENT__`` (``repr``).
WORDLE_IMPORT = """
import importlib.util
import sys

_spec = importlib.util.spec_from_file_location("inline_wordle_agent", __AGENT__)
wordle = importlib.util.module_from_spec(_spec)
sys.modules["inline_wordle_agent"] = wordle
_spec.loader.exec_module(wordle)
"""


def wordle_agent_source(doc: str, body: str) -> str:
    """An inline agent: its docstring, ``WORDLE_IMPORT`` (pointing at the example), ``body``."""
    head = WORDLE_IMPORT.replace("__AGENT__", repr(str(WORDLE_AGENT)))
    return f'"""{doc}"""\n{head}\n{body}'


def wordle_policy(name: str = "Solver") -> str:
    """The ``--policy`` spec of a scripted policy of ``examples/wordle/policies.py``."""
    return f"scripted:{WORDLE / 'policies.py'}:{name}"


def holdout(path: Path, rows: int) -> Path:
    """Write the first ``rows`` prompts of the Wordle holdout set to ``path``; return it."""
    lines = HOLDOUT.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:rows]), encoding="utf-8")
    return path


def wordle_config(name: str, policy: str = "Solver", **settings: Any) -> JobConfig:
    """A small Wordle job: group 4, temperature 0.7, concurrency 8, one step, 120 s rollouts;
    ``settings`` override any field."""
    fields: dict[str, Any] = {
        "name": name,
        "policy": wordle_policy(policy),
        "group_size": 4,
        "temperature": 0.7,
        "concurrency": 8,
        "steps": 1,
        "rollout_timeout": 120,
    }
    return JobConfig(**{**fields, **settings})


def play_wordle(
    dataset: Path,
    out: Path,
    config: JobConfig,
    *,
    entrypoint: Path = WORDLE_AGENT,
    status: str | None = "completed",
    hooks: JobHooks | None = None,
    **run: Any,
) -> Path:
    """Run ``entrypoint`` (the Wordle agent by default) over ``dataset`` into ``out`` (``run``:
    more ``RunConfig`` fields); assert the run ended as ``status`` (None: any) and return its run
    directory."""
    settings = RunConfig(entrypoint=str(entrypoint), dataset=dataset, job=config, out=out, **run)
    result = asyncio.run(run_local(settings, hooks))
    if status is not None:
        assert result.status == status, result.failure
    assert result.run_dir is not None
    return Path(result.run_dir)


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (signal 0 reaches it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pids: list[int], what: str, timeout: float = 30) -> None:
    """Wait for every process of ``pids`` to exit; fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while any(pid_alive(pid) for pid in pids):
        assert time.monotonic() < deadline, f"{what}: {pids}"
        time.sleep(0.05)  # polling process liveness, with a deadline


def id_dataset(path: Path, rows: int) -> Path:
    """A dataset of ``rows`` prompts ``{"id": i}`` (the submit agent's tasks) at ``path``."""
    path.write_text(
        "".join(json.dumps({"prompt": json.dumps({"id": i})}) + "\n" for i in range(rows)),
        encoding="utf-8",
    )
    return path


@contextlib.contextmanager
def mlflow_client(uri: str) -> Iterator[Any]:
    """An ``MlflowClient`` on the tracking store ``uri``, for reading back what a test logged;
    MLflow's own SQLAlchemy deprecation warning (``noload``) is silenced while it is used."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The ``noload`` loader strategy")
        from mlflow import MlflowClient

        yield MlflowClient(uri)
