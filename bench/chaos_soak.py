"""A soak of ``agent-kit run`` under random SIGKILLs: every slot rewarded once, nothing lost.

Runs the real command as a user does (``.venv/bin/agent-kit run examples/wordle/agent.py …``,
the scripted Solver policy at temperature 0.7), SIGKILLs the driver at random moments (seeded by
``--seed``), continues with ``agent-kit run --resume RUN_DIR`` and repeats until ``--kills N``
kills were survived; when a run completes before its next kill, a fresh run takes over. A
moment is either a time after the process started (0.3–4 s: start-up, agent cold start or the
first rollouts) or a point of progress (a random number of further rollouts rewarded, read
from the store, plus up to 0.3 s). After every kill it waits for the orphaned agent processes
to exit by themselves.

When each run completes it reads the run's store and counts, over every (step, prompt, sample)
slot: ``rewarded`` (exactly one REWARDED attempt), ``duplicates`` (more than one), ``lost``
(none, or a reward seen before a kill that changed or vanished), broken retry links (an attempt
whose ``retry_of`` is not the attempt before it) and orphaned agents (still alive 15 s after
their driver was killed). A kill that lands before the run recorded its job leaves nothing to
resume; the soak then starts the same command again, as a user would, and counts it as
``restarted`` (and ``stuck`` when the directory it left refuses both that command and
``--resume``, so the soak has to delete it). It prints one line per kill, the totals, and
records a row in bench/results.md (``--no-record`` to skip). Not part of ``make test``:
``python bench/chaos_soak.py --kills 10``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import results as bench_results  # bench/results.py, beside this script

from agent_kit.errors import UsageError
from agent_kit.store import RUN_FILE, RunStore

ROOT = Path(__file__).resolve().parents[1]
WORDLE = ROOT / "examples" / "wordle"
AGENT_KIT = Path(sys.executable).with_name("agent-kit")


@dataclass
class Totals:
    """What the soak counted, over every run it played."""

    slots: int = 0
    rewarded: int = 0
    duplicates: int = 0
    lost: int = 0
    broken_links: int = 0
    orphans: int = 0
    kills: int = 0
    restarted: int = 0
    #: Kills that left a run directory neither the same command nor --resume could use.
    stuck: int = 0
    runs: int = 0
    failed_runs: list[str] = field(default_factory=list)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RFT_"))}


def _peek(run_dir: Path) -> tuple[bool, int, dict[str, float]]:
    """(a job is recorded, slots done, rewards by trajectory id) from a read-only store view."""
    if not (run_dir / RUN_FILE).exists():
        return False, 0, {}
    try:
        with RunStore.open(run_dir, readonly=True) as store:
            jobs = store.list_jobs()
            rewarded = store.list_trajectories(states=["REWARDED"])
            rewards = {t.id: r.total for t in rewarded if (r := store.get_reward(t.id))}
            return bool(jobs), len(rewarded), rewards
    except (sqlite3.OperationalError, UsageError):
        return False, 0, {}


def _agent_pids(run_dir: Path) -> list[int]:
    with (
        contextlib.suppress(sqlite3.OperationalError, UsageError),
        RunStore.open(run_dir, readonly=True) as store,
    ):
        return [int(e.detail["pid"]) for e in store.list_events(kind="agent_start")]
    return []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _orphans(pids: list[int], timeout: float = 15.0) -> int:
    """Agent processes still alive ``timeout`` s after their driver died."""
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in pids if _alive(p)]
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(left)


def _check(run_dir: Path, seen: dict[str, float], totals: Totals) -> dict[str, int]:
    """Count the completed run's slots into ``totals``; returns this run's counts."""
    counts = {"slots": 0, "rewarded": 0, "duplicates": 0, "lost": 0, "broken_links": 0}
    with RunStore.open(run_dir, readonly=True) as store:
        slots: dict[tuple[int, int, int], list[Any]] = {}
        for row in store.list_trajectories():
            slots.setdefault((row.step, row.prompt_index, row.sample_index), []).append(row)
        (job,) = store.list_jobs()
        expected = int(job.config["job"]["group_size"]) * int(job.config["job"]["batch_size"])
        expected *= int(job.config["job"]["steps"])
        counts["slots"] = expected
        counts["lost"] += expected - len(slots)  # slots never played at all
        for rows in slots.values():
            rows.sort(key=lambda r: r.attempt)
            n = sum(1 for r in rows if r.state == "REWARDED")
            if n == 1:
                counts["rewarded"] += 1
            elif n > 1:
                counts["duplicates"] += 1
            else:
                counts["lost"] += 1
            for before, after in itertools.pairwise(rows):
                if after.retry_of != before.id:
                    counts["broken_links"] += 1
        for tid, reward in seen.items():  # rewards recorded before a kill must survive it
            now = store.get_reward(tid)
            if now is None or now.total != reward:
                counts["lost"] += 1
    for key, value in counts.items():
        setattr(totals, key, getattr(totals, key) + value)
    return counts


class Soak:
    """The soak's state: the random moments, the current run and the totals."""

    def __init__(self, args: argparse.Namespace, out: Path) -> None:
        self.args = args
        self.out = out
        self.rng = random.Random(args.seed)
        self.totals = Totals()
        self.dataset = out / "prompts.jsonl"
        lines = (WORDLE / "train.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        self.dataset.write_text("".join(lines[: args.prompts]), encoding="utf-8")

    def _new_argv(self, name: str) -> list[str]:
        a = self.args
        return [
            "run",
            str(WORDLE / "agent.py"),
            "--dataset",
            str(self.dataset),
            "--policy",
            f"scripted:{WORDLE / 'policies.py'}:Solver",
            "--group-size",
            str(a.group_size),
            "--temperature",
            "0.7",
            "--concurrency",
            str(a.concurrency),
            "--rollout-timeout",
            "120",
            "--out",
            str(self.out),
            "--name",
            name,
            "--json",
        ]

    def _launch(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as fh:
            return subprocess.Popen(
                [str(AGENT_KIT), *argv],
                cwd=ROOT,
                env=_env(),
                stdout=subprocess.DEVNULL,
                stderr=fh,
            )

    def _kill_moment(self, proc: subprocess.Popen[bytes], run_dir: Path, kills_left: int) -> str:
        """Wait for a random moment (or the process's end); return what the moment was."""
        started = time.monotonic()
        if self.rng.random() < 0.3:
            at = self.rng.uniform(0.3, 4.0)
            while time.monotonic() - started < at:
                if proc.poll() is not None:
                    return "ended"
                time.sleep(0.01)
            return f"{at:.2f} s after start"
        _, done, _ = _peek(run_dir)
        total = self.args.prompts * self.args.group_size
        step = max(1, (total - done) // (kills_left + 1))
        target = done + self.rng.randint(1, max(1, 2 * step - 1))
        while _peek(run_dir)[1] < target:
            if proc.poll() is not None:
                return "ended"
            time.sleep(0.02)
        extra = self.rng.uniform(0.0, 0.3)
        time.sleep(extra)
        return f"{target} rewarded + {extra:.2f} s"

    def play_run(self, index: int) -> None:
        """One run: kill and resume it until it completes (or the kills are all spent)."""
        totals = self.totals
        name = f"soak-{index}"
        run_dir = self.out / name
        log = self.out / f"{name}.stderr"
        argv = self._new_argv(name)
        seen: dict[str, float] = {}
        totals.runs += 1
        while True:
            proc = self._launch(argv, log)
            if totals.kills < self.args.kills:
                moment = self._kill_moment(proc, run_dir, self.args.kills - totals.kills)
            else:
                moment = "ended"
            if moment != "ended" and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)
                totals.kills += 1
                recorded, done, rewards = _peek(run_dir)
                seen |= rewards
                orphans = _orphans(_agent_pids(run_dir))
                totals.orphans += orphans
                print(
                    f"kill {totals.kills}/{self.args.kills} of {name} at {moment}: "
                    f"{done} rewarded so far, job recorded: {recorded}, orphans {orphans}",
                    flush=True,
                )
                if recorded:
                    argv = ["run", "--resume", str(run_dir), "--json"]
                    continue
                # Nothing to resume yet: the user runs the same command again. A store without
                # a job (killed between creating run.sqlite and recording the job) refuses both
                # that and --resume, so the user has to delete the directory first: counted.
                totals.restarted += 1
                if (run_dir / RUN_FILE).exists():
                    totals.stuck += 1
                    rerun = subprocess.run(
                        [str(AGENT_KIT), *self._new_argv(name)],
                        env=_env(),
                        capture_output=True,
                        text=True,
                        check=False,
                    )
                    print(
                        f"  {name}: same command again: exit {rerun.returncode}: "
                        f"{rerun.stderr.strip()[-300:]}; deleting {run_dir}",
                        flush=True,
                    )
                    if rerun.returncode == 0:
                        totals.stuck -= 1  # fixed: the command could start again
                        argv = ["run", "--resume", str(run_dir), "--json"]
                        continue
                    shutil.rmtree(run_dir)
                argv = self._new_argv(name)
                continue
            code = proc.wait(3600)
            if code != 0:
                tail = log.read_text(errors="replace").strip().splitlines()[-1:]
                totals.failed_runs.append(f"{name}: exit {code}: {' '.join(tail)}")
                print(f"{name} exited {code}: {' '.join(tail)}", flush=True)
                return
            counts = _check(run_dir, seen, totals)
            print(f"{name} completed: {json.dumps(counts)}", flush=True)
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10, help="SIGKILLs to survive in total")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    parser.add_argument("--prompts", type=int, default=32, help="prompts per run (train.jsonl)")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--no-record", action="store_true", help="do not touch bench/results")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}  load average: {os.getloadavg()[0]:.2f}  seed {args.seed}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agent-kit-soak-") as tmp:
        soak = Soak(args, Path(tmp))
        index = 0
        while soak.totals.kills < args.kills or index == 0:
            soak.play_run(index)
            index += 1
            if soak.totals.failed_runs:
                break
    t = soak.totals
    elapsed = time.monotonic() - started
    print(
        f"\nslots {t.slots}  rewarded {t.rewarded}  duplicates {t.duplicates}  lost {t.lost}  "
        f"broken retry links {t.broken_links}  orphaned agents {t.orphans}  "
        f"kills survived {t.kills - len(t.failed_runs)}/{t.kills}  restarted {t.restarted} "
        f"(stuck {t.stuck})  "
        f"runs {t.runs}  ({elapsed:.0f} s)"
    )
    print(json.dumps({**t.__dict__, "seed": args.seed, "elapsed_s": round(elapsed, 1)}))
    if args.no_record:
        return
    clean = t.duplicates == t.lost == t.broken_links == t.orphans == 0 and not t.failed_runs
    bench_results.record(
        "chaos_soak",
        [
            {
                "benchmark (script)": f"chaos soak: {t.kills} SIGKILLs of `agent-kit run` at "
                f"random moments + `--resume`, Wordle Solver, {t.runs} run(s) of "
                f"{args.prompts}×{args.group_size} (`bench/chaos_soak.py`, seed {args.seed})",
                "agent_kit": f"{t.lost} lost, {t.duplicates} duplicates in {t.kills} kills "
                f"({t.rewarded}/{t.slots} slots rewarded once; {t.orphans} orphaned agents)",
                "reference, same run": "—",
                "ratio": "—",
                "budget": "0 lost, 0 duplicates" + ("" if clean else " (NOT MET)"),
            }
        ],
    )


if __name__ == "__main__":
    main()
