"""Dataset loading for the job driver (docs/contract.md §5).

A dataset is a table of rows; the driver needs one string per row, the *prompt*:

- formats: ``.jsonl`` (one JSON object a line), ``.json`` (an array of objects), ``.csv`` (a
  header row), ``.parquet`` (needs the ``parquet`` extra: ``pip install 'agent_kit[parquet]'``);
- the column ``prompt`` is used when present, else the first column; other columns are ignored;
- the value reaches the agent as a string, unparsed: strings verbatim, any other JSON value
  (number, object, list, bool) as its ``json.dumps`` text.

Every problem is a :class:`~agent_kit.errors.UsageError` naming the file and, where the format
has lines, the line number — never a traceback.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_kit.errors import UsageError

__all__ = ["SUPPORTED_SUFFIXES", "Dataset", "load_dataset", "prompt_text"]

#: File suffixes :func:`load_dataset` understands.
SUPPORTED_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")

_PROMPT_COLUMN = "prompt"


@dataclass(frozen=True)
class Dataset:
    """The prompts of a dataset file, in file order; never empty."""

    path: Path
    column: str
    prompts: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.prompts)

    def __getitem__(self, index: int) -> str:
        return self.prompts[index]


def prompt_text(value: Any) -> str:
    """The string sent as ``payload.prompt`` for a cell value (strings verbatim, else JSON)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def load_dataset(path: str | Path) -> Dataset:
    """Load the prompt column of a dataset file; raise :class:`UsageError` on any problem."""
    file = Path(path)
    if not file.exists():
        raise UsageError(f"dataset not found: {file}")
    if not file.is_file():
        raise UsageError(
            f"dataset {file} is not a regular file (a dataset is a .jsonl, .json, .csv or "
            ".parquet file)"
        )
    suffix = file.suffix.lower()
    if suffix == ".jsonl":
        column, prompts = _load_jsonl(file)
    elif suffix == ".json":
        column, prompts = _load_json(file)
    elif suffix == ".csv":
        column, prompts = _load_csv(file)
    elif suffix == ".parquet":
        column, prompts = _load_parquet(file)
    else:
        raise UsageError(
            f"dataset {file}: unsupported format {suffix or '(no suffix)'!r}; "
            f"use one of {', '.join(SUPPORTED_SUFFIXES)}"
        )
    if not prompts:
        raise UsageError(f"dataset {file} has no rows")
    return Dataset(path=file, column=column, prompts=tuple(prompts))


def _read_text(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"dataset {file} is not UTF-8 text: {exc.reason}") from None
    except OSError as exc:
        raise UsageError(f"dataset {file} cannot be read: {exc.strerror}") from None


def _choose_column(file: Path, where: str, keys: Sequence[str]) -> str:
    if not keys:
        raise UsageError(f"dataset {file} {where}: the row has no columns")
    return _PROMPT_COLUMN if _PROMPT_COLUMN in keys else str(keys[0])


def _cell(file: Path, where: str, row: dict[str, Any], column: str) -> str:
    if column not in row:
        raise UsageError(f"dataset {file} {where}: missing the {column!r} column")
    value = row[column]
    if value is None or value == "":
        raise UsageError(f"dataset {file} {where}: the {column!r} value is empty")
    return prompt_text(value)


def _rows_to_prompts(file: Path, rows: Iterable[tuple[str, Any]]) -> tuple[str, list[str]]:
    column = ""
    prompts: list[str] = []
    for where, row in rows:
        if not isinstance(row, dict):
            raise UsageError(
                f"dataset {file} {where}: expected a JSON object, got {type(row).__name__}"
            )
        if not column:
            column = _choose_column(file, where, list(row))
        prompts.append(_cell(file, where, row, column))
    return column or _PROMPT_COLUMN, prompts


def _load_jsonl(file: Path) -> tuple[str, list[str]]:
    def rows() -> Iterable[tuple[str, Any]]:
        for number, line in enumerate(_read_text(file).splitlines(), start=1):
            if not line.strip():
                continue
            try:
                yield f"line {number}", json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(
                    f"dataset {file} line {number}: invalid JSON ({exc.msg} at column {exc.colno})"
                ) from None

    return _rows_to_prompts(file, rows())


def _load_json(file: Path) -> tuple[str, list[str]]:
    text = _read_text(file)
    if not text.strip():
        raise UsageError(f"dataset {file} has no rows")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"dataset {file} line {exc.lineno}: invalid JSON ({exc.msg} at column {exc.colno})"
        ) from None
    if not isinstance(data, list):
        raise UsageError(
            f"dataset {file}: a .json dataset must be an array of objects, "
            f"got {type(data).__name__}"
        )
    return _rows_to_prompts(file, ((f"item {i}", row) for i, row in enumerate(data)))


def _load_csv(file: Path) -> tuple[str, list[str]]:
    lines = _read_text(file).splitlines(keepends=True)
    if not any(line.strip() for line in lines):
        raise UsageError(f"dataset {file} has no rows")
    reader = csv.reader(lines)
    try:
        header = next(reader)
        column = _choose_column(file, "line 1 (header)", [h.strip() for h in header])
        index = [h.strip() for h in header].index(column)
        prompts: list[str] = []
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            where = f"line {reader.line_num}"
            if len(row) != len(header):
                raise UsageError(
                    f"dataset {file} {where}: {len(row)} fields, the header has {len(header)}"
                )
            prompts.append(_cell(file, where, {column: row[index]}, column))
    except csv.Error as exc:
        raise UsageError(f"dataset {file} line {reader.line_num}: malformed CSV ({exc})") from None
    return column, prompts


def _load_parquet(file: Path) -> tuple[str, list[str]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError(
            f"dataset {file}: reading .parquet needs pyarrow; "
            "install it with: pip install 'agent_kit[parquet]'"
        ) from None
    try:
        table = pq.read_table(file)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for corrupt files
        raise UsageError(f"dataset {file}: not a readable parquet file ({exc})") from None
    names = [str(n) for n in table.column_names]
    column = _choose_column(file, "schema", names)
    values = table.column(column).to_pylist()
    return column, [
        _cell(file, f"row {i}", {column: value}, column) for i, value in enumerate(values)
    ]
