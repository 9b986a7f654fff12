"""The support example end to end: judged rewards and a simulated customer, offline.

Real processes and sockets on loopback: ``agent-kit run`` starts the emulator and the agent
(``examples/support/agent.py``) as a subprocess; the policy, the judges and the customer are
scripted (``examples/support/policies.py``) and answer on the emulator's policy and ``/aux``
routes. Replay and ``doctor reward`` read the recorded run (``doctor reward`` and ``job plan``
through the CLI's ``main()`` in this process); nothing is mocked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_kit.cli import main
from agent_kit.emulator.aux_replies import judge_reply
from agent_kit.emulator.schemas import PolicyReply, PolicyRequest, ToolCall
from agent_kit.store import RunStore

pytest.importorskip("strands_evals")

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "examples" / "support"
POLICIES = SUPPORT / "policies.py"
CLI = shutil.which("agent-kit", path=str(Path(sys.executable).parent)) or "agent-kit"
HERE = Path(__file__).resolve()


def invalid_forever(request: PolicyRequest) -> PolicyReply:
    """A judge whose answer never validates (a score of "high"): only doctor's plays ask it."""
    args = {"score": "high", "test_pass": True, "reason": "great"}
    return PolicyReply(tool_calls=(ToolCall("EvaluationOutput", args),))


class Flaky:
    """A judge that fails its first six calls (the auxiliary model errs), then answers 0.8."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: PolicyRequest) -> PolicyReply:
        """Fail, then answer."""
        self.calls += 1
        if self.calls <= 6:
            raise RuntimeError("the judge's model is unavailable")
        return judge_reply(0.8, "fine")


def obeys_injection(request: PolicyRequest) -> PolicyReply:
    """A judge that obeys a score written anywhere in what it reads (0.5 otherwise)."""
    text = str(request.messages[-1].get("content") or "")
    return judge_reply(1.0 if "SCORE=1.0" in text else 0.5, "read")


pytestmark = pytest.mark.e2e


def _agent_kit(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``agent-kit ARGS`` from the repository root, without any auxiliary model configured."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_KIT_AUX")}
    proc = subprocess.run(
        [CLI, *args], capture_output=True, text=True, timeout=600, check=False, cwd=ROOT, env=env
    )
    if check:
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


AgentKit = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def in_process(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> AgentKit:
    """:func:`_agent_kit`, in this process through the CLI's ``main()``: for the commands that
    only read a recorded run (``doctor reward``, ``job plan``), whose claims are not about a
    process of their own."""
    monkeypatch.chdir(ROOT)
    for name in [k for k in os.environ if k.startswith("AGENT_KIT_AUX")]:
        monkeypatch.delenv(name)

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        proc = subprocess.CompletedProcess([CLI, *args], code, captured.out, captured.err)
        if check:
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        return proc

    return run


def _run(tmp_path: Path, aux: str, name: str) -> tuple[dict[str, Any], Path]:
    out = tmp_path / name
    proc = _agent_kit(
        "run", str(SUPPORT / "agent.py"), "--dataset", str(SUPPORT / "cases.jsonl"),
        "--policy", f"scripted:{POLICIES}:SupportAgent",
        "--aux-policy", f"scripted:{POLICIES}:{aux}",
        "--group-size", "2", "--json", "--out", str(out), "--name", name,
        check=aux != "GarbageAux",
    )  # fmt: skip
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    (run_dir,) = out.glob("*/")
    return summary, run_dir


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """One offline run of the example with the consistent judge and the scripted customer."""
    return _run(tmp_path_factory.mktemp("support"), "Aux", "support-e2e")


def test_the_example_runs_offline_with_judged_terms_and_auxiliary_tokens(
    judged_run: tuple[dict[str, Any], Path],
) -> None:
    """Every rollout is rewarded with judged resolution and tone terms carrying the judge's
    reason, and the summary counts the judge and customer calls as auxiliary tokens and cost."""
    summary, run_dir = judged_run
    assert summary["counts"]["rewarded"] == 6
    aux = summary["auxiliary"]
    assert set(aux["by_kind"]) == {"judge", "user"}
    assert aux["by_kind"]["judge"]["calls"] == 12
    assert aux["total_tokens"] > 0
    assert aux["cost"] > 0
    assert summary["tokens"]["turns"] == summary["counts"]["turns"]
    with RunStore.open(run_dir, readonly=True) as store:
        (job,) = store.list_jobs()
        bodies = [e.detail["body"] for e in store.list_events(kind="invocation")]
        assert sum(len(v) for v in store.job_aux_turns(job.arn).values()) == aux["calls"]
    for body in bodies:
        resolution = body["reward_breakdown"]["resolution"]
        assert resolution["judged"] is True
        assert resolution["reason"] in ("resolved", "unresolved")
    report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "Auxiliary calls (judge, simulated user)" in report
    assert "judged: resolved" in report


def _replay(run_dir: Path, *extra: str) -> dict[str, Any]:
    """The JSON report of ``agent-kit replay RUN --json EXTRA…``."""
    proc = _agent_kit("replay", str(run_dir), "--json", *extra)
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


@pytest.fixture(scope="module")
def subprocess_replay(judged_run: tuple[dict[str, Any], Path]) -> dict[str, Any]:
    """The report of one ``agent-kit replay`` (agent subprocesses) of :func:`judged_run`."""
    return _replay(judged_run[1])


def test_a_replay_of_the_judged_simulated_run_is_identical_without_any_model(
    subprocess_replay: dict[str, Any],
) -> None:
    """``agent-kit replay`` answers the judge and the customer from the recording: every
    episode replays identical with no auxiliary model reachable."""
    statuses = {e["status"] for e in subprocess_replay["episodes"]}
    assert statuses == {"identical"}, subprocess_replay


def test_in_process_replay_agrees_with_the_subprocess_replay(
    judged_run: tuple[dict[str, Any], Path], subprocess_replay: dict[str, Any]
) -> None:
    """``agent-kit replay --in-process`` answers the customer's opening, its replies and the
    judges from the recording by content: every episode's verdict equals the subprocess
    replay's (identical), none ends after 0 turns."""
    in_process = _replay(judged_run[1], "--in-process")
    verdicts = [
        {e["trajectory_id"]: e["status"] for e in report["episodes"]}
        for report in (subprocess_replay, in_process)
    ]
    assert verdicts[0] == verdicts[1]
    assert set(verdicts[0].values()) == {"identical"}


def test_doctor_rescoring_with_the_entrypoint_plays_the_simulated_customer(
    judged_run: tuple[dict[str, Any], Path], in_process: AgentKit
) -> None:
    """``doctor reward --entrypoint`` re-scores each episode in-process with the recorded
    customer and judge answers: the re-scored rewards are the recorded ones, 0 errors."""
    _, run_dir = judged_run
    proc = in_process(
        "doctor", "reward", str(run_dir), "--entrypoint", str(SUPPORT / "agent.py"), "--json",
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    audit = json.loads(proc.stdout)
    assert [f for f in audit["findings"] if f["severity"] == "error"] == []


def test_the_projection_and_the_job_plan_count_the_auxiliary_cost(
    judged_run: tuple[dict[str, Any], Path], in_process: AgentKit
) -> None:
    """The judge and customer calls are most of a support run's cost: the summary's projection
    and ``job plan`` (its table and ``--json``) add them to the MTRL cost."""
    summary, run_dir = judged_run
    proj = summary["projection"]
    assert proj["auxiliary"]["cost"] > 0
    assert proj["total_cost"] == pytest.approx(proj["cost"]["total"] + proj["auxiliary"]["cost"])
    assert "auxiliary calls" in proj["text"]
    doc = json.loads(in_process("job", "plan", str(run_dir), "--json").stdout)
    assert doc["auxiliary"]["total_with_auxiliary"]["p50"] == pytest.approx(
        doc["cost"]["total"]["p50"] + doc["auxiliary"]["cost"]
    )
    assert "total + auxiliary" in in_process("job", "plan", str(run_dir)).stdout


def test_doctor_passes_the_consistent_judge(
    judged_run: tuple[dict[str, Any], Path], in_process: AgentKit
) -> None:
    """``doctor reward`` re-judges the run's episodes and finds the example's judge steady
    under the padding, flattery, reorder and injection probes."""
    _, run_dir = judged_run
    proc = in_process("doctor", "reward", str(run_dir), "--json", check=False)
    audit = json.loads(proc.stdout)
    judge = [f for f in audit["findings"] if f["check"].startswith("judge")]
    assert {f["check"] for f in judge} == {
        "judge-share",
        "judge-consistency",
        "judge-bias",
        "judge-calls",
    }
    assert all(f["severity"] != "error" for f in judge), judge


def test_doctor_flags_a_length_biased_judge(
    judged_run: tuple[dict[str, Any], Path], in_process: AgentKit
) -> None:
    """Audited with a judge that scores length, ``doctor reward`` reports a judge-bias error
    on the padding probe with the score shifts as evidence, and exits 13."""
    _, run_dir = judged_run
    aux = f"scripted:{POLICIES}:LengthBiasedAux"
    proc = in_process("doctor", "reward", str(run_dir), "--aux-policy", aux, "--json", check=False)
    assert proc.returncode == 13, proc.stderr[-2000:]
    audit = json.loads(proc.stdout)
    bias = [f for f in audit["findings"] if f["check"] == "judge-bias" and f["severity"] == "error"]
    assert any(f["evidence"]["probe"] == "padding" for f in bias), audit["findings"]
    assert all(f["evidence"]["mean_shift"] > 0.1 for f in bias)


def test_a_judge_answering_garbage_ends_its_rollouts_on_the_floor_with_the_reason(
    tmp_path: Path,
) -> None:
    """A judge that answers prose instead of a score ends every rollout on the floor, the
    summary and the report naming ``judge: …`` as the agent-side failure."""
    summary, run_dir = _run(tmp_path, "GarbageAux", "support-garbage")
    assert summary["floor_rewards"] == 6
    (failure,) = summary["agent_failures"]
    assert failure["reason"].startswith("judge: resolution: ")
    assert "judge: resolution: " in (run_dir / "report.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path]:
    """The first command of the example's README, run from the repository root as written (its
    ``--out`` pointed at a temporary folder): the command and its ``--out`` folder."""
    import re
    import shlex

    text = (SUPPORT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block is not None
    command = shlex.split(block.group(1).replace("\\\n", " ").splitlines()[0])
    out = tmp_path_factory.mktemp("readme") / "runs"
    command[command.index("--out") + 1] = str(out)
    _agent_kit(*command[1:])
    return command, out


def test_the_readme_first_run_command_runs_as_pasted(readme_run: tuple[list[str], Path]) -> None:
    """The first command of the example's README runs from the repository root as written
    (its ``--out`` pointed at a temporary folder) and exits 0."""
    command, out = readme_run
    assert command[:2] == ["agent-kit", "run"]
    assert list(out.glob("*/summary.json"))


def test_the_example_passes_its_own_doctor(
    readme_run: tuple[list[str], Path], in_process: AgentKit
) -> None:
    """Run as its README says (group size 4, success at 1.5), the teaching example passes
    ``doctor reward``: no error, no warning, its declared orderings hold; success is neither
    0 % nor 100 %, and a conversation the customer ended satisfied says so."""
    command, out = readme_run
    assert command[command.index("--group-size") + 1] == "4"
    assert command[command.index("--success-threshold") + 1] == "1.5"
    (run_dir,) = out.glob("*/")
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    succeeded = summary["metrics"]["eval/reward/succeeded_rollouts"]
    assert 0 < succeeded < summary["counts"]["rewarded"], summary["metrics"]
    proc = in_process("doctor", "reward", str(run_dir), "--json", check=False)
    audit = json.loads(proc.stdout)
    loud = [f for f in audit["findings"] if f["severity"] != "info"]
    assert loud == [], loud
    orderings = [f for f in audit["findings"] if f["check"] == "ordering"]
    assert any("right action > wrong action" in f["title"] for f in orderings), orderings
    report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "goal was met" in report
    assert "stopped replying with tool calls before the task finished" not in report


def test_invoke_shows_a_failing_judge_and_exits_with_the_reward_code() -> None:
    """``agent-kit invoke`` of one case with a garbage judge prints the floor reward's
    ``judge: …`` reason and exits 6 (JudgeError, a RewardError)."""
    proc = _agent_kit(
        "invoke", str(SUPPORT / "agent.py"), "--dataset", str(SUPPORT / "cases.jsonl"),
        "--policy", f"scripted:{POLICIES}:SupportAgent",
        "--aux-policy", f"scripted:{POLICIES}:GarbageAux",
        check=False,
    )  # fmt: skip
    assert proc.returncode == 6, proc.stderr[-2000:]
    assert "judge: resolution: " in proc.stderr


def _doctor_with(
    in_process: AgentKit, run_dir: Path, aux: str
) -> tuple[subprocess.CompletedProcess[str], Any]:
    proc = in_process(
        "doctor", "reward", str(run_dir), "--aux-policy", f"scripted:{HERE}:{aux}", "--json",
        check=False,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc, json.loads(proc.stdout)


def test_doctor_ends_on_a_judge_that_never_answers_validly_and_says_it_failed(
    judged_run: tuple[dict[str, Any], Path], in_process: AgentKit
) -> None:
    """Audited with a judge whose answers never validate, the doctor finishes (each judgment
    bounded to the judge's max_calls), reports that every judgment failed (an error, exit 13),
    never "steady", and counts the calls it made: at most 3 per judgment."""
    _, run_dir = judged_run
    proc, audit = _doctor_with(in_process, run_dir, "invalid_forever")
    assert proc.returncode == 13, proc.stderr[-2000:]
    checks = {f["check"]: f for f in audit["findings"]}
    failed = checks["judge-failed"]
    assert failed["severity"] == "error"
    assert failed["title"].startswith("every judgment failed")
    assert "no valid answer in 3 judge calls" in failed["title"]
    assert not any("steady" in f["title"] for f in audit["findings"])
    calls = checks["judge-calls"]["evidence"]
    assert 0 < calls["calls"] <= 3 * failed["evidence"]["plays"]


def test_doctor_reports_a_flaky_judge_as_a_finding(
    judged_run: tuple[dict[str, Any], Path], in_process: AgentKit
) -> None:
    """A judge that fails its first six calls, then answers, is a judge-failed warning with
    the count; the rest is measured on the judgments that scored (no StatisticsError)."""
    _, run_dir = judged_run
    proc, audit = _doctor_with(in_process, run_dir, "Flaky")
    assert proc.returncode in (0, 13), proc.stderr[-2000:]
    failed = [f for f in audit["findings"] if f["check"] == "judge-failed"]
    assert failed, audit["findings"]
    assert failed[0]["severity"] == "warn"
    assert 0 < failed[0]["evidence"]["failed"] < failed[0]["evidence"]["plays"]
    assert any(f["check"] == "judge-consistency" for f in audit["findings"])


def test_doctor_probes_an_injection_and_names_the_policy_and_its_calls(
    judged_run: tuple[dict[str, Any], Path], in_process: AgentKit
) -> None:
    """The injection probe (an answer closing ``</Output>`` and adding its own rubric) flags a
    judge that obeys it; the judge-calls finding names the auxiliary policy asked, its calls
    and their cost at the auxiliary price."""
    _, run_dir = judged_run
    proc, audit = _doctor_with(in_process, run_dir, "obeys_injection")
    assert proc.returncode == 13, proc.stderr[-2000:]
    bias = [f for f in audit["findings"] if f["check"] == "judge-bias"]
    assert {f["evidence"]["probe"] for f in bias if f["severity"] == "error"} == {"injection"}
    (calls,) = [f for f in audit["findings"] if f["check"] == "judge-calls"]
    assert "obeys_injection" in calls["title"]
    assert calls["evidence"]["calls"] > 0
    assert calls["evidence"]["cost"] > 0
    assert "Claude 3 Haiku" in calls["evidence"]["label"]
