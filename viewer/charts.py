"""Chart geometry for the viewer's inline SVG: numbers only; the templates draw (and escape the labels).

Charts are drawn on the server, so they show without JavaScript and need no script or style from a page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    value: str
    css: str = ""
    href: str | None = None


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: list[Bar]
    axis: float = 0.0
    """The x (horizontal bars) or y (columns) of the zero line."""
    ticks: list[tuple[float, str]] = field(default_factory=list)
    """Labels along the axis at these x positions (a histogram's bin edges)."""


def bin_range(i: int, bins: int) -> str:
    """Bin ``i`` of ``bins`` equal bins of [0, 1] as an interval: half-open, but the last is closed (a
    score of 1.0 is in it)."""
    return f"[{i / bins:.1f}, {(i + 1) / bins:.1f}{']' if i == bins - 1 else ')'}"


def histogram(counts: list[int], *, width: int = 420, height: int = 160) -> Chart:
    """Columns for score bins of equal width over [0, 1], each labelled with its interval (``[0.9, 1.0]``:
    the last bin holds 1.0), the axis ticked at the bin edges."""
    bins = len(counts) or 1
    top = max(counts, default=0) or 1
    margin = 12  # room for the first and last edge labels
    plot = height - 30
    slot = (width - 2 * margin) / bins
    bars = []
    for i, n in enumerate(counts):
        h = plot * n / top
        bars.append(Bar(margin + i * slot + 2, 10 + plot - h, slot - 4, h, bin_range(i, bins), str(n)))
    ticks = [(margin + i * slot, f"{i / bins:.1f}") for i in range(bins + 1)]
    return Chart(width, height, bars, axis=10 + plot, ticks=ticks)


def deltas(
    rows: Sequence[tuple[str, float, str | None, str | None]], *, width: int = 720, row_height: int = 18
) -> Chart:
    """Horizontal bars, one per (label, delta B-A, flip, link), diverging from a zero line in the middle;
    regressions (negative) left, improvements right."""
    label_width = 260
    plot = width - label_width - 60
    zero = label_width + plot / 2
    scale = max((abs(d) for _, d, _, _ in rows), default=0.0) or 1.0
    bars = []
    for i, (label, delta, flip, href) in enumerate(rows):
        w = (plot / 2) * abs(delta) / scale
        x = zero if delta >= 0 else zero - w
        css = "up" if delta > 0 else "down" if delta < 0 else "same"
        if flip:
            css += " flip"
        short = label if len(label) <= 38 else label[:37] + "…"
        bars.append(Bar(x, i * row_height + 4, max(w, 1.0), row_height - 6, short, f"{delta:+.3f}", css, href))
    return Chart(width, max(len(rows), 1) * row_height + 8, bars, axis=zero)
