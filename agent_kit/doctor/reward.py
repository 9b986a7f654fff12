"""``agent-kit doctor reward``: audit a recorded run's reward before a real job pays for it.

:func:`audit_reward` reads a run directory (read-only), builds one
:class:`~agent_kit.doctor.invariants.EpisodeView` per scored slot (the rollout the metrics use;
:mod:`agent_kit.doctor.views`), optionally re-scores every episode with the entrypoint's current
reward (:mod:`agent_kit.doctor.rescore`), and returns a :class:`RewardAudit` with findings from
four checks:

- **ordering**: the entrypoint's ``REWARD_ORDERINGS`` on every pair of episodes
  (:mod:`agent_kit.doctor.invariants`);
- **zero-variance**: groups whose rewards are all equal give no gradient
  (:mod:`agent_kit.doctor.variance`);
- **hacking**: reward vs length, rewards without an outcome, a dominating component, recovered
  text tool calls (:mod:`agent_kit.doctor.hacking`);
- **projection** (here): tokens per slot × the planned job's slots → cost (the summary's
  projection), an error above ``budget``;
- **judges**: for rewards with LLM-judged terms, the judge's self-consistency, its share of
  the reward's variance and its bias probes (:mod:`agent_kit.doctor.judge_audit`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent_kit.contract import TrajectoryState
from agent_kit.doctor.findings import Finding, count_by_severity
from agent_kit.doctor.hacking import dominance, length_signals, recovered_calls, unearned_rewards
from agent_kit.doctor.invariants import EpisodeView, check_orderings, load_orderings
from agent_kit.doctor.rescore import Rescored, rescore_run
from agent_kit.doctor.variance import zero_variance
from agent_kit.doctor.views import SHOWN, episode_views
from agent_kit.driver.config import recorded_spec
from agent_kit.emulator.loader import load_module, module_name_for
from agent_kit.errors import UsageError
from agent_kit.reporting.breakdown import RunData, load_run_data
from agent_kit.reporting.pricing import Pricing
from agent_kit.reporting.summary import resolve_job, summarize
from agent_kit.reporting.summary_schema import Summary, flat_config
from agent_kit.reporting.words import plural
from agent_kit.settings import DEFAULTS, Settings
from agent_kit.store import Rollout, RunStore, load_rollouts, resolve_path
from agent_kit.store.events import ROLLOUT_DONE_EVENT
from agent_kit.store.records import INTERRUPTED_STATE
from agent_kit.store.runlock import live_holder

__all__ = ["RewardAudit", "audit_reward"]

#: States (as reports read them) of an attempt that ended without a reward.
_ENDED_WITHOUT_REWARD: Final = TrajectoryState.unrewarded() | {INTERRUPTED_STATE}


@dataclass(frozen=True)
class RewardAudit:
    """The findings on one run, with what was read."""

    run_dir: str
    job_name: str
    entrypoint: str | None
    rescored: bool
    episodes: int
    scored: int
    findings: tuple[Finding, ...]
    #: Who plays the run now (pid, host, command) when it was still being played: the audit
    #: then covers only the rollouts finished at the moment it read the store.
    live: Mapping[str, Any] | None = None
    #: Rollouts of a live run left out of the audit because they had not finished yet.
    in_flight: int = 0

    @property
    def ok(self) -> bool:
        """True when no finding is an error."""
        return not any(f.severity == "error" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``--json``)."""
        return {
            "schema": "agent_kit.doctor.reward/1",
            "run_dir": self.run_dir,
            "job": self.job_name,
            "entrypoint": self.entrypoint,
            "rescored": self.rescored,
            "episodes": self.episodes,
            "scored": self.scored,
            "live": self.live is not None,
            "in_flight": self.in_flight,
            "counts": count_by_severity(self.findings),
            "ok": self.ok,
            "findings": [f.to_dict() for f in self.findings],
        }


def projection(summary: Summary, budget: float | None) -> list[Finding]:
    """Tokens per slot × the planned job's slots → cost (with the auxiliary calls' cost, when
    the run made any); an error above ``budget``."""
    proj = summary.projection
    if proj is None:
        return [Finding("projection", "info", "no finished rollout: nothing to project", "")]
    cost = proj.cost
    total = proj.total_cost if proj.total_cost is not None else cost.total
    evidence = {
        "steps": proj.steps,
        "batch_size": proj.batch_size,
        "group_size": proj.group_size,
        "slots": proj.slots,
        "tokens_per_slot": proj.tokens_per_slot,
        "tokens": proj.tokens,
        "cost": cost.total,
        "auxiliary_cost": proj.auxiliary["cost"] if proj.auxiliary is not None else None,
        "total_cost": total,
        "currency": cost.currency,
        "pricing": cost.label,
        "budget": budget,
    }
    text = f"projected job: {proj.text}"
    if budget is not None and total <= budget:
        text += f", within the budget of {budget:,.2f} {cost.currency}"
    if budget is not None and total > budget:
        return [
            Finding(
                "projection",
                "error",
                f"{text}, above the budget of {budget:,.2f} {cost.currency}",
                "cut tokens per rollout (shorter prompts, fewer turns, max_tokens), the group "
                "size or the steps, or raise --budget",
                evidence,
            )
        ]
    return [Finding("projection", "info", text, "", evidence)]


# -- the audit ----------------------------------------------------------------------------------


def _entry_path(data: RunData, entrypoint: str | Path | None) -> Path | None:
    if entrypoint is not None:
        return Path(entrypoint)
    recorded = flat_config(data.job.config).get("entrypoint") or data.job.config.get("entrypoint")
    if isinstance(recorded, str) and recorded.endswith(".py"):
        return Path(recorded)
    return None


def audit_reward(
    run_dir: str | Path,
    *,
    entrypoint: str | Path | None = None,
    budget: float | None = None,
    steps: int | None = None,
    pricing: Pricing | None = None,
    aux_policy: str | None = None,
    judge_runs: int = 3,
    settings: Settings = DEFAULTS,
) -> RewardAudit:
    """Audit the latest job of ``run_dir`` (see the module docstring).

    With ``entrypoint`` every finished episode is re-scored by that file's RolloutApp reward and
    its ``REWARD_ORDERINGS`` are checked; without it the orderings come from the entrypoint the
    run recorded (when that file still exists) and the recorded rewards are used. ``steps`` is
    the planned job's length (default: the summary's projection, 100 steps). Judged reward
    terms are audited on ``aux_policy`` (default: the run's ``--aux-policy``; built with
    ``settings``, the ``AGENT_KIT_*`` ones the CLI read), each audited episode judged
    ``judge_runs`` times.
    """
    folder = Path(run_dir)
    if not resolve_path(folder).is_file():
        raise UsageError(f"no run store at {resolve_path(folder)} (expected a run directory)")
    if budget is not None and not budget > 0:
        raise UsageError(f"--budget must be > 0, got {budget}")
    live = live_holder(resolve_path(folder).parent)
    with RunStore.open(folder, readonly=True) as store, store.snapshot():
        job = resolve_job(store, None)
        records = load_rollouts(store, job.arn)
        in_flight = 0
        if live is not None:
            records, in_flight = _finished(store, records)
        data = load_run_data(store, job.arn, records=records)
        summary = summarize(
            store, job.arn, pricing=pricing, projection_steps=steps, records=records
        )
    findings: list[Finding] = []
    path = _entry_path(data, entrypoint)
    rescored: dict[str, Rescored] | None = None
    if entrypoint is not None:
        rescored = rescore_run(folder, entrypoint)
        findings.extend(_rescore_findings(data, rescored))
    views = episode_views(data, rescored)
    findings.extend(_ordering_findings(views, path, explicit=entrypoint is not None))
    findings.extend(zero_variance(views, data))
    findings.extend(length_signals(views))
    findings.extend(unearned_rewards(views, data.threshold))
    findings.extend(dominance(views))
    findings.extend(recovered_calls(views))
    findings.extend(projection(summary, budget))
    findings.extend(_judge_findings(folder, data, path, aux_policy, judge_runs, pricing, settings))
    order = {"error": 0, "warn": 1, "info": 2}
    findings.sort(key=lambda f: order[f.severity])
    return RewardAudit(
        run_dir=str(folder),
        job_name=data.job.name,
        entrypoint=None if path is None else str(path),
        rescored=rescored is not None,
        episodes=len(data.records),
        scored=sum(v.scored for v in views),
        findings=tuple(findings),
        live=live,
        in_flight=in_flight,
    )


def _judge_findings(
    folder: Path,
    data: RunData,
    path: Path | None,
    aux_policy: str | None,
    runs: int,
    pricing: Pricing | None = None,
    settings: Settings = DEFAULTS,
) -> list[Finding]:
    """The judge audit, when the run's rewards have judged terms."""
    from agent_kit.doctor.judge_audit import audit_judges, judged_names

    if not judged_names([r.reward_breakdown for r in data.chosen]):
        return []
    spec = aux_policy or flat_config(data.job.config).get("aux_policy")
    if aux_policy is None and isinstance(spec, str):
        spec = recorded_spec(spec, data.job.config, folder)
    if path is None or not path.is_file() or not isinstance(spec, str):
        return [
            Finding(
                "judge-bias",
                "warn",
                "the reward has LLM-judged terms, but the judge was not audited",
                "pass --entrypoint and --aux-policy (the judge's model) to audit it",
            )
        ]
    return audit_judges(folder, path, spec, data.chosen, k=runs, pricing=pricing, settings=settings)


def _finished(store: RunStore, records: Sequence[Rollout]) -> tuple[list[Rollout], int]:
    """The rollouts of a live run that are over (the driver recorded the slot done, or the
    attempt ended without a reward), and how many are not: a rollout can be rewarded before
    the driver has stored the agent's answer (its reward breakdown), and judging it then would
    see an episode without its game."""
    done = {e.trajectory_id for e in store.list_events(kind=ROLLOUT_DONE_EVENT)}
    over = [r for r in records if r.id in done or r.state in _ENDED_WITHOUT_REWARD]
    return over, len(records) - len(over)


def _ordering_findings(
    views: Sequence[EpisodeView], path: Path | None, *, explicit: bool
) -> list[Finding]:
    hint = "declare REWARD_ORDERINGS next to the reward (docs/doctor.md)"
    if path is None:
        return [Finding("ordering", "info", "no entrypoint recorded: orderings not checked", hint)]
    if not path.is_file():
        if explicit:
            raise UsageError(f"entrypoint not found: {path}")
        return [
            Finding(
                "ordering",
                "info",
                f"the run's entrypoint {path} no longer exists: orderings not checked",
                "pass --entrypoint",
            )
        ]
    module = load_module(
        path, name=module_name_for(path.resolve(), "_agent_kit_entry"), what="entrypoint"
    )
    orderings = load_orderings(module)
    if not orderings:
        return [Finding("ordering", "info", f"{path.name} declares no REWARD_ORDERINGS", hint)]
    return check_orderings(views, orderings)


def _rescore_findings(data: RunData, rescored: Mapping[str, Rescored]) -> list[Finding]:
    changed = [
        (r, again)
        for r in data.chosen
        if (again := rescored.get(r.id)) is not None
        and again.reward is not None
        and r.reward is not None
        and abs(again.reward - r.reward) > 1e-9 * max(1.0, abs(r.reward))
    ]
    errors = [again for again in rescored.values() if again.error]
    evidence = {
        "rescored": len(rescored),
        "changed": len(changed),
        "agent_failures": len(errors),
        "examples": [
            {"trajectory_id": r.id, "recorded": r.reward, "rescored": a.reward}
            for r, a in changed[:SHOWN]
        ],
    }
    title = (
        f"re-scored {plural(len(rescored), 'episode')} with the entrypoint: "
        f"{plural(len(changed), 'reward')} changed"
    )
    if errors:
        title += f", {len(errors)} failed on the agent's side ({errors[0].error})"
    return [
        Finding(
            "rescore",
            "warn" if errors else "info",
            title,
            "see `agent-kit replay --in-process` for where an episode diverges" if errors else "",
            evidence,
            [r.id for r, _ in changed[:SHOWN]],
        )
    ]
