"""Counted words: :func:`plural`, the one way a count and its noun are printed ("1 episode",
"2 episodes"), for every room that shows counts (reporting, driver, replay, doctor, CLI)."""

from __future__ import annotations

__all__ = ["first_line", "plural"]


def plural(count: int | str, word: str, many: str | None = None) -> str:
    """``"<count> <word>"``, the noun in the plural (``many``, else ``word + "s"``) unless the
    count is 1; an ``int`` count gets thousands separators, a ``str`` (already formatted) is
    shown as given."""
    shown = f"{count:,}" if isinstance(count, int) else count
    one = count == 1 or count == "1"
    return f"{shown} {word if one else (many or word + 's')}"


def first_line(text: str) -> str:
    """The first meaningful line of a possibly multi-line message (an exception's text, such as
    Strands' ``MaxTokensReachedException``), with ``…`` when more followed: what a one-line
    display shows; the full text stays where it was recorded."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else text.strip()
    return f"{lines[0].rstrip(':')} …"
