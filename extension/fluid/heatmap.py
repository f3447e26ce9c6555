"""`fluid.heatmap`: a 2-D array as an SVG heatmap with axes and a colour scale, no plotting
library needed (the notebooks draw hidden states over time with it).

Values map to a diverging scale centred on 0: blue for negative, white for 0, red for
positive, full colour at ``limit`` (default: the largest magnitude, so small values are
not drawn pale). Rows run down the y axis, columns along the x axis, each axis with ticks
and a title; the colour bar on the right says what the colours mean. Columns can be
outlined (``marked``), e.g. the steps of a sequence that matter.

    fluid.heatmap(hidden.T, x_label="step", y_label="hidden unit", marked=[3, 14])
"""
from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np

__all__ = ["Heatmap", "heatmap"]

_NEGATIVE, _ZERO, _POSITIVE = (33, 102, 172), (247, 247, 247), (178, 24, 43)
_FONT = 'font-family="sans-serif" font-size="12"'
_LEFT, _TOP, _BOTTOM, _BAR = 58, 28, 44, 70    # margins: y axis, title, x axis, colour bar


def _colour(v: float) -> str:
    """The scale's colour of ``v`` in [-1, 1]."""
    far = _POSITIVE if v > 0 else _NEGATIVE
    t = min(abs(v), 1.0)
    r, g, b = (round(z + (f - z) * t) for z, f in zip(_ZERO, far))
    return f"#{r:02x}{g:02x}{b:02x}"


def _ticks(n: int, most: int = 10) -> list[int]:
    """Tick positions 0, k, 2k, ... below ``n`` with k in 1, 2, 5, 10, 20, ... so that at
    most ``most`` ticks are drawn."""
    scale = 1
    while True:
        for step in (scale, 2 * scale, 5 * scale):
            if math.ceil(n / step) <= most:
                return list(range(0, n, step))
        scale *= 10


def _number(x: float) -> str:
    return f"{x:.3g}"


class Heatmap:
    """An SVG heatmap; Jupyter shows it (``_repr_svg_``), ``.svg`` is the text, ``.save(path)``
    writes it."""

    def __init__(self, svg: str, limit: float):
        self.svg, self.limit = svg, limit

    def _repr_svg_(self) -> str:
        return self.svg

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.svg)

    def __repr__(self) -> str:
        return f"<fluid.Heatmap, colour scale ±{_number(self.limit)}>"


def heatmap(values: np.ndarray, *, x_label: str = "column", y_label: str = "row",
            title: str = "", marked: Sequence[int] = (), limit: float | None = None
            ) -> Heatmap:
    """``values`` (2-D: rows down, columns across) as a `Heatmap`, coloured on a scale
    from ``-limit`` (blue) through 0 (white) to ``limit`` (red); ``limit`` defaults to the
    largest magnitude. ``marked``: columns to outline."""
    a = np.asarray(values, dtype=np.float64)
    if a.ndim != 2 or 0 in a.shape:
        raise ValueError(f"heatmap: values must be a non-empty 2-D array, got shape "
                         f"{list(a.shape)}")
    finite = a[np.isfinite(a)]
    if limit is None:
        limit = float(np.abs(finite).max()) if finite.size else 1.0
    limit = limit if limit > 0 else 1.0
    rows, cols = a.shape
    cw = min(28.0, max(6.0, 600.0 / cols))
    ch = min(20.0, max(4.0, 360.0 / rows))
    parts = _cells(a, limit, cw, ch) + _marks(marked, cols, rows, cw, ch)
    parts += _axes(rows, cols, cw, ch, x_label, y_label)
    parts += _colour_bar(limit, cols * cw, rows * ch)
    width, height = _LEFT + cols * cw + _BAR, _TOP + rows * ch + _BOTTOM
    if title:
        parts.append(f'<text x="{_LEFT}" y="16" {_FONT} font-weight="bold">'
                     f"{html.escape(title)}</text>")
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" class="fluid-heatmap" '
           f'width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}">' + "".join(parts) + "</svg>")
    return Heatmap(svg, limit)


def _cells(a: np.ndarray, limit: float, cw: float, ch: float) -> list[str]:
    out = []
    for i, row in enumerate(a):
        for j, v in enumerate(row):
            fill = _colour(v / limit) if math.isfinite(v) else "#999999"
            out.append(f'<rect class="cell" x="{_LEFT + j * cw:.1f}" y="{_TOP + i * ch:.1f}" '
                       f'width="{cw:.1f}" height="{ch:.1f}" fill="{fill}">'
                       f"<title>[{i}, {j}] = {_number(v)}</title></rect>")
    return out


def _marks(marked: Sequence[int], cols: int, rows: int, cw: float, ch: float) -> list[str]:
    return [f'<rect class="mark" x="{_LEFT + j * cw:.1f}" y="{_TOP}" width="{cw:.1f}" '
            f'height="{rows * ch:.1f}" fill="none" stroke="black" stroke-width="2"/>'
            for j in marked if 0 <= j < cols]


def _axes(rows: int, cols: int, cw: float, ch: float, x_label: str, y_label: str
          ) -> list[str]:
    """Tick marks and numbers along both axes, and the axes' titles."""
    bottom = _TOP + rows * ch
    out = [f'<rect x="{_LEFT}" y="{_TOP}" width="{cols * cw:.1f}" height="{rows * ch:.1f}" '
           f'fill="none" stroke="#555"/>']
    for j in _ticks(cols):
        x = _LEFT + (j + 0.5) * cw
        out.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" '
                   f'stroke="#555"/><text class="tick" x="{x:.1f}" y="{bottom + 16}" '
                   f'text-anchor="middle" {_FONT}>{j}</text>')
    for i in _ticks(rows):
        y = _TOP + (i + 0.5) * ch
        out.append(f'<line x1="{_LEFT - 4}" y1="{y:.1f}" x2="{_LEFT}" y2="{y:.1f}" '
                   f'stroke="#555"/><text class="tick" x="{_LEFT - 7}" y="{y + 4:.1f}" '
                   f'text-anchor="end" {_FONT}>{i}</text>')
    mid_x, mid_y = _LEFT + cols * cw / 2, _TOP + rows * ch / 2
    out.append(f'<text class="axis" x="{mid_x:.1f}" y="{bottom + 36}" text-anchor="middle" '
               f"{_FONT}>{html.escape(x_label)}</text>")
    out.append(f'<text class="axis" x="14" y="{mid_y:.1f}" text-anchor="middle" {_FONT} '
               f'transform="rotate(-90 14 {mid_y:.1f})">{html.escape(y_label)}</text>')
    return out


def _colour_bar(limit: float, plot_width: float, plot_height: float) -> list[str]:
    """A vertical bar from +limit (top) to -limit (bottom) with three labelled ticks."""
    x, steps = _LEFT + plot_width + 14, 40
    h = plot_height / steps
    out = [f'<rect class="scale" x="{x:.1f}" y="{_TOP + k * h:.2f}" width="12" '
           f'height="{h + 0.5:.2f}" fill="{_colour(1 - 2 * (k + 0.5) / steps)}"/>'
           for k in range(steps)]
    out.append(f'<rect x="{x:.1f}" y="{_TOP}" width="12" height="{plot_height:.1f}" '
               f'fill="none" stroke="#555"/>')
    for frac, value in ((0.0, limit), (0.5, 0.0), (1.0, -limit)):
        y = _TOP + frac * plot_height
        out.append(f'<text class="scale-label" x="{x + 16:.1f}" y="{y + 4:.1f}" {_FONT}>'
                   f"{_number(value)}</text>")
    return out
