"""Reading a run store's JSON columns: a damaged value (not JSON, not UTF-8, the wrong shape)
is one clear error naming the file and the row, never a traceback (what
:class:`~agent_kit.store.run_store.RunStore`'s readers are wrapped in)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

from agent_kit.errors import DamagedRowError, RunStoreError
from agent_kit.store.connection import StoreConnection
from agent_kit.store.rows import decode_json

__all__ = ["decode_rows", "decodes"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def decodes(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """A reader whose rows hold a value that cannot be decoded (not JSON, not UTF-8, the wrong
    shape) raises one :class:`~agent_kit.errors.RunStoreError` naming the file and the row."""

    @functools.wraps(method)
    def reading(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except DamagedRowError as exc:
            store = args[0]
            assert isinstance(store, StoreConnection)
            raise RunStoreError(
                f"run store {store.path} is damaged: {exc}; restore it from a copy or start a "
                "new run"
            ) from None

    return reading


def decode_rows(rows: Sequence[Any], column: int, where: str, kind: type) -> list[Any]:
    """The JSON ``column`` of every row, decoded together as one array when they all are
    well-formed (one decode for all), else row by row to name the damaged one."""
    try:
        values = json.loads(f"[{','.join(r[column] for r in rows)}]")
    except (TypeError, ValueError):
        values = None
    if values is None or len(values) != len(rows) or not all(isinstance(v, kind) for v in values):
        values = [decode_json(r[column], f"{where} {r[0]}", kind=kind) for r in rows]
    return list(values)
