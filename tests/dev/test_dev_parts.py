"""The dev loop's parts in-process: the watched files, the numbered iterations, what moved
between two grids, the audit's changes, a load error's file and line, the verdict's code."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path

import pytest
from helpers import WORDLE, WORDLE_AGENT

from agent_kit.dev.audit import audit_change
from agent_kit.dev.compare import Played, Slot, compare
from agent_kit.dev.loadcheck import LoadError, load_error
from agent_kit.dev.loop import Watcher
from agent_kit.dev.options import DevOptions
from agent_kit.dev.runs import iteration_dir, next_number, prune, replay_dir
from agent_kit.dev.session import DevSession
from agent_kit.dev.sources import Sources, default_policy, local_imports, scripted_file
from agent_kit.dev.verdict import EXIT_AUDIT, EXIT_LOAD, EXIT_OK, EXIT_ROLLOUTS, Verdict
from agent_kit.doctor.findings import Finding
from agent_kit.driver.config import JobConfig
from agent_kit.emulator.loader import load_module
from agent_kit.errors import UsageError
from agent_kit.store.run_figures import ROLLOUTS_FAILED


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- the watched files ---------------------------------------------------------------------------


def test_local_imports_follow_the_entrypoints_own_modules(tmp_path: Path) -> None:
    """An entrypoint's local imports are followed transitively — a module beside it, a
    package and its submodule, a relative import inside the package, a lazy import in a
    function — while the standard library and installed packages are not watched."""
    agent = _write(
        tmp_path / "agent.py",
        "import json\nimport helper\nfrom pkg import sub\nimport httpx\n"
        "def later():\n    import lazy\n",
    )
    helper = _write(tmp_path / "helper.py", "from words import WORDS\n")
    words = _write(tmp_path / "words.py", "WORDS = ()\n")
    init = _write(tmp_path / "pkg" / "__init__.py", "")
    sub = _write(tmp_path / "pkg" / "sub.py", "from . import inner\n")
    inner = _write(tmp_path / "pkg" / "inner.py", "")
    lazy = _write(tmp_path / "lazy.py", "")
    _write(tmp_path / "unused.py", "")
    found = local_imports(agent)
    assert found == {p.resolve() for p in (agent, helper, words, init, sub, inner, lazy)}


def test_a_file_that_does_not_parse_is_still_watched(tmp_path: Path) -> None:
    """A syntax error keeps the file watched (its own load says why) and adds nothing else."""
    agent = _write(tmp_path / "agent.py", "import helper\nx = (\n")
    _write(tmp_path / "helper.py", "")
    assert local_imports(agent) == {agent.resolve()}


def test_sources_say_what_a_save_touched(tmp_path: Path) -> None:
    """A batch of saves is read as agent code, policy code or dataset, by file; unwatched
    files count for nothing."""
    agent = _write(tmp_path / "agent.py", "import helper\n")
    helper = _write(tmp_path / "helper.py", "")
    policy = _write(tmp_path / "policies.py", "")
    data = _write(tmp_path / "d.jsonl", "{}\n")
    sources = Sources.scan(agent, data, policy)
    assert sources.files == {p.resolve() for p in (agent, helper, policy, data)}
    code = sources.changes([helper])
    assert (code.agent, code.policy, code.dataset) == (True, False, False)
    assert code.names == ("helper.py",)
    both = sources.changes([policy, data, tmp_path / "notes.txt"])
    assert (both.agent, both.policy, both.dataset) == (False, True, True)
    assert not sources.changes([tmp_path / "notes.txt"]).any


def test_the_default_policy_is_declared_beside_the_entrypoint(tmp_path: Path) -> None:
    """``DEFAULT_POLICY`` in a policies.py beside the entrypoint names the default scripted
    policy (read without importing the file); without one there is none."""
    assert default_policy(WORDLE_AGENT) == f"scripted:{WORDLE / 'policies.py'}:Solver"
    agent = _write(tmp_path / "agent.py", "")
    assert default_policy(agent) is None
    _write(tmp_path / "policies.py", "raise SystemExit('never imported')\nDEFAULT_POLICY = 'Bot'\n")
    assert default_policy(agent) == f"scripted:{(tmp_path / 'policies.py').resolve()}:Bot"
    assert scripted_file(f"scripted:{tmp_path}/policies.py:Bot") == tmp_path / "policies.py"
    assert scripted_file("random") is None


def test_options_refuse_what_cannot_work(tmp_path: Path) -> None:
    """Bad options are one UsageError naming the option, before anything starts."""
    agent = _write(tmp_path / "agent.py", "")
    data = _write(tmp_path / "d.jsonl", "{}\n")
    cases = [
        (DevOptions(tmp_path / "nope.py", data), "ENTRYPOINT"),
        (DevOptions(agent, tmp_path / "none.jsonl"), "dataset not found"),
        (DevOptions(agent, data, samples=1), "--samples"),
        (DevOptions(agent, data, prompts=0), "--prompts"),
        (DevOptions(agent, data, keep=0), "--keep"),
        (DevOptions(agent, data, baseline=tmp_path), "--baseline"),
    ]
    for options, words in cases:
        with pytest.raises(UsageError, match=words):
            options.check()


def test_the_grid_job_keeps_the_baselines_sampling_settings_only(tmp_path: Path) -> None:
    """The grid's job takes the baseline's sampling, seed, threshold, timeouts, auxiliary model,
    region and policy, and ``agent-kit run``'s defaults for the rest (chaos, contract, name)."""
    baseline = JobConfig(
        name="base",
        policy="echo",
        aux_policy="echo",
        group_size=8,
        steps=5,
        concurrency=3,
        rollout_timeout=30.0,
        max_retries=0,
        temperature=0.5,
        top_p=0.5,
        max_tokens=64,
        success_threshold=0.5,
        fail_fast=False,
        seed=7,
        report_grace=2.0,
        region="eu-west-1",
        chaos="timeout=0.1",
        contract="rl-toolkit",
    )
    job = DevOptions(tmp_path / "agent.py", tmp_path / "d.jsonl", samples=3).job(baseline)
    default = JobConfig()
    assert (job.group_size, job.steps, job.policy) == (3, 1, baseline.policy)
    kept = ("aux_policy", "rollout_timeout", "max_retries", "temperature", "top_p")
    kept += ("max_tokens", "success_threshold", "seed", "region")
    assert all(getattr(job, name) == getattr(baseline, name) for name in kept)
    reset = ("name", "batch_size", "concurrency", "fail_fast", "report_grace", "chaos")
    assert all(getattr(job, name) == getattr(default, name) for name in (*reset, "contract"))


# -- the iterations' directories -------------------------------------------------------------


def test_iterations_are_numbered_on_and_the_last_few_kept(tmp_path: Path) -> None:
    """Numbers go on from the highest directory found; pruning keeps the last ``keep``
    iterations (their replays with them) and never the baseline or other folders."""
    out = tmp_path / "dev"
    assert next_number(out) == 1
    for n in (1, 2, 3, 7):
        iteration_dir(out, n).mkdir(parents=True)
    replay_dir(out, 2).mkdir()
    (out / "agents").mkdir()
    assert next_number(out) == 8
    removed = prune(out, 2, protect=iteration_dir(out, 1))
    assert {p.name for p in removed} == {"dev-0002", "dev-0002-replay"}
    assert sorted(p.name for p in out.iterdir()) == ["agents", "dev-0001", "dev-0003", "dev-0007"]


# -- what moved ----------------------------------------------------------------------------------


def _played(rewards: dict[tuple[str, int], float | None], strategy: float = 0.03) -> Played:
    slots = {
        (prompt, 0, g): Slot(
            f"p{ord(prompt) - 97}-g{g}",
            r,
            {} if r is None else {"outcome": r - strategy, "strategy": strategy},
        )
        for (prompt, g), r in rewards.items()
    }
    return Played(Path("run"), 1.0, slots)


def test_a_reward_change_is_paired_by_prompt_with_its_terms_and_rollouts() -> None:
    """The difference is paired by prompt (its SE from the per-prompt differences, far below
    the unpaired one), the term that moved is named, and so is every rollout whose reward
    changed."""
    before = _played({("a", 0): 1.3, ("a", 1): 1.2, ("b", 0): -0.5, ("b", 1): 0.4})
    after = _played({("a", 0): 1.28, ("a", 1): 1.18, ("b", 0): -0.52, ("b", 1): 0.4}, 0.01)
    found = compare(after, before, "#1")
    d = found.difference
    assert d is not None
    assert d.paired
    assert d.prompts == 2
    assert d.mean == pytest.approx(-0.015)
    assert d.se is not None
    assert d.unpaired_se is not None
    assert d.se < d.unpaired_se
    assert [m.name for m in found.terms] == ["outcome", "strategy"]
    assert [(m.name, m.before, m.after) for m in found.rollouts] == [
        ("p0-g0", 1.3, 1.28),
        ("p0-g1", 1.2, 1.18),
        ("p1-g0", -0.5, -0.52),
    ]
    text = found.text()
    assert text.startswith("vs #1: Δ -0.015 ± ")
    assert "(paired, 2 prompts)" in text
    assert "3 of 4 rollouts changed: p0-g0 1.300 → 1.280" in text


def test_no_change_says_so_and_a_lost_rollout_counts() -> None:
    """The same rewards are no change; a slot that lost its reward is a changed rollout that
    counts 0 in the mean and fails."""
    before = _played({("a", 0): 1.3, ("a", 1): 1.2})
    assert compare(before, before, "#1").text() == "vs #1: no change (2 rollouts compared)"
    after = _played({("a", 0): 1.3, ("a", 1): None})
    found = compare(after, before, "#1")
    assert [m.text() for m in found.rollouts] == ["p0-g1 1.200 → lost"]
    assert after.figures().mean == pytest.approx(0.65)
    assert after.figures().success_rate == pytest.approx(0.5)


def test_against_a_baseline_only_shared_prompts_pair() -> None:
    """A baseline restricted to the grid's prompts pairs with it, and to the grid's own slots
    when it played them all; different prompts are an unpaired difference."""
    grid = _played({("a", 0): 1.0, ("b", 0): 0.5})
    base = _played({("a", 0): 1.0, ("a", 1): 0.8, ("b", 0): 0.5, ("c", 0): 0.1})
    paired = compare(grid, base.only(set(grid.prompts)), "baseline", slots=False)
    assert paired.difference is not None
    assert paired.difference.paired
    assert paired.rollouts == ()
    same = base.matching(grid)
    assert sorted(same.slots) == sorted(grid.slots), "like for like: the grid's own slots"
    assert compare(grid, same, "baseline", slots=False).text() == (
        "vs baseline: no change (2 rollouts compared)"
    )
    unpaired = compare(grid, base.only({"a", "c"}), "baseline", slots=False)
    assert unpaired.difference is not None
    assert not unpaired.difference.paired


# -- the audit -----------------------------------------------------------------------------------


def test_the_audit_shows_only_what_changed() -> None:
    """New and gone findings are shown (warnings and errors; info is JSON only); a finding
    seen again is not; the error count is the current one."""
    warn = Finding("zero-variance", "warn", "2 of 4 groups have zero reward variance")
    error = Finding("hacking", "error", "rewards above the threshold without an outcome")
    info = Finding("hacking", "info", "reward vs turns: r = 0.1")
    first = audit_change([warn, info], None)
    assert first.lines() == ["+ warn zero-variance: 2 of 4 groups have zero reward variance"]
    second = audit_change([error, info], [warn, info])
    assert second.lines() == [
        "+ error hacking: rewards above the threshold without an outcome",
        "− warn zero-variance: 2 of 4 groups have zero reward variance",
    ]
    assert second.errors == 1
    assert audit_change([error, info], [error, info]).lines() == []


# -- a load error --------------------------------------------------------------------------------


def test_a_syntax_error_names_its_file_and_line(tmp_path: Path) -> None:
    """A syntax error in a module the entrypoint imports is that module's file and line."""
    _write(tmp_path / "helper.py", "def f(:\n")
    agent = _write(tmp_path / "agent_syntax_case.py", "import helper\n")
    with pytest.raises(UsageError) as caught:
        load_module(agent)
    sys.modules.pop("helper", None)
    error = load_error(caught.value, tmp_path, "entrypoint", agent)
    assert error.text(tmp_path) == "helper.py:1: SyntaxError: invalid syntax"


def test_a_failing_app_points_at_the_line_that_built_it(tmp_path: Path) -> None:
    """An exception raised inside agent_kit while the user's module builds its app is located
    at the user's line, with the exception's own words."""
    agent = _write(
        tmp_path / "agent_bad_app.py",
        "from agent_kit.app import RolloutApp\n\n"
        "class Env:\n    pass\n\n"
        "app = RolloutApp(Env, reward=lambda env, ep: 1.0, max_turns=0)\n",
    )
    with pytest.raises(UsageError) as caught:
        load_module(agent)
    error = load_error(caught.value, tmp_path, "entrypoint", agent)
    assert error.text(tmp_path) == "agent_bad_app.py:6: ValueError: max_turns must be at least 1"
    plain = load_error(UsageError("policies.py defines no 'Bot'"), tmp_path, "policy", agent)
    assert (plain.file, plain.line, plain.message) == (str(agent), None, plain.message)


# -- the verdict ---------------------------------------------------------------------------------


def test_a_load_error_verdict_is_one_line_and_exits_2(tmp_path: Path) -> None:
    """A load error is one line naming the file and line; its code is 2."""
    error = LoadError("entrypoint", "SyntaxError: invalid syntax", str(tmp_path / "agent.py"), 9)
    verdict = Verdict(3, tmp_path / "dev-0003", ("agent.py",), True, load_error=error)
    assert verdict.lines(tmp_path) == [
        "#3 agent.py: does not load: agent.py:9: SyntaxError: invalid syntax"
    ]
    assert verdict.code == EXIT_LOAD
    assert verdict.document()["load_error"]["line"] == 9


def test_the_verdict_code_takes_the_first_that_applies(tmp_path: Path) -> None:
    """Rollouts failed as a whole outrank the audit; an audit error is 13; else 0; a failure
    that kept the grid from playing is its error's code."""
    error = Finding("zero-variance", "error", "no group teaches the policy anything")
    audit = audit_change([error], None)
    played = Verdict(1, tmp_path, status="completed", audit=audit)
    assert played.code == EXIT_AUDIT
    assert Verdict(1, tmp_path, status=ROLLOUTS_FAILED, audit=audit).code == EXIT_ROLLOUTS
    assert Verdict(1, tmp_path, status="completed").code == EXIT_OK
    failed = Verdict(1, tmp_path, failure="the policy cannot answer", failure_code=5)
    assert failed.code == 5
    assert failed.lines()[-1] == "  → the policy cannot answer (exit 5)"


def test_a_policy_that_does_not_load_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    """A scripted policy with a syntax error ends the iteration with one line naming its file
    and line, before any agent process starts; the iteration's directory holds its verdict."""
    agent = _write(tmp_path / "agent.py", "")
    data = _write(tmp_path / "d.jsonl", '{"prompt": "hi"}\n')
    policy = _write(tmp_path / "policies.py", "import json\n\ndef Bot(request:\n")
    options = DevOptions(agent, data, policy=f"scripted:{policy}:Bot", out=tmp_path / "dev")
    options.check()
    session = DevSession(options)
    try:
        verdict = asyncio.run(session.iterate())
    finally:
        asyncio.run(session.aclose())
    assert verdict.lines(tmp_path) == [
        "#1 start: does not load: policies.py:3: SyntaxError: '(' was never closed"
    ]
    assert verdict.code == EXIT_LOAD
    assert not session.agents.running
    saved = json.loads((tmp_path / "dev" / "dev-0001" / "verdict.json").read_text())
    assert saved["load_error"]["what"] == "policy"


def test_the_watcher_batches_only_the_watched_files(tmp_path: Path) -> None:
    """A save of a watched file comes out of the watch (watchfiles on the sources' folders);
    a file beside it that is not watched never does; closing the watch ends it."""
    agent = _write(tmp_path / "agent.py", "")
    data = _write(tmp_path / "d.jsonl", "{}\n")

    async def watch() -> set[Path]:
        async with Watcher(Sources.scan(agent, data, None)) as watcher:
            deadline = time.monotonic() + 60
            while True:  # the watch starts in a thread: save until it has seen one
                assert time.monotonic() < deadline, "no change seen"
                _write(tmp_path / "notes.txt", "not watched\n")
                _write(agent, "x = 1\n")
                with contextlib.suppress(asyncio.TimeoutError):
                    return await asyncio.wait_for(watcher.next(), 0.5)

    seen = asyncio.run(watch())
    assert {p.resolve() for p in seen} == {agent.resolve()}
