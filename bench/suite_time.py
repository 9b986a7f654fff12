"""How long ``make test`` takes: from a fresh clone (bootstrap included) and again warm.

Clones this checkout's HEAD into a temporary folder beside a link to ``../shared`` (as CI lays
it out), runs ``make test`` there, then (unless ``--once``) a second ``make test`` in the same
clone (``.venv``, the headless browser, the AgentCore CLI and uv's cache warm). Prints the
bootstrap's time, each run's wall time, pytest's own count and time, and a CPU probe (seconds
for a fixed pure-Python loop, before anything starts) so that runs on a slower or faster box can
be told apart: on one machine, two runs of the same suite have differed by a third.

Run it on a quiet machine (nothing else running; it uses every core): ``python
bench/suite_time.py --record``. It needs the package registries, as the bootstrap does.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from results import record  # noqa: E402

#: The budget the suite is held to (issue 45: ``make test`` ≤ 10 minutes on 2 cores, warm).
BUDGET_S = 600


def probe() -> float:
    """Seconds this machine takes for a fixed pure-Python loop (best of three, in a process of
    its own): the box's speed, beside the suite's figures."""
    code = (
        "import time; t = time.perf_counter(); sum(i * i for i in range(10**7)); "
        "print(time.perf_counter() - t)"
    )
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(3)
    ]
    return min(runs)


def make(target: str, cwd: Path, log: Path) -> float:
    """Run ``make <target>`` in ``cwd`` (output into ``log``); its wall seconds; exit on failure."""
    start = time.monotonic()
    with log.open("a", encoding="utf-8") as out:
        done = subprocess.run(
            ["make", target], cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False
        )
    took = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"make {target} failed ({done.returncode}) in {cwd}; see {log}")
    return took


def pytest_line(log: Path) -> tuple[int, float]:
    """(tests passed, pytest's seconds) from the last ``N passed in S s`` line of ``log``."""
    found = re.findall(r"(\d+) passed(?:, [^\n]*?)? in ([\d.]+)s", log.read_text(encoding="utf-8"))
    if not found:
        sys.exit(f"no 'passed in' line in {log}")
    passed, seconds = found[-1]
    return int(passed), float(seconds)


def minutes(seconds: float) -> str:
    """``9 min 57 s``."""
    return f"{int(seconds // 60)} min {round(seconds % 60):02d} s"


def main() -> None:
    """Clone, bootstrap, test (twice unless --once); print and optionally record the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--once", action="store_true", help="only the fresh clone's run")
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path printed)")
    parser.add_argument("--record", action="store_true", help="write the rows to bench/results.md")
    args = parser.parse_args()
    speed, load_before = probe(), os.getloadavg()[0]
    folder = Path(tempfile.mkdtemp(prefix="agent-kit-suite-"))
    clone = folder / "agent_kit"
    (folder / "shared").symlink_to((ROOT.parent / "shared").resolve(), target_is_directory=True)
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    log = folder / "make.log"
    print(f"clone {clone}; CPU probe {speed:.2f} s; load {load_before:.2f}; log {log}", flush=True)
    # the bootstrap: the stamps `make test` depends on (venv, installs, browser, AgentCore CLI)
    stamps = [".venv/.run-stamp", ".venv/.test-stamp", ".venv/browser/.installed-stamp",
              ".venv/agentcore-cli/.installed-stamp"]  # fmt: skip
    bootstrap = sum(make(stamp, clone, log) for stamp in stamps)
    fresh = make("test", clone, log)
    passed, fresh_pytest = pytest_line(log)
    print(
        f"fresh clone: bootstrap {bootstrap:.0f} s, make test {fresh:.0f} s "
        f"(pytest {fresh_pytest:.0f} s, {passed} passed)"
    )
    rows = []
    if not args.once:
        warm = make("test", clone, log)
        passed, warm_pytest = pytest_line(log)
        print(f"warm: make test {warm:.0f} s (pytest {warm_pytest:.0f} s, {passed} passed)")
        rows.append({
            "benchmark (script)": (
                f"`make test`, warm `.venv`, {passed} tests (`bench/suite_time.py`)"
            ),
            "agent_kit": f"{minutes(warm)} (pytest {warm_pytest:.0f} s)",
            "reference, same run": f"CPU probe {speed:.2f} s",
            "ratio": f"{warm / BUDGET_S:.2f} of the budget",
            "budget": "≤ 10 min",
        })  # fmt: skip
    load = (load_before + os.getloadavg()[0]) / 2
    rows.append({
        "benchmark (script)": (
            f"`make test` from a fresh clone: bootstrap + first run, {passed} tests "
            "(`bench/suite_time.py`)"
        ),
        "agent_kit": (
            f"{minutes(bootstrap + fresh)} (bootstrap {bootstrap:.0f} s, "
            f"pytest {fresh_pytest:.0f} s)"
        ),
        "reference, same run": f"CPU probe {speed:.2f} s, load {load:.1f}",
        "ratio": "—",
        "budget": "—",
    })  # fmt: skip
    if args.record:
        record("suite_time", rows)
    if args.keep:
        print(f"kept {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
