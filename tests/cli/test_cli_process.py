"""Process tuning happens at the command's door (agent_kit/cli/process.py) and nowhere else:
importing the training room changes nothing, ``agent-kit train`` sets its heap, TRL and log
settings, and a ``local``/``hf`` policy gets its environment."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import agent_kit
from agent_kit.cli.process import tune_process
from agent_kit.cli.run import resumed_policies
from agent_kit.store import RunStore

PACKAGE = Path(agent_kit.__file__).parent
#: The variables the door may set; a subprocess starts without them.
TUNED = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS",
    "TRL_EXPERIMENTAL_SILENCE",
    "OMP_WAIT_POLICY",
)
#: The process state the library must leave alone, as JSON (run in a subprocess).
STATE = (
    "import json, os, torch, transformers, datasets\n"
    "from agent_kit.model.seam import lm_head_tiles\n"
    "lm_head_tiles()  # TRL imported (torch's inductor sets its cache folder then)\n"
    "def state():\n"
    "    return {'env': dict(os.environ), 'threads': torch.get_num_threads(),\n"
    "            'tiles': lm_head_tiles(),\n"
    "            'verbosity': transformers.logging.get_verbosity(),\n"
    "            'bars': [transformers.utils.logging.is_progress_bar_enabled(),\n"
    "                     datasets.utils.logging.is_progress_bar_enabled()]}\n"
)


def _python(code: str) -> dict:
    """Run ``code`` in a fresh interpreter without the tuned variables; its last stdout line
    as JSON."""
    env = {k: v for k, v in os.environ.items() if k not in TUNED}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def environ() -> Iterator[None]:
    """os.environ as it was after the test, whatever the door set in it."""
    saved = dict(os.environ)
    for name in TUNED:
        os.environ.pop(name, None)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.e2e  # a fresh interpreter: a subprocess
def test_importing_the_training_room_changes_nothing_of_the_process() -> None:
    """Importing agent_kit.train and every module of it, the model room and the model
    policies leaves the environment, torch's threads, TRL's tiles and transformers' and
    datasets' log level and bars as they were."""
    code = STATE + (
        "before = state()\n"
        "import agent_kit.train, agent_kit.train.grpo, agent_kit.train.warm, "
        "agent_kit.train.evaluate, agent_kit.train.passes, agent_kit.model.seam, "
        "agent_kit.model.sampler, agent_kit.emulator.policies.hf, "
        "agent_kit.emulator.policies.local_llm\n"
        "print(json.dumps({'before': before, 'after': state()}))\n"
    )
    seen = _python(code)
    assert seen["after"] == seen["before"]
    assert seen["before"]["tiles"] == [4096, 32768]  # TRL's own


@pytest.mark.e2e  # a fresh interpreter: a subprocess
def test_the_train_command_tunes_its_process_at_the_door(tmp_path: Path) -> None:
    """``agent-kit train`` (here refusing a folder without a run, after its door) leaves TRL's
    LM head in the CPU's small tiles, the hub offline, TRL's notice and transformers' advice
    silent, its log at errors and the progress bars off."""
    code = STATE + (
        "from agent_kit.cli import main\n"
        "from agent_kit.cli.process import release_free_memory, tune_process\n"
        f"code = main(['train', '--resume', {str(tmp_path)!r}, '--device', 'cpu'])\n"
        "hook = tune_process(train_model='m', device='cpu').between_phases\n"
        "hook = getattr(hook, 'func', None) is release_free_memory\n"
        "print(json.dumps({'code': code, 'hook': hook, **state()}))\n"
    )
    seen = _python(code)
    assert seen["code"] == 2
    assert seen["hook"]  # the heap's free pages handed back between phases
    assert seen["tiles"] == [512, 8192]
    assert {k: seen["env"].get(k) for k in TUNED[:3]} == dict.fromkeys(TUNED[:3], "1")
    assert "OMP_WAIT_POLICY" not in seen["env"]
    assert seen["verbosity"] == 40  # logging.ERROR
    assert seen["bars"] == [False, False]


@pytest.mark.usefixtures("environ")
def test_policies_get_their_environment_and_a_users_own_value_stands() -> None:
    """A ``local`` policy waits passively, an ``hf`` model on disk keeps the hub offline, a hub
    id leaves it reachable, a value the user set is kept, and other policies change nothing."""
    assert tune_process(policies=["random", "scripted:p.py:X"]).applied == ()
    assert all(name not in os.environ for name in TUNED)
    tuning = tune_process(policies=["local", "hf:smollm2-135m+adapters/step-0001"])
    assert os.environ["OMP_WAIT_POLICY"] == "passive"
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"] == "1"
    assert tuning.between_phases is None  # not training
    os.environ.pop("HF_HUB_OFFLINE")
    os.environ["OMP_WAIT_POLICY"] = "active"
    tune_process(policies=["hf:HuggingFaceTB/SmolLM2-135M-Instruct", "local"])
    assert "HF_HUB_OFFLINE" not in os.environ  # a hub id may be downloaded
    assert os.environ["OMP_WAIT_POLICY"] == "active"


@pytest.mark.usefixtures("environ")
def test_a_resumed_run_is_tuned_for_the_policies_it_recorded(tmp_path: Path) -> None:
    """``run --resume`` tunes the process for the run's recorded ``--policy`` and
    ``--aux-policy`` (not the options' defaults); a folder with no readable run gives none."""
    with RunStore.open(tmp_path) as store:
        store.create_job(
            "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/r",
            "r",
            {"job": {"policy": "local", "aux_policy": "hf:./model"}},
        )
    assert resumed_policies(tmp_path) == ["local", "hf:./model"]
    tune_process(policies=resumed_policies(tmp_path))
    assert os.environ["OMP_WAIT_POLICY"] == "passive"
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert resumed_policies(tmp_path / "nothing") == []
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.sqlite").write_bytes(b"not a database")
    assert resumed_policies(tmp_path / "broken") == []


#: ``os.environ`` (or a bare ``environ``) in a piece of source.
_ENVIRON = re.compile(r"\benviron\b")
#: Calls that change the whole process: only the door makes them.
_DOOR_ONLY = {"bound_malloc", "release_free_memory", "set_lm_head_tiles", "tune_process"}


def _offences(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            found += [f"imports {n}" for n in names if n == "ctypes"]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            target = ast.unparse(node.func)
            if name in _DOOR_ONLY or (
                _ENVIRON.search(target) and name in ("setdefault", "update", "pop", "clear")
            ):
                found.append(f"calls {target}")
            if name in ("putenv", "unsetenv", "set_num_threads", "set_verbosity_error"):
                found.append(f"calls {target}")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            found += [f"sets {ast.unparse(t)}" for t in targets if _ENVIRON.search(ast.unparse(t))]
    return found


def test_only_the_door_changes_the_process() -> None:
    """No module outside the CLI writes the environment, loads the C library, sets threads or
    log levels or TRL's tiles; in the CLI, only the door (cli/process.py) does, and commands
    call its one function."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ("cli/process.py", "model/seam.py"):
            continue  # the door, and the seam's definition of the tile setter
        allowed = {"calls tune_process"} if rel.startswith("cli/") else set()
        offenders += [f"{rel}: {o}" for o in _offences(path) if o not in allowed]
    assert offenders == []
