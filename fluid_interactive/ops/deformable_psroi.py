"""Deformable position-sensitive roi pooling: deformable_psroi_pooling (Dai et al.,
"Deformable Convolutional Networks", 2017), the op of Paddle 1.8's deformable_roi_pooling.

Input [N, C, H, W], ROIs [R, 4] (x1, y1, x2, y2 in the image's pixels; RoisLod: offsets
[N + 1] of each image's rois, as the other roi ops), Trans [R, 2 * classes, Ph, Pw] (the
learned offsets of ``part_size`` parts, x then y per class) -> Output [R, output_dim, ph,
pw] and TopCount (how many samples each bin averaged).

A roi's corners are rounded, the far one extended by a pixel, scaled, and shifted by half
a pixel (pixel centres); it is split into ph x pw bins. Output (c, i, j) averages
``sample_per_part`` x ``sample_per_part`` samples of input channel ``(c * gh + gi) * gw +
gj`` (gi, gj: the bin's cell of a ``group_size`` grid), spaced a bin / sample_per_part apart
from the bin's corner moved by ``trans_std * Trans[r, 2 k (+1), pi, pj] * roi size`` (k =
c's class, c // (output_dim / classes); (pi, pj): the bin's part). A sample farther than
half a pixel outside the image is skipped; the others are clamped into it and read
bilinearly. ``no_trans`` reads no offsets.

The kernel loops over the sample grid, each step a gather of the four corners of every
output at once. The gradients: the input's added at those corners (a ``bincount`` per
sample), the offsets' from the bilinear weights' derivatives (zero where a sample was
clamped, as Paddle's), summed into Trans's parts.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from math import prod
from typing import Any

from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as fmt
from .registry import register
from .roi import batch_of, ps_box
from .spec import InferContext, KernelContext, OpSpec, emit_default_grad, slots

_ATTRS = {"no_trans": False, "spatial_scale": 1.0, "output_dim": 1, "group_size": [1, 1],
          "pooled_height": 1, "pooled_width": 1, "part_size": [1, 1], "sample_per_part": 1,
          "trans_std": 0.1}


def _pairs(ctx: Any) -> tuple[list[int], list[int]]:
    group, part = [list(ctx.attrs[a]) for a in ("group_size", "part_size")]
    for what, v in (("group_size", group), ("part_size", part)):
        if len(v) != 2 or min(v) < 1:
            ctx.fail(f"deformable_psroi_pooling: {what} must be two positive ints, got {v}")
    return [int(v) for v in group], [int(v) for v in part]


def _infer(ctx: InferContext) -> None:
    x, rois, trans = ctx.input("Input"), ctx.input("ROIs"), ctx.input("Trans")
    if x.rank != 4 or x.dtype not in FLOAT_DTYPES or trans.rank != 4 or trans.dtype != x.dtype:
        ctx.fail(f"deformable_psroi_pooling: Input and Trans must be float [N, C, H, W] and "
                 f"[R, 2 * classes, part_h, part_w] of one dtype, got {x.dtype}{fmt(x.shape)}"
                 f" and {trans.dtype}{fmt(trans.shape)}")
    if rois.rank != 2 or rois.shape[1] != 4 or rois.dtype != x.dtype:
        ctx.fail(f"deformable_psroi_pooling: ROIs must be [R, 4] (x1, y1, x2, y2) of Input's "
                 f"dtype {x.dtype}, got {rois.dtype}{fmt(rois.shape)}")
    a = ctx.attrs
    (gh, gw), (part_h, part_w) = _pairs(ctx)
    od, ph, pw = int(a["output_dim"]), int(a["pooled_height"]), int(a["pooled_width"])
    if min(od, ph, pw, int(a["sample_per_part"])) < 1 or float(a["spatial_scale"]) <= 0 or \
            float(a["trans_std"]) < 0:
        ctx.fail(f"deformable_psroi_pooling: output_dim, pooled_height, pooled_width and "
                 f"sample_per_part must be positive, spatial_scale > 0 and trans_std >= 0; "
                 f"got {od}, {ph}, {pw}, {a['sample_per_part']}, {a['spatial_scale']}, "
                 f"{a['trans_std']}")
    if x.shape[1] >= 0 and x.shape[1] < od * gh * gw:
        ctx.fail(f"deformable_psroi_pooling: Input has {x.shape[1]} channels; output_dim "
                 f"{od} with group_size [{gh}, {gw}] reads {od * gh * gw}")
    _check_trans(ctx, trans.shape, rois.shape[0], od, (part_h, part_w))
    ctx.set_output("Output", (rois.shape[0], od, ph, pw), x.dtype)
    ctx.set_output("TopCount", (rois.shape[0], od, ph, pw), x.dtype)


def _check_trans(ctx: InferContext, shape: tuple, r: int, od: int, part: tuple) -> None:
    if any(0 <= t < p for t, p in zip(shape[2:], part)) or (
            shape[0] >= 0 and r >= 0 and shape[0] != r):
        ctx.fail(f"deformable_psroi_pooling: Trans {fmt(shape)} must be [R, 2 * classes, "
                 f"part_h, part_w] with R = {r} rois and parts of at least part_size "
                 f"{list(part)}")
    classes = shape[1] // 2
    if not ctx.attrs["no_trans"] and shape[1] >= 0 and (classes < 1 or od % classes):
        ctx.fail(f"deformable_psroi_pooling: Trans has {shape[1]} channels, an x and a y "
                 f"offset for {classes} classes; output_dim {od} must be a positive "
                 f"multiple of the classes")


class _Grid:
    """What a plan fixes: per output (c, i, j) its input channel, its class's Trans
    channels and its part."""

    def __init__(self, ctx: KernelContext):
        xp, a = ctx.xp, ctx.attrs
        self.xp = xp
        self.n, self.c, self.h, self.w = ctx.input("Input").shape
        self.trans_shape = ctx.input("Trans").shape
        (gh, gw), (part_h, part_w) = _pairs(ctx)
        od, self.ph, self.pw = int(a["output_dim"]), int(a["pooled_height"]), int(a["pooled_width"])
        self.samples, self.std = int(a["sample_per_part"]), float(a["trans_std"])
        self.scale, self.no_trans = float(a["spatial_scale"]), bool(a["no_trans"])
        i, j, k = xp.arange(self.ph), xp.arange(self.pw), xp.arange(od)
        gi = xp.clip(i * gh // self.ph, 0, gh - 1)[:, None]
        gj = xp.clip(j * gw // self.pw, 0, gw - 1)
        self.channel = (k[:, None, None] * gh + gi) * gw + gj              # od ph pw
        classes = 1 if self.no_trans else self.trans_shape[1] // 2
        per_class = max(od // classes, 1)
        self.trans_x = (2 * (k // per_class))[:, None, None]             # od 1 1
        self.part_i = (i * part_h // self.ph)[:, None]                    # ph 1
        self.part_j = j * part_w // self.pw                               # pw
        dtype = ctx.input("Input").dtype        # sample positions in X's precision
        self.i, self.j = i[:, None].astype(dtype), j.astype(dtype)


class _Starts:
    """One call's sampling grids: per output (r, c, i, j) where its first sample lies, the
    step between samples [R, 1, 1, 1], its input plane's flat offset, and the flat index of
    its x offset in Trans (the y offset's is a channel further)."""

    def __init__(self, grid: _Grid, rois: Any, trans: Any, lod: tuple):
        xp = grid.xp
        x1, y1, x2, y2 = (v - 0.5 for v in ps_box(xp, rois, grid.scale))
        col = (slice(None), None, None, None)
        self.roi_w = xp.maximum(x2 - x1, 0.1)[col]
        self.roi_h = xp.maximum(y2 - y1, 0.1)[col]
        bin_w, bin_h = self.roi_w / grid.pw, self.roi_h / grid.ph
        self.step_w, self.step_h = bin_w / grid.samples, bin_h / grid.samples
        self.w0 = grid.j * bin_w + x1[col]
        self.h0 = grid.i * bin_h + y1[col]
        r = xp.arange(rois.shape[0])[col]
        self.trans_at = None
        if not grid.no_trans:
            _, tc, th, tw = grid.trans_shape
            self.trans_at = ((r * tc + grid.trans_x) * th + grid.part_i) * tw + grid.part_j
            flat, y_off = trans.reshape(-1), th * tw
            self.w0 = self.w0 + xp.take(flat, self.trans_at) * grid.std * self.roi_w
            self.h0 = self.h0 + xp.take(flat, self.trans_at + y_off) * grid.std * self.roi_h
        image = batch_of(xp, rois, lod)[col]
        self.plane = (image * grid.c + grid.channel) * (grid.h * grid.w)


def _inside(pos: Any, size: int) -> Any:
    """Whether sample positions lie within half a pixel of the image."""
    return (pos >= -0.5) & (pos <= size - 0.5)


class _Axis:
    """The samples at one step along one axis: inside (within half a pixel of the image),
    the flat offsets of the two pixels around the clamped position (times ``stride``,
    plus ``base``) and the fraction past the first."""

    def __init__(self, xp: Any, pos: Any, size: int, stride: int, base: Any = 0):
        self.inside = _inside(pos, size)
        pos = xp.clip(pos, 0, size - 1)
        low = xp.floor(pos)
        self.frac = pos - low
        self.low = base + low.astype("int64") * stride
        self.high = base + xp.ceil(pos).astype("int64") * stride


class _Sample:
    """One sample of every output: its four corners in Input (flat), their values, and
    the bilinear value between them."""

    def __init__(self, xp: Any, flat: Any, row: _Axis, col: _Axis):
        self.row, self.col = row, col
        self.inside = row.inside & col.inside
        self.corners = [row.low + col.low, row.low + col.high, row.high + col.low,
                        row.high + col.high]
        v = [xp.take(flat, i) for i in self.corners]
        self.top = v[0] + col.frac * (v[1] - v[0])
        self.bottom = v[2] + col.frac * (v[3] - v[2])
        self.by_x = (1 - row.frac) * (v[1] - v[0]) + row.frac * (v[3] - v[2])
        self.value = self.top + row.frac * (self.bottom - self.top)

    def weights(self) -> list[Any]:
        fy, fx = self.row.frac, self.col.frac
        return [(1 - fy) * (1 - fx), (1 - fy) * fx, fy * (1 - fx), fy * fx]


def _samples(grid: _Grid, at: _Starts, x: Any) -> Iterator[_Sample]:
    xp, flat = grid.xp, x.reshape(-1)
    rows = [_Axis(xp, at.h0 + s * at.step_h, grid.h, grid.w, at.plane)
            for s in range(grid.samples)]
    for s in range(grid.samples):
        col = _Axis(xp, at.w0 + s * at.step_w, grid.w, 1)
        for row in rows:
            yield _Sample(xp, flat, row, col)


def _count(grid: _Grid, at: _Starts) -> Any:
    """How many samples of each output fall inside: rows inside times columns inside."""
    rows = sum(_inside(at.h0 + s * at.step_h, grid.h) for s in range(grid.samples))
    cols = sum(_inside(at.w0 + s * at.step_w, grid.w) for s in range(grid.samples))
    return rows * cols


def _kernel(ctx: KernelContext) -> Callable:
    grid = _Grid(ctx)
    xp = ctx.xp

    def deformable_psroi_pooling(x: Any, rois: Any, trans: Any, *lod: Any) -> tuple:
        at = _Starts(grid, rois, trans, lod)
        total = 0
        for sample in _samples(grid, at, x):
            total = total + xp.where(sample.inside, sample.value, 0)
        count = _count(grid, at)
        out = xp.where(count > 0, total / xp.maximum(count, 1), 0)
        # without offsets a bin's samples are the same for every channel
        return out.astype(x.dtype), xp.broadcast_to(count, out.shape).astype(x.dtype)
    return deformable_psroi_pooling


def _grad_kernel(ctx: KernelContext) -> Callable:
    grid = _Grid(ctx)
    xp, dtype = ctx.xp, ctx.input("Input").dtype
    wanted = [s for s in ("Input@GRAD", "Trans@GRAD") if ctx.has_output(s)]

    def deformable_psroi_pooling_grad(x: Any, rois: Any, trans: Any, *rest: Any) -> Any:
        *lod, g = rest
        at = _Starts(grid, rois, trans, tuple(lod))
        share = g / xp.maximum(_count(grid, at), 1)
        dx, by_x, by_y = xp.zeros(x.size, dtype), 0, 0
        for sample in _samples(grid, at, x):     # one bincount per sample: little memory
            s = xp.where(sample.inside, share, 0)
            dx += _scatter(xp, [xp.broadcast_to(i, s.shape).reshape(-1) for i in sample.corners],
                           [(w * s).reshape(-1) for w in sample.weights()], (x.size,), dtype)
            by_x = by_x + s * sample.by_x
            by_y = by_y + s * (sample.bottom - sample.top)
        got = {"Input@GRAD": dx.reshape(x.shape)}
        if "Trans@GRAD" in wanted:
            got["Trans@GRAD"] = _trans_grad(grid, at, by_x * grid.std * at.roi_w,
                                            by_y * grid.std * at.roi_h, dtype)
        outs = tuple(got[s] for s in wanted)
        return outs[0] if len(outs) == 1 else outs
    return deformable_psroi_pooling_grad


def _scatter(xp: Any, places: list, weights: list, shape: tuple, dtype: str) -> Any:
    """An array of ``shape`` holding the weights added up at their flat places."""
    added = xp.bincount(xp.concatenate(places), weights=xp.concatenate(weights),
                        minlength=prod(shape))
    return added.reshape(shape).astype(dtype)


def _trans_grad(grid: _Grid, at: _Starts, by_x: Any, by_y: Any, dtype: str) -> Any:
    """Trans@GRAD: each output's derivative by its x and y offsets, summed per part."""
    xp = grid.xp
    shape = grid.trans_shape
    if at.trans_at is None:      # no_trans: the offsets are not read
        return xp.zeros(shape, dtype)
    index = xp.broadcast_to(at.trans_at, by_x.shape)
    y_off = shape[2] * shape[3]
    return _scatter(xp, [index.reshape(-1), (index + y_off).reshape(-1)],
                    [by_x.reshape(-1), by_y.reshape(-1)], shape, dtype)


def _grad_infer(ctx: InferContext) -> None:
    for slot in ("Input", "Trans"):
        t = ctx.input(slot)
        ctx.set_output(f"{slot}@GRAD", t.shape, t.dtype)


_INPUTS = ("Input", "ROIs", "Trans", "RoisLod?")
register(OpSpec("deformable_psroi_pooling", slots(*_INPUTS), slots("Output", "TopCount"),
                _infer, _kernel,
                lambda g: emit_default_grad(g, ("Input", "ROIs", "Trans", "RoisLod"),
                                            "deformable_psroi_pooling_grad",
                                            ("Input", "Trans"), ("Output",)),
                attrs=_ATTRS, host_access="reads",
                doc="Position-sensitive roi pooling whose bins move by learned offsets "
                    "(Trans): each bin the mean of a grid of bilinear samples."))
register(OpSpec("deformable_psroi_pooling_grad", slots(*_INPUTS, "Output@GRAD"),
                slots("Input@GRAD?", "Trans@GRAD?"), _grad_infer, _grad_kernel,
                attrs=_ATTRS, host_access="reads",
                doc="Input@GRAD at each sample's four corners; Trans@GRAD from the bilinear "
                    "weights' derivatives, summed per part."))
