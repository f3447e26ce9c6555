"""What a live program holds: per-variable statistics, tables of programs and of a scope,
and small SVG histograms. Pure NumPy; used by ``%fluid``, the explorer widget and tests."""
from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fluid_interactive.backend import to_host
from fluid_interactive.ir.text import short_shape
from fluid_interactive.runtime.live.compiled import CompiledProgram
from fluid_interactive.runtime.summary import format_bytes

from .display import Table

__all__ = ["VarStats", "var_stats", "vars_table", "programs_table", "histogram_svg",
           "format_bytes", "program_bytes"]


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}"


@dataclass
class VarStats:
    """Statistics of one persistable var's current value."""
    name: str
    kind: str            # 'param', 'state' or the var kind ('reader', ...)
    shape: tuple
    dtype: str
    nbytes: int
    device: str
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    std: float | None = None
    nonfinite: int = 0
    values: np.ndarray | None = None   # a host copy, for the histogram

    def row(self) -> list[str]:
        return [self.name, short_shape(self.shape) if self.shape else "[]", self.dtype,
                format_bytes(self.nbytes), self.device, _fmt(self.min), _fmt(self.max),
                _fmt(self.mean)]


def _host_array(value: Any) -> np.ndarray | None:
    if not hasattr(value, "shape") or not hasattr(value, "dtype"):
        return None
    return np.asarray(to_host(value))


def var_stats(compiled: CompiledProgram, name: str, keep_values: bool = False) -> VarStats:
    """Statistics of the persistable var ``name`` of ``compiled`` (min/max/mean over the
    finite values; a reader or other non-array state has only its kind)."""
    var = compiled.program.global_block().vars.get(name)
    if var is None or not var.persistable:
        raise KeyError(f"{name!r} is not a persistable var of this program; it holds: "
                       f"{', '.join(compiled.var_names())}")
    kind = "param" if var.is_parameter else ("state" if var.kind == "tensor" else var.kind)
    arr = _host_array(compiled.scope.get(name))
    if arr is None:
        return VarStats(name, kind, tuple(var.shape), var.dtype, 0, compiled.device)
    stats = VarStats(name, kind, tuple(arr.shape), str(arr.dtype), int(arr.nbytes),
                     compiled.device)
    if arr.size and arr.dtype.kind in "fiub":
        data = arr.astype(np.float64, copy=False).ravel()
        finite = np.isfinite(data)
        stats.nonfinite = int(data.size - finite.sum())
        good = data[finite]
        if good.size:
            stats.min, stats.max = float(good.min()), float(good.max())
            stats.mean, stats.std = float(good.mean()), float(good.std())
        if keep_values:
            stats.values = good
    return stats


def program_bytes(compiled: CompiledProgram) -> int:
    return sum(int(getattr(v, "nbytes", 0)) for v in compiled.scope.snapshot().values())


def parameter_count(compiled: CompiledProgram) -> int:
    block0 = compiled.program.global_block()
    return sum(int(getattr(compiled.scope.get(v.name), "size", 0))
               for v in block0.vars.values() if v.is_parameter)


def vars_table(compiled: CompiledProgram, title: str = "") -> Table:
    """One row per persistable var: name, shape, dtype, bytes, device, min/max/mean."""
    rows = [var_stats(compiled, name).row() for name in compiled.var_names()]
    return Table(["name", "shape", "dtype", "bytes", "device", "min", "max", "mean"], rows,
                 title=title, align="lllrlrrr")


def programs_table(programs: Iterable[tuple[str, CompiledProgram, str]]) -> Table:
    """One row per live program: ``(names in the namespace, program, class name)``."""
    rows = []
    for names, compiled, cls_name in programs:
        rows.append([names or "(unnamed)", cls_name, ", ".join(compiled.methods) or "-",
                     str(len(compiled.program.blocks)), f"{parameter_count(compiled):,}",
                     format_bytes(program_bytes(compiled)), compiled.device])
    return Table(["name", "class", "methods", "blocks", "parameters", "bytes", "device"],
                 rows, align="lllrrrl")


def histogram_svg(values: np.ndarray, bins: int = 30, width: int = 360,
                  height: int = 120, value_range: tuple[float, float] | None = None,
                  labels: bool = True) -> str:
    """A bar chart of ``values`` as an inline SVG (an empty frame when there are none);
    ``value_range`` fixes the range of the bins (small multiples share one), ``labels``
    writes the range under the bars."""
    pad_l, pad_b, pad_t = 6, (18 if labels else 2), 4
    w, h = width - 2 * pad_l, height - pad_b - pad_t
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'class="fluid-histogram" style="font:10px sans-serif">',
             f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="#fafafa" '
             f'stroke="#ddd"/>']
    values = np.asarray(values, dtype=np.float64).ravel()
    values = values[np.isfinite(values)] if value_range is not None else values
    if values.size:
        lo, hi = value_range or (float(values.min()), float(values.max()))
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        counts, edges = np.histogram(values, bins=bins, range=(lo, hi))
        top = max(int(counts.max()), 1)
        bw = w / bins
        for i, c in enumerate(counts):
            if not c:
                continue
            bh = h * c / top
            parts.append(f'<rect class="bar" x="{pad_l + i * bw:.1f}" '
                         f'y="{pad_t + h - bh:.1f}" width="{max(bw - 1, 1):.1f}" '
                         f'height="{bh:.1f}" fill="#4a7fb5"><title>'
                         f"[{edges[i]:.4g}, {edges[i + 1]:.4g}): {int(c)}</title></rect>")
        if labels:
            parts.append(f'<text x="{pad_l}" y="{height - 4}">{html.escape(f"{lo:.4g}")}'
                         f"</text>")
            parts.append(f'<text x="{width - pad_l}" y="{height - 4}" text-anchor="end">'
                         f'{html.escape(f"{hi:.4g}")}</text>')
    else:
        parts.append(f'<text x="{width / 2}" y="{pad_t + h / 2}" text-anchor="middle" '
                     f'fill="#888">no values</text>')
    parts.append("</svg>")
    return "".join(parts)
