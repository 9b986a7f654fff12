"""The group view: the rollouts of one prompt side by side (report.html, eval.html).

GRPO's advantage comes from the spread within a group: the k rollouts of one prompt. The view
puts them next to each other, a column each: the reward (or why there is none), the advantage,
every reward term's contribution, the task's own figures, the turns, and what each rollout did
at the **parting turn**: the first turn (0-based policy call) at which not every rollout made
the same answer (the assistant message: its text and tool calls). Before it the rollouts are
one; from it on they differ, and the reward difference comes from there.

The page holds every group's block, pre-rendered and escaped, in a hidden pool; the page's one
static script (:data:`agent_kit.reporting.page.SCRIPT`) shows the block the selects name in
each pane — one pane in report.html (a group: step and prompt), two in eval.html (two cells of
the grid on one prompt: base against trained). No run data reaches the script.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent_kit.reporting.metrics import GroupResult
from agent_kit.reporting.page import esc, wide
from agent_kit.reporting.transcripts import fmt
from agent_kit.store import Rollout, TurnRow

__all__ = ["GroupBlock", "group_block", "group_view", "parting_turn", "run_groups"]

#: How much of one answer a cell of the view shows.
_ACTION_CHARS: Final = 160


@dataclass(frozen=True)
class GroupBlock:
    """One group's pre-rendered block: its key (what the selects name), the option's text
    and the markup."""

    key: str
    title: str
    html: str


def _message(row: TurnRow) -> Mapping[str, Any]:
    choices = row.response.get("choices") if isinstance(row.response, dict) else None
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    message = first.get("message")
    return message if isinstance(message, dict) else {}


def _answer(row: TurnRow) -> str:
    """A turn's answer as one comparable string: its text and its tool calls."""
    message = _message(row)
    calls = [
        (c.get("function") or {}).get("name", "") + str((c.get("function") or {}).get("arguments"))
        for c in message.get("tool_calls") or ()
        if isinstance(c, dict)
    ]
    return json.dumps([message.get("content") or "", calls], default=str)


def _action(row: TurnRow | None) -> str:
    """What the policy did at a turn, in short: its tool calls (``name(arguments)``), else its
    text; ``–`` for no such turn."""
    if row is None:
        return "–"
    message = _message(row)
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            calls.append(f"{function.get('name', '?')}({function.get('arguments', '')})")
    text = "; ".join(calls) or str(message.get("content") or "").strip() or "(empty answer)"
    return text if len(text) <= _ACTION_CHARS else text[: _ACTION_CHARS - 1] + "…"


def parting_turn(rollouts: Sequence[Rollout]) -> int | None:
    """The first turn at which the rollouts' answers are not all the same (one that has no such
    turn while another has counts as different); None for fewer than two rollouts or rollouts
    that never part. Needs their turns (``load_rollouts(..., with_turns=True)``)."""
    if len(rollouts) < 2:
        return None
    longest = max(len(r.turn_rows) for r in rollouts)
    for turn in range(longest):
        answers = {
            _answer(r.turn_rows[turn]) if turn < len(r.turn_rows) else None for r in rollouts
        }
        if len(answers) > 1:
            return turn
    return None


def _terms(rollouts: Sequence[Rollout]) -> list[str]:
    return list(dict.fromkeys(n for r in rollouts for n in (r.reward_breakdown or {})))


def _tasks(rollouts: Sequence[Rollout]) -> list[str]:
    return list(dict.fromkeys(n for r in rollouts for n in r.task_metrics))


def _row(name: str, values: Sequence[Any], cls: str = "") -> str:
    klass = f' class="{cls}"' if cls else ""
    cells = "".join(f"<td>{esc(v if isinstance(v, str) else fmt(v))}</td>" for v in values)
    return f"<tr{klass}><th>{esc(name)}</th>{cells}</tr>"


def group_block(
    key: str, title: str, rollouts: Sequence[Rollout], advantages: Sequence[float] | None = None
) -> GroupBlock:
    """The block of one group's rollouts (with their turns), a column each, in sample order;
    ``advantages`` in the same order (None: not shown, e.g. an evaluation)."""
    ordered = sorted(rollouts, key=lambda r: (r.sample_index, r.attempt))
    parting = parting_turn(ordered)
    head = "".join(f"<th>sample {r.sample_index}</th>" for r in ordered)
    rows = [
        _row("rollout", [r.id for r in ordered], "id"),
        _row("reward", [r.reward if r.reward is not None else r.state.lower() for r in ordered]),
    ]
    if advantages is not None:
        by_id = dict(zip((r.id for r in rollouts), advantages, strict=False))
        rows.append(_row("advantage", [by_id.get(r.id) for r in ordered]))
    for term in _terms(ordered):
        values = [((r.reward_breakdown or {}).get(term) or {}).get("contribution") for r in ordered]
        rows.append(_row(f"term: {term}", values))
    for name in _tasks(ordered):
        rows.append(_row(f"task: {name}", [r.task_metrics.get(name) for r in ordered]))
    rows.append(_row("turns", [r.turns for r in ordered]))
    if parting is not None:
        at = [r.turn_rows[parting] if parting < len(r.turn_rows) else None for r in ordered]
        rows.append(_row(f"turn {parting} (parting)", [_action(t) for t in at], "differs"))
    rows.append(
        _row("last answer", [_action(r.turn_rows[-1] if r.turn_rows else None) for r in ordered])
    )
    if parting is None:
        note = "the rollouts never part: every turn's answer is the same in all of them"
        if len(ordered) < 2:
            note = "one rollout: nothing to compare"
    else:
        note = (
            f"the rollouts part at turn {parting}: turns 0–{parting - 1} are the same in all"
            if parting
            else "the rollouts part at turn 0: their first answers already differ"
        )
    markup = (
        f'<div class="gv-block" data-key="{esc(key)}"><p class="muted">{esc(title)}: '
        f"{esc(note)}</p>"
        + wide(
            f"<table><thead><tr><th></th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
        + "</div>"
    )
    return GroupBlock(key, title, markup)


def _options(values: Sequence[tuple[str, str]], selected: str = "") -> str:
    return "".join(
        f'<option value="{esc(v)}"{" selected" if v == selected else ""}>{esc(t)}</option>'
        for v, t in values
    )


def group_view(
    blocks: Sequence[GroupBlock],
    prompts: Sequence[tuple[str, str]],
    cells: Sequence[tuple[str, str]] = (),
) -> str:
    """The view's markup: a select of ``prompts`` (value, text); with ``cells`` (value, text)
    two panes, each with its own select of a cell (the first and second cell chosen), a block
    keyed ``CELL|PROMPT``; without, one pane whose block is keyed by the prompt's value. The
    blocks wait in a hidden pool for the page's script to show."""
    if cells:
        panes = "".join(
            '<div class="gv-pane"><label>cell <select class="gv-cell">'
            f"{_options(cells, cells[min(i, len(cells) - 1)][0])}</select></label>"
            '<div class="gv-shown"></div></div>'
            for i in range(2)
        )
    else:
        panes = '<div class="gv-pane"><div class="gv-shown"></div></div>'
    pool = "".join(b.html for b in blocks)
    return (
        '<div class="group-view"><label>'
        f'{"prompt" if cells else "group"} <select class="gv-prompt">{_options(prompts)}'
        f'</select></label><div class="gv-panes">{panes}</div>'
        f'<div class="gv-pool" hidden>{pool}</div></div>'
    )


def run_groups(groups: Sequence[GroupResult], turns: Mapping[str, Rollout]) -> str:
    """The report's view: every group of a run (step, prompt), its rewarded rollouts with their
    advantages; ``turns`` maps a rollout id to its record loaded with its turns."""
    blocks, options = [], []
    for g in groups:
        if not g.rollouts:
            continue
        key = f"s{g.step}-p{g.prompt_index}"
        rewards = g.rewards
        spread = f"rewards {min(rewards):.3g} – {max(rewards):.3g}" if rewards else "no reward"
        lost = f", {g.lost} lost" if g.lost else ""
        title = (
            f"step {g.step} · prompt {g.prompt_index}: {spread} ({len(g.rollouts)} rollouts{lost})"
        )
        rollouts = [turns.get(r.id, r) for r in g.rollouts]
        blocks.append(group_block(key, title, rollouts, g.advantages))
        options.append((key, title))
    return group_view(blocks, options)
