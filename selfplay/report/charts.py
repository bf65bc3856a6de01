"""Inline SVG charts (line charts, bar charts, histograms) drawn as text, so the report needs no plotting
package and no network. Every label is escaped: metric keys carry repo and check names.

Each chart is a `<figure>` with the SVG and a collapsed table of the numbers it draws, so readers (and
tests) can check the values without reading coordinates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22")
WIDTH, HEIGHT = 680, 260
LEFT, RIGHT, TOP, BOTTOM = 56, 170, 16, 40
MAX_MARKERS = 150  # above this many points a series is drawn as a bare line

Series = dict[str, list[tuple[float, float]]]


def fmt(value: float | None) -> str:
    """A number the way the page prints it everywhere (4 significant digits, integers whole)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if float(value).is_integer() and abs(value) < 1e12:
        return str(int(value))
    return f"{value:.4g}"


def nice_ticks(lo: float, hi: float, count: int = 5, *, whole: bool = False) -> list[float]:
    """Round tick values covering [lo, hi] (`whole`: integer steps only, for counts)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(count - 1, 1)
    mag = 10 ** math.floor(math.log10(raw))
    steps = (1, 2, 5, 10) if whole else (1, 2, 2.5, 5, 10)
    step = next(m * mag for m in steps if m * mag >= raw)
    if whole:
        step = max(1, round(step))
    start = math.floor(lo / step) * step
    ticks, t = [], start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 10))
    return ticks


def line_chart(chart_id: str, title: str, series: Series, *, y_label: str, x_label: str = "iteration",
               y_range: tuple[float, float] | None = None) -> str:
    """One line per series; an empty `series` gives a figure saying there is no data."""
    series = {name: sorted(points) for name, points in series.items() if points}
    if not series:
        return empty(chart_id, title)
    xs = [x for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts]
    x_lo, x_hi = min(xs), max(xs)
    if x_hi == x_lo:  # one iteration so far: centre it
        x_lo, x_hi = x_lo - 0.5, x_hi + 0.5
    y_ticks = nice_ticks(*(y_range or (min(0.0, min(ys)), max(ys))))
    y_lo, y_hi = y_ticks[0], y_ticks[-1]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x_lo) / (x_hi - x_lo) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (y - y_lo) / ((y_hi - y_lo) or 1) * plot_h

    parts = _axes(y_ticks, py, plot_w, x_label, y_label)
    whole = all(float(x).is_integer() for x in xs)  # iterations: no tick at 1.5
    for x in nice_ticks(x_lo, x_hi, 6):
        if x_lo <= x <= x_hi and (float(x).is_integer() or not whole):
            parts.append(f'<text class="tick" x="{px(x):.1f}" y="{TOP + plot_h + 16}" '
                         f'text-anchor="middle">{fmt(x)}</text>')
    for i, (name, points) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        label = escape(name)
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        parts.append(f'<g class="series" data-series="{label}"><polyline fill="none" stroke="{color}" '
                     f'stroke-width="2" points="{coords}"/>')
        if len(points) <= MAX_MARKERS:
            parts.extend(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}">'
                         f'<title>{label}: {escape(x_label)} {fmt(x)} = {fmt(y)}</title></circle>'
                         for x, y in points)
        parts.append("</g>")
        parts.append(_legend_entry(i, label, color))
    table = data_table([x_label, *series], _rows_by_x(series))
    return _figure(chart_id, title, parts, table)


def bar_chart(chart_id: str, title: str, bars: Sequence[tuple[str, float]], *, x_label: str) -> str:
    """Horizontal bars, one per label (long check and repo names stay readable)."""
    if not bars:
        return empty(chart_id, title)
    row_h = 22
    height = TOP + BOTTOM + row_h * len(bars)
    label_w = 190
    plot_w = WIDTH - label_w - 60
    top = max(v for _, v in bars) or 1.0
    parts = []
    for i, (label, value) in enumerate(bars):
        y = TOP + i * row_h
        w = max(value, 0) / top * plot_w
        parts.append(f'<text class="tick" x="{label_w - 6}" y="{y + 15}" text-anchor="end">{escape(label)}</text>'
                     f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" '
                     f'fill="{PALETTE[0]}"><title>{escape(label)}: {fmt(value)}</title></rect>'
                     f'<text class="value" x="{label_w + w + 4:.1f}" y="{y + 15}">{fmt(value)}</text>')
    parts.append(f'<text class="axis-label" x="{label_w + plot_w / 2:.1f}" y="{height - 8}" '
                 f'text-anchor="middle">{escape(x_label)}</text>')
    table = data_table(["", x_label], [[label, fmt(value)] for label, value in bars])
    return _figure(chart_id, title, parts, table, height=height)


def histogram(chart_id: str, title: str, labels: Sequence[str], counts: dict[str, Sequence[int]], *,
              x_label: str, y_label: str = "count", ticks: Sequence[str] | None = None) -> str:
    """Vertical bars over labelled bins (in order), one bar per series in each bin; `ticks` are shorter
    axis labels of the bins (their lower edges, say), `labels` name them in tooltips and the table."""
    counts = {name: list(c) for name, c in counts.items() if any(c)}
    if not labels or not counts:
        return empty(chart_id, title)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    y_ticks = nice_ticks(0, max(max(c) for c in counts.values()), whole=True)
    y_hi = y_ticks[-1] or 1

    def py(y: float) -> float:
        return TOP + plot_h - y / y_hi * plot_h

    parts = _axes(y_ticks, py, plot_w, x_label, y_label)
    bin_w = plot_w / len(labels)
    bar_w = (bin_w - 2) / len(counts)
    for s, (name, values) in enumerate(counts.items()):
        color = PALETTE[s % len(PALETTE)]
        parts.append(f'<g class="series" data-series="{escape(name)}">')
        for i, (label, count) in enumerate(zip(labels, values, strict=True)):
            x = LEFT + i * bin_w + 1 + s * bar_w
            parts.append(f'<rect x="{x:.1f}" y="{py(count):.1f}" width="{max(bar_w - 1, 0.5):.1f}" '
                         f'height="{TOP + plot_h - py(count):.1f}" fill="{color}">'
                         f'<title>{escape(name)} {escape(label)}: {count}</title></rect>')
        parts.append("</g>")
        parts.append(_legend_entry(s, escape(name), color))
    step = math.ceil(len(labels) / 10)
    for i, label in enumerate(ticks or labels):
        if i % step == 0:
            parts.append(f'<text class="tick" x="{LEFT + (i + 0.5) * bin_w:.1f}" y="{TOP + plot_h + 16}" '
                         f'text-anchor="middle">{escape(label)}</text>')
    rows = [[label, *(str(c[i]) for c in counts.values())] for i, label in enumerate(labels)]
    return _figure(chart_id, title, parts, data_table([x_label, *counts], rows))


def empty(chart_id: str, title: str) -> str:
    return (f'<figure class="chart empty" id="{escape(chart_id)}"><figcaption>{escape(title)}</figcaption>'
            '<p class="none">No data in this run yet.</p></figure>')


def data_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="data"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _axes(y_ticks: list[float], py, plot_w: float, x_label: str, y_label: str) -> list[str]:
    plot_h = HEIGHT - TOP - BOTTOM
    parts = [f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}"/>',
             f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}"/>']
    for t in y_ticks:
        parts.append(f'<line class="grid" x1="{LEFT}" y1="{py(t):.1f}" x2="{LEFT + plot_w}" y2="{py(t):.1f}"/>'
                     f'<text class="tick" x="{LEFT - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{fmt(t)}</text>')
    parts.append(f'<text class="axis-label" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" '
                 f'text-anchor="middle">{escape(x_label)}</text>')
    parts.append(f'<text class="axis-label" transform="rotate(-90)" x="{-(TOP + plot_h / 2):.1f}" y="14" '
                 f'text-anchor="middle">{escape(y_label)}</text>')
    return parts


def _legend_entry(i: int, label: str, color: str) -> str:
    x, y = WIDTH - RIGHT + 14, TOP + 8 + i * 18
    return (f'<rect x="{x}" y="{y - 8}" width="12" height="4" fill="{color}"/>'
            f'<text class="legend" x="{x + 18}" y="{y - 2}">{label}</text>')


def _rows_by_x(series: Series) -> list[list[str]]:
    by_x: dict[float, dict[str, float]] = {}
    for name, points in series.items():
        for x, y in points:
            by_x.setdefault(x, {})[name] = y
    return [[fmt(x), *(fmt(by_x[x].get(name)) for name in series)] for x in sorted(by_x)]


def _figure(chart_id: str, title: str, parts: list[str], table: str, height: int = HEIGHT) -> str:
    t = escape(title)
    return (f'<figure class="chart" id="{escape(chart_id)}"><figcaption>{t}</figcaption>'
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
            f'height="{height}" role="img" aria-label="{t}">{"".join(parts)}</svg>'
            f'<details><summary>numbers</summary>{table}</details></figure>')
