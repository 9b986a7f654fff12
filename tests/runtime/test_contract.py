"""Contract models: payload parsing with lenient aliases and strict types."""

from __future__ import annotations

import json

import pytest

from agent_kit.contract import (
    CompleteRolloutBody,
    RolloutPayload,
    RolloutStatus,
    UpdateRewardBody,
    default_endpoint,
    parse_job_arn,
    parse_payload,
    resolve_endpoint,
)
from agent_kit.errors import ContractError

ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/my-job"


def test_full_payload_parses_with_documented_names() -> None:
    """The payload of docs/contract.md §2 parses and maps inferenceParams to OpenAI names."""
    payload = parse_payload(
        {
            "prompt": json.dumps({"prompt": "hi", "answer": "riser"}),
            "metadata": {"jobArn": ARN, "rolloutId": "t-1", "endpoint": "http://127.0.0.1:1/"},
            "inferenceParams": {"temperature": 1.0, "topP": 0.9, "maxTokens": 4096},
        }
    )
    assert payload.metadata is not None
    assert payload.metadata.trajectory_id == "t-1"
    assert payload.inference_params.to_openai() == {
        "temperature": 1.0,
        "top_p": 0.9,
        "max_tokens": 4096,
    }
    assert payload.task()["answer"] == "riser"
    assert resolve_endpoint(payload.metadata) == "http://127.0.0.1:1"


def test_wire_writes_the_documented_names_in_order_and_drops_unset_fields() -> None:
    """RolloutPayload.wire() gives the §2 camelCase names in field order, no None, no extras."""
    body = {
        "prompt": "p",
        "metadata": {"jobArn": ARN, "rolloutId": "t-1", "endpoint": "http://h/x", "region": "r"},
        "inferenceParams": {"temperature": 1.0, "topP": 0.5, "maxTokens": 7},
    }
    wire = parse_payload({**body, "extra": 1}).wire()
    assert json.dumps(wire) == json.dumps(body)
    sparse = parse_payload({"prompt": "p", "metadata": {"job_arn": ARN, "trajectory_id": "t"}})
    assert sparse.wire() == {
        "prompt": "p",
        "metadata": {"jobArn": ARN, "rolloutId": "t"},
        "inferenceParams": {},
    }
    assert parse_payload(wire) == parse_payload(body)


def test_for_rollout_without_a_job_is_the_in_process_payload() -> None:
    """Without ``job_arn`` the one builder gives a payload with no metadata (nothing is
    reported), equal to the body parsed by hand; a lone metadata field or a bad parameter is a
    ContractError, never a pydantic traceback."""
    params = {"temperature": 0.5, "maxTokens": 9}
    built = RolloutPayload.for_rollout("p", inference_params=params)
    assert built == parse_payload({"prompt": "p", "inferenceParams": params})
    assert built.metadata is None
    assert RolloutPayload.for_rollout("p", inference_params={}).wire() == {
        "prompt": "p",
        "inferenceParams": {},
    }
    with pytest.raises(ContractError, match="job_arn"):
        RolloutPayload.for_rollout("p", trajectory_id="t-1")
    with pytest.raises(ContractError, match="trajectory_id"):
        RolloutPayload.for_rollout("p", job_arn=ARN)
    with pytest.raises(ContractError, match="inferenceParams: temperature"):
        RolloutPayload.for_rollout("p", inference_params={"temperature": "hot"})


def test_lenient_aliases_are_accepted() -> None:
    """snake_case and trajectoryId spellings are accepted as the contract says."""
    payload = parse_payload(
        {
            "prompt": "x",
            "metadata": {"job_arn": ARN, "trajectoryId": "t-2"},
            "inference_params": {"temperature": 0, "max_tokens": 5},
        }
    )
    assert payload.metadata is not None
    assert payload.metadata.rollout_id == "t-2"
    assert payload.inference_params.to_openai() == {"temperature": 0.0, "max_tokens": 5}


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({}, "prompt"),
        ({"prompt": 3}, "prompt"),
        ({"prompt": "x", "metadata": {"jobArn": "arn:bad", "rolloutId": "t"}}, "job ARN"),
        ({"prompt": "x", "metadata": {"jobArn": ARN, "rolloutId": ""}}, "rollout"),
        ({"prompt": "x", "inferenceParams": {"temperature": "hot"}}, "temperature"),
        ({"prompt": "x", "inferenceParams": {"maxTokens": 1.5}}, "max"),
    ],
)
def test_bad_payloads_raise_contract_errors_naming_the_field(body: dict, needle: str) -> None:
    """Missing or mistyped fields raise ContractError with the offending field in the message."""
    with pytest.raises(ContractError) as info:
        parse_payload(body)
    assert needle.lower() in info.value.message.lower()


def test_non_object_payload_is_refused() -> None:
    """A JSON list or string is not a payload."""
    with pytest.raises(ContractError, match="JSON object"):
        parse_payload(["prompt"])


def test_endpoint_falls_back_to_env_then_region(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without metadata.endpoint: $RFT_RUNTIME_ENDPOINT, else the region's public endpoint."""
    payload = parse_payload({"prompt": "x", "metadata": {"jobArn": ARN, "rolloutId": "t"}})
    assert payload.metadata is not None
    monkeypatch.delenv("RFT_RUNTIME_ENDPOINT", raising=False)
    assert resolve_endpoint(payload.metadata) == default_endpoint("us-west-2")
    monkeypatch.setenv("RFT_RUNTIME_ENDPOINT", "http://127.0.0.1:9/")
    assert resolve_endpoint(payload.metadata) == "http://127.0.0.1:9"


def test_wire_bodies_validate_status_and_rewards() -> None:
    """CompleteRollout defaults to ready; UpdateReward refuses non-finite values."""
    body = CompleteRolloutBody.model_validate({"TrajectoryId": "t"})
    assert body.status is RolloutStatus.READY
    assert UpdateRewardBody.model_validate({"TrajectoryId": "t", "Rewards": [1, 0.5]}).rewards
    with pytest.raises(ValueError, match="finite"):
        UpdateRewardBody.model_validate({"TrajectoryId": "t", "Rewards": [float("nan")]})


def test_job_arn_is_split_into_parts() -> None:
    """parse_job_arn returns region, account, category and name; junk raises ContractError."""
    assert parse_job_arn(ARN) == ("us-west-2", "123456789012", "AgentRFT", "my-job")
    with pytest.raises(ContractError):
        parse_job_arn("arn:aws:sagemaker:us-west-2:1234:job/AgentRFT/x")
