"""Generate strings matching a regular expression (JSON schema ``pattern``), for a subset.

Supported: literals, character classes (ranges, negation, ``\\d \\w \\s`` and their negations),
``.``, groups (capturing, non-capturing, atomic), alternation, anchors and every quantifier
(unbounded ones repeat at most 4 times more than their minimum). Other constructs
(back-references, look-arounds, conditionals) make :func:`pattern_string` return ``None``: the
caller then draws an ordinary string, which may not match.
"""

from __future__ import annotations

import functools
import importlib
import random
import re
from typing import Any

__all__ = ["pattern_string"]


class _UnsupportedPatternError(Exception):
    """A regex construct the pattern generator does not produce."""


_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_CATEGORY_POOLS = {
    "CATEGORY_DIGIT": "0123456789",
    "CATEGORY_NOT_DIGIT": _LETTERS,
    "CATEGORY_SPACE": " ",
    "CATEGORY_NOT_SPACE": _LETTERS + "0123456789",
    "CATEGORY_WORD": _LETTERS + "0123456789_",
    "CATEGORY_NOT_WORD": "-. ",
}
_NEGATED_POOL = _LETTERS + _LETTERS.upper() + "0123456789 _-.,:;!?@#"


def _regex_parser() -> Any:
    try:
        return importlib.import_module("re._parser")  # Python 3.11+
    except ImportError:  # pragma: no cover - Python 3.10
        return importlib.import_module("sre_parse")


@functools.lru_cache(maxsize=256)
def _prepare(pattern: str) -> tuple[Any, re.Pattern[str]] | None:
    try:
        return _regex_parser().parse(pattern), re.compile(pattern)
    except (re.error, RecursionError, ValueError, OverflowError):
        return None


def pattern_string(pattern: str, rng: random.Random, lo: int, hi: int | None) -> str | None:
    """A string ``re.search(pattern, s)`` accepts, within the length bounds, or None."""
    prepared = _prepare(pattern)
    if prepared is None:
        return None
    parsed, compiled = prepared
    for _ in range(8):
        out: list[str] = []
        try:
            _emit(parsed, rng, out)
        except _UnsupportedPatternError:
            return None
        text = "".join(out)
        if compiled.search(text) and len(text) >= lo and (hi is None or len(text) <= hi):
            return text
    return None


def _in_set(items: list[Any], ch: str) -> bool:
    for op, av in items:
        name = str(op)
        if name == "LITERAL" and chr(av) == ch:
            return True
        if name == "RANGE" and av[0] <= ord(ch) <= av[1]:
            return True
        if name == "CATEGORY" and ch in _CATEGORY_POOLS.get(str(av), ""):
            return True
    return False


def _pick_in(items: list[Any], rng: random.Random) -> str:
    if items and str(items[0][0]) == "NEGATE":
        allowed = [c for c in _NEGATED_POOL if not _in_set(items[1:], c)]
        if not allowed:
            raise _UnsupportedPatternError
        return rng.choice(allowed)
    op, av = rng.choice(items)
    name = str(op)
    if name == "LITERAL":
        return chr(av)
    if name == "RANGE":
        return chr(rng.randint(av[0], av[1]))
    if name == "CATEGORY" and str(av) in _CATEGORY_POOLS:
        return rng.choice(_CATEGORY_POOLS[str(av)])
    raise _UnsupportedPatternError


def _emit(seq: Any, rng: random.Random, out: list[str]) -> None:
    for op, av in seq:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(av))
        elif name == "NOT_LITERAL":
            out.append("a" if av != ord("a") else "b")
        elif name == "ANY":
            out.append(rng.choice(_LETTERS))
        elif name == "IN":
            out.append(_pick_in(av, rng))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = av
            for _ in range(rng.randint(low, min(high, low + 4))):
                _emit(sub, rng, out)
        elif name == "SUBPATTERN":
            _emit(av[-1], rng, out)
        elif name == "ATOMIC_GROUP":
            _emit(av, rng, out)
        elif name == "BRANCH":
            _emit(rng.choice(av[1]), rng, out)
        elif name == "AT":
            continue
        elif name == "CATEGORY" and str(av) in _CATEGORY_POOLS:
            out.append(rng.choice(_CATEGORY_POOLS[str(av)]))
        else:
            raise _UnsupportedPatternError
