"""Auxiliary calls in the summary, the job plan, the MLflow metrics and the pricing file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_kit.errors import UsageError
from agent_kit.export.mlflow import with_aux_metrics
from agent_kit.export.steps import StepMetrics
from agent_kit.reporting.auxiliary import auxiliary_of, plan_auxiliary
from agent_kit.reporting.pricing import BEDROCK_AUX_DEFAULT, default_pricing, load_pricing
from agent_kit.reporting.summary_schema import Summary
from agent_kit.store import AuxTurnRow


def _row(tid: str, idx: int, kind: str, inp: int, out: int) -> AuxTurnRow:
    return AuxTurnRow(tid, idx, kind, {}, {}, inp, out, False, 1.0)


CALLS = {
    "t1": [_row("t1", 0, "user", 1000, 10), _row("t1", 1, "judge", 500, 20)],
    "t2": [_row("t2", 0, "judge", 500, 20)],
}


def test_auxiliary_tokens_are_counted_by_kind_and_priced_as_bedrock_on_demand() -> None:
    """Calls and tokens by kind, per rollout, and the cost at the default Bedrock prices."""
    aux = auxiliary_of(CALLS, 2, default_pricing())
    assert aux is not None
    assert (aux.calls, aux.input_tokens, aux.output_tokens) == (3, 2000, 50)
    assert aux.by_kind["judge"].calls == 2
    assert aux.by_kind["user"].input_tokens == 1000
    inp, out, label = BEDROCK_AUX_DEFAULT
    assert aux.cost == pytest.approx(2000 / 1e6 * inp + 50 / 1e6 * out)
    assert aux.label == label
    assert aux.calls_per_rollout == 1.5
    assert auxiliary_of({}, 2, default_pricing()) is None


def test_a_pricing_file_sets_the_auxiliary_prices(tmp_path: Path) -> None:
    """aux_input_per_million / aux_output_per_million / aux_label in a pricing file price the
    auxiliary calls; a negative one is refused naming the key."""
    good = tmp_path / "p.json"
    good.write_text(
        json.dumps(
            {"blended_per_million": 0.3, "aux_input_per_million": 3, "aux_output_per_million": 15}
        )
    )
    aux = auxiliary_of(CALLS, 2, load_pricing(good))
    assert aux is not None
    assert aux.cost == pytest.approx(2000 / 1e6 * 3 + 50 / 1e6 * 15)
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {"blended_per_million": 0.3, "aux_input_per_million": -1, "aux_output_per_million": 1}
        )
    )
    with pytest.raises(UsageError, match="aux_input_per_million"):
        load_pricing(bad)


@pytest.mark.parametrize("key", ["aux_input_per_million", "aux_output_per_million"])
def test_one_auxiliary_price_alone_is_refused_not_priced_at_zero(tmp_path: Path, key: str) -> None:
    """A pricing file with only one of the two auxiliary prices would price the other side at
    0 without a word: it is refused with one line naming both keys."""
    half = tmp_path / "half.json"
    half.write_text(json.dumps({"blended_per_million": 0.3, key: 3}))
    with pytest.raises(UsageError, match="give both auxiliary prices") as caught:
        load_pricing(half)
    assert "aux_input_per_million" in caught.value.message
    assert "aux_output_per_million" in caught.value.message
    assert "\n" not in caught.value.message


def test_the_job_plan_scales_the_auxiliary_calls_to_the_job() -> None:
    """Per-rollout auxiliary figures × the job's rollouts, with the cost's label."""
    aux = auxiliary_of(CALLS, 2, default_pricing())
    planned = plan_auxiliary(aux, 1000)
    assert planned is not None
    assert (planned["calls"], planned["tokens"]) == (1500, 1_025_000)
    assert planned["cost"] == pytest.approx(aux.cost_per_rollout * 1000)
    assert plan_auxiliary(None, 1000) is None


def test_mlflow_gets_the_auxiliary_metrics_on_the_last_step() -> None:
    """The last step's metrics gain auxiliary/calls, tokens, cost and calls per kind."""
    aux = auxiliary_of(CALLS, 2, default_pricing())
    summary = Summary.model_construct(auxiliary=aux)
    steps = [StepMetrics(0, 1, {"a": 1.0}), StepMetrics(1, 2, {"a": 2.0})]
    out = with_aux_metrics(steps, summary)
    assert out[0].values == {"a": 1.0}
    assert out[1].values["auxiliary/calls"] == 3.0
    assert out[1].values["auxiliary/judge/calls"] == 2.0
    assert out[1].values["a"] == 2.0


def test_the_projection_prices_the_auxiliary_calls_with_the_job() -> None:
    """The run summary's projection adds the auxiliary calls (per rollout × the projected
    rollouts, at the auxiliary price) to the MTRL cost, says so in its text, and the doctor's
    budget check reads the total with them."""
    from fakes.rollouts import rollout

    from agent_kit.doctor.reward import projection
    from agent_kit.reporting.summary import summarize_records
    from agent_kit.store.rows import JobRow

    config = {"job": {"name": "j", "group_size": 2, "batch_size": 1, "steps": 1}}
    job = JobRow("arn:j", "j", 1.0, config, "completed", None)
    records = [
        rollout(f"t{g + 1}", sample_index=g, reward=float(g), turns=1, prefill_tokens=100,
                sample_tokens=10, ended_at=1.0)
        for g in range(2)
    ]  # fmt: skip
    aux = auxiliary_of(CALLS, 2, default_pricing())
    assert aux is not None
    summary = summarize_records(job, records, auxiliary=aux)
    proj = summary.projection
    assert proj is not None
    assert proj.auxiliary is not None
    assert proj.auxiliary["cost"] == pytest.approx(aux.cost_per_rollout * proj.slots, rel=1e-6)
    assert proj.total_cost == pytest.approx(proj.cost.total + proj.auxiliary["cost"])
    assert "auxiliary calls" in proj.text
    assert f"{proj.total_cost:,.2f} {proj.cost.currency} in all" in proj.text
    budget = (proj.cost.total + proj.total_cost) / 2  # above the MTRL cost, under the total
    (finding,) = projection(summary, budget)
    assert finding.severity == "error"
    assert summarize_records(job, records).projection.auxiliary is None  # type: ignore[union-attr]
