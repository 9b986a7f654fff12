"""LLM-judged reward components: a Judge's score through the emulator's auxiliary route.

In-process: the emulator's real app answered through httpx's ASGI transport (no socket); the
auxiliary model is a scripted policy (the judge's structured-output tool call).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_kit.auxiliary import AuxTarget, using_target
from agent_kit.emulator.aux_replies import judge_reply, judged_output
from agent_kit.emulator.core import Emulator
from agent_kit.emulator.policies.scripted import ScriptedBackend
from agent_kit.emulator.schemas import PolicyReply, PolicyRequest
from agent_kit.emulator.server import create_app
from agent_kit.episode import Episode
from agent_kit.errors import JudgeError
from agent_kit.judge import Judge
from agent_kit.store import RunStore

pytest.importorskip("strands_evals")


def _backend(fn: Callable[[PolicyRequest], Any]) -> ScriptedBackend:
    return ScriptedBackend(fn, name="aux", path=Path(__file__))


class _Emu:
    """An emulator with one job and one OPEN trajectory, and an AuxTarget reaching it."""

    def __init__(self, tmp_path: Path, aux: Callable[[PolicyRequest], Any] | None) -> None:
        self.store = RunStore.open(tmp_path / "run")
        policy = _backend(lambda r: "unused")
        self.emu = Emulator(self.store, policy, aux_policy=None if aux is None else _backend(aux))
        job = self.emu.create_job("judged", {})
        self.traj = self.emu.open_trajectory(job.arn, "{}", step=0, prompt_index=0, sample_index=0)
        app = create_app(self.emu, auth="none")
        self.target = AuxTarget(
            "http://emulator/aux/v1",
            headers={
                "X-Amzn-SageMaker-Job-Arn": job.arn,
                "X-Amzn-SageMaker-Trajectory-Id": self.traj.id,
            },
            transport=httpx.ASGITransport(app=app),
        )


@pytest.fixture
def make_emu(tmp_path: Path) -> Iterator[Callable[..., _Emu]]:
    made: list[_Emu] = []

    def make(aux: Callable[[PolicyRequest], Any] | None) -> _Emu:
        made.append(_Emu(tmp_path, aux))
        return made[-1]

    yield make
    for emu in made:
        emu.store.close()


def _episode(final: str = "Your refund of $20 is on its way.") -> Episode:
    return Episode(
        task={},
        prompt="My order arrived broken.",
        trajectory_id="t",
        final_text=final,
        messages=[
            {"role": "user", "content": [{"text": "My order arrived broken."}]},
            {"role": "assistant", "content": [{"text": final}]},
        ],
    )


def _score(emu: _Emu, judge: Judge, episode: Episode) -> Any:
    async def run() -> Any:
        with using_target(emu.target):
            return await judge.score(None, episode)

    return asyncio.run(run())


def test_a_judge_score_is_a_named_component_with_its_reason_and_a_recorded_call(
    make_emu: Callable[..., _Emu],
) -> None:
    """The judge's 0-1 score becomes a judged Component carrying the judge's reason, and the
    call is recorded as the rollout's auxiliary turn of kind judge (not a policy turn)."""

    def aux(request: PolicyRequest) -> PolicyReply:
        return judge_reply(0.75 if "refund" in judged_output(request) else 0.1, "resolved")

    emu = make_emu(aux)
    component = _score(emu, Judge("Was the case resolved?", name="resolution"), _episode())
    assert (component.value, component.reason, component.judged) == (0.75, "resolved", True)
    (call,) = emu.store.list_aux_turns(emu.traj.id)
    assert call.kind == "judge"
    assert emu.store.count_turns(emu.traj.id) == 0


@pytest.mark.parametrize(
    ("aux", "expected"),
    [
        (lambda r: judge_reply(7.0, "out of range"), "not in 0..1"),
        (lambda r: "I think it was fine.", "structured output"),
        (lambda r: 1 / 0, "auxiliary"),
    ],
    ids=["score-out-of-range", "no-structured-answer", "aux-model-fails"],
)
def test_a_judge_that_fails_or_answers_nonsense_raises_a_judge_error(
    make_emu: Callable[..., _Emu], aux: Callable[[PolicyRequest], Any], expected: str
) -> None:
    """A score outside 0..1, an answer without the structured score, or a failing auxiliary
    model is a JudgeError naming the judge, never a silent score."""
    emu = make_emu(aux)
    with pytest.raises(JudgeError, match=expected) as caught:
        _score(emu, Judge("Was the case resolved?", name="resolution"), _episode())
    assert caught.value.message.startswith("resolution: ")


def test_an_emulator_without_an_aux_policy_refuses_the_judge_clearly(
    make_emu: Callable[..., _Emu],
) -> None:
    """Without --aux-policy the judge's call is refused with a message naming the option."""
    emu = make_emu(None)
    with pytest.raises(JudgeError, match="--aux-policy"):
        _score(emu, Judge("Was the case resolved?"), _episode())
