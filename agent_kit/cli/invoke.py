"""``agent-kit invoke``: one rollout, and its turn-by-turn transcript (the debugging view).

The view: every turn's new messages and the policy's reply, then the last turn's tool results
(from the agent's answer: no request carries them), the rollout's state, its reward and its
breakdown (once, as a table, rounded), and the rest of the agent's answer on one line.

The transcript is read back from the run store; the command then exits 7 if the rollout was not
reported and 6 if the agent's answer names an environment or reward-function failure (see
:func:`_outcome_error`).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent_kit.cli.process import tune_process
from agent_kit.cli.run_options import AuxPolicyOption, door_settings, settings_of
from agent_kit.contract import TrajectoryState
from agent_kit.driver.config import JobConfig, RunConfig
from agent_kit.driver.dataset import load_dataset
from agent_kit.driver.one_rollout import InvokeOutcome, invoke_once
from agent_kit.emulator.policies.registry import POLICY_HELP
from agent_kit.errors import (
    AgentKitError,
    EnvironmentFailure,
    JudgeError,
    ReportingError,
    RewardError,
    UsageError,
)
from agent_kit.reporting.tool_results import NOT_RECORDED, last_tool_results
from agent_kit.reporting.transcripts import fmt
from agent_kit.reporting.words import plural
from agent_kit.store import RunStore, TurnRow
from agent_kit.store.events import NO_REWARD_REASON
from agent_kit.store.records import breakdown_of

__all__ = ["register"]

#: The one settings record's defaults, which ``invoke``'s options default to.
_DEFAULTS: Final = JobConfig()


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return "" if content is None else str(content)


def _print_message(console: Console, message: dict[str, Any]) -> None:
    role = str(message.get("role", "?"))
    style = {"system": "dim", "user": "cyan", "tool": "yellow", "assistant": "green"}.get(role, "")
    label = "tool result" if role == "tool" else role
    text = _message_text(message)
    if text:
        console.print(Text(f"  {label}: ", style=f"bold {style}") + Text(text))
    for call in message.get("tool_calls") or []:
        fn = call.get("function", {}) if isinstance(call, dict) else {}
        console.print(
            Text("  tool call: ", style="bold magenta")
            + Text(f"{fn.get('name')}({fn.get('arguments')})")
        )


def _print_transcript(console: Console, turns: list[TurnRow]) -> None:
    previous = 0
    for turn in turns:
        messages = list(turn.request.get("messages") or [])
        console.print(
            Text(
                f"turn {turn.idx + 1}  {turn.route}  prompt {turn.prompt_tokens} · completion "
                + plural(turn.completion_tokens, "token")
                + (" (estimated)" if turn.usage_estimated else "")
                + f"  {turn.latency_ms:.1f} ms",
                style="bold",
            )
        )
        # Messages new since the previous turn (its own assistant reply is echoed back first).
        start = previous + 1 if previous else 0
        for message in messages[start:]:
            if isinstance(message, dict):
                _print_message(console, message)
        previous = len(messages)
        tools = turn.request.get("tools") or []
        if tools and turn.idx == 0:
            names = [str(t.get("function", {}).get("name")) for t in tools if isinstance(t, dict)]
            console.print(Text(f"  tools offered: {', '.join(names)}", style="dim"))
        choices = turn.response.get("choices") or [{}]
        reply = choices[0].get("message", {}) if isinstance(choices[0], dict) else {}
        console.print(Text("  policy →", style="bold green"))
        _print_message(console, {"role": "assistant", **reply})


#: Keys of the agent's answer that the view shows in their own lines (the reward, its
#: breakdown table, the last tool result), so the answer's line leaves them out.
_SHOWN_APART = frozenset({"reward", "reward_breakdown", "tool_log", "trajectory_id"})


def _print_last_results(console: Console, turns: list[TurnRow], body: Any) -> None:
    """The results of the last turn's tool calls: no request follows them, so they come from
    the agent's answer (its ``tool_log``); a line says so when the answer keeps none."""
    if not turns:
        return
    choices = turns[-1].response.get("choices") or [{}]
    reply = choices[0].get("message", {}) if isinstance(choices[0], dict) else {}
    calls = reply.get("tool_calls") if isinstance(reply, dict) else None
    pending = len(calls) if isinstance(calls, list) else 0
    results = last_tool_results(body if isinstance(body, dict) else None, turns[-1].idx, pending)
    if results is None:
        if pending:
            console.print(Text(f"  {NOT_RECORDED} (the agent's answer has no tool_log)", "dim"))
        return
    for result in results:
        label = f"  tool result ← {result.name}" + (f"({result.input})" if result.input else "")
        status = f" [{result.status}]" if result.status not in ("", "success") else ""
        console.print(Text(f"{label}{status}: ", style="bold yellow") + Text(result.output))


def _print_breakdown(console: Console, body: Any) -> None:
    """The reward breakdown once, as a table rounded to 4 significant digits."""
    parts = breakdown_of(body if isinstance(body, dict) else None)
    if not parts:
        return
    table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False)
    table.add_column("  component", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    for name in ("value", "weight", "contribution"):
        table.add_column(name, justify="right", no_wrap=True)
    for name, part in parts.items():
        table.add_row(
            f"  {name}",
            str(part.get("kind", "")),
            *(fmt(part.get(key)) for key in ("value", "weight", "contribution")),
        )
    console.print(Text("reward breakdown:", style="bold"))
    console.print(table)


def _answer_line(body: Any) -> str:
    """The agent's answer without what the view shows apart: ``key value`` pairs, numbers
    rounded, at most 2,000 characters."""
    if not isinstance(body, dict):
        return json.dumps(body, default=str)[:2000]
    shown = []
    for key, value in body.items():
        if key in _SHOWN_APART:
            continue
        if isinstance(value, float):
            text = fmt(value, 6)
        elif isinstance(value, (dict, list)):
            text = json.dumps(value, default=str)
        else:
            text = fmt(value)
        shown.append(f"{key} {text}")
    return " · ".join(shown)[:2000]


def _outcome_json(outcome: InvokeOutcome, turns: list[TurnRow]) -> dict[str, Any]:
    result = outcome.result
    return {
        "trajectory_id": outcome.trajectory_id,
        "state": outcome.state,
        "reason": outcome.reason,
        "reward": outcome.reward,
        "turns": [
            {
                "route": t.route,
                "request": t.request,
                "response": t.response,
                "prompt_tokens": t.prompt_tokens,
                "completion_tokens": t.completion_tokens,
            }
            for t in turns
        ],
        "agent_status": None if result is None else result.status,
        "agent_response": None if result is None else result.body,
        "agent_error": None if result is None else result.error,
        "store": str(outcome.store_path),
    }


def invoke(
    ctx: typer.Context,
    entrypoint: Annotated[
        str, typer.Argument(help="Agent: entrypoint .py file, http:// URL or ARN.")
    ],
    prompt: Annotated[
        str | None, typer.Option(help="The prompt string (often a JSON task object).")
    ] = None,
    dataset: Annotated[Path | None, typer.Option(help="Take the prompt from this dataset.")] = None,
    row: Annotated[int, typer.Option(help="Row of --dataset (0-based).")] = 0,
    policy: Annotated[str, typer.Option(help=POLICY_HELP)] = _DEFAULTS.policy,
    aux_policy: AuxPolicyOption = None,
    temperature: Annotated[
        float, typer.Option(help="inferenceParams.temperature")
    ] = _DEFAULTS.temperature,
    timeout: Annotated[
        float, typer.Option(help="Rollout timeout in seconds.")
    ] = _DEFAULTS.rollout_timeout,
    seed: Annotated[int, typer.Option(help="Policy seed.")] = _DEFAULTS.seed,
    out: Annotated[
        Path | None, typer.Option(help="Keep the run store here (default: a temporary directory).")
    ] = None,
    endpoint_url: Annotated[
        str | None, typer.Option(help="AWS endpoint override for ARN targets (local fakes).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the transcript as JSON.")] = False,
    lenient_auth: Annotated[
        bool,
        typer.Option(
            "--lenient-auth",
            help="Check only the shape of the agent's credentials, not their signature.",
        ),
    ] = False,
) -> None:
    """Play one rollout and print its turn-by-turn transcript (the debugging view)."""
    given = {k: v for k, v in locals().items() if k != "ctx"}
    text = _invoke_prompt(prompt, dataset, row)
    tune_process(policies=[p for p in (policy, aux_policy) if p is not None])
    console = Console(highlight=False, soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="agent-kit-invoke-") as tmp:
        run_dir = out if out is not None else Path(tmp) / "invoke"
        job = settings_of(JobConfig, given, rollout_timeout=timeout)
        config = RunConfig(
            entrypoint=entrypoint,
            job=job,
            endpoint_url=endpoint_url,
            lenient_auth=lenient_auth,
            settings=door_settings(ctx),
        )
        outcome = asyncio.run(invoke_once(config, text, run_dir=run_dir))
        with RunStore.open(outcome.store_path, readonly=True) as store:
            turns = store.list_turns(outcome.trajectory_id)
        error = _outcome_error(outcome, len(turns))
        if as_json:
            typer.echo(json.dumps(_outcome_json(outcome, turns), default=str))
        else:
            _print_outcome(console, outcome, turns, kept=out is not None)
    if error is not None:
        raise error


def _invoke_prompt(prompt: str | None, dataset: Path | None, row: int) -> str:
    """The prompt of ``invoke``: ``--prompt`` itself, or row ``--row`` of ``--dataset``."""
    if prompt is not None and dataset is None:
        return prompt
    if prompt is None and dataset is not None:
        data = load_dataset(dataset)
        if not 0 <= row < len(data):
            raise UsageError(f"--row {row} is outside {dataset} (0..{len(data) - 1})")
        return data[row]
    raise UsageError("give exactly one of --prompt TEXT or --dataset PATH --row N")


def _outcome_error(outcome: InvokeOutcome, n_turns: int) -> AgentKitError | None:
    """The error ``invoke`` exits with for its rollout, or None when nothing went wrong.

    - :class:`ReportingError` (exit 7): the agent says its CompleteRollout/UpdateReward failed
      after its retries (``"reported": false``), or the agent answered after sampling but the
      rollout never got its reward (no reward in time, or never completed);
    - :class:`EnvironmentFailure` / :class:`RewardError` (exit 6): the agent's answer names an
      ``environment`` / ``reward`` failure (the rollout was still reported, with a floor reward).
    """
    tid = outcome.trajectory_id
    result = outcome.result
    body = result.body if result is not None and isinstance(result.body, dict) else {}
    if body.get("reported") is False:
        why = body.get("report_error") or "the agent's report failed"
        return ReportingError(f"rollout {tid} was not reported: {why}")
    answered = result is not None and result.ok and n_turns > 0
    if outcome.state not in TrajectoryState.settled() and (
        answered or outcome.reason == NO_REWARD_REASON
    ):
        return ReportingError(f"rollout {tid} was not reported: {outcome.reason}")
    failure = body.get("failure")
    if isinstance(failure, dict):
        reason = failure.get("reason")
        if failure.get("boundary") == "environment":
            return EnvironmentFailure(f"rollout {tid}: the environment failed: {reason}")
        if failure.get("boundary") == "judge":
            return JudgeError(f"rollout {tid}: judge: {reason}")
        if failure.get("boundary") == "reward":
            return RewardError(f"rollout {tid}: the reward function failed: {reason}")
    return None


def _print_outcome(
    console: Console, outcome: InvokeOutcome, turns: list[TurnRow], *, kept: bool
) -> None:
    """The human view of ``invoke``: the transcript, the rollout's state, reward and answer."""
    console.print(Text(f"rollout {outcome.trajectory_id}", style="bold underline"))
    _print_transcript(console, turns)
    result = outcome.result
    body = result.body if result is not None else None
    _print_last_results(console, turns, body)
    console.print(Text(f"state: {outcome.state}", style="bold"))
    if outcome.reason:
        console.print(Text(f"reason: {outcome.reason}", style="red"))
    console.print(Text(f"reward (UpdateReward): {fmt(outcome.reward, 6)}", style="bold"))
    if result is not None:
        _print_breakdown(console, body)
        console.print(
            Text(f"agent answered ({result.status}): ", style="dim")
            + Text(_answer_line(body) if body is not None else str(result.error))
        )
    if kept:
        console.print(Text(f"run store: {outcome.store_path}", style="dim"))


def register(app: typer.Typer) -> None:
    """Add the ``invoke`` command to the ``agent-kit`` Typer app."""
    app.command("invoke")(invoke)
