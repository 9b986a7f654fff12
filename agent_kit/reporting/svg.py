"""Tiny inline-SVG charts for the HTML reports: histogram, line chart, strip plot, bar chart.

Each function returns one ``<svg>`` element as a string, with labelled axes (the caller gives the
unit in the label), ticks, a title and ``<title>`` tooltips; no script, no external resource.
The root element carries ``data-kind`` (``histogram``, ``lines``, ``strip``, ``bars`` or
``empty``) so a reader or a test can tell a distribution from a curve. Every label is
HTML-escaped. Missing values (None) break lines instead of being drawn as zero.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Final

__all__ = ["LABEL_GAP_PX", "bars", "histogram", "lines", "strip", "ticks"]

_W: Final = 540
_H: Final = 260
_LEFT, _RIGHT, _TOP, _BOTTOM = 66, 14, 44, 42
#: The least horizontal distance between two shown group labels of a strip plot (rotated 45°
#: at font size 9, closer ones overlap).
LABEL_GAP_PX: Final = 24
_PALETTE: Final = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2")
_MUTED: Final = "#9aa4ad"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _tick_label(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        return f"{value:.2g}"
    return f"{round(value, 6):g}"


def ticks(lo: float, hi: float, count: int = 5, *, integer: bool = False) -> list[float]:
    """About ``count`` round tick values covering [lo, hi] (steps of 1, 2, 2.5 or 5 × 10^n;
    whole numbers only when ``integer``)."""
    if not hi > lo:
        return [lo]
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = magnitude * 10
    for m in (1, 2, 2.5, 5, 10):
        if (hi - lo) / (m * magnitude) <= count:
            step = m * magnitude
            break
    if integer:
        step = max(1.0, float(math.ceil(step)))
    first = math.ceil(lo / step - 1e-9)
    last = math.floor(hi / step + 1e-9)
    return [i * step for i in range(first, last + 1)]


def _padded(lo: float, hi: float) -> tuple[float, float]:
    if hi > lo:
        pad = (hi - lo) * 0.05
        return lo - pad, hi + pad
    return lo - 0.5, hi + 0.5


class _Frame:
    """Maps data coordinates to pixels inside the plot area and draws axes."""

    def __init__(
        self, xlim: tuple[float, float], ylim: tuple[float, float], width: int = _W
    ) -> None:
        self.width = width
        self.x0, self.x1 = xlim
        self.y0, self.y1 = ylim

    def px(self, x: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return _LEFT + (x - self.x0) / span * (self.width - _LEFT - _RIGHT)

    def py(self, y: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return _H - _BOTTOM - (y - self.y0) / span * (_H - _TOP - _BOTTOM)

    def axes(
        self,
        title: str,
        x_label: str,
        y_label: str = "",
        *,
        x_ticks: bool = True,
        integer_x: bool = False,
    ) -> list[str]:
        out = [
            _y_label(y_label, _H),
            _title(title, self.width),
            f'<line x1="{_LEFT}" y1="{_H - _BOTTOM}" x2="{self.width - _RIGHT}" '
            f'y2="{_H - _BOTTOM}" stroke="#57606a"/>',
            f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_H - _BOTTOM}" stroke="#57606a"/>',
            _x_label(x_label, self.width / 2, _H),
        ]
        for y in ticks(self.y0, self.y1):
            py = self.py(y)
            out.append(
                f'<line x1="{_LEFT}" y1="{py:.1f}" x2="{self.width - _RIGHT}" y2="{py:.1f}" '
                f'stroke="#eaeef2"/><text x="{_LEFT - 4}" y="{py + 4:.1f}" text-anchor="end" '
                f'font-size="10">{_e(_tick_label(y))}</text>'
            )
        if x_ticks:
            for x in ticks(self.x0, self.x1, 6, integer=integer_x):
                px = self.px(x)
                out.append(
                    f'<text x="{px:.1f}" y="{_H - _BOTTOM + 14}" text-anchor="middle" '
                    f'font-size="10">{_e(_tick_label(x))}</text>'
                )
        return out


def _svg(width: int, body: Sequence[str], title: str, kind: str) -> str:
    return (
        f'<svg width="{width}" height="{_H}" data-kind="{kind}" '
        f'viewBox="0 0 {width} {_H}" role="img" aria-label="{_e(title)}" '
        f'font-family="system-ui,sans-serif">' + "".join(body) + "</svg>"
    )


def _empty(title: str, x_label: str = "", y_label: str = "") -> str:
    frame = _Frame((0.0, 1.0), (0.0, 1.0))
    body = [*frame.axes(title, x_label, y_label, x_ticks=False)]
    body.append(
        f'<text x="{_W / 2:.0f}" y="{_H / 2:.0f}" text-anchor="middle" fill="{_MUTED}">'
        "no data</text>"
    )
    return _svg(_W, body, title, "empty")


def _marker(frame: _Frame, label: str, x: float) -> str:
    px = frame.px(x)
    return (
        f'<line class="marker" x1="{px:.1f}" x2="{px:.1f}" y1="{_TOP}" y2="{_H - _BOTTOM}" '
        f'stroke="#cf222e" stroke-dasharray="4 3"><title>{_e(label)}: {_e(_tick_label(x))}'
        f'</title></line><text x="{px + 3:.1f}" y="{_TOP + 10}" font-size="10" '
        f'fill="#cf222e">{_e(label)}</text>'
    )


def histogram(
    values: Sequence[float],
    *,
    title: str,
    x_label: str,
    y_label: str = "rollouts (count)",
    integer: bool = False,
    markers: Sequence[tuple[str, float]] = (),
) -> str:
    """A histogram of ``values``: one bar per integer when ``integer`` (and the range is ≤ 40),
    else about √n equal-width bins (5..30). ``markers`` draw labelled dashed vertical lines
    (e.g. the success threshold); the x range stretches to include them."""
    data = [v for v in values if math.isfinite(v)]
    if not data:
        return _empty(title, x_label, y_label)
    marks = [(label, x) for label, x in markers if math.isfinite(x)]
    lo = min([*data, *(x for _, x in marks)])
    hi = max([*data, *(x for _, x in marks)])
    whole = integer and hi - lo <= 40
    if whole:
        edges = [lo - 0.5 + i for i in range(int(hi - lo) + 2)]
    else:
        if hi == lo:
            lo, hi = lo - 0.5, hi + 0.5
        bins = min(30, max(5, math.isqrt(len(data)) + 1))
        edges = [lo + (hi - lo) * i / bins for i in range(bins + 1)]
    counts = [0] * (len(edges) - 1)
    for v in data:
        index = min(len(counts) - 1, max(0, int((v - edges[0]) / (edges[1] - edges[0]))))
        counts[index] += 1
    frame = _Frame((edges[0], edges[-1]), (0.0, max(counts) * 1.08))
    body = frame.axes(title, f"{x_label} (n={len(data)})", y_label, integer_x=whole)
    for i, count in enumerate(counts):
        if not count:
            continue
        x, x2, y = frame.px(edges[i]), frame.px(edges[i + 1]), frame.py(count)
        label = f"{_tick_label(edges[i])} – {_tick_label(edges[i + 1])}: {count}"
        body.append(
            f'<rect x="{x + 0.5:.1f}" y="{y:.1f}" width="{max(1.0, x2 - x - 1):.1f}" '
            f'height="{frame.py(0) - y:.1f}" fill="{_PALETTE[0]}"><title>{_e(label)}</title>'
            "</rect>"
        )
    body.extend(_marker(frame, label, x) for label, x in marks)
    return _svg(_W, body, title, "histogram")


def _title(title: str, width: float) -> str:
    """A chart's title, centred on top."""
    return (
        f'<text x="{width / 2:.0f}" y="18" text-anchor="middle" font-size="13" '
        f'font-weight="600">{_e(title)}</text>'
    )


def _y_label(label: str, height: float) -> str:
    """A chart's y-axis label, turned up along its left edge, centred on the plot."""
    mid = (_TOP + height - _BOTTOM) / 2
    return (
        f'<text class="y-label" x="12" y="{mid:.0f}" text-anchor="middle" font-size="11" '
        f'transform="rotate(-90 12 {mid:.0f})">{_e(label)}</text>'
    )


def _x_label(label: str, x: float, height: float) -> str:
    """A chart's x-axis label at ``x``, along its bottom edge."""
    return (
        f'<text class="x-label" x="{x:.0f}" y="{height - 6}" '
        f'text-anchor="middle" font-size="11">{_e(label)}</text>'
    )


def lines(
    xs: Sequence[float],
    series: Sequence[tuple[str, Sequence[float | None]]],
    *,
    title: str,
    x_label: str,
    y_label: str = "",
    ylim: tuple[float, float] | None = None,
    integer_x: bool = False,
    bands: Mapping[str, Sequence[float | None]] | None = None,
) -> str:
    """Line chart of several named series over ``xs``; None values leave gaps; a legend on top.

    ``ylim`` fixes the y range (e.g. (0, 1) for fractions); ``integer_x`` ticks whole x only;
    ``bands`` gives a series (by name) a half-width at each x: a shaded band ``y ± width``
    around it (``class="band"``: an SE band), inside the y range.
    """
    bands = bands or {}
    ys = [y for _, values in series for y in values if y is not None and math.isfinite(y)]
    for name, values in series:
        for y, w in zip(values, bands.get(name, ()), strict=False):
            if y is not None and w is not None and math.isfinite(y) and math.isfinite(w):
                ys += [y - w, y + w]
    if not xs or not ys:
        return _empty(title, x_label, y_label)
    frame = _Frame(_padded(min(xs), max(xs)), _padded(*(ylim or (min(ys), max(ys)))))
    body = frame.axes(title, x_label, y_label, integer_x=integer_x)
    for n, (name, values) in enumerate(series):
        color = _PALETTE[n % len(_PALETTE)]
        if name in bands:
            body += _band(frame, xs, values, bands[name], color)
        segments: list[list[str]] = [[]]
        for x, y in zip(xs, values, strict=False):
            if y is None or not math.isfinite(y):
                segments.append([])
                continue
            segments[-1].append(f"{frame.px(x):.1f},{frame.py(y):.1f}")
            if len(xs) <= 60:
                body.append(
                    f'<circle cx="{frame.px(x):.1f}" cy="{frame.py(y):.1f}" r="2.5" '
                    f'fill="{color}"><title>{_e(name)} @ {_e(_tick_label(x))}: '
                    f"{_e(_tick_label(y))}</title></circle>"
                )
        for seg in segments:
            if len(seg) > 1:
                body.append(
                    f'<polyline fill="none" stroke="{color}" stroke-width="1.8" '
                    f'points="{" ".join(seg)}"/>'
                )
        lx = _LEFT + 8 + n * 100
        body.append(
            f'<rect x="{lx}" y="28" width="10" height="3" fill="{color}"/>'
            f'<text x="{lx + 14}" y="32" font-size="10">{_e(name)}</text>'
        )
    return _svg(_W, body, title, "lines")


def _band(
    frame: _Frame,
    xs: Sequence[float],
    values: Sequence[float | None],
    widths: Sequence[float | None],
    color: str,
) -> list[str]:
    """The shaded ``y ± width`` polygons of one series, one per run of defined points."""
    runs: list[list[tuple[float, float, float]]] = [[]]
    for x, y, w in zip(xs, values, widths, strict=False):
        if y is None or w is None or not (math.isfinite(y) and math.isfinite(w)):
            runs.append([])
        else:
            runs[-1].append((x, y, w))
    out = []
    for run in (r for r in runs if r):
        upper = [f"{frame.px(x):.1f},{frame.py(y + w):.1f}" for x, y, w in run]
        lower = [f"{frame.px(x):.1f},{frame.py(y - w):.1f}" for x, y, w in reversed(run)]
        if len(run) == 1:  # one point: a short vertical bar of its band
            upper.append(upper[0])
        out.append(
            f'<polygon class="band" fill="{color}" fill-opacity="0.18" stroke="none" '
            f'points="{" ".join(upper + lower)}"/>'
        )
    return out


def strip(
    groups: Sequence[tuple[str, Sequence[float], bool]],
    *,
    title: str,
    y_label: str = "reward",
    markers: Sequence[tuple[str, float]] = (),
) -> str:
    """Strip plot: one column per group (label, rewards, degenerate), one dot per reward and a
    bar at the group mean; zero-variance groups are drawn grey. ``markers`` draw labelled
    dashed horizontal lines (e.g. the success threshold)."""
    values = [v for _, rewards, _ in groups for v in rewards]
    x_label = "group (step:prompt); grey = zero variance"
    if not values:
        return _empty(title, x_label, y_label)
    marks = [(label, y) for label, y in markers if math.isfinite(y)]
    span = [*values, *(y for _, y in marks)]
    width = min(1100, max(_W, _LEFT + _RIGHT + 9 * len(groups)))
    frame = _Frame((-0.5, len(groups) - 0.5), _padded(min(span), max(span)), width)
    body = frame.axes(title, x_label, y_label, x_ticks=False)
    for label, y in marks:
        py = frame.py(y)
        body.append(
            f'<line class="marker" x1="{_LEFT}" x2="{width - _RIGHT}" y1="{py:.1f}" '
            f'y2="{py:.1f}" stroke="#cf222e" stroke-dasharray="4 3"/><text x="{width - _RIGHT}" '
            f'y="{py - 3:.1f}" font-size="10" text-anchor="end" fill="#cf222e">{_e(label)}</text>'
        )
    # Thin the rotated group labels so neighbours stay apart (:data:`LABEL_GAP_PX`).
    every = max(1, math.ceil(LABEL_GAP_PX / max(frame.px(1) - frame.px(0), 1e-9)))
    for i, (label, rewards, degenerate) in enumerate(groups):
        color = _MUTED if degenerate else _PALETTE[0]
        x = frame.px(i)
        for v in rewards:
            body.append(
                f'<circle cx="{x:.1f}" cy="{frame.py(v):.1f}" r="3" fill="{color}" '
                f'fill-opacity="0.6"><title>{_e(label)}: {_e(_tick_label(v))}</title></circle>'
            )
        if rewards:
            mean = math.fsum(rewards) / len(rewards)
            body.append(
                f'<line x1="{x - 4:.1f}" x2="{x + 4:.1f}" y1="{frame.py(mean):.1f}" '
                f'y2="{frame.py(mean):.1f}" stroke="#1f2328" stroke-width="1.5"/>'
            )
        if i % every == 0:
            body.append(
                f'<text x="{x:.1f}" y="{_H - _BOTTOM + 12}" font-size="9" text-anchor="end" '
                f'transform="rotate(-45 {x:.1f} {_H - _BOTTOM + 12})">{_e(label)}</text>'
            )
    return _svg(width, body, title, "strip")


def bars(
    items: Sequence[tuple[str, float | None]], *, title: str, x_label: str, y_label: str
) -> str:
    """Horizontal bar chart: one bar per (label, value), negative values to the left of 0;
    None values are listed without a bar."""
    values = [v for _, v in items if v is not None and math.isfinite(v)]
    if not values:
        return _empty(title, x_label, y_label)
    lo, hi = min(0.0, *values), max(0.0, *values)
    row = 18
    height = max(_H, _TOP + _BOTTOM + row * len(items))
    left = 150
    plot_w = _W - left - _RIGHT
    span = (hi - lo) or 1.0

    def px(v: float) -> float:
        return left + (v - lo) / span * plot_w

    body = [
        _title(title, _W),
        _y_label(y_label, height),
        _x_label(x_label, left + plot_w / 2, height),
        f'<line x1="{left}" y1="{height - _BOTTOM}" x2="{_W - _RIGHT}" y2="{height - _BOTTOM}" '
        'stroke="#57606a"/>',
    ]
    for t in ticks(lo, hi):
        body.append(
            f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{_TOP}" y2="{height - _BOTTOM}" '
            f'stroke="#eaeef2"/><text x="{px(t):.1f}" y="{height - _BOTTOM + 14}" '
            f'text-anchor="middle" font-size="10">{_e(_tick_label(t))}</text>'
        )
    body.append(
        f'<line x1="{px(0):.1f}" x2="{px(0):.1f}" y1="{_TOP}" y2="{height - _BOTTOM}" '
        'stroke="#57606a"/>'
    )
    for i, (label, value) in enumerate(items):
        y = _TOP + i * row
        body.append(
            f'<text x="{left - 4}" y="{y + row * 0.7:.1f}" text-anchor="end" '
            f'font-size="10">{_e(label[:28])}</text>'
        )
        if value is None or not math.isfinite(value):
            continue
        x0, x1 = sorted((px(0.0), px(value)))
        color = _PALETTE[0] if value >= 0 else _PALETTE[4]
        body.append(
            f'<rect x="{x0:.1f}" y="{y + 3}" width="{max(1.0, x1 - x0):.1f}" height="{row - 6}" '
            f'fill="{color}"><title>{_e(label)}: {_e(_tick_label(value))}</title></rect>'
        )
    return (
        f'<svg width="{_W}" height="{height}" data-kind="bars" viewBox="0 0 {_W} {height}" '
        f'role="img" aria-label="{_e(title)}" font-family="system-ui,sans-serif">'
        + "".join(body)
        + "</svg>"
    )
