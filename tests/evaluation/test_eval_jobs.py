"""The grid as SageMaker evaluation jobs (``agent-kit eval … --submit``).

Against the loopback fake of the SageMaker control plane, ``tests/fakes/aws_control.FakeAws``
(real boto3 clients pointed at it with ``AWS_ENDPOINT_URL_SAGEMAKER``; not botocore's
Stubber), as the ``job`` commands are tested in tests/deploy/test_jobs.py. A created job is
InProgress, then Completed after two DescribeJob polls; the fake keeps the most jobs ever
running at once. The library tests inject the clock, the sleep and the metrics reader; the CLI
test reads the metrics from a local MLflow store the fake's jobs name in ``MlflowDetails``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.aws_control import FakeAws

from agent_kit.cli import main
from agent_kit.deploy.agentcore import boto3_clients
from agent_kit.errors import DeployError
from agent_kit.evaluation.grid import GridSpec, grid_spec
from agent_kit.evaluation.job_cells import JOBS_FILE, JobGridRun, run_job_grid
from agent_kit.evaluation.job_specs import JobSettings, job_policy
from agent_kit.evaluation.table import build_table
from agent_kit.reporting.pricing import default_pricing

pytestmark = pytest.mark.e2e  # a loopback server

RUNTIME = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/wordle-abcdefghij"
ROLE = "arn:aws:iam::123456789012:role/JobRole"
MLFLOW = "arn:aws:sagemaker:us-west-2:123456789012:mlflow-app/app-1"
BASE = "gpt-oss-20b"
TRAINED = f"{BASE}+arn:aws:sagemaker:us-west-2:123456789012:model-package/wordle/3"
#: Mean reward and successes (of 8 rollouts: 2 prompts × 4) each model's job reports.
OUTCOME = {"gpt-oss-20b": (0.25, 2), "wordle-3": (0.75, 6)}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAws]:
    """A started fake with the process environment pointing boto3 at it."""
    aws = FakeAws().start()
    for key, value in aws.env().items():
        monkeypatch.setenv(key, value)
    yield aws
    aws.stop()


@pytest.fixture
def holdout(tmp_path: Path) -> Path:
    """A local copy of a two-prompt holdout (its S3 copy is what the jobs read)."""
    path = tmp_path / "holdout.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": "b"}\n', encoding="utf-8")
    return path


def _label(job: dict[str, Any]) -> str:
    return "wordle-3" if job["JobName"].startswith("wordle-3") else "gpt-oss-20b"


def _spec(holdout: Path) -> GridSpec:
    return grid_spec(
        RUNTIME, "s3://data/holdout.jsonl", [BASE, TRAINED], ["temperature=0,1"], 4, {}, job_policy
    )


def _settings(quota: int = 1) -> JobSettings:
    return JobSettings(
        runtime_arn=RUNTIME,
        role_arn=ROLE,
        output="s3://out/eval/",
        dataset_uri="s3://data/holdout.jsonl",
        region="us-west-2",
        mlflow_arn=MLFLOW,
        max_concurrent=quota,
        poll_interval_s=5.0,
    )


def _metrics(describe: Any) -> dict[str, float]:
    mean, succeeded = OUTCOME[_label(describe)]
    return {
        "eval/reward/mean": mean,
        "eval/reward/succeeded_rollouts": float(succeeded),
        "eval/reward/failed_rollouts": float(8 - succeeded),
        "eval/reward/pass_at_1": succeeded / 8,
        "eval/reward/pass_at_4": 0.5,
    }


def _usage(job: dict[str, Any], document: dict[str, Any]) -> None:
    document["ServiceOutput"] = {
        "BillableTokenUsage": {"PrefillTokenCount": 8_000, "SampleTokenCount": 1_600},
        "MlflowDetails": {"MlflowExperimentId": "1", "MlflowRunId": f"run-{job['JobName']}"},
    }


def _run(
    spec: GridSpec, out: Path, settings: JobSettings, sleep: Any = None, read: Any = None
) -> JobGridRun:
    now = [0.0]

    def tick(seconds: float) -> None:
        now[0] += seconds
        if sleep is not None:
            sleep()

    return run_job_grid(
        spec,
        out,
        settings,
        boto3_clients("us-west-2")("sagemaker"),
        k=4,
        threshold=1.0,
        prompts=2,
        pricing=default_pricing(),
        read_metrics=read or _metrics,
        echo=lambda _line: None,
        clock=lambda: now[0],
        sleep=tick,
    )


def test_grid_runs_one_job_at_a_time_and_fills_the_table(
    fake: FakeAws, holdout: Path, tmp_path: Path
) -> None:
    """Four cells, quota 1: four jobs, never two running at once; each job carries its cell's
    flat hyperparameters; the metrics land in the table with the difference (no SE)."""
    fake.on_done = _usage
    spec = _spec(holdout)
    done = _run(spec, tmp_path / "eval", _settings())
    assert fake.max_running == 1
    created = [r.json for r in fake.find("CreateJob")]
    assert len(created) == 4
    hps = [
        json.loads(c["JobConfigDocument"])["EvaluationConfig"]["HyperParameters"] for c in created
    ]
    assert hps[0] == {
        "eval_group_size": "4",
        "temperature": "0",
        "pass_k_values": "[1, 4]",
        "success_threshold": "1",
    }
    assert [h["temperature"] for h in hps] == ["0", "0", "1", "1"]
    trained = json.loads(created[1]["JobConfigDocument"])
    assert trained["ModelPackageConfig"] == {"InputModelPackageArn": TRAINED.split("+", 1)[1]}
    assert trained["EvaluationConfig"]["BaseModelArn"].endswith("/Model/gpt-oss-20b/1.0.0")
    assert fake.operations().count("DescribeHubContent") == 1  # resolved once
    table = build_table(spec, done.figures, compare=None, k=4, threshold=1.0)
    row = table.row("wordle-3-temperature-0")
    assert (row.figures.mean, row.figures.success_rate, row.figures.source) == (0.75, 0.75, "job")
    assert row.figures.pass_at_k == {1: 0.75, 4: 0.5}
    assert row.figures.prompt_tokens == 1_000
    assert row.figures.sample_tokens == 200
    assert row.figures.location is not None
    assert row.figures.location.startswith("arn:aws:sagemaker")
    first = table.differences[0]
    assert first.difference == pytest.approx(-0.5)
    assert first.se is None
    assert first.significant is None


def test_quota_two_runs_two_at_once(fake: FakeAws, holdout: Path, tmp_path: Path) -> None:
    """--max-concurrent-jobs is the limit: with 2 the fake sees two jobs running at once."""
    fake.on_done = _usage
    _run(_spec(holdout), tmp_path / "eval", _settings(quota=2))
    assert fake.max_running == 2
    assert len(fake.find("CreateJob")) == 4


def test_another_running_job_holds_the_quota(fake: FakeAws, holdout: Path, tmp_path: Path) -> None:
    """A job of the account already in progress fills quota 1: nothing is submitted until the
    deadline, and the cells are marked pending (a re-run submits them)."""
    fake.add_job("someone-elses", RUNTIME, category="AgentRFTEvaluation")
    settings = JobSettings(**{**_settings().__dict__, "timeout_s": 60.0})
    done = _run(_spec(holdout), tmp_path / "eval", settings)
    assert fake.find("CreateJob") == []
    assert {f.state for f in done.figures.values()} == {"pending"}


class _Interrupt(Exception):
    pass


def test_an_interrupted_grid_resumes_without_resubmitting(
    fake: FakeAws, holdout: Path, tmp_path: Path
) -> None:
    """Interrupted once the first job finished (the second submitted): the re-run keeps the
    first, waits for the second (not resubmitted) and submits the other two."""
    fake.on_done = _usage
    out = tmp_path / "eval"
    state = out / JOBS_FILE

    def interrupt() -> None:
        cells = json.loads(state.read_text(encoding="utf-8"))["cells"]
        if any(c.get("figures") for c in cells.values()) and len(cells) >= 2:
            raise _Interrupt

    spec = _spec(holdout)
    with pytest.raises(_Interrupt):
        _run(spec, out, _settings(), sleep=interrupt)
    first = [r.json["JobName"] for r in fake.find("CreateJob")]
    assert len(first) == 2
    done = _run(spec, out, _settings())
    names = [r.json["JobName"] for r in fake.find("CreateJob")]
    assert len(names) == 4
    assert len(set(names)) == 4
    assert done.submitted == tuple(c.id for c in spec.cells()[2:])
    assert {f.state for f in done.figures.values()} == {"completed"}
    assert fake.max_running == 1


def test_a_failed_job_marks_its_cell(fake: FakeAws, holdout: Path, tmp_path: Path) -> None:
    """A job that ends Failed marks its cell failed with the job's reason; the others finish."""

    def outcome(job: dict[str, Any], document: dict[str, Any]) -> None:
        _usage(job, document)
        if job["JobName"].startswith("wordle-3-temperature-1"):
            job["JobStatus"] = "Failed"
            job["FailureReason"] = "ClientError: the runtime did not answer"

    fake.on_done = outcome
    done = _run(_spec(holdout), tmp_path / "eval", _settings())
    failed = done.figures["wordle-3-temperature-1"]
    assert (failed.state, failed.reason) == ("failed", "ClientError: the runtime did not answer")
    assert sum(f.state == "completed" for f in done.figures.values()) == 3


def test_a_metrics_read_that_failed_is_read_again(
    fake: FakeAws, holdout: Path, tmp_path: Path
) -> None:
    """The jobs complete but their metrics cannot be read (the MLflow run is not found): the
    cells are errors this time and jobs.json keeps no figures for them, so the next run reads
    them again (DescribeJob, then the metrics), submitting nothing."""
    fake.on_done = _usage
    out = tmp_path / "eval"

    def unreadable(describe: Any) -> dict[str, float]:
        raise DeployError(f"MLflow run run-{describe['JobName']}: not found")

    first = _run(_spec(holdout), out, _settings(), read=unreadable)
    assert {f.state for f in first.figures.values()} == {"error"}
    cells = json.loads((out / JOBS_FILE).read_text(encoding="utf-8"))["cells"]
    assert {c["status"] for c in cells.values()} == {"Completed"}
    assert not any("figures" in c for c in cells.values())
    again = _run(_spec(holdout), out, _settings())
    assert {f.state for f in again.figures.values()} == {"completed"}
    assert again.figures["wordle-3-temperature-0"].mean == 0.75
    assert again.submitted == ()
    assert len(fake.find("CreateJob")) == 4


def test_an_old_state_with_an_error_for_a_completed_job_is_read_again(
    fake: FakeAws, holdout: Path, tmp_path: Path
) -> None:
    """A jobs.json of an earlier build (an `error` figure kept for a Completed job) is read
    again, not kept."""
    fake.on_done = _usage
    out = tmp_path / "eval"
    _run(_spec(holdout), out, _settings())
    state = json.loads((out / JOBS_FILE).read_text(encoding="utf-8"))
    for entry in state["cells"].values():
        entry["figures"] = {"state": "error", "reason": "MLflow run x: not found"}
    (out / JOBS_FILE).write_text(json.dumps(state), encoding="utf-8")
    again = _run(_spec(holdout), out, _settings())
    assert {f.state for f in again.figures.values()} == {"completed"}


# --------------------------------------------------------------------------- the command


def _argv(holdout: Path, out: Path, *extra: str, policy: str = TRAINED) -> list[str]:
    return [
        "eval",
        "--dataset",
        str(holdout),
        "--policy",
        BASE,
        "--policy",
        policy,
        "--grid",
        "temperature=0,1",
        "--samples",
        "4",
        "--out",
        str(out),
        "--submit",
        "--runtime-arn",
        RUNTIME,
        "--role-arn",
        ROLE,
        "--s3-output",
        "s3://out/eval/",
        "--dataset-uri",
        "s3://data/holdout.jsonl",
        "--mlflow-arn",
        MLFLOW,
        "--poll-interval",
        "0",
        *extra,
    ]


def _mlflow_runs(uri: str) -> dict[str, str]:
    """One MLflow run per model with its job's metrics; model label → run id."""
    from agent_kit.export.tracking import mlflow_quiet, require_mlflow

    client = require_mlflow().MlflowClient(uri)
    runs = {}
    with mlflow_quiet():
        experiment = client.create_experiment("jobs")
        for label in OUTCOME:
            run = client.create_run(experiment)
            for key, value in _metrics({"JobName": label}).items():
                client.log_metric(run.info.run_id, key, value)
            runs[label] = run.info.run_id
    return runs


def _jobs_name_their_runs(fake: FakeAws, uri: str) -> str:
    """The MLflow store at ``uri`` given a run per model (:func:`_mlflow_runs`) that each
    finished job names in its MlflowDetails; the store's URI."""
    runs = _mlflow_runs(uri)

    def outcome(job: dict[str, Any], document: dict[str, Any]) -> None:
        _usage(job, document)
        document["ServiceOutput"]["MlflowDetails"]["MlflowRunId"] = runs[_label(job)]

    fake.on_done = outcome
    return uri


def test_submit_prints_the_table_from_the_jobs_metrics(
    fake: FakeAws,
    holdout: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    mlflow_store: Callable[[Path], str],
) -> None:
    """`agent-kit eval … --submit --json`: four jobs one at a time, the metrics read from the
    MLflow runs the jobs name, the table with the difference, table.json and eval.html."""
    uri = _jobs_name_their_runs(fake, mlflow_store(tmp_path / "jobs.db"))
    out = tmp_path / "eval"
    code = main(_argv(holdout, out, "--metrics-uri", uri, "--json"))
    assert code == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    means = {c["id"]: c["figures"]["mean"] for c in doc["cells"]}
    assert means == {
        "gpt-oss-20b-temperature-0": 0.25,
        "wordle-3-temperature-0": 0.75,
        "gpt-oss-20b-temperature-1": 0.25,
        "wordle-3-temperature-1": 0.75,
    }
    # the policies at each temperature, then each policy at temperature 1 against 0
    assert [d["difference"] for d in doc["differences"]] == [-0.5, -0.5, 0.0, 0.0]
    assert fake.max_running == 1
    assert (out / "table.json").is_file()
    assert (out / "eval.html").is_file()
    again = main(_argv(holdout, out, "--metrics-uri", uri))
    assert again == 0
    assert len(fake.find("CreateJob")) == 4  # the re-run kept every cell
    printed = capsys.readouterr().out
    assert "wordle-3" in printed
    assert "0.750" in printed


def test_a_corrected_metrics_uri_is_read_on_the_rerun(
    fake: FakeAws,
    holdout: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    mlflow_store: Callable[[Path], str],
) -> None:
    """A first run with a --metrics-uri that holds no such runs: the jobs complete, their
    cells are errors (exit 9); the re-run with the right --metrics-uri reads them (exit 0),
    submitting no job again."""
    uri = _jobs_name_their_runs(fake, mlflow_store(tmp_path / "jobs.db"))
    out = tmp_path / "eval"
    wrong = mlflow_store(tmp_path / "other.db")
    assert main(_argv(holdout, out, "--metrics-uri", wrong, "--json")) == 9
    capsys.readouterr()
    assert main(_argv(holdout, out, "--metrics-uri", uri, "--json")) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {c["figures"]["state"] for c in doc["cells"]} == {"completed"}
    assert doc["cells"][1]["figures"]["mean"] == 0.75
    assert len(fake.find("CreateJob")) == 4


def test_submit_plan_gives_the_job_side(
    fake: FakeAws, holdout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--plan --submit: jobs × rounds at the quota, rollouts; sends nothing."""
    code = main(_argv(holdout, tmp_path / "eval", "--plan", "--json"))
    assert code == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert doc["rollouts"] == 4 * 2 * 4
    assert doc["jobs"] == {
        "count": 4,
        "max_concurrent": 1,
        "turns": 4,
        "max_runtime_s": 4 * 86400,
        "wall_clock_s": None,
    }
    assert fake.requests == []


@pytest.mark.parametrize(
    ("extra", "policy", "expected"),
    [
        ((), "scripted:examples/wordle/policies.py:Solver", "runs only on this machine"),
        ((), "hf:Qwen/Qwen3-0.6B", "runs only on this machine"),
        ((), "arn:aws:sagemaker:us-west-2:123456789012:model-package/wordle/3", "base model"),
        (("--job-timeout", "7200", "--max-runtime", "3600"), TRAINED, "4 evaluation jobs"),
        (("--grid", "env.REASONING_EFFORT=low,high"), TRAINED, "runtime's"),
        (("--max-concurrent-jobs", "0"), TRAINED, "--max-concurrent-jobs must be"),
        (("--region", "us-west-2/../evil"), TRAINED, "--region 'us-west-2/../evil' is not"),
        (("--dataset-uri", "https://data/holdout.jsonl"), TRAINED, "--dataset-uri"),
        (("--s3-output", "s3://"), TRAINED, "--s3-output"),
        (("--role-arn", "JobRole"), TRAINED, "--role-arn 'JobRole' is not an IAM role ARN"),
        (("--temperature", "nan"), TRAINED, "temperature"),
    ],
)
def test_bad_submit_input_is_refused_before_any_request(
    fake: FakeAws,
    holdout: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: tuple[str, ...],
    policy: str,
    expected: str,
) -> None:
    """A local policy, a package without its base, a grid over the quota and deadline, an env
    axis, a bad quota, region, S3 URI (named by its flag), role or setting: one line, exit 2,
    before any request (ListJobs included), nothing written."""
    out = tmp_path / "eval"
    code = main(_argv(holdout, out, *extra, policy=policy))
    err = capsys.readouterr().err
    assert code == 2
    assert expected in err
    assert "Traceback" not in err
    assert fake.requests == []
    assert not out.exists()


def test_submit_needs_its_options(
    fake: FakeAws, holdout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--submit without --mlflow-arn (where the table reads the metrics) is refused; a job
    option without --submit too."""
    argv = _argv(holdout, tmp_path / "eval")
    i = argv.index("--mlflow-arn")
    assert main(argv[:i] + argv[i + 2 :]) == 2
    assert "--submit needs --mlflow-arn" in capsys.readouterr().err
    argv = _argv(holdout, tmp_path / "eval")
    argv.remove("--submit")
    assert main(argv) == 2
    assert "add --submit" in capsys.readouterr().err
    assert fake.requests == []
