"""``agent-kit run`` (a local job against the emulator) and ``agent-kit invoke`` (one rollout).

``run`` shows a Rich live progress display on a terminal (not with ``--json`` or when stdout is
not a TTY), then the summary table; ``--json`` prints the summary JSON as the last line of
stdout. A job that fails with one of the service's job-killing reasons exits with code 9 after
the summary is written. ``invoke`` plays one rollout and prints its turn-by-turn transcript,
read back from the run store.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from agent_kit.emulator.dataset import load_dataset
from agent_kit.emulator.driver import (
    InvokeOutcome,
    JobConfig,
    JobResult,
    Progress,
    invoke_once,
)
from agent_kit.emulator.store import RunStore, TurnRow
from agent_kit.errors import JobFailed, UsageError
from agent_kit.runs.local import run_local

__all__ = ["register"]


def _fmt_seconds(value: float | None) -> str:
    if value is None:
        return "–"
    value = max(0.0, value)
    if value < 60:
        return f"{value:.0f}s"
    minutes, seconds = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class _LiveProgress:
    """Renders :class:`Progress` snapshots as one status table (Rich Live)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.snapshot: Progress | None = None
        self.live = Live(self._render(), console=console, refresh_per_second=4, transient=False)

    def update(self, progress: Progress) -> None:
        self.snapshot = progress
        self.live.update(self._render())

    def _render(self) -> Table:
        p = self.snapshot
        table = Table.grid(padding=(0, 2))
        if p is None:
            table.add_row(Text("starting the emulator and the agent…", style="dim"))
            return table
        width = 30
        filled = int(width * p.done / p.total) if p.total else 0
        bar = "█" * filled + "░" * (width - filled)
        reward = "–" if p.reward_mean is None else f"{p.reward_mean:.3f}"
        table.add_row(
            Text(bar, style="green"),
            f"{p.done}/{p.total} rollouts",
            f"step {p.step + 1}/{p.steps}",
        )
        table.add_row(
            f"ok {p.succeeded}  failed {p.failed}  retried {p.retried}  in flight {p.in_flight}",
            f"reward mean {reward}",
            f"{p.rate:.2f}/s  ETA {_fmt_seconds(p.eta)}",
        )
        if p.job_failures:
            table.add_row(Text(f"job failures: {p.job_failures}", style="bold red"), "", "")
        return table


def _summary_table(result: JobResult) -> Table:
    run = result.summary.get("run", {})
    table = Table(title="agent-kit run", show_header=False, title_justify="left")
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    rows = [
        ("job", result.job_arn),
        ("status", result.status + (f" — {result.failure}" if result.failure else "")),
        ("rollouts", f"{result.succeeded} rewarded / {result.total} ({result.failed} failed)"),
        ("retries", str(run.get("retries"))),
        ("reward mean", "–" if run.get("reward_mean") is None else f"{run['reward_mean']:.4f}"),
        ("turns", str(run.get("turns"))),
        (
            "tokens",
            f"prompt {run.get('prompt_tokens')} · completion {run.get('completion_tokens')}",
        ),
        ("rollouts/s", str(run.get("rollouts_per_s"))),
    ]
    for key, value in rows:
        table.add_row(key, value)
    return table


def _render_metrics(summary: dict[str, Any]) -> Any:
    try:
        from agent_kit.reporting.report import render_terminal
    except ImportError:
        return None
    try:
        return render_terminal(summary)
    except Exception:  # noqa: BLE001 - the driver's own table still shows the essentials
        return None


def run(
    entrypoint: Annotated[
        str | None,
        typer.Argument(
            help="Agent: entrypoint .py file, http:// URL, AgentCore runtime ARN or Lambda ARN "
            "(optional with --resume)."
        ),
    ] = None,
    dataset: Annotated[
        Path | None, typer.Option(help="Prompts: .jsonl, .json, .csv or .parquet.")
    ] = None,
    policy: Annotated[
        str, typer.Option(help="Policy spec: random[:seed] | scripted:F:NAME | openai:URL[#model]")
    ] = "random",
    group_size: Annotated[int, typer.Option(help="Rollouts per prompt (2..32).")] = 8,
    batch_size: Annotated[
        int | None, typer.Option(help="Prompts per step (default: all, at most 128).")
    ] = None,
    steps: Annotated[int, typer.Option(help="Training steps to play.")] = 1,
    concurrency: Annotated[int, typer.Option(help="Rollouts in flight at most.")] = 32,
    rollout_timeout: Annotated[
        float, typer.Option(help="Seconds before a rollout is failed and retried.")
    ] = 600.0,
    max_retries: Annotated[int, typer.Option(help="Retries of a timed-out rollout (0..10).")] = 3,
    temperature: Annotated[float, typer.Option(help="inferenceParams.temperature")] = 1.0,
    top_p: Annotated[float, typer.Option(help="inferenceParams.topP")] = 1.0,
    max_tokens: Annotated[int, typer.Option(help="inferenceParams.maxTokens")] = 4096,
    success_threshold: Annotated[
        float, typer.Option(help="A rollout succeeds when its reward is at least this.")
    ] = 1.0,
    fail_fast: Annotated[
        bool,
        typer.Option(
            help="Stop the job at the first job-killing failure, as the service does "
            "(--no-fail-fast only flags it and goes on)."
        ),
    ] = True,
    report_grace: Annotated[
        float,
        typer.Option(help="Seconds to wait for CompleteRollout/UpdateReward after the answer."),
    ] = 30.0,
    seed: Annotated[int, typer.Option(help="Seed of the policy and of the run.")] = 0,
    out: Annotated[Path, typer.Option(help="Parent directory of run directories.")] = Path("runs"),
    name: Annotated[
        str | None, typer.Option(help="Job name (default: <entrypoint>-<timestamp>).")
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(help="Continue the run in this directory (its recorded settings are used)."),
    ] = None,
    workers: Annotated[int, typer.Option(help="Agent processes for a .py entrypoint.")] = 1,
    rate: Annotated[
        float | None, typer.Option(help="Invocations per second cap (AgentCore default 25).")
    ] = None,
    endpoint_url: Annotated[
        str | None, typer.Option(help="AWS endpoint override for ARN targets (local fakes).")
    ] = None,
    advertise_url: Annotated[
        str | None,
        typer.Option(
            help="Public https URL of a tunnel to the emulator, for a deployed agent; payloads "
            "get <URL>/<random token> and the emulator serves only under the token."
        ),
    ] = None,
    emulator_port: Annotated[
        int | None,
        typer.Option(
            help="Fixed loopback port of the emulator (the port your tunnel forwards to; "
            "default: ephemeral, or the one recorded by --resume)."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="No live display; summary JSON as the last stdout line.")
    ] = False,
) -> None:
    """Play a dataset against an agent the way a SageMaker MTRL job does, locally."""
    if resume is None and (entrypoint is None or dataset is None):
        raise UsageError("give ENTRYPOINT and --dataset (or --resume RUN_DIR)")
    if advertise_url is not None and resume is None and not emulator_port:
        raise UsageError(
            "--advertise-url needs --emulator-port N: the fixed local port your tunnel "
            "forwards to (e.g. ssh -R 443:127.0.0.1:N, cloudflared --url http://127.0.0.1:N)"
        )
    config = JobConfig(
        name=name,
        policy=policy,
        group_size=group_size,
        batch_size=batch_size,
        steps=steps,
        concurrency=concurrency,
        rollout_timeout=rollout_timeout,
        max_retries=max_retries,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        success_threshold=success_threshold,
        fail_fast=fail_fast,
        seed=seed,
        report_grace=report_grace,
    )
    console = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    live = _LiveProgress(console) if console.is_terminal and not as_json else None

    async def go() -> JobResult:
        return await run_local(
            entrypoint,
            dataset,
            None if resume is not None else config,
            out_dir=out,
            resume=resume,
            workers=workers,
            progress=live.update if live is not None else None,
            rate=rate,
            endpoint_url=endpoint_url,
            advertise_url=advertise_url,
            emulator_port=emulator_port,
        )

    if live is not None:
        with live.live:
            result = asyncio.run(go())
    else:
        result = asyncio.run(go())
    if as_json:
        typer.echo(json.dumps(result.summary, ensure_ascii=False, default=str))
    else:
        metrics = _render_metrics(result.summary)
        parts = [metrics] if metrics is not None else []
        console.print(Group(*parts, _summary_table(result)))
        console.print(f"run directory: {result.run_dir}", markup=False)
    if result.status == "failed":
        err.print(f"summary written to {result.run_dir / 'summary.json'}", markup=False)
        raise JobFailed(f"job {result.job_arn} failed: {result.failure}")


# -- invoke ------------------------------------------------------------------------------------


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
                f"{turn.completion_tokens} tokens{' (estimated)' if turn.usage_estimated else ''}"
                f"  {turn.latency_ms:.1f} ms",
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
    entrypoint: Annotated[
        str, typer.Argument(help="Agent: entrypoint .py file, http:// URL or ARN.")
    ],
    prompt: Annotated[
        str | None, typer.Option(help="The prompt string (often a JSON task object).")
    ] = None,
    dataset: Annotated[Path | None, typer.Option(help="Take the prompt from this dataset.")] = None,
    row: Annotated[int, typer.Option(help="Row of --dataset (0-based).")] = 0,
    policy: Annotated[
        str, typer.Option(help="Policy spec: random[:seed] | scripted:F:NAME | openai:URL[#model]")
    ] = "random",
    temperature: Annotated[float, typer.Option(help="inferenceParams.temperature")] = 1.0,
    timeout: Annotated[float, typer.Option(help="Rollout timeout in seconds.")] = 120.0,
    seed: Annotated[int, typer.Option(help="Policy seed.")] = 0,
    out: Annotated[
        Path | None, typer.Option(help="Keep the run store here (default: a temporary directory).")
    ] = None,
    endpoint_url: Annotated[
        str | None, typer.Option(help="AWS endpoint override for ARN targets (local fakes).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the transcript as JSON.")] = False,
) -> None:
    """Play one rollout and print its turn-by-turn transcript (the debugging view)."""
    if (prompt is None) == (dataset is None):
        raise UsageError("give exactly one of --prompt TEXT or --dataset PATH --row N")
    if dataset is not None:
        data = load_dataset(dataset)
        if not 0 <= row < len(data):
            raise UsageError(f"--row {row} is outside {dataset} (0..{len(data) - 1})")
        prompt = data[row]
    assert prompt is not None
    console = Console(highlight=False, soft_wrap=True)
    with tempfile.TemporaryDirectory(prefix="agent-kit-invoke-") as tmp:
        run_dir = out if out is not None else Path(tmp) / "invoke"
        outcome = asyncio.run(
            invoke_once(
                entrypoint,
                prompt,
                policy=policy,
                run_dir=run_dir,
                rollout_timeout=timeout,
                temperature=temperature,
                seed=seed,
                endpoint_url=endpoint_url,
            )
        )
        with RunStore.open(outcome.store_path, readonly=True) as store:
            turns = store.list_turns(outcome.trajectory_id)
            if as_json:
                typer.echo(json.dumps(_outcome_json(outcome, turns), default=str))
                return
            console.print(Text(f"rollout {outcome.trajectory_id}", style="bold underline"))
            _print_transcript(console, turns)
    result = outcome.result
    console.print(Text(f"state: {outcome.state}", style="bold"))
    if outcome.reason:
        console.print(Text(f"reason: {outcome.reason}", style="red"))
    console.print(Text(f"reward (UpdateReward): {outcome.reward}", style="bold"))
    if result is not None:
        body = result.body
        if isinstance(body, dict) and "reward_breakdown" in body:
            console.print(Text(f"reward breakdown: {json.dumps(body['reward_breakdown'])}"))
        console.print(
            Text(f"agent answered ({result.status}): ", style="dim")
            + Text(json.dumps(body, default=str)[:2000] if body is not None else str(result.error))
        )
    if out is not None:
        console.print(Text(f"run store: {outcome.store_path}", style="dim"))


def register(app: typer.Typer) -> None:
    """Add the ``run`` and ``invoke`` commands to the ``agent-kit`` Typer app."""
    app.command("run")(run)
    app.command("invoke")(invoke)
