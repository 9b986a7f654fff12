"""The RL report (agent_kit.reporting.report/breakdown/transcripts/compare) on a hand-built store.

Every page is parsed with the standard library's ``html.parser`` into a small tree, and the
structure is asserted: sections and their order, numbers equal to ``summary.json``'s, the reward
breakdown against an independent computation, the per-prompt table, the transcripts' order and
content, the filter controls, the plot kinds, and the comparison page.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from fakes.rollouts import rollout

from agent_kit.reporting.breakdown import (
    RESIDUAL,
    component_stats,
    load_run_data,
    outcome_of,
    prompt_label,
)
from agent_kit.reporting.compare import delta, write_comparison
from agent_kit.reporting.metrics import build_groups
from agent_kit.reporting.report import render_html, write_reports
from agent_kit.reporting.summary import summarize
from agent_kit.reporting.tool_results import NOT_RECORDED, last_tool_results
from agent_kit.reporting.transcripts import stop_reason
from agent_kit.store import INVOCATION_EVENT, RunStore, TrajectoryRow, TurnRow

ARN = "arn:aws:sagemaker:us-west-2:123456789012:job/AgentRFT/rl-test"
LAST = "LAST-RESULT-MARKER <b>solved</b>"
NAN_REASON = "reward: reward component 'outcome' is not finite: nan"
SECTIONS = ["failures", "breakdown", "prompts", "groups", "plots", "metrics", "tokens", "steps"]
SECTIONS += ["transcripts", "slowest", "config"]

# -- a tiny DOM over html.parser ------------------------------------------------------------------

_VOID = {"meta", "br", "hr", "input", "img", "link", "area", "base", "col", "embed", "wbr"}


@dataclass
class Node:
    """One element of the parsed page."""

    tag: str
    attrs: dict[str, str | None]
    children: list[Node | str] = field(default_factory=list)

    def get(self, name: str) -> str | None:
        """An attribute's value (None when absent or valueless)."""
        return self.attrs.get(name)

    @property
    def classes(self) -> set[str]:
        """The element's classes."""
        return set((self.get("class") or "").split())

    def text(self) -> str:
        """All text under the element."""
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self) -> Iterator[Node]:
        """This element and every element under it, in document order."""
        yield self
        for child in self.children:
            if isinstance(child, Node):
                yield from child.iter()

    def all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Node]:
        """Elements under this one matching the tag, class and attributes (``_`` for ``-``)."""
        wanted = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [
            n
            for n in self.iter()
            if n is not self
            and (tag is None or n.tag == tag)
            and (cls is None or cls in n.classes)
            and all(n.get(k) == v for k, v in wanted.items())
        ]

    def one(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Node:
        """The single matching element (assertion error otherwise)."""
        found = self.all(tag, cls, **attrs)
        assert len(found) == 1, (tag, cls, attrs, len(found))
        return found[0]


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs))
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(page: str) -> Node:
    """The page as a :class:`Node` tree (its root holds the ``<html>`` element)."""
    builder = _Builder()
    builder.feed(page)
    builder.close()
    return builder.root


def num(node: Node) -> float | None:
    """The exact value of a cell: its ``data-v`` attribute (None when empty)."""
    raw = node.get("data-v")
    assert raw is not None, node
    return None if raw == "" else float(raw)


# -- the hand-built job ---------------------------------------------------------------------------

#: (prompt, sample) → (outcome value, strategy value) with strategy weight 0.1, or a special.
PLAN: dict[tuple[int, int], Any] = {
    (0, 0): (1.0, 2.0),
    (0, 1): (0.5, -1.0),
    (0, 2): "floor",
    (0, 3): (1.0, 1.0),
    (1, 0): (1.0, -1.0),
    (1, 1): (1.0, 0.0),
    (1, 2): "failed",
    (1, 3): (-1.0, -2.0),
    (2, 0): (1.0, 0.5),
    (2, 1): (1.0, 0.5),
    (2, 2): (1.0, 0.5),
    (2, 3): (1.0, 0.5),
}
LOWEST = (1, 3)  # reward −1.2, below the floor of −1.0
WEIGHT = 0.1


def _turns(store: RunStore, tid: str) -> None:
    system = {"role": "system", "content": "play the game"}
    user = {"role": "user", "content": "first guess"}
    first = {"role": "assistant", "content": None, "tool_calls": [_call(0, "crane")]}
    requests = [[system, user], [system, user, first, _result(0, "feedback one")]]
    for idx, messages in enumerate(requests):
        store.add_turn(
            TurnRow(
                trajectory_id=tid,
                idx=idx,
                route="/v1/chat/completions",
                request={"messages": messages},
                response={
                    "choices": [
                        {
                            "message": {
                                "role": "assistant",
                                "content": None,
                                "tool_calls": [_call(idx, "crane" if idx == 0 else "riser")],
                            }
                        }
                    ]
                },
                prompt_tokens=100 + 50 * idx,
                completion_tokens=10,
                usage_estimated=False,
                latency_ms=2.0,
            )
        )


def _call(i: int, word: str) -> dict[str, Any]:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "guess", "arguments": json.dumps({"word": word})},
    }


def _result(i: int, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": text}


def _breakdown(outcome: float, strategy: float) -> dict[str, dict[str, Any]]:
    return {
        "outcome": {"value": outcome, "weight": 1.0, "contribution": outcome, "kind": "outcome"},
        "strategy": {
            "value": strategy,
            "weight": WEIGHT,
            "contribution": WEIGHT * strategy,
            "kind": "strategy",
        },
        "points_probe": {"value": 3.0, "weight": 0.0, "contribution": 0.0, "kind": "strategy"},
    }


def populate(store: RunStore, *, steps: int = 1, shift: float = 0.0, name: str = "rl-test") -> str:
    """The PLAN over ``steps`` steps (outcome values shifted by ``shift``); return the job ARN.

    Prompt 1 sample 2 is FAILED (a job failure), prompt 2 sample 0 times out and is retried,
    prompt 0 sample 2 is a floor reward from a NaN reward function, and the lowest-scoring
    rollout (prompt 1 sample 3) is the only one whose agent answer carries a tool log.
    """
    arn = ARN.replace("rl-test", name)
    config = {"job": {"group_size": 4, "batch_size": 3, "steps": steps, "success_threshold": 1.0}}
    store.create_job(arn, name, config)
    for step in range(steps):
        for (prompt, sample), plan in PLAN.items():
            tid = f"{name}-s{step}-p{prompt}-g{sample}"
            task = {"prompt": "guess the word", "answer": "riser", "id": f"task-{prompt}"}
            row = TrajectoryRow(
                id=tid,
                job_arn=arn,
                state="OPEN",
                prompt=json.dumps(task),
                step=step,
                prompt_index=prompt,
                sample_index=sample,
            )
            store.create_trajectory(row)
            _turns(store, tid)
            if plan == "failed":
                store.set_state(tid, "FAILED", "The agent signaled that the trajectory failed")
                store.add_event(
                    "job_failure",
                    {
                        "reason": "The agent signaled that the trajectory failed",
                        "trajectory_id": tid,
                    },
                    trajectory_id=tid,
                )
                continue
            if plan == "floor":
                body: dict[str, Any] = {
                    "reward": -1.0,
                    "reward_breakdown": {},
                    "stop_reason": "finished",
                    "floor_reward": True,
                    "failure": {"boundary": "reward", "reason": NAN_REASON.split(": ", 1)[1]},
                }
                reward = -1.0
            else:
                outcome, strategy = plan
                outcome += shift
                reward = outcome + WEIGHT * strategy
                body = {
                    "reward": reward,
                    "reward_breakdown": _breakdown(outcome, strategy),
                    "stop_reason": "finished",
                }
                if (prompt, sample) == LOWEST:
                    body["stop_reason"] = "limit_turns"
                    body["tool_log"] = [
                        {"turn": 0, "name": "guess", "input": {"word": "crane"}, "output": "x"},
                        {"turn": 1, "name": "guess", "input": {"word": "riser"}, "output": LAST},
                    ]
            if (prompt, sample) == (2, 0):
                store.set_state(tid, "TIMED_OUT", "rollout_timeout")
                tid = f"{tid}-a1"
                store.create_trajectory(
                    TrajectoryRow(
                        id=tid,
                        job_arn=arn,
                        state="OPEN",
                        prompt=row.prompt,
                        step=step,
                        prompt_index=prompt,
                        sample_index=sample,
                        attempt=1,
                        retry_of=row.id,
                    )
                )
                _turns(store, tid)
            store.add_event(INVOCATION_EVENT, {"status": "ok", "body": body}, trajectory_id=tid)
            store.set_reward(tid, [reward], None, None, state="REWARDED")
    return arn


@pytest.fixture
def one_step(tmp_path: Path) -> Path:
    """A one-step run directory with the PLAN."""
    directory = tmp_path / "one-step"
    with RunStore.open(directory) as store:
        populate(store)
        write_reports(directory, summarize(store), store)
    return directory


@pytest.fixture
def page(one_step: Path) -> Node:
    """The one-step run's report.html, parsed."""
    return parse((one_step / "report.html").read_text(encoding="utf-8"))


@pytest.fixture
def summary(one_step: Path) -> dict[str, Any]:
    """The one-step run's summary.json."""
    data: dict[str, Any] = json.loads((one_step / "summary.json").read_text(encoding="utf-8"))
    return data


# -- the report -----------------------------------------------------------------------------------


def test_every_section_present_failures_first(page: Node) -> None:
    """Every section is there once, in order, and the failures section comes first."""
    sections = [s.get("id") for s in page.all("section")]
    assert sections == SECTIONS
    nav = [a.get("href") for a in page.one("nav").all("a")]
    assert nav == [f"#{s}" for s in SECTIONS]
    body = page.one("body")
    order = [n for n in body.iter() if n.get("id") in {"cost-banner", "failures", "breakdown"}]
    assert [n.get("id") for n in order] == ["cost-banner", "failures", "breakdown"]


def test_cost_banner_is_honest(page: Node, summary: dict[str, Any]) -> None:
    """The banner says the cost is an estimate, names the pricing and shows the total."""
    banner = page.one(id="cost-banner").text()
    assert "estimate, not a bill" in banner
    assert summary["cost"]["label"] in banner
    assert f"{summary['cost']['total']:,.4f}" in banner
    card = page.one("div", cls="card", data_metric="cost.total")
    assert num(card) == summary["cost"]["total"]


def test_numbers_equal_summary(page: Node, summary: dict[str, Any]) -> None:
    """Every metric row and headline card holds exactly summary.json's value."""
    rows = page.one(id="metrics-table").all("tr")[1:]
    assert [r.get("data-metric") for r in rows] == list(summary["metrics"])
    for row in rows:
        value = summary["metrics"][row.get("data-metric") or ""]
        assert num(row.all("td")[1]) == value
        assert row.all("td")[0].text() == row.get("data-metric")
    for card in page.all("div", cls="card"):
        key = card.get("data-metric")
        if key and key.startswith(("rollout/", "eval/")):
            assert num(card) == summary["metrics"][key]
    assert (
        num(page.one("div", cls="card", data_metric="tokens.total")) == summary["tokens"]["total"]
    )
    assert "eval/reward/failed_rollouts" in page.one(id="metrics-table").text()


def test_failures_section_counts_and_ids(page: Node, summary: dict[str, Any]) -> None:
    """Agent-side, floor, non-finite, job and rollout failures are counted with first ids."""
    failures = page.one("section", id="failures")
    counts = {
        r.get("data-count"): num(r.one("td")) for r in failures.all("tr") if r.get("data-count")
    }
    assert counts["agent_failures"] == sum(a["count"] for a in summary["agent_failures"]) == 1
    assert counts["floor_rewards"] == summary["floor_rewards"] == 1
    assert counts["non_finite"] == 1
    assert counts["job_failures"] == 1
    assert counts["failed_rollouts"] == 2  # the FAILED one and the timed-out attempt
    assert counts["timed_out"] == 1
    assert counts["lost"] == summary["counts"]["lost"] == 1
    agent = failures.one(id="agent-failures").text()
    assert NAN_REASON in agent
    assert "rl-test-s0-p0-g2" in agent
    jobs = failures.one(id="job-failures").text()
    assert "The agent signaled that the trajectory failed" in jobs
    assert "rl-test-s0-p1-g2" in jobs
    reasons = failures.one(id="failure-reasons").text()
    assert "rollout_timeout" in reasons
    assert "rl-test-s0-p2-g0" in reasons
    assert "Failed rollouts" in failures.text()


def test_failures_section_says_where_it_failed(page: Node) -> None:
    """The failures section lists the rewarded rollouts below the success threshold, lowest
    reward first, each with its outcome, why it ended, its weighted reward components and a
    link to its transcript on the page; a line counts them against the rewarded ones."""
    failures = page.one("section", id="failures")
    assert "4 of 11 rewarded rollouts are below the success threshold 1" in failures.text()
    rows = failures.one("table", id="below-threshold").one("tbody").all("tr")
    ids = [r.get("data-trajectory") for r in rows]
    assert ids == ["rl-test-s0-p1-g3", "rl-test-s0-p0-g2", "rl-test-s0-p0-g1", "rl-test-s0-p1-g0"]
    transcripts = {t.get("id") for t in page.all("details", cls="tx")}
    for row, tid in zip(rows, ids, strict=True):
        assert row.one("a").get("href") == f"#tx-{tid}"
        assert f"tx-{tid}" in transcripts
    lowest = rows[0].text()
    assert "unsolved" in lowest
    assert "turn budget exhausted" in lowest
    assert "outcome -1" in lowest
    assert "strategy -0.2" in lowest
    assert "points_probe" not in lowest  # a weight-0 component explains nothing
    assert "LAST-RESULT-MARKER" in lowest  # the last tool result, from the agent's tool log
    assert num(rows[0].all("td")[2]) == pytest.approx(-1.2)
    assert "floor" in rows[1].text()
    reasons = failures.one("table", id="below-threshold-reasons").text()
    assert "turn budget exhausted" in reasons


def test_unsolved_run_has_no_green_no_failures_box(tmp_path: Path) -> None:
    """A run where every rollout was rewarded but one is below the threshold does not say
    "No failures" in green: it lists the unsolved rollout with a link to its transcript."""
    with RunStore.open(tmp_path / "unsolved") as store:
        store.create_job(ARN, "unsolved", {"group_size": 2})
        for sample, reward in enumerate((0.0, 1.0)):
            tid = f"u-{sample}"
            store.create_trajectory(
                TrajectoryRow(id=tid, job_arn=ARN, state="OPEN", prompt="p", sample_index=sample)
            )
            _turns(store, tid)
            store.set_reward(tid, [reward], None, None, state="REWARDED")
        root = parse(render_html(summarize(store), store))
    failures = root.one("section", id="failures")
    assert not [n for n in failures.iter() if "ok" in (n.get("class") or "").split()]
    assert "No failures" not in failures.text()
    rows = failures.one("table", id="below-threshold").one("tbody").all("tr")
    assert [r.get("data-trajectory") for r in rows] == ["u-0"]
    assert "1 of 2 rewarded rollouts are below the success threshold 1" in failures.text()


def _share(contributions: list[float], totals: list[float]) -> float:
    mc, mt = statistics.fmean(contributions), statistics.fmean(totals)
    cov = statistics.fmean(
        [(c - mc) * (t - mt) for c, t in zip(contributions, totals, strict=True)]
    )
    return cov / statistics.pvariance(totals)


def test_reward_breakdown_table(page: Node) -> None:
    """Component mean, std, declared weight and variance share match an independent
    computation over the rewarded non-floor rollouts; floor and non-finite are counted apart."""
    plans = [p for p in PLAN.values() if isinstance(p, tuple)]
    outcome = [p[0] for p in plans]
    strategy = [WEIGHT * p[1] for p in plans]
    totals = [o + s for o, s in zip(outcome, strategy, strict=True)]
    section = page.one("section", id="breakdown")
    table = section.one("table", cls="sortable")
    rows = {
        r.get("data-component"): r.all("td") for r in table.all("tr") if r.get("data-component")
    }
    assert list(rows) == ["outcome", "strategy", "points_probe"]  # no residual: they add up
    cells = rows["strategy"]
    assert num(cells[2]) == WEIGHT  # declared weight
    assert num(cells[3]) == len(plans)
    assert num(cells[4]) == pytest.approx(statistics.fmean([p[1] for p in plans]))
    assert num(cells[5]) == pytest.approx(statistics.pstdev([p[1] for p in plans]))
    assert num(cells[6]) == pytest.approx(statistics.fmean(strategy))
    assert num(cells[7]) == pytest.approx(statistics.pstdev(strategy))
    assert num(cells[8]) == pytest.approx(_share(strategy, totals))
    assert num(rows["outcome"][8]) == pytest.approx(_share(outcome, totals))
    shares = [num(r[8]) or 0.0 for r in rows.values()]
    assert math.fsum(shares) == pytest.approx(1.0)
    assert num(rows["points_probe"][8]) == 0.0  # weight 0: diagnostic
    text = section.text()
    assert f"Over {len(plans)} rewarded rollouts" in text
    assert "1 floor rewards (of which 1 non-finite)" in text
    assert section.one("svg").get("data-kind") == "bars"


def test_component_stats_residual_row(tmp_path: Path) -> None:
    """A breakdown that does not add up to the reward gets a residual row, and the shares still
    sum to 1."""
    with RunStore.open(tmp_path / "r") as store:
        data = load_run_data(store, populate(store))
    changed = "rl-test-s0-p0-g0"
    records = tuple(
        replace(r, reward_row=replace(r.reward_row, total=(r.reward or 0.0) + 0.5))
        if r.id == changed and r.reward_row is not None
        else r
        for r in data.records
    )
    data = replace(data, records=records, groups=tuple(build_groups(records)))
    result = component_stats(data)
    assert [c.name for c in result.components][-1] == RESIDUAL
    assert math.fsum(c.share or 0.0 for c in result.components) == pytest.approx(1.0)


def test_per_prompt_table(page: Node, summary: dict[str, Any]) -> None:
    """Success rate, reward mean/std per prompt; zero-variance prompt marked; sortable headers;
    the totals row equals eval/reward/succeeded_rollouts."""
    table = page.one("table", id="prompt-table")
    assert "sortable" in table.classes
    heads = table.one("thead").all("th")
    assert all(th.one("button", cls="sort") for th in heads)
    assert [th.get("data-type") for th in heads][:2] == ["text", "num"]
    rows = table.one("tbody").all("tr")
    assert [r.get("data-prompt") for r in rows] == ["0", "1", "2"]
    by = {r.get("data-prompt"): r.all("td") for r in rows}
    assert [num(by[p][8]) for p in "012"] == [0.5, 0.25, 1.0]  # success rate
    rewards_p0 = [1.2, 0.4, -1.0, 1.1]
    assert num(by["0"][9]) == pytest.approx(statistics.fmean(rewards_p0))
    assert num(by["0"][10]) == pytest.approx(statistics.pstdev(rewards_p0))
    assert num(by["1"][7]) == 1  # lost
    assert num(by["0"][6]) == 1  # floor
    assert num(by["2"][11]) == 1  # zero-variance groups
    novar = [r for r in rows if "novar" in r.classes]
    assert [r.get("data-prompt") for r in novar] == ["2"]
    assert "no gradient" in novar[0].text()
    assert by["2"][0].one("button").get("data-show-prompt") == "2"
    assert by["0"][0].text().startswith("task-0")
    foot = table.one("tfoot").all("td")
    assert num(foot[3]) == summary["metrics"]["eval/reward/succeeded_rollouts"] == 7


def test_filter_controls(page: Node) -> None:
    """The transcripts have prompt and outcome filters, and every transcript carries the
    attributes they filter on."""
    filters = page.one(id="filters")
    prompt = filters.one("select", id="f-prompt")
    assert [o.get("value") for o in prompt.all("option")] == ["", "0", "1", "2"]
    outcome = filters.one("select", id="f-outcome")
    values = [o.get("value") for o in outcome.all("option")]
    assert values == ["", "rewarded", "succeeded", "unsolved", "floor", "failed", "pending"]
    for tx in page.all("details", cls="tx"):
        assert tx.get("data-prompt") in {"0", "1", "2"}
        assert tx.get("data-outcome") in values[2:]
        assert tx.get("data-rewarded") in {"0", "1"}
    assert page.one("span", id="f-count")


def test_transcripts_order_and_content(page: Node) -> None:
    """The lowest-scoring rollout comes first (open), with every turn, its last tool result
    (from the agent's tool log), its reward breakdown and its stop reason; then the floor and
    failed ones; a rollout without a tool log says its last result was not recorded."""
    txs = page.all("details", cls="tx")
    ids = [t.get("data-trajectory") for t in txs]
    assert ids[0] == "rl-test-s0-p1-g3"
    assert "open" in txs[0].attrs
    assert ids.index("rl-test-s0-p0-g2") < ids.index("rl-test-s0-p1-g2")  # floor before failed
    assert ids.index("rl-test-s0-p1-g2") < ids.index("rl-test-s0-p2-g0")
    assert len(ids) == len(set(ids)) == 13  # every trajectory of this small job
    first = txs[0]
    assert first.get("data-outcome") == "unsolved"
    text = first.text()
    assert text.count("turn ") >= 2
    assert "→ guess" in text
    assert "feedback one" in text
    last = first.one("div", cls="last-result")
    assert LAST in last.text()  # escaped markup shown as text
    breakdown = first.one("table", cls="breakdown")
    assert {r.all("td")[0].text() for r in breakdown.all("tr")[1:]} == {
        "outcome",
        "strategy",
        "points_probe",
    }
    assert num(first.one("div", cls="reward").one("b")) == pytest.approx(-1.2)
    assert "turn budget exhausted" in text
    assert "unsolved (reward < 1)" in text
    plain = next(t for t in txs if t.get("data-trajectory") == "rl-test-s0-p0-g0")
    assert NOT_RECORDED in plain.one(cls="not-recorded").text()
    assert "solved: the environment finished" in plain.text()
    floor = next(t for t in txs if t.get("data-trajectory") == "rl-test-s0-p0-g2")
    assert floor.get("data-outcome") == "floor"
    assert "floor reward" in floor.text()
    assert "non-finite reward" in floor.text()
    failed = next(t for t in txs if t.get("data-trajectory") == "rl-test-s0-p1-g2")
    assert failed.get("data-outcome") == "failed"
    assert "failed, no reward" in failed.text()
    timed_out = next(t for t in txs if t.get("data-trajectory") == "rl-test-s0-p2-g0")
    assert "timeout" in timed_out.text()


def test_vocabulary_failed_is_never_unsolved(page: Node) -> None:
    """A rewarded episode below the threshold is 'unsolved', never 'failed'; 'failed' marks
    only trajectories without a reward."""
    for tx in page.all("details", cls="tx"):
        reward = num(tx.one("div", cls="reward").one("b"))
        outcome = tx.get("data-outcome")
        if outcome == "failed":
            assert reward is None
        else:
            assert reward is not None
        badge = tx.one("summary").one("span", cls="badge")
        assert badge.text() == outcome


def test_one_step_shows_distributions(page: Node) -> None:
    """A one-step run draws reward, turn and token histograms, not single-dot lines; every axis
    is labelled with its unit."""
    plots = page.one("section", id="plots")
    kinds = [s.get("data-kind") for s in plots.all("svg")]
    assert "lines" not in kinds
    titles = {s.get("aria-label"): s for s in plots.all("svg")}
    for title in ("Reward distribution", "Turns per rollout", "Tokens per rollout"):
        assert titles[title].get("data-kind") == "histogram"
    reward = titles["Reward distribution"]
    assert reward.one("line", cls="marker")  # the success threshold
    assert "success threshold 1" in reward.text()
    for svg in page.all("svg"):
        assert svg.one("text", cls="x-label").text(), svg.get("aria-label")
        assert svg.one("text", cls="y-label").text(), svg.get("aria-label")
    assert "rollouts (count)" in reward.text()
    assert "reward (unitless)" in reward.text()
    assert "tokens per rollout (prefill + sample)" in titles["Tokens per rollout"].text()


def test_multi_step_shows_lines(tmp_path: Path) -> None:
    """A run of several steps draws per-step lines for reward, zero_frac, turns and tokens."""
    with RunStore.open(tmp_path / "multi") as store:
        populate(store, steps=3)
        root = parse(render_html(summarize(store), store))
    plots = root.one("section", id="plots")
    titles = {s.get("aria-label"): s.get("data-kind") for s in plots.all("svg")}
    for title in (
        "Reward per step",
        "Zero-variance groups per step (zero_frac)",
        "Turns per rollout, mean per step",
        "Tokens per rollout, mean per step",
    ):
        assert titles[title] == "lines"
    assert "Reward distribution" not in titles
    chart = plots.one("svg", aria_label="Reward per step")
    assert len(chart.all("polyline")) == 4  # mean, valid mean, min, max over three steps
    assert "training step (index)" in chart.text()
    rows = root.one("table", id="prompt-table").one("tbody").all("tr")
    assert [num(r.all("td")[2]) for r in rows] == [3, 3, 3]  # groups per prompt


def test_page_without_failures_says_so(tmp_path: Path) -> None:
    """A job where nothing failed says so in the failures section."""
    with RunStore.open(tmp_path / "clean") as store:
        store.create_job(ARN, "clean", {"group_size": 2})
        for sample in range(2):
            tid = f"c-{sample}"
            store.create_trajectory(
                TrajectoryRow(id=tid, job_arn=ARN, state="OPEN", prompt="p", sample_index=sample)
            )
            _turns(store, tid)
            store.set_reward(tid, [1.0 + sample], None, None, state="REWARDED")
        root = parse(render_html(summarize(store), store))
    assert root.one("section", id="failures").one(id="no-failures")
    assert root.one("section", id="breakdown").text().count("no reward breakdown") == 1


# -- pieces ---------------------------------------------------------------------------------------


def test_outcome_words() -> None:
    """Outcomes: failed = no reward; unsolved = rewarded below the threshold; floor first."""
    assert outcome_of(rollout("t", reward=1.0), 1.0) == "succeeded"
    assert outcome_of(rollout("t", reward=0.99), 1.0) == "unsolved"
    floor = rollout("t", reward=5.0, floor_reward=True)
    assert outcome_of(floor, 1.0) == "floor"
    assert outcome_of(rollout("t", state="TIMED_OUT"), 1.0) == "failed"
    assert outcome_of(rollout("t", state="OPEN"), 1.0) == "pending"


def test_last_tool_results_sources() -> None:
    """The last tool result comes from a tool log (by turn), a last_tool_result, or trailing
    chat/Strands messages; without any of them it is not recorded (None)."""
    log = [
        {"turn": 2, "name": "g", "input": {"w": "a"}, "output": "last"},
        {"turn": 1, "output": "x"},
    ]
    assert [r.output for r in last_tool_results({"tool_log": log}, 2, 1) or []] == ["last"]
    assert [r.output for r in last_tool_results({"last_tool_result": "done"}, 0, 1) or []] == [
        "done"
    ]
    strands = {
        "messages": [
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": "u1"}}]},
            {
                "role": "user",
                "content": [{"toolResult": {"toolUseId": "u1", "content": [{"text": "ok!"}]}}],
            },
        ]
    }
    assert [r.output for r in last_tool_results(strands, 0, 1) or []] == ["ok!"]
    chat = {"messages": [{"role": "assistant"}, {"role": "tool", "content": "fin"}]}
    assert [r.output for r in last_tool_results(chat, 0, 1) or []] == ["fin"]
    assert last_tool_results({"reward": 1.0}, 0, 1) is None
    assert last_tool_results(None, 0, 1) is None


def test_stop_reason_words() -> None:
    """Stop reasons read as words: solved, turn budget, policy error, timeout, failed."""
    rec = rollout("t", reward=1.2)
    low = rollout("t", reward=0.2)
    body = {"status": "ok", "body": {"stop_reason": "finished"}}
    assert stop_reason(rec, body, 1.0).startswith("solved")
    assert stop_reason(low, body, 1.0).startswith("finished unsolved")
    turns = {"status": "ok", "body": {"stop_reason": "limit_turns"}}
    assert stop_reason(low, turns, 1.0).startswith("turn budget exhausted")
    policy = {
        "body": {"failure": {"boundary": "policy", "reason": "HTTP 500"}, "floor_reward": True}
    }
    assert stop_reason(low, policy, 1.0) == "policy error: HTTP 500 — floor reward"
    timed = rollout("t", state="TIMED_OUT")
    assert stop_reason(timed, None, 1.0).startswith("timeout")
    failed = rollout("t", state="FAILED", reason="boom")
    assert stop_reason(failed, None, 1.0) == "failed, no reward: boom"
    assert "not recorded" in stop_reason(rec, None, 1.0)


def test_prompt_label() -> None:
    """A prompt is named by its JSON id, else by its (inner) text, shortened."""
    assert prompt_label(json.dumps({"id": "w-1", "answer": "x"})) == "w-1"
    assert prompt_label(json.dumps({"prompt": "Play   Wordle"})) == "Play Wordle"
    assert prompt_label("x" * 100).endswith("…")


# -- the comparison -------------------------------------------------------------------------------


def test_comparison_page(tmp_path: Path) -> None:
    """The comparison has both runs' metrics with B − A deltas, failure counts, component
    means and per-prompt success both ways."""
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with RunStore.open(a_dir) as store:
        populate(store, name="before")
        write_reports(a_dir, summarize(store), store)
    with RunStore.open(b_dir) as store:
        populate(store, name="after", shift=0.5)  # every outcome term +0.5
    out = write_comparison(a_dir, b_dir, tmp_path / "out" / "compare.html")
    root = parse(out.read_text(encoding="utf-8"))
    assert root.one("h1").text() == "agent_kit comparison: before vs after"
    sa = json.loads((a_dir / "summary.json").read_text())
    with RunStore.open(b_dir, readonly=True) as store:
        sb = summarize(store).document()
    rows = {r.get("data-metric"): r.all("td") for r in root.one(id="metrics-table").all("tr")[1:]}
    for name, value in sa["metrics"].items():
        cells = rows[name]
        assert num(cells[1]) == value
        assert num(cells[2]) == sb["metrics"][name]
        expected, _ = delta(value, sb["metrics"][name])
        assert num(cells[3]) == expected
    assert num(rows["rollout/reward/mean"][3]) == pytest.approx(0.5 * 10 / 11)
    assert num(rows["counts.slots"][1]) == sa["counts"]["slots"]
    assert num(rows["cost.total"][1]) == sa["cost"]["total"]
    failures = {
        r.get("data-metric"): r.all("td") for r in root.one(id="failures-table").all("tr")[1:]
    }
    assert num(failures["failures.floor rewards"][1]) == 1
    assert num(failures["failures.job failures"][2]) == 1
    comp = {
        r.get("data-component"): r.all("td") for r in root.one(id="breakdown-table").all("tr")[1:]
    }
    assert num(comp["outcome"][3]) == pytest.approx(0.5)
    prompts = {
        r.get("data-prompt-label"): r.all("td") for r in root.one(id="prompt-table").all("tr")[1:]
    }
    assert set(prompts) == {"task-0", "task-1", "task-2"}
    assert num(prompts["task-1"][1]) == 0.25
    assert num(prompts["task-1"][2]) == 0.5  # sample 0 (0.9 → 1.4) crosses the threshold
    assert num(prompts["task-1"][3]) == 0.25
    assert num(prompts["task-0"][3]) == 0.0
    assert "task-1" in root.one(id="better-in-b").text()
    assert "task-0" not in root.one(id="better-in-b").text()
    assert root.one(id="better-in-a").text() == "none"
    assert "estimates, not bills" in root.one(id="cost-banner").text()
    assert root.one("section", id="settings")
    assert len(root.all("script")) == 1


def test_comparison_refuses_a_directory_without_store(tmp_path: Path) -> None:
    """write_comparison names the directory that holds no run store."""
    from agent_kit.errors import UsageError

    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no run store"):
        write_comparison(tmp_path / "empty", tmp_path / "empty", tmp_path / "c.html")
