"""The one file benchmark figures live in: ``bench/results.md`` (docs/benchmarks.md copies its
table).

Each bench script calls :func:`record` with its rows; the rows are kept per script in
``bench/results.json`` and the markdown table is rebuilt from all of them, with the date and
machine class of each script's run. ``python bench/results.py --docs`` (or its older name
``--readme``) copies the table into docs/benchmarks.md between the ``bench-results`` markers and
the training headline (:func:`headline`) into the README between the ``bench-train`` markers;
``make bench`` does both. A test checks that the page's table is the file's, so no figure in the
docs lacks a script behind it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "results.json"
TABLE = HERE / "results.md"
#: The page that shows the table (the README links to it).
PAGE = HERE.parent / "docs" / "benchmarks.md"
START, END = "<!-- bench-results:start -->", "<!-- bench-results:end -->"
#: The README's one benchmark line: what `agent-kit train` did on the learnable task.
README = HERE.parent / "README.md"
HEAD_START, HEAD_END = "<!-- bench-train:start -->", "<!-- bench-train:end -->"
COLUMNS = ("benchmark (script)", "agent_kit", "reference, same run", "ratio", "budget")
#: Order of the scripts in the table.
ORDER = (
    "emulator_overhead",
    "rollout_throughput",
    "replay_speed",
    "whole_run",
    "dev_loop",
    "train_local",
    "train_vs_trl",
    "hf_sampling",
    "train_wordle",
    "wordle_step",
    "train_memory",
    "warm_tokens",
    "suite_time",
)


def machine() -> str:
    """The machine class a figure was measured on (cores, arch, Python)."""
    return f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"


def record(script: str, rows: list[dict[str, str]]) -> None:
    """Replace ``script``'s rows (each a dict over :data:`COLUMNS`) and rebuild results.md."""
    data: dict[str, Any] = json.loads(DATA.read_text()) if DATA.is_file() else {}
    for row in rows:
        missing = set(COLUMNS) - set(row)
        if missing:
            raise ValueError(f"bench row lacks {sorted(missing)}: {row}")
    data[script] = {
        "date": dt.date.today().isoformat(),
        "machine": machine(),
        "load_average": round(os.getloadavg()[0], 2),
        "rows": rows,
    }
    DATA.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    TABLE.write_text(render(data))


def table(data: dict[str, Any]) -> str:
    """The markdown table of every recorded script (what docs/benchmarks.md copies)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|---:|---:|---:|---|"]
    keys = [k for k in ORDER if k in data] + sorted(k for k in data if k not in ORDER)
    for key in keys:
        for row in data[key]["rows"]:
            lines.append("| " + " | ".join(row[c] for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def render(data: dict[str, Any]) -> str:
    """results.md: the table, then when and where each script measured its rows."""
    runs = [
        f"- `bench/{k}.py`: {v['date']}, {v['machine']}, load average {v['load_average']}"
        for k, v in sorted(data.items())
    ]
    return (
        "# Benchmark results\n\n"
        "Written by the scripts in `bench/` (`make bench`); "
        "docs/benchmarks.md's table is a copy.\n\n"
        + table(data)
        + "\nMeasured:\n\n"
        + "\n".join(runs)
        + "\n"
    )


def page_table(text: str) -> str:
    """The table between the markers of a page's text ('' if there are no markers)."""
    if START not in text or END not in text:
        return ""
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def headline(data: dict[str, Any]) -> str:
    """The README's lines, each a recorded row as a sentence ('' for one never recorded): what
    `agent-kit train` learned on echo and on Wordle, and its speed against a bare TRL run."""
    lines = []
    runs = data.get("train_local")
    if runs:
        row = runs["rows"][0]
        lines.append(
            f"Measured ({runs['date']}, {runs['machine']}): {row['benchmark (script)']} took "
            f"SmolLM2-135M's holdout reward from {row['reference, same run']} to "
            f"{row['agent_kit']} ({row['ratio']} peak RSS).\n"
        )
    runs = data.get("train_wordle")
    if runs:
        row = runs["rows"][0]
        lines.append(
            f"Wordle ({runs['date']}, {runs['machine']}): {row['benchmark (script)']}: "
            f"{row['reference, same run']}; {row['agent_kit']} ({row['ratio']}).\n"
        )
    runs = data.get("train_vs_trl")
    if runs:
        row = runs["rows"][0]
        lines.append(
            f"Speed ({runs['date']}, load {runs['load_average']}): a training step takes "
            f"{row['ratio']} of a bare TRL `GRPOTrainer`'s ({row['agent_kit']} against "
            f"{row['reference, same run']}; `bench/train_vs_trl.py`).\n"
        )
    return "".join(lines)


def _between(path: Path, start: str, end: str, body: str) -> None:
    text = path.read_text()
    if start not in text or end not in text:
        sys.exit(f"{path} has no {start} ... {end} markers")
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    path.write_text(f"{head}{start}\n{body}{end}{tail}")


def copy_to_page() -> None:
    """Put results.md's table into docs/benchmarks.md and the training headline into the README,
    each between its markers."""
    data = json.loads(DATA.read_text())
    _between(PAGE, START, END, table(data))
    _between(README, HEAD_START, HEAD_END, headline(data))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--docs",
        "--readme",
        dest="docs",
        action="store_true",
        help="copy the table into docs/benchmarks.md",
    )
    args = parser.parse_args()
    if args.docs:
        copy_to_page()
    else:
        print(TABLE.read_text(), end="")
