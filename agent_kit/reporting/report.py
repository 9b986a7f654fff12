"""Render a run summary: a Rich terminal view, one-line JSON, and one self-contained HTML page.

The HTML report is a single file with inline CSS and inline SVG plots generated here — no
script, no CDN, no external fetch, so it opens offline and can be attached to an issue. Every
piece of text that comes from a run (model output, tool results, prompts, failure reasons) is
HTML-escaped. Transcripts show only chat messages (roles, contents, tool calls) from the stored
request/response bodies; the store never holds headers, so no credential can reach the page.
The task prompt is shown as recorded (it may contain hidden answers: the report is a local
debugging view, not something to publish).

Nothing here prints; ``agent_kit.cli`` prints the renderables this module returns.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from agent_kit.emulator.store import RunStore
from agent_kit.reporting import svg as plots
from agent_kit.reporting.metrics import build_groups
from agent_kit.reporting.summary import load_records

__all__ = [
    "REPORT_FILE",
    "SUMMARY_FILE",
    "render_html",
    "render_json",
    "render_terminal",
    "write_reports",
]

SUMMARY_FILE: Final = "summary.json"
REPORT_FILE: Final = "report.html"
_MAX_MESSAGE_CHARS: Final = 4000
_MAX_TRANSCRIPTS: Final = 10
_MAX_STRIP_GROUPS: Final = 120


def fmt(value: Any, digits: int = 4) -> str:
    """A compact human form of a metric value: ``–`` for None, thousands separators for
    integers, ``digits`` significant digits otherwise."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if math.isfinite(value) else str(value)
    return str(value)


# -- terminal ----------------------------------------------------------------------------------


def _kv_table(title: str, rows: Sequence[tuple[str, str]]) -> Table:
    table = Table(
        title=Text(title), title_justify="left", show_header=False, box=None, pad_edge=False
    )
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        table.add_row(Text(key), Text(value))
    return table


def render_terminal(summary: Mapping[str, Any]) -> RenderableType:
    """A Rich renderable of the summary: run, reward/turn/advantage metrics, tokens and cost,
    projection, failure reasons."""
    job, counts, tokens, cost = (summary[k] for k in ("job", "counts", "tokens", "cost"))
    timing, metrics = summary["timing"], summary["metrics"]
    states = ", ".join(f"{k} {v}" for k, v in counts["by_state"].items()) or "none"
    run = _kv_table(
        f"Run {job['name']} ({job['mode']}, {job['status']})",
        [
            ("trajectories", f"{counts['trajectories']} ({states})"),
            (
                "slots",
                f"{counts['slots']}: rewarded {counts['rewarded']}, lost {counts['lost']}, "
                f"pending {counts['pending']}, retries {counts['retries']}",
            ),
            ("groups", f"{counts['groups']} ({counts['degenerate_groups']} with zero variance)"),
            ("wall time", f"{fmt(timing['wall_s'], 3)} s, {fmt(timing['rollouts_per_s'], 3)}/s"),
        ],
    )
    table = Table(title="Metrics", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in metrics.items():
        if name.startswith(("rollout/reward", "rollout/turns", "rollout/advantage", "eval/")):
            table.add_row(Text(name), Text(fmt(value)))
    est = " (estimated usage)" if tokens["estimated"] else ""
    money = f"{cost['total']:,.4f} {cost['currency']}"
    tok = _kv_table(
        "Tokens and cost",
        [
            ("prefill", fmt(tokens["prefill"])),
            ("sample", fmt(tokens["sample"])),
            ("train", fmt(tokens["train"])),
            ("total", f"{fmt(tokens['total'])}{est}"),
            ("per rollout", fmt(tokens["per_rollout"].get("total"))),
            ("cost", f"{money} — {cost['label']}"),
        ],
    )
    parts: list[RenderableType] = [run, table, tok]
    if summary.get("projection"):
        parts.append(Text("projection: " + summary["projection"]["text"]))
    if summary["failures"]:
        fail = Table(title="Failures", title_justify="left")
        fail.add_column("count", justify="right")
        fail.add_column("reason")
        for item in summary["failures"]:
            fail.add_row(Text(str(item["count"])), Text(item["reason"]))
        parts.append(fail)
    return Group(*parts)


def render_json(summary: Mapping[str, Any]) -> str:
    """The summary as one line of strict JSON (no NaN), key order preserved."""
    return json.dumps(summary, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


# -- HTML --------------------------------------------------------------------------------------

_CSS: Final = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1f2328;
background:#fff;max-width:1200px}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de}
.muted{color:#656d76}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #d0d7de;border-radius:6px;padding:8px 14px;min-width:140px}
.card b{display:block;font-size:20px}table{border-collapse:collapse;margin:6px 0}
td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.plots{display:flex;flex-wrap:wrap;gap:16px}.plots svg{border:1px solid #eaeef2}
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;background:#f6f8fa;padding:6px}
details{margin:6px 0}summary{cursor:pointer}.msg{margin:6px 0 6px 8px}
.role{font-weight:600;font-size:12px;text-transform:uppercase;color:#0969da}
.warn{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;border-radius:6px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for cell in row:
            numeric = isinstance(cell, (int, float)) or cell is None
            cls = ' class="n"' if numeric else ""
            cells.append(f"<td{cls}>{_e(fmt(cell) if numeric else cell)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content]
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def _message_html(message: Mapping[str, Any]) -> str:
    role = str(message.get("role", "?"))
    text = _content_text(message.get("content"))
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if len(text) > _MAX_MESSAGE_CHARS:
        text = text[:_MAX_MESSAGE_CHARS] + f"… [{len(text) - _MAX_MESSAGE_CHARS} more chars]"
    out = [f'<div class="msg"><span class="role">{_e(role)}</span>']
    if isinstance(reasoning, str) and reasoning:
        out.append(f"<pre class=muted>{_e(reasoning[:_MAX_MESSAGE_CHARS])}</pre>")
    if text:
        out.append(f"<pre>{_e(text)}</pre>")
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            fn = {}
        args = fn.get("arguments", "")
        args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        out.append(f"<pre>→ {_e(fn.get('name', '?'))}({_e(args_text[:_MAX_MESSAGE_CHARS])})</pre>")
    out.append("</div>")
    return "".join(out)


def _transcript_html(store: RunStore, trajectory_id: str) -> str:
    traj = store.get_trajectory(trajectory_id)
    turns = store.list_turns(trajectory_id)
    parts = []
    if traj is not None:
        parts.append(f"<div class=muted>task prompt (local view)</div><pre>{_e(traj.prompt)}</pre>")
    if not turns:
        parts.append("<p class=muted>no policy call was recorded for this rollout</p>")
        return "".join(parts)
    rows = [
        (t.idx, t.route, t.prompt_tokens, t.completion_tokens, round(t.latency_ms, 1))
        for t in turns
    ]
    parts.append(_table(["turn", "route", "prefill", "sample", "latency ms"], rows))
    previous: list[Any] = []
    for turn in turns:
        raw = turn.request.get("messages")
        messages = raw if isinstance(raw, list) else []
        # Show what is new since the previous request (usually tool results), else everything
        # (the agent rewrote its history); skip the echo of the previous reply.
        new = messages[len(previous) :] if messages[: len(previous)] == previous else messages
        if previous and new and isinstance(new[0], dict) and new[0].get("role") == "assistant":
            new = new[1:]
        previous = messages
        parts.append(f'<div class="muted">turn {turn.idx}</div>')
        parts.extend(_message_html(m) for m in new if isinstance(m, dict))
        choices = turn.response.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        if isinstance(first, dict) and isinstance(first.get("message"), dict):
            parts.append(_message_html(first["message"]))
    return "".join(parts)


def _rollouts_section(
    title: str, items: Sequence[Mapping[str, Any]], store: RunStore | None, anchor: str
) -> str:
    if not items:
        return f'<h2 id="{anchor}">{_e(title)}</h2><p class=muted>none</p>'
    headers = ["id", "step", "prompt", "sample", "attempt", "state", "reward", "turns", "tokens"]
    keys = ["id", "step", "prompt_index", "sample_index", "attempt", "state", "reward", "turns"]
    keys += ["tokens", "duration_s"]
    rows = [[*(i[k] for k in keys), i["reason"] or ""] for i in items]
    parts = [f'<h2 id="{anchor}">{_e(title)}</h2>', _table([*headers, "seconds", "reason"], rows)]
    if store is not None:
        for item in items[:_MAX_TRANSCRIPTS]:
            label = f"{item['id']} — {item['state']}, reward {fmt(item['reward'])}"
            body = _transcript_html(store, item["id"])
            parts.append(f"<details><summary>{_e(label)}</summary>{body}</details>")
    return "".join(parts)


def _plots(summary: Mapping[str, Any], store: RunStore | None) -> str:
    steps = summary["steps"]
    charts = []
    if steps:
        xs = [float(s["step"]) for s in steps]
        charts.append(
            plots.lines(
                xs,
                [
                    ("reward mean", [s["reward_mean"] for s in steps]),
                    ("valid mean", [s["valid_mean"] for s in steps]),
                    ("min", [s["reward_min"] for s in steps]),
                    ("max", [s["reward_max"] for s in steps]),
                ],
                title="Reward per step",
                x_label="step",
                integer_x=True,
            )
        )
        charts.append(
            plots.lines(
                xs,
                [("zero_frac", [s["zero_frac"] for s in steps])],
                title="Zero-variance groups per step (zero_frac)",
                x_label="step",
                ylim=(0.0, 1.0),
                integer_x=True,
            )
        )
    if store is not None:
        records = load_records(store, summary["job"]["arn"])
        groups = build_groups(records, summary["settings"]["advantage"])
        shown = groups[-_MAX_STRIP_GROUPS:]
        note = "" if len(shown) == len(groups) else f" (last {len(shown)} of {len(groups)})"
        charts.append(
            plots.strip(
                [(f"{g.step}:{g.prompt_index}", g.rewards, g.degenerate) for g in shown],
                title=f"Reward distribution per group{note}",
            )
        )
        advantages = [a for g in groups for a in g.advantages]
        charts.append(plots.histogram(advantages, title="Advantages", x_label="advantage"))
        chosen = [r for g in groups for r in g.rollouts]
        charts.append(
            plots.histogram(
                [float(r.turns) for r in chosen],
                title="Turns per rollout",
                x_label="turns",
                integer=True,
            )
        )
        charts.append(
            plots.histogram(
                [float(r.tokens) for r in chosen], title="Tokens per rollout", x_label="tokens"
            )
        )
    return '<div class="plots">' + "".join(charts) + "</div>"


def render_html(summary: Mapping[str, Any], store: RunStore | None = None) -> str:
    """One self-contained HTML page of the summary (inline CSS and SVG, no external resource).

    With ``store`` (the run's store) it adds the per-group, advantage, turn and token plots and
    the transcripts of the slowest and failed rollouts. All run text is HTML-escaped.
    """
    job, counts, tokens, cost = (summary[k] for k in ("job", "counts", "tokens", "cost"))
    metrics, projection = summary["metrics"], summary.get("projection")
    cards = [
        ("rollouts", f"{counts['rewarded']} / {counts['slots']}"),
        ("reward mean", fmt(metrics.get("rollout/reward/mean"))),
        ("zero_frac", fmt(metrics.get("rollout/reward/zero_frac"))),
        ("turns mean", fmt(metrics.get("rollout/turns/mean"))),
        ("tokens", fmt(tokens["total"])),
        ("cost", f"{cost['total']:,.4f} {cost['currency']}"),
    ]
    out = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>agent_kit report — {_e(job['name'])}</title><style>{_CSS}</style></head><body>",
        f"<h1>agent_kit run report: {_e(job['name'])}</h1>",
        f"<div class=muted>{_e(job['arn'])} · {_e(job['mode'])} · status {_e(job['status'])}"
        f" · schema {_e(summary['schema'])}</div>",
        '<div class="cards">',
        *(f'<div class="card">{_e(k)}<b>{_e(v)}</b></div>' for k, v in cards),
        "</div>",
    ]
    if tokens["estimated"]:
        out.append(
            f'<p class="warn">{tokens["estimated_turns"]} of {tokens["turns"]} turns have '
            "estimated token usage (the policy reported none): token counts and costs are "
            "estimates.</p>"
        )
    out.append("<h2>Plots</h2>" + _plots(summary, store))
    out.append("<h2>Metrics</h2>" + _table(["metric", "value"], list(metrics.items())))
    token_rows = [(k, tokens[k]) for k in ("prefill", "sample", "train", "total")]
    cost_rows = [(k, cost[k]) for k in ("prefill", "sample", "train", "total")]
    out.append("<h2>Tokens and cost</h2>" + _table(["category", "tokens"], token_rows))
    out.append(
        _table(["category", f"cost ({cost['currency']})"], cost_rows)
        + f"<p class=muted>pricing: {_e(cost['label'])} (source: {_e(cost['source'])})</p>"
    )
    if projection:
        out.append(f"<h2>Projection</h2><p>{_e(projection['text'])}</p>")
    out.append("<h2>Per-step</h2>")
    step_keys = ["step", "trajectories", "rewarded", "lost", "reward_mean", "valid_mean"]
    step_keys += ["zero_frac", "turns_mean", "prefill", "sample", "train"]
    out.append(_table(step_keys, [[s[k] for k in step_keys] for s in summary["steps"]]))
    fails = [(f["count"], f["reason"]) for f in summary["failures"]]
    out.append(
        "<h2>Failure reasons</h2>"
        + (_table(["count", "reason"], fails) if fails else "<p class=muted>none</p>")
    )
    out.append(_rollouts_section("Slowest rollouts", summary["slowest"], store, "slowest"))
    out.append(_rollouts_section("Failed rollouts", summary["failed"], store, "failed"))
    out.append("<h2>Configuration</h2>")
    out.append(f"<pre>{_e(json.dumps(summary['config'], indent=2, ensure_ascii=False))}</pre>")
    out.append("</body></html>")
    return "\n".join(out)


def write_reports(
    run_dir: str | Path, summary: Mapping[str, Any], store: RunStore | None = None
) -> tuple[Path, Path]:
    """Write ``summary.json`` (indented JSON) and ``report.html`` into ``run_dir``; return both
    paths. Each file is written to a temporary name and renamed, so a reader never sees half."""
    directory = Path(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    paths = (directory / SUMMARY_FILE, directory / REPORT_FILE)
    texts = (
        json.dumps(summary, indent=2, ensure_ascii=False, allow_nan=False) + "\n",
        render_html(summary, store),
    )
    for path, text in zip(paths, texts, strict=True):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return paths
