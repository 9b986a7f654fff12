"""What a grid's cell is as a SageMaker evaluation job (``agent-kit eval … --submit``).

- A cell's **policy** must be a model the service can evaluate (:func:`job_policy`): a public
  hub model id (``openai-reasoning-gpt-oss-20b``), a hub-content model ARN, or a trained model
  package on its base, ``BASE+MODEL_PACKAGE_ARN`` (sent as ``BaseModelArn`` and
  ``ModelPackageConfig.InputModelPackageArn``). A local-only policy (``scripted:``, ``hf:``,
  ``openai:``, ``local``, ``replay:``, ``random``) is refused.
- A cell's **settings** become the evaluator's flat hyperparameters (strings):
  ``eval_group_size`` (the grid's samples), ``temperature``, ``sampling_top_p``,
  ``sampling_max_tokens`` (the cell's inference settings, else the grid's base ones),
  ``pass_k_values`` (``[1, K]``) and ``success_threshold``. An ``env.*`` axis cannot be a job
  setting: the agent's environment is its runtime's.
- A cell's **job name** is its id and the grid's token (8 hex digits drawn once per eval
  directory and kept in ``jobs.json``): unique per grid, stable across re-runs.
- A finished job's **figures** (:func:`job_figures`) come from its metrics (the ``eval/reward/*``
  metrics the job logs to MLflow) and its DescribeJob (``BillableTokenUsage``): mean reward,
  success rate, pass@k, prompt / sample tokens per rollout and their cost. The metrics are
  aggregates over rollouts, so a job cell has no SE (the difference then shows none either).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from agent_kit.deploy.jobs import JobSpec, build_create_job, job_status
from agent_kit.emulator.policies.registry import policy_schemes
from agent_kit.errors import UsageError
from agent_kit.evaluation.figures import CellFigures
from agent_kit.evaluation.grid import Cell, GridSpec
from agent_kit.reporting.pricing import Pricing, TokenCounts, estimate_cost

__all__ = [
    "INFERENCE_HYPERPARAMETERS",
    "JobPolicy",
    "JobSettings",
    "cell_job_spec",
    "check_job_grid",
    "check_region",
    "job_figures",
    "job_name",
    "job_policy",
]

#: A cell's inference setting → the evaluator's flat hyperparameter name.
INFERENCE_HYPERPARAMETERS: Final[Mapping[str, str]] = {
    "temperature": "temperature",
    "top_p": "sampling_top_p",
    "max_tokens": "sampling_max_tokens",
}
_HUB_ID: Final = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._\-]{0,62}$")
_HUB_ARN: Final = re.compile(r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]+:[^:]*:hub-content/.+$")
_PACKAGE_ARN: Final = re.compile(
    r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]+:\d{12}:model-package/[a-zA-Z0-9\-/]+$"
)
_WHAT: Final = (
    "a hub model id, a hub-content model ARN, or BASE+MODEL_PACKAGE_ARN (a trained model on "
    "its base)"
)


@dataclass(frozen=True)
class JobPolicy:
    """A policy as the evaluation job takes it: the base model (hub id or ARN) and, for a
    trained model, its model package ARN."""

    model: str
    package: str | None = None


def job_policy(spec: str) -> JobPolicy:
    """The job form of a ``--policy`` spec; UsageError for a local-only policy or a spec that is
    no model the service can evaluate (see the module docstring)."""
    text = spec.strip()
    scheme = text.partition(":")[0].strip().lower()
    if scheme in policy_schemes() or text.lower() in policy_schemes():
        raise UsageError(
            f"--policy {spec!r} runs only on this machine; with --submit every policy must be "
            f"{_WHAT}"
        )
    base, plus, package = text.partition("+")
    if plus and not _PACKAGE_ARN.match(package):
        raise UsageError(f"--policy {spec!r}: {package!r} is not a SageMaker model package ARN")
    if _PACKAGE_ARN.match(base):
        raise UsageError(f"--policy {spec!r}: give the package's base model too (BASE+{base})")
    if not (_HUB_ARN.match(base) or _HUB_ID.match(base)):
        raise UsageError(f"--policy {spec!r}: not a model an evaluation job takes ({_WHAT})")
    return JobPolicy(base, package or None)


def check_job_grid(spec: GridSpec) -> None:
    """Refuse, before anything is submitted, a grid that cannot run as jobs: a local-only
    policy, an ``env.*`` axis."""
    for policy in spec.policies:
        job_policy(policy)
    for axis in spec.axes:
        if axis.is_env:
            raise UsageError(
                f"--grid {axis.name}: with --submit the agent's environment is its runtime's "
                "(deploy a runtime per value and run a grid on each)"
            )


@dataclass(frozen=True)
class JobSettings:
    """What every job of a grid shares: the deployed agent, the role, where the holdout and
    the output are in S3, the MLflow app the jobs log to, the region, the most evaluation
    jobs that may run at once (the account's quota: 1 by default), each job's runtime limit,
    and the deadline of the whole wait with its poll interval."""

    runtime_arn: str
    role_arn: str
    output: str
    dataset_uri: str
    region: str
    mlflow_arn: str | None = None
    max_concurrent: int = 1
    max_runtime_s: int = 86400
    timeout_s: float | None = None
    poll_interval_s: float = 60.0
    qualifier: str = "DEFAULT"

    def deadline_s(self, cells: int) -> float:
        """The wait's deadline: ``timeout_s``, else every turn of jobs at its runtime limit."""
        if self.timeout_s is not None:
            return self.timeout_s
        return turns(cells, self.max_concurrent) * self.max_runtime_s + 3600.0


#: An AWS Region code (``us-west-2``, ``us-gov-west-1``, ``ap-southeast-7``): the form AWS
#: lists its Regions under (https://docs.aws.amazon.com/global-infrastructure/latest/regions/
#: aws-regions.html); botocore refuses anything that is no host label
#: (``botocore.utils.validate_region_name``), which this form is within.
_REGION: Final = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")


def check_region(flag: str, region: str) -> None:
    """UsageError naming ``flag`` when ``region`` is no AWS Region code (:data:`_REGION`)."""
    if not _REGION.match(region):
        raise UsageError(f"{flag} {region!r} is not an AWS Region code (such as us-west-2)")


def turns(cells: int, quota: int) -> int:
    """How many rounds ``cells`` jobs take at ``quota`` at once."""
    return -(-cells // max(1, quota))


def job_name(cell: Cell, token: str) -> str:
    """The job name of ``cell`` in a grid whose token is ``token``."""
    return f"{cell.id[: 62 - len(token)].rstrip('-')}-{token}"


def _hyperparameters(spec: GridSpec, cell: Cell, k: int, threshold: float) -> dict[str, str]:
    values: dict[str, str] = {"eval_group_size": str(spec.samples)}
    for setting, name in INFERENCE_HYPERPARAMETERS.items():
        value = cell.inference.get(setting, spec.base.get(setting))
        if value is not None:
            values[name] = f"{value:g}" if isinstance(value, float) else str(value)
    values["pass_k_values"] = json.dumps(sorted({1, k}))
    values["success_threshold"] = f"{threshold:g}"
    return values


def cell_job_spec(
    spec: GridSpec, cell: Cell, settings: JobSettings, name: str, *, k: int, threshold: float
) -> JobSpec:
    """The evaluation job of ``cell`` (checked by :func:`build_create_job`'s rules)."""
    policy = job_policy(cell.policy)
    job = JobSpec(
        name=name,
        agent_arn=settings.runtime_arn,
        model=policy.model,
        role_arn=settings.role_arn,
        output=f"{settings.output.rstrip('/')}/{cell.id}/",
        region=settings.region,
        evaluation=settings.dataset_uri,
        mlflow_arn=settings.mlflow_arn,
        hyperparameters=_hyperparameters(spec, cell, k, threshold),
        qualifier=settings.qualifier,
        input_model_package=policy.package,
        max_runtime_s=settings.max_runtime_s,
        category="AgentRFTEvaluation",
    )
    build_create_job(job, model_arn=job.model)  # the request's own checks, before any request
    return job


def _number(metrics: Mapping[str, Any], name: str) -> float | None:
    value = metrics.get(name)
    return float(value) if isinstance(value, int | float) else None


def job_figures(
    metrics: Mapping[str, Any],
    describe: Mapping[str, Any],
    *,
    k: int,
    rollouts: int,
    prompts: int,
    pricing: Pricing,
) -> CellFigures:
    """The figures of a completed evaluation job: ``metrics`` its ``eval/reward/*`` metrics,
    ``describe`` its DescribeJob answer, ``rollouts`` / ``prompts`` the grid's shape (used
    when the metrics do not count the rollouts)."""
    status = job_status(describe)
    succeeded = _number(metrics, "eval/reward/succeeded_rollouts")
    failed = _number(metrics, "eval/reward/failed_rollouts")
    counted = int(succeeded + failed) if succeeded is not None and failed is not None else 0
    n = counted or rollouts
    success = succeeded / counted if counted and succeeded is not None else None
    usage = status.get("billable_token_usage") or {}
    prefill = int(usage.get("PrefillTokenCount") or 0)
    sample = int(usage.get("SampleTokenCount") or 0)
    cost = estimate_cost(TokenCounts(prefill=prefill, sample=sample), pricing)
    return CellFigures(
        state="completed",
        mean=_number(metrics, "eval/reward/mean"),
        se=None,
        success_rate=success if success is not None else _number(metrics, "eval/reward/pass_at_1"),
        pass_at_k={kk: _number(metrics, f"eval/reward/pass_at_{kk}") for kk in sorted({1, k})},
        turns=_number(metrics, "eval/turns/mean"),
        prompt_tokens=prefill / n if usage and n else None,
        sample_tokens=sample / n if usage and n else None,
        cost=cost.prefill + cost.sample if usage else None,
        currency=pricing.currency,
        n=n,
        prompts=prompts,
        source="job",
        location=status.get("arn"),
    )
