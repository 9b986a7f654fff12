"""One source for every benchmark figure: docs/benchmarks.md's table is bench/results.md's."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _results_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_results", ROOT / "bench" / "results.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_table_is_the_results_file_table() -> None:
    """docs/benchmarks.md's table equals the one bench/results.json renders, verbatim, and
    the README links to that page instead of carrying a copy."""
    results = _results_module()
    data = json.loads((ROOT / "bench" / "results.json").read_text())
    table = results.table(data)
    assert results.PAGE == ROOT / "docs" / "benchmarks.md"
    assert results.page_table(results.PAGE.read_text()) == table
    readme = (ROOT / "README.md").read_text()
    assert results.START not in readme
    assert "(docs/benchmarks.md)" in readme
    assert table in (ROOT / "bench" / "results.md").read_text()


def test_readme_training_line_is_the_recorded_bench_row() -> None:
    """The README's benchmark lines (what `agent-kit train` did on examples/echo and Wordle, its
    speed against bare TRL) are the sentences bench/results.json's rows render, verbatim."""
    results = _results_module()
    data = json.loads((ROOT / "bench" / "results.json").read_text())
    line = results.headline(data)
    assert "holdout reward from base" in line
    assert "bare TRL" in line
    readme = (ROOT / "README.md").read_text()
    between = readme.split(results.HEAD_START, 1)[1].split(results.HEAD_END, 1)[0]
    assert between == "\n" + line


def test_every_bench_script_has_recorded_rows() -> None:
    """Each benchmark script that writes results has rows with a date and a machine."""
    data = json.loads((ROOT / "bench" / "results.json").read_text())
    for script in ("emulator_overhead", "rollout_throughput", "replay_speed", "train_local"):
        entry = data[script]
        assert entry["rows"]
        assert entry["date"]
        assert "cores" in entry["machine"]
        assert (ROOT / "bench" / f"{script}.py").is_file()


@pytest.mark.e2e
def test_docs_flag_copies_the_table_into_the_page(tmp_path: Path) -> None:
    """`bench/results.py --docs` (and its older name `--readme`), run on a copy of the repo's
    bench/ and docs/ folders, puts results.md's table back between the page's markers."""
    for folder in ("bench", "docs"):
        (tmp_path / folder).mkdir()
    for name in ("results.py", "results.json"):
        shutil.copy(ROOT / "bench" / name, tmp_path / "bench" / name)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    results = _results_module()
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    stale = page.replace(results.page_table(page), "| stale |\n")
    for flag in ("--docs", "--readme"):
        (tmp_path / "docs" / "benchmarks.md").write_text(stale)
        script = str(tmp_path / "bench" / "results.py")
        subprocess.run([sys.executable, script, flag], check=True, timeout=60)
        assert (tmp_path / "docs" / "benchmarks.md").read_text() == page
