"""Dataset loading: formats, the prompt-column rule of docs/contract.md §5, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agent_kit.driver.dataset import load_dataset, prompt_text
from agent_kit.errors import UsageError


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_uses_prompt_column_verbatim(tmp_path: Path) -> None:
    """A .jsonl file yields its `prompt` values as unparsed strings, in file order."""
    rows = [{"id": 1, "prompt": '{"answer": "riser"}'}, {"id": 2, "prompt": "plain text"}]
    path = _write(tmp_path / "d.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    data = load_dataset(path)
    assert data.column == "prompt"
    assert data.prompts == ('{"answer": "riser"}', "plain text")
    assert len(data) == 2


def test_first_column_and_non_string_values_become_json(tmp_path: Path) -> None:
    """Without a `prompt` column the first column is used; objects are passed as JSON text."""
    rows = [{"task": {"answer": "crane"}, "x": 1}, {"task": 7, "x": 2}]
    path = _write(tmp_path / "d.jsonl", "\n".join(json.dumps(r) for r in rows))
    data = load_dataset(path)
    assert data.column == "task"
    assert json.loads(data.prompts[0]) == {"answer": "crane"}
    assert data.prompts[1] == "7"
    assert prompt_text([1, "a"]) == '[1, "a"]'


def test_json_array_and_csv(tmp_path: Path) -> None:
    """A .json array of objects and a .csv with a header both load their prompt column."""
    json_path = _write(tmp_path / "d.json", json.dumps([{"prompt": "a"}, {"prompt": "b"}]))
    assert load_dataset(json_path).prompts == ("a", "b")
    csv_path = _write(tmp_path / "d.csv", 'id,prompt\n1,"{""k"": 1}"\n2,hello\n')
    data = load_dataset(csv_path)
    assert data.column == "prompt"
    assert data.prompts == ('{"k": 1}', "hello")


def test_parquet(tmp_path: Path) -> None:
    """A .parquet file is read with pyarrow; the first column is used when `prompt` is absent."""
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"question": ["q1", "q2", "q3"], "n": [1, 2, 3]}), path)
    data = load_dataset(path)
    assert data.column == "question"
    assert data.prompts == ("q1", "q2", "q3")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("empty.jsonl", "\n\n", "has no rows"),
        ("bad.jsonl", '{"prompt": "a"}\n{"prompt": \n', "line 2: invalid JSON"),
        ("scalar.jsonl", '{"prompt": "a"}\n"just a string"\n', "line 2: expected a JSON object"),
        ("missing.jsonl", '{"prompt": "a"}\n{"other": "b"}\n', "line 2: missing the 'prompt'"),
        ("null.jsonl", '{"prompt": null}\n', "line 1: the 'prompt' value is empty"),
        ("obj.json", '{"prompt": "a"}', "must be an array of objects"),
        ("broken.json", '[{"prompt": "a"},\n  {"prompt": ]', "line 2: invalid JSON"),
        ("empty.json", "", "has no rows"),
        ("ragged.csv", "prompt,x\na,1\nb\n", "line 3: 1 fields, the header has 2"),
        ("header-only.csv", "prompt\n", "has no rows"),
        ("data.txt", "hello", "unsupported format '.txt'"),
    ],
)
def test_bad_files_give_clear_errors(tmp_path: Path, name: str, text: str, message: str) -> None:
    """Empty, malformed or unsupported files raise UsageError naming the file and line."""
    path = _write(tmp_path / name, text)
    with pytest.raises(UsageError, match=message) as info:
        load_dataset(path)
    assert name in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    """A path that does not exist is a UsageError, not an OSError."""
    with pytest.raises(UsageError, match="dataset not found"):
        load_dataset(tmp_path / "nope.jsonl")


def test_a_device_or_folder_is_not_a_regular_file(tmp_path: Path) -> None:
    """A path that exists but is no regular file (a device such as /dev/zero, a folder) is
    named as such, never 'not found' (and never read: /dev/zero has no end)."""
    for path in (Path("/dev/zero"), tmp_path):
        with pytest.raises(UsageError, match="is not a regular file"):
            load_dataset(path)


def test_corrupt_parquet(tmp_path: Path) -> None:
    """A file named .parquet that is not parquet gives a UsageError."""
    path = _write(tmp_path / "bad.parquet", "not parquet at all")
    with pytest.raises(UsageError, match="not a readable parquet file"):
        load_dataset(path)
