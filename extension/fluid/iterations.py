"""Values a loop kept once per iteration, as ``%fluid inspect`` shows them.

Watching a var of a loop's body (a ``While``, a ``StaticRNN`` step, a branch inside a
loop) keeps its value of every iteration, stacked along a new first dim: ``[T, batch,
...]`` for T iterations (nested loops: every inner iteration, in order; a gradient in the
order of the forward iterations). Here such a stack is read as what it is: statistics per
iteration (mean, spread, extremes, norm), a line chart of them across the iterations, a
strip of small histograms of a few iterations on one shared scale, and a table of every
iteration. Pure NumPy and HTML; nothing here imports IPython.
"""
from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .var_stats import histogram_svg

__all__ = ["IterationStats", "iteration_stats", "sample", "chart_svg", "strip_html",
           "table_html", "shape_text"]

_MUTED = "#767676"


def shape_text(values: np.ndarray) -> str:
    """``20 × [64, 24]``: the iterations, then the shape of one iteration's value
    (``0 iterations`` for a loop that did not run, whose stack has no shape to give)."""
    if values.shape[0] == 0 and values.ndim == 1:
        return "0 iterations"
    return f"{values.shape[0]} × {list(values.shape[1:])}"


@dataclass
class IterationStats:
    """Statistics of each iteration's value (arrays of length T, the iteration count)."""
    mean: np.ndarray
    std: np.ndarray
    min: np.ndarray
    max: np.ndarray
    norm: np.ndarray      # the L2 norm of the whole value of one iteration

    @property
    def count(self) -> int:
        return int(self.mean.shape[0])


def iteration_stats(values: np.ndarray) -> IterationStats:
    """Per-iteration statistics of a stack ``[T, ...]`` (an empty iteration gives NaN)."""
    flat = np.asarray(values, dtype=np.float64)
    flat = flat.reshape(flat.shape[0], int(np.prod(flat.shape[1:])))
    if flat.shape[1] == 0:
        nan = np.full(flat.shape[0], np.nan)
        return IterationStats(nan, nan, nan, nan, np.zeros(flat.shape[0]))
    return IterationStats(flat.mean(axis=1), flat.std(axis=1), flat.min(axis=1),
                          flat.max(axis=1), np.linalg.norm(flat, axis=1))


def sample(count: int, k: int = 8) -> list[int]:
    """At most ``k`` iterations of ``count``, evenly spread, the first and the last in."""
    if count <= k:
        return list(range(count))
    return sorted({round(j * (count - 1) / (k - 1)) for j in range(k)})


def _points(values: np.ndarray, x_of: Callable[[int], float],
            y_of: Callable[[float], float]) -> str:
    return " ".join(f"{x_of(t):.1f},{y_of(v):.1f}" for t, v in enumerate(values)
                    if np.isfinite(v))


def chart_svg(series: list[tuple[str, np.ndarray, str]], width: int = 260,
              height: int = 90, band: tuple[np.ndarray, np.ndarray] | None = None) -> str:
    """A line per ``(label, values per iteration, colour)`` across the iterations, on one
    scale; ``band`` (low, high) shades a range around the first line (mean ± std)."""
    pad_l, pad_r, pad_t, pad_b = 44, 6, 4, 16
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    data = [v for _, v, _ in series] + (list(band) if band is not None else [])
    finite = np.concatenate([v[np.isfinite(v)] for v in data]) if data else np.array([])
    count = max((len(v) for _, v, _ in series), default=0)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'class="fluid-iteration-chart" style="font:10px sans-serif">',
             f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="#fafafa" '
             f'stroke="#ddd"/>']
    if not finite.size:
        parts.append(f'<text x="{pad_l + w / 2}" y="{pad_t + h / 2}" text-anchor="middle" '
                     f'fill="#888">no iterations</text></svg>')
        return "".join(parts)
    lo, hi = float(finite.min()), float(finite.max())
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5

    def x_of(t: int) -> float:
        return pad_l + (w * t / (count - 1) if count > 1 else w / 2)

    def y_of(v: float) -> float:
        return pad_t + h * (hi - v) / (hi - lo)

    if band is not None:
        low, high = band
        ring = [(x_of(t), y_of(v)) for t, v in enumerate(high)] + \
            [(x_of(t), y_of(v)) for t, v in reversed(list(enumerate(low)))]
        parts.append('<polygon class="band" fill="#4a7fb5" fill-opacity="0.18" points="'
                     + " ".join(f"{x:.1f},{y:.1f}" for x, y in ring) + '"/>')
    for label, values, colour in series:
        parts.append(f'<polyline class="line" fill="none" stroke="{colour}" '
                     f'stroke-width="1.5" points="{_points(values, x_of, y_of)}">'
                     f"<title>{html.escape(label)}</title></polyline>")
    parts += [f'<text x="{pad_l - 3}" y="{pad_t + 8}" text-anchor="end">{hi:.3g}</text>',
              f'<text x="{pad_l - 3}" y="{pad_t + h}" text-anchor="end">{lo:.3g}</text>',
              f'<text x="{pad_l}" y="{height - 3}">0</text>',
              f'<text x="{pad_l + w}" y="{height - 3}" text-anchor="end">{count - 1}</text>',
              f'<text x="{pad_l + w / 2}" y="{height - 3}" text-anchor="middle" '
              f'fill="{_MUTED}">iteration</text></svg>']
    return "".join(parts)


def strip_html(values: np.ndarray, k: int = 8) -> str:
    """Small multiples: a histogram of each of ``k`` iterations spread over the run, on
    one shared value range, so they compare at a glance."""
    flat = np.asarray(values, dtype=np.float64)
    finite = flat[np.isfinite(flat)]
    shared = (float(finite.min()), float(finite.max())) if finite.size else None
    cells = "".join(
        '<figure style="margin:0;text-align:center" class="fluid-iteration">'
        + histogram_svg(flat[t], bins=12, width=96, height=46, value_range=shared,
                        labels=False)
        + f'<figcaption style="font:10px sans-serif;color:{_MUTED}">iteration {t}'
          f"</figcaption></figure>"
        for t in sample(flat.shape[0], k))
    return (f'<div class="fluid-iteration-strip" style="display:flex;flex-wrap:wrap;'
            f'gap:2px 4px;max-width:420px">{cells}</div>')


def table_html(stats: IterationStats, grad: IterationStats | None = None) -> str:
    """Every iteration's statistics in an expandable table."""
    head = "".join(f"<th>{h}</th>" for h in ("iteration", "mean", "std", "min", "max",
                                            "norm") + (("gradient norm",) if grad else ()))
    rows = []
    for t in range(stats.count):
        cells = [str(t)] + [f"{a[t]:.4g}" for a in (stats.mean, stats.std, stats.min,
                                                     stats.max, stats.norm)]
        if grad is not None and t < grad.count:
            cells.append(f"{grad.norm[t]:.4g}")
        rows.append("<tr>" + "".join(f'<td style="text-align:right">{c}</td>'
                                     for c in cells) + "</tr>")
    return (f'<details class="fluid-iteration-table"><summary>every iteration '
            f"({stats.count})</summary><table class=\"fluid-table\"><thead><tr>{head}"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table></details>")
