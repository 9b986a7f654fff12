"""One source for every benchmark figure: the README's table is bench/results.md's."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _results_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_results", ROOT / "bench" / "results.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_table_is_the_results_file_table() -> None:
    """The README's benchmark table equals the one bench/results.json renders, verbatim."""
    results = _results_module()
    data = json.loads((ROOT / "bench" / "results.json").read_text())
    table = results.table(data)
    assert results.readme_table((ROOT / "README.md").read_text()) == table
    assert table in (ROOT / "bench" / "results.md").read_text()


def test_every_bench_script_has_recorded_rows() -> None:
    """Each benchmark script that writes results has rows with a date and a machine."""
    data = json.loads((ROOT / "bench" / "results.json").read_text())
    for script in ("emulator_overhead", "rollout_throughput", "replay_speed"):
        entry = data[script]
        assert entry["rows"]
        assert entry["date"]
        assert "cores" in entry["machine"]
        assert (ROOT / "bench" / f"{script}.py").is_file()
