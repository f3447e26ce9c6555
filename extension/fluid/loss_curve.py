"""The loss curve of `fluid.train`: losses summarised per column as they arrive, and drawn
from the summary, so that a redraw costs the same after a million steps as after ten.

`CurveData` keeps between `columns` and twice as many buckets of consecutive steps, each
with the smallest and largest finite loss in it and the smoothed loss at its end; when the
buckets fill, neighbours merge and each bucket covers twice the steps. Adding a loss is
O(1) (amortised), drawing O(columns). The raw losses are drawn as their min/max envelope
per bucket, which keeps every spike visible however many steps share a column.
"""
from __future__ import annotations

import html
import math
from collections.abc import Iterable

import numpy as np

__all__ = ["CurveData", "loss_curve_svg", "smooth", "DEFAULT_SMOOTHING", "COLUMNS"]

#: How much a loss curve is smoothed by default (an exponential moving average with this
#: weight on the past, debiased at the start, as TensorBoard draws it; 0: raw losses only).
DEFAULT_SMOOTHING = 0.6

#: Buckets kept at least (at most twice as many): about one per pixel of the plot.
COLUMNS = 420

_PAD_L, _PAD_R, _PAD_T, _PAD_B = 52, 10, 16, 20


def smooth(values: Iterable[float], weight: float) -> np.ndarray:
    """An exponential moving average with ``weight`` on the past, debiased so the first
    points are not pulled towards 0 (TensorBoard's smoothing). NaNs are carried over."""
    values = list(values)
    if weight <= 0:
        return np.asarray(values, dtype=np.float64)
    if not 0 <= weight < 1:
        raise ValueError(f"smoothing must be in [0, 1), got {weight!r}")
    average = _Average(weight)
    return np.array([average.add(v) if math.isfinite(v) else v for v in values],
                    dtype=np.float64)


class _Average:
    """The debiased moving average of `smooth`, one value at a time."""

    def __init__(self, weight: float):
        self.weight, self.last, self.n = weight, 0.0, 0

    def add(self, value: float) -> float:
        self.n += 1
        self.last = self.last * self.weight + (1 - self.weight) * value
        return self.last / (1 - self.weight ** self.n)


class CurveData:
    """The losses of a run, summarised for drawing (see the module's docstring)."""

    def __init__(self, smoothing: float = DEFAULT_SMOOTHING, columns: int = COLUMNS):
        if not 0 <= smoothing < 1:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing!r}")
        self.smoothing, self.columns = smoothing, columns
        self.count = 0                 # losses added
        self.per = 1                   # steps per bucket (a power of two)
        # per bucket: [smallest finite loss, largest, smoothed loss at its end] (NaN: none)
        self.buckets: list[list[float]] = []
        self.finite = 0
        self.low, self.high = math.inf, -math.inf
        self.last_finite: float | None = None
        self.last_smoothed: float | None = None
        self._average = _Average(smoothing) if smoothing > 0 else None

    @classmethod
    def of(cls, losses: Iterable[float], smoothing: float = DEFAULT_SMOOTHING,
           columns: int = COLUMNS) -> CurveData:
        data = cls(smoothing, columns)
        for v in losses:
            data.add(v)
        return data

    def add(self, value: float) -> None:
        if self.count % self.per == 0:
            self.buckets.append([math.nan, math.nan, math.nan])
        self.count += 1
        if not math.isfinite(value):
            return
        bucket = self.buckets[-1]
        # (a bucket's NaN means "no value yet": every comparison with it is False)
        if not value >= bucket[0]:
            bucket[0] = value
        if not value <= bucket[1]:
            bucket[1] = value
        if self._average is not None:
            self.last_smoothed = bucket[2] = self._average.add(value)
        self.finite += 1
        self.low, self.high = min(self.low, value), max(self.high, value)
        self.last_finite = value
        if len(self.buckets) > 2 * self.columns and self.count % self.per == 0:
            self._merge()

    def _merge(self) -> None:
        """Pairs of buckets become one: each covers twice the steps."""
        merged = []
        for a, b in zip(self.buckets[0::2], self.buckets[1::2]):
            merged.append([float(np.fmin(a[0], b[0])), float(np.fmax(a[1], b[1])),
                           a[2] if math.isnan(b[2]) else b[2]])
        if len(self.buckets) % 2:
            merged.append(self.buckets[-1])
        self.buckets, self.per = merged, self.per * 2

    def points(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(step at each bucket's middle, its min, its max, smoothed at its end)."""
        b = np.array(self.buckets, dtype=np.float64).reshape(-1, 3)
        starts = np.arange(len(b)) * self.per
        ends = np.minimum(starts + self.per, self.count)
        return (starts + 1 + ends) / 2, b[:, 0], b[:, 1], b[:, 2]


def _polyline(px: np.ndarray, py: np.ndarray, colour: str, width: float,
              opacity: float) -> str:
    points = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px, py))
    return (f'<polyline fill="none" stroke="{colour}" stroke-width="{width}" '
            f'stroke-opacity="{opacity}" points="{points}"/>')


def _lines(data: CurveData, log: bool, w: float, h: float) -> tuple[list[str], float, float]:
    """The polylines (raw envelope, then the smoothed line) and the y range drawn."""
    xs, lows, highs, smoothed = data.points()
    keep = np.isfinite(lows)
    xs, lows, highs, smoothed = xs[keep], lows[keep], highs[keep], smoothed[keep]
    scale = np.log10 if log else (lambda v: v)
    lo, hi = float(scale(data.low)), float(scale(data.high))
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    n = max(data.count, 2)
    px = _PAD_L + (xs - 1) / (n - 1) * w

    def py(values: np.ndarray) -> np.ndarray:
        return _PAD_T + (hi - scale(values)) / (hi - lo) * h
    # the envelope: down to each bucket's min and up to its max, column after column
    env_x = np.repeat(px, 2)
    env_y = np.column_stack([py(lows), py(highs)]).reshape(-1)
    with_average = data.smoothing > 0 and data.finite > 2
    lines = [_polyline(env_x, env_y, "#d6604d", 1.0 if with_average else 1.5,
                       0.3 if with_average else 1.0)]
    if with_average:
        lines.append(_polyline(px, py(smoothed), "#b2182b", 1.8, 1.0))
    return lines, lo, hi


def loss_curve_svg(loss: Iterable[float] | CurveData, width: int = 480, height: int = 160,
                   smoothing: float = DEFAULT_SMOOTHING) -> str:
    """An inline SVG of the losses (a list, or a `CurveData` kept up to date) against the
    steps run; a log scale when the losses are positive and span more than two decades.
    With ``smoothing`` (in [0, 1)) the raw losses are drawn faint and their moving
    average over them, so a noisy loss reads as a line instead of a band."""
    data = loss if isinstance(loss, CurveData) else CurveData.of(loss, smoothing)
    w, h = width - _PAD_L - _PAD_R, height - _PAD_T - _PAD_B
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'class="fluid-loss-curve" style="font:10px sans-serif">',
             f'<rect x="{_PAD_L}" y="{_PAD_T}" width="{w}" height="{h}" fill="#fcfcfc" '
             f'stroke="#ccc"/>']
    if data.finite:
        log = data.low > 0 and data.high / data.low > 100
        lines, lo, hi = _lines(data, log, w, h)
        parts += lines
        top, bottom = (10 ** hi, 10 ** lo) if log else (hi, lo)
        parts.append(f'<text x="{_PAD_L - 4}" y="{_PAD_T + 8}" text-anchor="end">'
                     f'{top:.3g}</text>')
        parts.append(f'<text x="{_PAD_L - 4}" y="{_PAD_T + h}" text-anchor="end">'
                     f'{bottom:.3g}</text>')
        if log:
            parts.append(f'<text x="{_PAD_L - 4}" y="{_PAD_T + h / 2 + 4}" '
                         f'text-anchor="end" fill="#888">log</text>')
        label = f"loss {data.last_finite:.5g} at step {data.count}" + (
            f" (smoothed {data.last_smoothed:.5g})" if len(lines) > 1 else "")
    else:
        label = "loss: no values yet" if not data.count else \
            f"loss: no finite value in {data.count} steps"
    parts.append(f'<text x="{_PAD_L}" y="{_PAD_T - 4}">{html.escape(label)}</text>')
    parts.append(f'<text x="{_PAD_L}" y="{height - 6}">0</text>')
    parts.append(f'<text x="{width - _PAD_R}" y="{height - 6}" text-anchor="end">'
                 f'{data.count} steps</text>')
    parts.append("</svg>")
    return "".join(parts)
