"""Draw JSON values valid against a JSON schema: the engine of the ``random`` policy.

:class:`SchemaSampler` with an ``rng`` draws random values, with ``rng=None`` canonical ones (see
:mod:`agent_kit.emulator.policies.randomized` for the keywords supported and the temperature rule).
Values always stay inside the schema's constraints, edge values included; a ``pattern`` is
honoured through :mod:`agent_kit.emulator.policies.regex_sampler`.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from typing import Any

from agent_kit.emulator.policies.regex_sampler import pattern_string

__all__ = ["SchemaSampler"]

_MAX_DEPTH = 12
_UNBOUNDED_SPAN = 100
_EDGE_STRINGS = (
    " ",
    "héllo wörld ✓ 日本語 🙂 مرحبا",
    'line1\nline2\t"quoted" \\ back\\slash',
    "null",
    "0",
    "-1",
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    "\u200b\u00a0 zero-width and nbsp",
)
_VOCAB = (
    "the",
    "answer",
    "is",
    "probably",
    "this",
    "one",
    "I",
    "think",
    "we",
    "should",
    "try",
    "again",
    "with",
    "a",
    "different",
    "guess",
    "result",
    "done",
    "final",
    "check",
    "tool",
    "value",
    "okay",
    "maybe",
)
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_FORMATS = {
    "date": "2024-01-31",
    "date-time": "2024-01-31T12:00:00Z",
    "time": "12:00:00",
    "email": "user@example.com",
    "uri": "https://example.com/path",
    "url": "https://example.com/path",
    "ipv4": "192.0.2.1",
    "hostname": "example.com",
}
_EDGE_INTS = (0, 1, -1, 2**31 - 1, -(2**31), 2**53)


class SchemaSampler:
    """Draws values that validate against a JSON schema (the keywords in the module docstring).

    ``rng=None`` means temperature 0: canonical values, no randomness. ``root`` is the schema
    ``$ref`` pointers resolve against (the tool's ``parameters``).
    """

    def __init__(
        self, rng: random.Random | None, *, temperature: float, root: dict[str, Any]
    ) -> None:
        self.rng = rng
        self.p_edge = min(0.5, 0.1 * temperature * temperature) if rng is not None else 0.0
        self.root = root

    def _edge(self) -> bool:
        return self.rng is not None and self.p_edge > 0 and self.rng.random() < self.p_edge

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return {}
        node: Any = self.root
        for part in ref[1:].split("/"):
            if not part:
                continue
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return {}
        return node

    def value(self, schema: Any, depth: int = 0) -> Any:
        """One value valid against ``schema`` (a dict, or ``True``/``{}`` for anything)."""
        if not isinstance(schema, dict):
            return "example"
        rng = self.rng
        if "$ref" in schema and depth < _MAX_DEPTH:
            target = self._resolve(str(schema["$ref"]))
            merged = {**(target if isinstance(target, dict) else {}), **schema}
            merged.pop("$ref")
            return self.value(merged, depth + 1)
        if "const" in schema:
            return schema["const"]
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return enum[0] if rng is None else rng.choice(enum)
        if "default" in schema and (rng is None or rng.random() < 0.25):
            return schema["default"]
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and all_of:
            return self.value(_merge(schema, all_of, self), depth + 1)
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                branch = options[0] if rng is None else rng.choice(options)
                rest = {k: v for k, v in schema.items() if k not in (key, "default")}
                if isinstance(branch, dict):
                    rest.update(branch)
                return self.value(rest, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if isinstance(k, str)] or ["string"]
            non_null = [k for k in kinds if k != "null"] or kinds
            kind = non_null[0] if rng is None else rng.choice(kinds)
        if not isinstance(kind, str):
            kind = _infer_type(schema)
        if kind == "object":
            return self._object(schema, depth)
        if kind == "array":
            return self._array(schema, depth)
        if kind in ("integer", "number"):
            return self._number(schema, integer=kind == "integer")
        if kind == "boolean":
            return False if rng is None else rng.random() < 0.5
        if kind == "null":
            return None
        return self._string(schema)

    def _object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        rng = self.rng
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        required = [r for r in schema.get("required") or () if isinstance(r, str)]
        names = list(dict.fromkeys(required))
        optional = [p for p in props if p not in names]
        if rng is not None and depth < _MAX_DEPTH:
            if self._edge():
                names += optional if rng.random() < 0.5 else []
            else:
                names += [p for p in optional if rng.random() < 0.5]
        min_props = schema.get("minProperties")
        if isinstance(min_props, int):
            names += [p for p in optional if p not in names][: max(0, min_props - len(names))]
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for name in names:
            sub = props.get(name, extra if isinstance(extra, dict) else {"type": "string"})
            out[name] = self.value(sub, depth + 1)
        if isinstance(min_props, int) and extra is not False:
            i = 0
            while len(out) < min_props:
                sub = extra if isinstance(extra, dict) else {"type": "string"}
                out.setdefault(f"extra_{i}", self.value(sub, depth + 1))
                i += 1
        return out

    def _array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        rng = self.rng
        lo, hi = _size_range(schema, "Items")
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(items, list):  # draft-4 tuple form
            prefix, items = items, schema.get("additionalItems", {})
        prefix = prefix if isinstance(prefix, list) else []
        if rng is None:
            n = max(lo, 1, len(prefix))
        elif self._edge():
            n = rng.choice([lo, hi if hi is not None and hi <= 64 else lo + 8])
        else:
            n = rng.randint(lo, lo + 3)
        if depth >= _MAX_DEPTH:
            n = lo
        if hi is not None:
            n = min(n, hi)
        if items is False:
            n = min(n, len(prefix))
        out: list[Any] = []
        seen: set[str] = set()
        unique = bool(schema.get("uniqueItems"))
        sampler = (
            self
            if rng is not None or not unique
            else SchemaSampler(random.Random(0), temperature=1.0, root=self.root)
        )
        attempts = 0
        while len(out) < n and attempts < 10 * n + 10:
            attempts += 1
            i = len(out)
            sub = prefix[i] if i < len(prefix) else (items if isinstance(items, dict) else {})
            value = (self if i == 0 else sampler).value(sub, depth + 1)
            if unique:
                key = json.dumps(value, sort_keys=True, default=str)
                if key in seen:
                    continue
                seen.add(key)
            out.append(value)
        return out

    def _number(self, schema: dict[str, Any], *, integer: bool) -> int | float:
        rng = self.rng
        lo, lo_ex = _bound(schema, "minimum", "exclusiveMinimum")
        hi, hi_ex = _bound(schema, "maximum", "exclusiveMaximum")
        step = schema.get("multipleOf")
        if integer:
            ilo = None if lo is None else (math.floor(lo) + 1 if lo_ex else math.ceil(lo))
            ihi = None if hi is None else (math.ceil(hi) - 1 if hi_ex else math.floor(hi))
            if isinstance(step, (int, float)) and step > 0 and float(step).is_integer():
                return self._multiple(int(step), ilo, ihi)
            if rng is None:
                return ilo if ilo is not None else (0 if ihi is None or ihi >= 0 else ihi)
            if self._edge():
                edges = [e for e in (ilo, ihi, *_EDGE_INTS) if e is not None]
                edges = [e for e in edges if _within(e, ilo, ihi)]
                if edges:
                    return rng.choice(edges)
            a, b = _span(ilo, ihi)
            return rng.randint(int(a), int(b))
        if rng is None:
            if lo is not None:
                return lo + (1e-6 if lo_ex else 0.0) * max(1.0, abs(lo))
            return 0.0 if hi is None or hi > 0 else hi - (1.0 if hi_ex else 0.0)
        if self._edge():
            candidates: list[float | None] = [
                lo if not lo_ex else None,
                hi if not hi_ex else None,
                0.0,
                1e-9,
                1e12,
            ]
            fedges = [
                float(e) for e in candidates if e is not None and _within(e, lo, hi, lo_ex, hi_ex)
            ]
            if fedges:
                return rng.choice(fedges)
        a, b = _span(lo, hi)
        x = round(rng.uniform(a, b), 3)
        if not _within(x, lo, hi, lo_ex, hi_ex):
            x = (a + b) / 2
        return x

    def _multiple(self, step: int, lo: int | None, hi: int | None) -> int:
        klo = None if lo is None else -(-lo // step)
        khi = None if hi is None else hi // step
        if self.rng is None:
            k = klo if klo is not None else (0 if khi is None or khi >= 0 else khi)
        else:
            a, b = _span(klo, khi, span=20)
            k = self.rng.randint(int(a), int(b))
        return k * step

    def _string(self, schema: dict[str, Any]) -> str:
        rng = self.rng
        lo, hi = _size_range(schema, "Length")
        fmt = schema.get("format")
        pattern = schema.get("pattern")
        text: str
        if isinstance(pattern, str):
            matched = pattern_string(pattern, self.rng or random.Random(0), lo, hi)
            if matched is not None:
                return matched
        if fmt == "uuid":
            text = str(uuid.UUID(int=0 if rng is None else rng.getrandbits(128), version=4))
        elif isinstance(fmt, str) and fmt in _FORMATS:
            text = _FORMATS[fmt]
        elif rng is None:
            text = "example"
        elif self._edge():
            text = rng.choice(("", "x" * (hi if hi is not None and hi <= 4096 else 1000)))
            if rng.random() < 0.6:
                text = rng.choice(_EDGE_STRINGS)
        else:
            n = rng.randint(lo, max(lo, 1) + 11)
            text = "".join(rng.choice(_LETTERS) for _ in range(n))
        return _fit(text, lo, hi)

    def text_answer(self, max_tokens: int | None) -> str:
        """The final text: ``"Final answer."`` at temperature 0, else random words (or edges)."""
        rng = self.rng
        if rng is None:
            return "Final answer."
        if self._edge():
            text = rng.choice(("", *_EDGE_STRINGS))
        else:
            text = " ".join(rng.choice(_VOCAB) for _ in range(rng.randint(3, 12))).capitalize()
        if max_tokens is not None and max_tokens > 0:
            text = text[: 4 * max_tokens]
        return text


def _infer_type(schema: dict[str, Any]) -> str:
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema or "minItems" in schema:
        return "array"
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        return "number"
    return "string"


def _merge(schema: dict[str, Any], parts: list[Any], sampler: SchemaSampler) -> dict[str, Any]:
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    for part in parts:
        if isinstance(part, dict) and "$ref" in part:
            target = sampler._resolve(str(part["$ref"]))
            part = {**(target if isinstance(target, dict) else {}), **part}
            part.pop("$ref")
        if not isinstance(part, dict):
            continue
        for key, value in part.items():
            if key == "properties" and isinstance(value, dict):
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required" and isinstance(value, list):
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged.setdefault(key, value)
    return merged


def _bound(schema: dict[str, Any], inclusive: str, exclusive: str) -> tuple[float | None, bool]:
    ex = schema.get(exclusive)
    inc = schema.get(inclusive)
    if isinstance(ex, (int, float)) and not isinstance(ex, bool):
        if isinstance(inc, (int, float)) and not isinstance(inc, bool):
            # both given: the tighter one wins
            tighter_ex = ex >= inc if inclusive == "minimum" else ex <= inc
            return (ex, True) if tighter_ex else (inc, False)
        return ex, True
    if isinstance(inc, (int, float)) and not isinstance(inc, bool):
        return inc, ex is True  # draft 4: exclusiveMinimum is a boolean modifier
    return None, False


def _within(
    x: float, lo: float | None, hi: float | None, lo_ex: bool = False, hi_ex: bool = False
) -> bool:
    if lo is not None and (x < lo or (lo_ex and x == lo)):
        return False
    return not (hi is not None and (x > hi or (hi_ex and x == hi)))


def _size_range(schema: dict[str, Any], of: str) -> tuple[int, int | None]:
    """A size's bounds in a schema, ``min<of>`` (at least 0) and ``max<of>`` (None: none):
    an array's ``Items``, a string's ``Length``."""
    hi = schema.get(f"max{of}")
    return max(0, int(schema.get(f"min{of}") or 0)), int(hi) if isinstance(hi, int) else None


def _span(lo: float | None, hi: float | None, span: int = _UNBOUNDED_SPAN) -> tuple[float, float]:
    if lo is None:
        return (0, span) if hi is None else (hi - span, hi)
    if hi is None:
        return lo, lo + span
    return (lo, hi) if lo <= hi else (lo, lo)


def _fit(text: str, lo: int, hi: int | None) -> str:
    if hi is not None:
        text = text[:hi]
    if len(text) < lo:
        pad = text or "x"
        text = (pad * (lo // len(pad) + 1))[:lo]
    return text
