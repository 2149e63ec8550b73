"""A small SVG layer for the HTML report: forest plots, bars and curves as static markup.

Why hand-written SVG rather than a charting library: the report must work offline from
`file://`, stay small for large cards, be byte-for-byte deterministic, and be readable by
screen readers. Static SVG drawn here is a few kilobytes per chart, needs no script to
render, carries its numbers in `<title>` (hover) and `aria-label`, and adds no dependency.
(Vega-Lite through altair + vl-convert also renders static SVG, but adds ~100 MB of wheels
and a JavaScript engine to produce the same marks.)

Every string that reaches the markup goes through `esc`: values from a package are data.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "Curve",
    "ForestRow",
    "SlopePoint",
    "StackedBar",
    "curves",
    "esc",
    "forest",
    "slopegraph",
    "stacked_bars",
]

#: Colour-blind safe palette (Okabe–Ito), cycled by series.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
#: Terminal states in a fixed order and colour, so every accounting chart reads the same.
STATUS_COLOURS = {
    "completed": "#009E73",
    "error": "#D55E00",
    "timeout": "#E69F00",
    "limit": "#CC79A7",
    "cancelled": "#999999",
    "skipped": "#cccccc",
}
_FONT = 12
_ROW = 22


def esc(text: object) -> str:
    """`text` escaped for HTML/SVG text and attribute values."""
    return html.escape(str(text), quote=True)


def _num(x: float) -> str:
    """A coordinate with at most two decimals and no trailing zeros (deterministic output)."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _fmt(x: float | None) -> str:
    if x is None:
        return "undefined"
    return f"{x:.4f}" if abs(x) < 1000 else f"{x:,.1f}"


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]."""
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _domain(values: Sequence[float], *, zero: bool = False, unit_interval: bool = False) -> tuple[float, float]:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if zero:
        finite.append(0.0)
    if unit_interval and all(0.0 <= v <= 1.0 for v in finite):
        return 0.0, 1.0
    if not finite:
        return 0.0, 1.0
    lo, hi = min(finite), max(finite)
    if lo == hi:
        pad = abs(lo) * 0.1 or 0.5
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad


def _svg_open(width: float, height: float, label: str, cls: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {esc(cls)}" role="img" '
        f'width="{_num(width)}" height="{_num(height)}" viewBox="0 0 {_num(width)} {_num(height)}" '
        f'aria-label="{esc(label)}"><title>{esc(label)}</title>'
    )


@dataclass(frozen=True)
class ForestRow:
    """One row of a forest plot: a label, a point, an interval, a hover text."""

    label: str
    value: float | None
    low: float | None
    high: float | None
    note: str
    hover: str
    series: int = 0
    emphasis: str = ""  # a short flag shown after the note, e.g. "inside the noise"


def forest(
    rows: Sequence[ForestRow],
    *,
    title: str,
    zero_line: bool = False,
    legend: Sequence[str] = (),
    label_width: int = 210,
    plot_width: int = 260,
    note_width: int = 330,
) -> str:
    """A forest plot: one row per estimate, its interval as a whisker, the numbers at the right."""
    values = [v for r in rows for v in (r.value, r.low, r.high) if v is not None]
    lo, hi = _domain(values, zero=zero_line, unit_interval=not zero_line)
    legend_h = _ROW if legend else 0
    top = 28 + legend_h
    height = top + _ROW * max(len(rows), 1) + 30
    width = label_width + plot_width + note_width
    x0, x1 = label_width, label_width + plot_width - 10

    def sx(v: float) -> float:
        return x0 + (v - lo) / (hi - lo) * (x1 - x0)

    parts = [_svg_open(width, height, title, "forest")]
    parts.append(f'<text x="4" y="16" class="chart-title">{esc(title)}</text>')
    for i, name in enumerate(legend):
        lx = 4 + i * 200
        parts.append(
            f'<rect x="{lx}" y="{24}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
            f'<text x="{lx + 14}" y="{33}" class="legend">{esc(name)}</text>'
        )
    axis_y = top + _ROW * max(len(rows), 1) + 4
    for t in _ticks(lo, hi):
        x = sx(t)
        parts.append(
            f'<line x1="{_num(x)}" y1="{top - 4}" x2="{_num(x)}" y2="{_num(axis_y)}" class="grid"/>'
            f'<text x="{_num(x)}" y="{_num(axis_y + 14)}" class="tick" text-anchor="middle">{esc(_num(t))}</text>'
        )
    if zero_line and lo <= 0 <= hi:
        parts.append(f'<line x1="{_num(sx(0))}" y1="{top - 4}" x2="{_num(sx(0))}" y2="{_num(axis_y)}" class="zero"/>')
    if not rows:
        parts.append(f'<text x="{x0}" y="{top + 14}" class="note">no estimates</text>')
    for i, row in enumerate(rows):
        y = top + _ROW * i + _ROW / 2
        colour = PALETTE[row.series % len(PALETTE)]
        parts.append(f'<g class="row"><title>{esc(row.hover)}</title>')
        parts.append(f'<rect x="0" y="{_num(y - _ROW / 2)}" width="{width}" height="{_ROW}" class="hit"/>')
        parts.append(f'<text x="4" y="{_num(y + 4)}" class="label">{esc(_clip(row.label, 30))}</text>')
        if row.low is not None and row.high is not None:
            parts.append(
                f'<line x1="{_num(sx(row.low))}" y1="{_num(y)}" x2="{_num(sx(row.high))}" y2="{_num(y)}" '
                f'stroke="{colour}" stroke-width="2"/>'
            )
            for end in (row.low, row.high):
                parts.append(
                    f'<line x1="{_num(sx(end))}" y1="{_num(y - 5)}" x2="{_num(sx(end))}" y2="{_num(y + 5)}" '
                    f'stroke="{colour}" stroke-width="2"/>'
                )
        if row.value is not None:
            parts.append(f'<circle cx="{_num(sx(row.value))}" cy="{_num(y)}" r="4.5" fill="{colour}"/>')
        note = row.note + (f" — {row.emphasis}" if row.emphasis else "")
        parts.append(f'<text x="{label_width + plot_width}" y="{_num(y + 4)}" class="note">{esc(_clip(note, 54))}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class StackedBar:
    """One bar of counts by category (e.g. an agent's episodes by terminal state)."""

    label: str
    counts: dict[str, int] = field(default_factory=dict)


def stacked_bars(bars: Sequence[StackedBar], *, title: str, colours: dict[str, str] | None = None) -> str:
    """Horizontal 100% stacked bars, the counts and shares in each segment's hover text."""
    colours = colours or STATUS_COLOURS
    categories = [c for c in colours if any(b.counts.get(c) for b in bars)]
    categories += sorted({c for b in bars for c in b.counts if c not in colours and b.counts[c]})
    label_width, plot_width = 220, 480
    top = 46
    height = top + 26 * max(len(bars), 1) + 8
    parts = [_svg_open(label_width + plot_width + 120, height, title, "stacked")]
    parts.append(f'<text x="4" y="16" class="chart-title">{esc(title)}</text>')
    for i, cat in enumerate(categories):
        lx = 4 + i * 110
        parts.append(
            f'<rect x="{lx}" y="24" width="10" height="10" fill="{colours.get(cat, PALETTE[i % len(PALETTE)])}"/>'
            f'<text x="{lx + 14}" y="33" class="legend">{esc(cat)}</text>'
        )
    for i, bar in enumerate(bars):
        y = top + 26 * i
        total = sum(bar.counts.values())
        parts.append(f'<text x="4" y="{y + 15}" class="label">{esc(_clip(bar.label, 32))}</text>')
        x = float(label_width)
        for j, cat in enumerate(categories):
            count = bar.counts.get(cat, 0)
            if not count:
                continue
            w = plot_width * count / total
            share = count / total
            colour = colours.get(cat, PALETTE[j % len(PALETTE)])
            parts.append(
                f'<rect x="{_num(x)}" y="{y}" width="{_num(w)}" height="20" fill="{colour}">'
                f"<title>{esc(f'{bar.label}: {cat} {count} of {total} episodes ({share:.1%})')}</title></rect>"
            )
            x += w
        parts.append(f'<text x="{label_width + plot_width + 6}" y="{y + 15}" class="note">n = {total}</text>')
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class SlopePoint:
    """One group in a rank slopegraph: its value and rank under each rule, and a flag."""

    label: str
    left_value: float | None
    right_value: float | None
    left_rank: int
    right_rank: int
    left_text: str = ""  # e.g. the rank interval "[1, 2]"
    right_text: str = ""
    flag: str = ""  # "" or e.g. "rank 2→1, inside the noise"


def slopegraph(points: Sequence[SlopePoint], *, title: str, left: str, right: str) -> str:
    """Each group's rank (and value) under the `left` rule and the `right` rule, joined by a
    line; a flagged line is dashed when the flag says "inside the noise", bold otherwise."""
    n = max([1, len(points), *(max(p.left_rank, p.right_rank) for p in points)])
    width, height = 820, 56 + 26 * n
    xa, xb = 280, 500
    y0 = 50

    def sy(rank: int) -> float:
        return y0 + (rank - 1) * 26

    parts = [_svg_open(width, height, title, "slope")]
    parts.append(f'<text x="4" y="16" class="chart-title">{esc(title)}</text>')
    parts.append(f'<text x="{xa}" y="34" class="axis" text-anchor="middle">{esc(_clip(left, 34))}</text>')
    parts.append(f'<text x="{xb}" y="34" class="axis" text-anchor="middle">{esc(_clip(right, 34))}</text>')
    for i, p in enumerate(points):
        colour = PALETTE[i % len(PALETTE)]
        hover = (f"{p.label}: rank {p.left_rank} {p.left_text} ({_fmt(p.left_value)}) under {left}, rank "
                 f"{p.right_rank} {p.right_text} ({_fmt(p.right_value)}) under {right}"
                 + (f" — {p.flag}" if p.flag else ""))
        parts.append(f'<g class="row"><title>{esc(hover)}</title>')
        dash = ' stroke-dasharray="5 4"' if "inside the noise" in p.flag else ""
        weight = 3 if p.flag and not dash else 1.5
        ya, yb = sy(p.left_rank), sy(p.right_rank)
        parts.append(
            f'<line x1="{xa}" y1="{_num(ya)}" x2="{xb}" y2="{_num(yb)}" stroke="{colour}" '
            f'stroke-width="{weight}"{dash}/>'
        )
        parts.append(f'<circle cx="{xa}" cy="{_num(ya)}" r="4" fill="{colour}"/>')
        parts.append(
            f'<text x="{xa - 8}" y="{_num(ya + 4)}" class="label" text-anchor="end">'
            f"{esc(_clip(p.label, 24))} · #{p.left_rank}{esc(p.left_text)} {esc(_fmt(p.left_value))}</text>"
        )
        parts.append(f'<circle cx="{xb}" cy="{_num(yb)}" r="4" fill="{colour}"/>')
        text = f"#{p.right_rank}{p.right_text} {_fmt(p.right_value)} {_clip(p.label, 24)}" + (f" ({p.flag})" if p.flag else "")
        parts.append(f'<text x="{xb + 8}" y="{_num(yb + 4)}" class="label">{esc(text)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Curve:
    """A named series of (x, y) points, e.g. pass@k for k = 1..K."""

    name: str
    points: tuple[tuple[float, float | None], ...]


def curves(series: Sequence[Curve], *, title: str, x_label: str, y_label: str) -> str:
    """Lines with markers over a shared integer x axis (attempt curves)."""
    xs = sorted({x for c in series for x, _ in c.points})
    ys = [y for c in series for _, y in c.points if y is not None]
    lo, hi = _domain(ys, unit_interval=True)
    width, height = 560, 300
    left, right, top, bottom = 60, 150, 36, 40
    xmin, xmax = (xs[0], xs[-1]) if xs else (0, 1)
    if xmin == xmax:
        xmin, xmax = xmin - 1, xmax + 1

    def sx(x: float) -> float:
        return left + (x - xmin) / (xmax - xmin) * (width - left - right)

    def sy(y: float) -> float:
        return height - bottom - (y - lo) / (hi - lo) * (height - top - bottom)

    parts = [_svg_open(width, height, title, "curves")]
    parts.append(f'<text x="4" y="16" class="chart-title">{esc(title)}</text>')
    for t in _ticks(lo, hi):
        parts.append(
            f'<line x1="{left}" y1="{_num(sy(t))}" x2="{width - right}" y2="{_num(sy(t))}" class="grid"/>'
            f'<text x="{left - 6}" y="{_num(sy(t) + 4)}" class="tick" text-anchor="end">{esc(_num(t))}</text>'
        )
    for x in xs:
        parts.append(
            f'<text x="{_num(sx(x))}" y="{height - bottom + 16}" class="tick" text-anchor="middle">{esc(_num(x))}</text>'
        )
    parts.append(f'<text x="{_num((left + width - right) / 2)}" y="{height - 6}" class="axis" text-anchor="middle">{esc(x_label)}</text>')
    parts.append(f'<text x="4" y="{top - 6}" class="axis">{esc(y_label)}</text>')
    for i, curve in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        pts = [(x, y) for x, y in curve.points if y is not None]
        if len(pts) > 1:
            d = " ".join(f"{_num(sx(x))},{_num(sy(y))}" for x, y in pts)
            parts.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in pts:
            parts.append(
                f'<circle cx="{_num(sx(x))}" cy="{_num(sy(y))}" r="3.5" fill="{colour}">'
                f"<title>{esc(f'{curve.name}: {x_label} {_num(x)} → {_fmt(y)}')}</title></circle>"
            )
        if pts:
            x, y = pts[-1]
            parts.append(
                f'<text x="{_num(sx(x) + 8)}" y="{_num(sy(y) + 4)}" class="label">{esc(_clip(curve.name, 20))}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)
