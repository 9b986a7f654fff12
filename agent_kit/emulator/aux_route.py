"""The emulator's second model route: auxiliary calls (an LLM judge, a simulated user).

In the real service an agent's judge and simulated user call their own model (Bedrock, with the
runtime's role): the Job Runtime never sees them. Locally they call
``POST {endpoint}/aux/v1/chat/completions`` (**[chosen]**), authenticated like the policy route,
with the rollout's ``X-Amzn-SageMaker-Job-Arn`` / ``-Trajectory-Id`` headers and
``X-Agent-Kit-Aux-Kind: judge|user``. The emulator answers with its *auxiliary* policy (any
policy spec, ``--aux-policy``) and records the call as an auxiliary turn of the rollout
(:class:`~agent_kit.store.rows.AuxTurnRow`, numbered apart from the policy's turns): it is never
a policy turn, never counted in MTRL's prefill/sample/train tokens, and never trained.

A reply is bounded as a request is (``max_body_bytes``, 4 MiB): a larger one is a 500 naming
the bound, and nothing of it is recorded or counted (the judge then fails with that reason).

A call is admitted while its trajectory is OPEN (the judge scores before the agent reports),
up to ``max_aux_calls_per_trajectory`` calls (256, like the policy route's turns; the next is
a 400 ValidationException). Its index is taken when the call is admitted, from a counter in the
emulator's trajectory table (one count from the store the first time, never a read of the
earlier calls), so two calls in flight together (two judges awaited with ``asyncio.gather``)
never share one; the row is stored in the order the calls finish, and a replay matches a call
to its recording by content, not by arrival. The auxiliary policy sees a
:class:`~agent_kit.emulator.schemas.PolicyRequest` whose ``turn`` is that index and whose
``context`` carries ``aux_kind`` (and ``aux_name``, a judge's name, when the caller sent
``X-Agent-Kit-Aux-Name``); its RNG is seeded apart from the policy's turns.

While a call waits for the auxiliary policy it is listed on its trajectory
(``CachedTrajectory.aux_waiting``): a rollout that times out meanwhile names it in its reason
(:func:`aux_waiting_note`), since the agent was waiting on the auxiliary model, not the policy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from agent_kit.contract import TrajectoryState
from agent_kit.emulator.chat_request import parse_chat, policy_request
from agent_kit.emulator.service import ServiceState
from agent_kit.emulator.sse import dumps
from agent_kit.errors import InternalServiceError, JobRuntimeError, NotFoundError, ValidationError
from agent_kit.store.rows import AUX_KINDS, AuxTurnRow

__all__ = [
    "AUX_KIND_HEADER",
    "AUX_NAME_HEADER",
    "AUX_PREFIX",
    "AuxOutcome",
    "aux_turn",
    "aux_waiting_note",
]

#: The path prefix of the auxiliary route (``{endpoint}/aux/v1/chat/completions``).
AUX_PREFIX: Final = "/aux"
#: The header naming the kind of an auxiliary call.
AUX_KIND_HEADER: Final = "x-agent-kit-aux-kind"
#: The header naming the caller (a judge's name) of an auxiliary call.
AUX_NAME_HEADER: Final = "x-agent-kit-aux-name"


@dataclass(frozen=True)
class AuxOutcome:
    """One auxiliary call's answer (a chat.completion) and its recorded index."""

    response: dict[str, Any]
    response_json: bytes
    idx: int


def _admit(
    emu: ServiceState, job_arn: str | None, trajectory_id: str | None
) -> tuple[str, str, dict[str, Any], int]:
    """(job, trajectory id, the trajectory's policy context, the call's auxiliary index), once
    they, the state and the bound are checked; the index is taken here."""
    job_arn = emu.check_job(job_arn)
    if not trajectory_id or len(trajectory_id) > 256:
        raise ValidationError("TrajectoryId must be 1..256 characters")
    traj = emu.table.get(trajectory_id)
    if traj is None or traj.job_arn != job_arn:
        raise NotFoundError(f"Trajectory {trajectory_id} not found in job {job_arn}")
    if traj.state is not TrajectoryState.OPEN:
        raise ValidationError(
            f"Trajectory {trajectory_id} is not in valid status for an auxiliary call: "
            f"{traj.state.value}"
        )
    cap = emu.max_aux_calls_per_trajectory
    with emu.table.lock:
        if traj.aux_calls is None:
            traj.aux_calls = emu.store.count_aux_turns(trajectory_id)
        if traj.aux_calls >= cap:
            raise ValidationError(
                f"Trajectory {trajectory_id} reached the limit of {cap} auxiliary calls "
                "(judge and simulated-user calls of one rollout)"
            )
        idx = traj.aux_calls
        traj.aux_calls = idx + 1
    return job_arn, trajectory_id, dict(traj.context), idx


def _caller(kind: str, name: str | None) -> str:
    """Who made an auxiliary call, as a reason names it: ``judge 'tone'``, ``simulated user``."""
    who = "simulated user" if kind == "user" else kind
    return f"{who} {name[:100]!r}" if name else who


@contextlib.contextmanager
def _waiting(emu: ServiceState, trajectory_id: str, idx: int, caller: str) -> Iterator[None]:
    """List the call on its trajectory while the block (the auxiliary policy) runs."""
    traj = emu.table.get(trajectory_id)
    if traj is None:  # admitted a moment ago: only a store deleted under it
        yield
        return
    with emu.table.lock:
        traj.aux_waiting[idx] = caller
    try:
        yield
    finally:
        with emu.table.lock:
            traj.aux_waiting.pop(idx, None)


def aux_waiting_note(emu: ServiceState, trajectory_id: str) -> str | None:
    """The auxiliary calls of the trajectory waiting for the auxiliary policy now, as a
    timeout's reason adds them (``its auxiliary call (judge 'tone') was still waiting for the
    auxiliary model (--aux-policy SPEC)``); None when none waits."""
    traj = emu.table.get(trajectory_id)
    if traj is None:
        return None
    with emu.table.lock:
        callers = [traj.aux_waiting[i] for i in sorted(traj.aux_waiting)]
    if not callers:
        return None
    policy = getattr(getattr(emu, "aux_policy", None), "name", None) or "its auxiliary policy"
    calls = "call" if len(callers) == 1 else f"{len(callers)} calls"
    was = "was" if len(callers) == 1 else "were"
    return (
        f"its auxiliary {calls} ({', '.join(callers)}) {was} still waiting for the "
        f"auxiliary model (--aux-policy {policy})"
    )


def _check_size(size: int, limit: int) -> None:
    """A reply over ``limit`` bytes (the bound a request has, ``max_body_bytes``) is a 500 and
    is not recorded: a judge that answers megabytes of reason must not fill the store and the
    token counts (**[chosen]**: Bedrock bounds a reply by its ``maxTokens``)."""
    if size > limit:
        raise InternalServiceError(
            f"The auxiliary policy's reply is {size / 2**20:.1f} MiB, over the "
            f"{limit / 2**20:g} MiB bound on an auxiliary reply (the bound on a request); "
            "it was not recorded"
        )


async def aux_turn(
    emu: ServiceState,
    job_arn: str | None,
    trajectory_id: str | None,
    body: Any,
    *,
    kind: str | None,
    name: str | None = None,
) -> AuxOutcome:
    """Answer one auxiliary call with the emulator's auxiliary policy and record it.

    400 for an unknown kind, a sealed trajectory or an emulator without an auxiliary policy;
    the policy's failure is a 500 and nothing is recorded.
    """
    started = time.perf_counter()
    if kind not in AUX_KINDS:
        raise ValidationError(
            f"X-Agent-Kit-Aux-Kind must be one of {', '.join(AUX_KINDS)}, got {kind!r}"
        )
    policy = getattr(emu, "aux_policy", None)
    if policy is None:
        raise ValidationError(
            "This emulator has no auxiliary model for judge and simulated-user calls: "
            "start the run with --aux-policy SPEC (e.g. scripted:FILE.py:NAME)"
        )
    job_arn, trajectory_id, context, idx = _admit(emu, job_arn, trajectory_id)
    context = {**context, "aux_kind": kind}
    if name:
        context["aux_name"] = name[:100]
    request = policy_request(
        body,
        seed=emu.seed,
        trajectory_id=trajectory_id,
        job_arn=job_arn,
        turn=idx,
        context=context,
        parsed=parse_chat(body),
    )
    request = dataclasses.replace(
        request, rng=random.Random(f"{emu.seed}:{trajectory_id}:aux:{idx}")
    )
    try:
        with _waiting(emu, trajectory_id, idx, _caller(kind, name)):
            result = await policy.complete(request)
        response = result.response
        if not isinstance(response, dict) or not isinstance(response.get("choices"), list):
            raise TypeError("the auxiliary policy returned something that is not a chat.completion")
    except JobRuntimeError:
        raise
    except Exception as exc:  # noqa: BLE001 - any backend failure is a 5xx, nothing recorded
        raise InternalServiceError(
            f"The auxiliary policy failed: {type(exc).__name__}: {str(exc)[:500]}"
        ) from None
    response_json = dumps(response)
    _check_size(len(response_json), emu.max_body_bytes)
    usage = result.usage
    prompt, completion = int(usage.prompt_tokens), int(usage.completion_tokens)
    if response.get("usage") is None:
        total = prompt + completion
        usage_doc = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": total,
        }
        response = {**response, "usage": usage_doc}
        response_json = dumps(response)
    row = AuxTurnRow(
        trajectory_id=trajectory_id,
        idx=idx,
        kind=kind,
        request=body,
        response=response,
        prompt_tokens=prompt,
        completion_tokens=completion,
        usage_estimated=bool(usage.estimated),
        latency_ms=(time.perf_counter() - started) * 1000.0,
    )
    stored = emu.store.add_aux_turn(row)
    return AuxOutcome(response, response_json, stored)
