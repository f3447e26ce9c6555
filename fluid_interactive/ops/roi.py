"""Pooling over regions of interest: roi_pool, roi_align and psroi_pool.

X [N, C, H, W], ROIs [R, 4] (x1, y1, x2, y2 in the input image's pixels; times
``spatial_scale`` on X) and RoisLod (int64 [N + 1], the offsets of each image's rows in
ROIs: Paddle's LoD; without it every roi is of image 0) -> Out [R, C, ph, pw].

``roi_pool``  each roi rounded to X's pixels, split into ph x pw bins (floor / ceil
bounds, clipped to X); each bin's maximum (0 for an empty bin), and Argmax, the int64
index ``h * W + w`` of its first maximum (-1 for an empty bin).

``roi_align``  each roi (not rounded; at least 1 x 1) split into ph x pw bins; each bin
the mean of a grid of ``sampling_ratio`` x ``sampling_ratio`` bilinear samples (or
``ceil(roi size / pooled size)`` per dim when sampling_ratio <= 0), Paddle 1.8's rules at
the border (a sample beyond -1 or the size counts 0; below 0 it is clamped to 0).

``psroi_pool``  position-sensitive: X has ``output_channels * ph * pw`` channels and
output (c, i, j) averages bin (i, j) of channel ``(c * ph + i) * pw + j``; the roi's
corners are rounded, its far corner extended by a pixel, then scaled.

Bins and sample grids differ in size from roi to roi, so windows are index arrays as
long as the largest (read back from the device each call), positions past a window's end
masked. roi_align's bilinear sampling is separable: its samples' weights are added up
per pixel of each roi's window of rows and of columns (`Window`), and `pool_windows`
gathers each roi's window and applies both with two batched matrix products (prroi_pool
uses it too). The gradients add into X with ``add.at`` or ``bincount`` (bins of
different rois overlap).
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as fmt
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, emit_default_grad, slots


def infer_roi(ctx: InferContext, argmax: bool) -> None:
    """Out [R, C (or output_channels), ph, pw] (and Argmax) from X, ROIs and RoisLod."""
    x, rois = ctx.input("X"), ctx.input("ROIs")
    if x.rank != 4 or x.dtype not in FLOAT_DTYPES:
        ctx.fail(f"X must be a float [N, C, H, W], got {x.dtype}{fmt(x.shape)}")
    if rois.rank != 2 or rois.shape[1] != 4 or rois.dtype != x.dtype:
        ctx.fail(f"ROIs must be [R, 4] (x1, y1, x2, y2) of X's dtype {x.dtype}, got "
                 f"{rois.dtype}{fmt(rois.shape)}")
    if ctx.has_input("RoisLod") and ctx.input("RoisLod").rank != 1:
        ctx.fail("RoisLod must be 1-D: the offsets [N + 1] of each image's rois")
    ph, pw = (int(ctx.attrs[a]) for a in ("pooled_height", "pooled_width"))
    if ph < 1 or pw < 1:
        ctx.fail(f"pooled_height and pooled_width must be positive, got {ph}, {pw}")
    c = x.shape[1]
    if "output_channels" in ctx.attrs:
        oc = int(ctx.attrs["output_channels"])
        if c >= 0 and c != oc * ph * pw:
            ctx.fail(f"X has {c} channels; psroi_pool needs output_channels * pooled_height "
                     f"* pooled_width = {oc * ph * pw}")
        c = oc
    ctx.set_output("Out", (rois.shape[0], c, ph, pw), x.dtype)
    if argmax:
        ctx.set_output("Argmax", (rois.shape[0], c, ph, pw), "int64")


def batch_of(xp: Any, rois: Any, lod: tuple) -> Any:
    """The image index of each roi, [R]."""
    r = rois.shape[0]
    if not lod:
        return xp.zeros(r, "int64")
    return xp.searchsorted(lod[0][1:], xp.arange(r), side="right").astype("int64")


def _round(xp: Any, v: Any) -> Any:
    """Rounding half away from zero (C's round)."""
    return xp.sign(v) * xp.floor(xp.abs(v) + 0.5)


def ps_box(xp: Any, rois: Any, scale: float) -> tuple[Any, Any, Any, Any]:
    """The position-sensitive ops' box on X: (x1, y1, x2, y2) with each corner rounded
    to the image's pixels, the far one extended by a pixel, then scaled."""
    x1, y1 = _round(xp, rois[:, 0]) * scale, _round(xp, rois[:, 1]) * scale
    x2, y2 = (_round(xp, rois[:, 2]) + 1) * scale, (_round(xp, rois[:, 3]) + 1) * scale
    return x1, y1, x2, y2


class _Boxes:
    """Per roi the clipped [start, end) of each bin along one dim, and the bin's taps as
    index arrays as long as the longest bin: (index [R, bins, K], inside [R, bins, K])."""

    def __init__(self, xp: Any, start: Any, size: Any, bins: int, limit: int,
                 offset_in_bin: bool):
        k = xp.arange(bins, dtype=size.dtype)   # bounds in the rois' dtype, as Paddle's
        lo = start[:, None] + xp.floor(k * size[:, None]) if offset_in_bin else \
            xp.floor(start[:, None] + k * size[:, None])
        hi = start[:, None] + xp.ceil((k + 1) * size[:, None]) if offset_in_bin else \
            xp.ceil(start[:, None] + (k + 1) * size[:, None])
        self.lo = xp.clip(lo, 0, limit).astype("int64")
        self.hi = xp.clip(hi, 0, limit).astype("int64")
        taps = max(int((self.hi - self.lo).max()), 1) if self.lo.size else 1
        index = self.lo[:, :, None] + xp.arange(taps)
        self.inside = index < self.hi[:, :, None]
        self.index = xp.minimum(index, max(limit - 1, 0))


def _quantized(ctx: KernelContext, xp: Any, rois: Any, ps: bool) -> tuple[_Boxes, _Boxes]:
    """The bins of roi_pool (``ps`` False) or psroi_pool, along H and along W."""
    scale = float(ctx.attrs["spatial_scale"])
    _, _, h, w = ctx.input("X").shape
    ph, pw = int(ctx.attrs["pooled_height"]), int(ctx.attrs["pooled_width"])
    if ps:
        x1, y1, x2, y2 = ps_box(xp, rois, scale)
        rh, rw = xp.maximum(y2 - y1, 0.1), xp.maximum(x2 - x1, 0.1)
    else:
        x1, y1 = _round(xp, rois[:, 0] * scale), _round(xp, rois[:, 1] * scale)
        x2, y2 = _round(xp, rois[:, 2] * scale), _round(xp, rois[:, 3] * scale)
        rh, rw = xp.maximum(y2 - y1 + 1, 1), xp.maximum(x2 - x1 + 1, 1)
    return (_Boxes(xp, y1, rh / ph, ph, h, not ps), _Boxes(xp, x1, rw / pw, pw, w, not ps))


def _box_index(xp: Any, rows: _Boxes, cols: _Boxes, batch: Any, channels: Any) -> tuple:
    """Indices into X of every bin's taps, [R, C, ph, pw, Kh, Kw] after broadcasting,
    and where a tap is inside its bin."""
    b = batch[:, None, None, None, None, None]
    hi = rows.index[:, None, :, None, :, None]
    wi = cols.index[:, None, None, :, None, :]
    inside = rows.inside[:, None, :, None, :, None] & cols.inside[:, None, None, :, None, :]
    return (b, channels, hi, wi), inside


def _roi_pool_kernel(ctx: KernelContext) -> Callable:
    xp = ctx.xp
    _, c, _, w = ctx.input("X").shape
    channels = xp.arange(c)[None, :, None, None, None, None]

    def roi_pool(x: Any, rois: Any, *lod: Any) -> tuple[Any, Any]:
        rows, cols = _quantized(ctx, xp, rois, False)
        index, inside = _box_index(xp, rows, cols, batch_of(xp, rois, lod), channels)
        vals = xp.where(inside, x[index], -xp.inf)
        r, cc, ph, pw, kh, kw = vals.shape
        flat = vals.reshape(r, cc, ph, pw, kh * kw)
        first = xp.argmax(flat, axis=-1)[..., None]
        best = xp.take_along_axis(flat, first, -1)[..., 0]
        empty = ~inside.reshape(r, 1, ph, pw, kh * kw).any(axis=-1)
        where = xp.take_along_axis(xp.broadcast_to(index[2] * w + index[3], vals.shape)
                                   .reshape(flat.shape), first, -1)[..., 0]
        return xp.where(empty, 0, best).astype(x.dtype), xp.where(empty, -1, where)
    return roi_pool


def _roi_pool_grad_kernel(ctx: KernelContext) -> Callable:
    """Each bin's gradient goes to its first maximum (Argmax), added over rois."""
    xp = ctx.xp
    n, c, h, w = ctx.input("X").shape

    dtype = ctx.input("X").dtype

    def roi_pool_grad(x: Any, rois: Any, *rest: Any) -> Any:
        *lod, argmax, g = rest
        batch = batch_of(xp, rois, tuple(lod))
        dx = xp.zeros((n, c, h * w), dtype)
        seen = argmax >= 0
        b = xp.broadcast_to(batch[:, None, None, None], argmax.shape)
        ch = xp.broadcast_to(xp.arange(c)[None, :, None, None], argmax.shape)
        xp.add.at(dx, (b[seen], ch[seen], argmax[seen]), g[seen])
        return dx.reshape(n, c, h, w)
    return roi_pool_grad


def _ps_channels(ctx: KernelContext, xp: Any) -> Any:
    """The input channel of each output (c, i, j): (c * ph + i) * pw + j, shaped to
    broadcast as [1, C, ph, pw, 1, 1]."""
    ph, pw = int(ctx.attrs["pooled_height"]), int(ctx.attrs["pooled_width"])
    oc = int(ctx.attrs["output_channels"])
    return ((xp.arange(oc)[:, None, None] * ph + xp.arange(ph)[:, None]) * pw
            + xp.arange(pw))[None, :, :, :, None, None]


def _psroi_kernel(ctx: KernelContext) -> Callable:
    xp = ctx.xp
    channels = _ps_channels(ctx, xp)

    def psroi_pool(x: Any, rois: Any, *lod: Any) -> Any:
        rows, cols = _quantized(ctx, xp, rois, True)
        index, inside = _box_index(xp, rows, cols, batch_of(xp, rois, lod), channels)
        total = xp.where(inside, x[index], 0).sum(axis=(4, 5))
        count = inside.sum(axis=(4, 5))
        return (total / xp.maximum(count, 1)).astype(x.dtype)
    return psroi_pool


def _psroi_grad_kernel(ctx: KernelContext) -> Callable:
    xp = ctx.xp
    n, c, h, w = ctx.input("X").shape
    channels = _ps_channels(ctx, xp)

    def psroi_pool_grad(x: Any, rois: Any, *rest: Any) -> Any:
        *lod, g = rest
        rows, cols = _quantized(ctx, xp, rois, True)
        index, inside = _box_index(xp, rows, cols, batch_of(xp, rois, tuple(lod)), channels)
        count = xp.maximum(inside.sum(axis=(4, 5)), 1)
        shape = g.shape + inside.shape[4:]
        inside = xp.broadcast_to(inside, shape)
        share = xp.broadcast_to((g / count)[..., None, None], shape)
        dx = xp.zeros((n, c, h, w), g.dtype)
        full = tuple(xp.broadcast_to(i, shape) for i in index)
        xp.add.at(dx, tuple(i[inside] for i in full), share[inside])
        return dx
    return psroi_pool_grad


class _Samples:
    """roi_align's bilinear samples along one dim: per roi, bin and sample, the two
    neighbours (index [R, bins, S]) and their weights (0 for a sample past the grid of its
    roi or out of range), S = 2 * the largest grid."""

    def __init__(self, xp: Any, start: Any, size: Any, bins: int, grid: Any, limit: int,
                 dtype: str):
        width = int(grid.max()) if grid.size else 1
        k = xp.arange(bins)[None, :, None]
        t = xp.arange(width)[None, None, :]
        g = grid[:, None, None]
        bin_size = (size / bins)[:, None, None]
        pos = start[:, None, None] + k * bin_size + (t + 0.5) * bin_size / g
        used = (t < g) & (pos >= -1.0) & (pos <= limit)
        pos = xp.maximum(pos, 0.0)
        low = xp.floor(pos)
        top = low >= limit - 1
        low = xp.where(top, limit - 1, low)
        pos = xp.where(top, low, pos)
        high = xp.where(top, low, low + 1)
        frac = pos - low
        self.index = xp.concatenate([low, high], axis=2).astype("int64")
        self.weight = (xp.concatenate([1.0 - frac, frac], axis=2) * xp.concatenate(
            [used, used], axis=2)).astype(dtype)
        self.taps = Taps(self.index, self.weight)


def _align_samples(ctx: KernelContext, xp: Any, rois: Any) -> tuple[_Samples, _Samples, Any]:
    """(the samples along H, along W, the number of samples per bin [R])."""
    scale, ratio = float(ctx.attrs["spatial_scale"]), int(ctx.attrs["sampling_ratio"])
    _, _, h, w = ctx.input("X").shape
    ph, pw = int(ctx.attrs["pooled_height"]), int(ctx.attrs["pooled_width"])
    x1, y1 = rois[:, 0] * scale, rois[:, 1] * scale
    rw = xp.maximum(rois[:, 2] * scale - x1, 1.0)
    rh = xp.maximum(rois[:, 3] * scale - y1, 1.0)
    gh = xp.full(rh.shape, ratio) if ratio > 0 else xp.ceil(rh / ph)
    gw = xp.full(rw.shape, ratio) if ratio > 0 else xp.ceil(rw / pw)
    dtype = ctx.input("X").dtype
    return (_Samples(xp, y1, rh, ph, gh, h, dtype), _Samples(xp, x1, rw, pw, gw, w, dtype),
            (gh * gw).astype(dtype))


class Taps(NamedTuple):
    """Per roi, bin and tap: the row (or column) of X it reads, and its weight."""
    index: Any
    weight: Any


class Window(NamedTuple):
    """One dim of each roi's bins: the pixels of X the roi reads along it (a window from
    its first, as long as the longest, clamped into X: index [R, K]) and each bin's
    weight on each (weight [R, bins, K]; 0 past the roi's own pixels)."""
    index: Any
    weight: Any


def window_of(xp: Any, taps: Taps) -> Window:
    """The window holding a roi's taps, their weights added up per pixel."""
    r, bins, s = taps.index.shape
    first = taps.index.min(axis=(1, 2)) if taps.index.size else xp.zeros(r, "int64")
    k = int((taps.index.max(axis=(1, 2)) - first).max()) + 1 if taps.index.size else 1
    at = (xp.arange(r * bins).reshape(r, bins, 1) * k + taps.index - first[:, None, None])
    weight = xp.bincount(at.reshape(-1), weights=taps.weight.reshape(-1), minlength=r * bins * k)
    last = taps.index.max() if taps.index.size else 0
    return Window(xp.minimum(first[:, None] + xp.arange(k), last),
                  weight.reshape(r, bins, k).astype(taps.weight.dtype))


def pool_windows(xp: Any, x: Any, batch: Any, rows: Window, cols: Window) -> Any:
    """[R, C, ph, pw] = sum over the windows of X[batch[r], c, i, j] * rows.weight[r, p,
    i] * cols.weight[r, q, j]: each roi's window gathered (channels last, so each pixel's
    channels come as one run), then two batched matrix products."""
    r, ph, kr = rows.weight.shape
    kc = cols.index.shape[1]
    pixels = xp.ascontiguousarray(x.transpose(0, 2, 3, 1))               # N H W C
    win = pixels[batch[:, None, None], rows.index[:, :, None], cols.index[:, None, :]]
    c = x.shape[1]
    t = xp.matmul(rows.weight, win.reshape(r, kr, kc * c)).reshape(r, ph, kc, c)
    out = xp.matmul(cols.weight[:, None], t)                              # R ph pw C
    return xp.ascontiguousarray(out.transpose(0, 3, 1, 2))


def spread_windows(xp: Any, shape: tuple, batch: Any, rows: Window, cols: Window,
                   share: Any) -> Any:
    """The gradient of `pool_windows` for the output gradient ``share`` [R, C, ph, pw]:
    X@GRAD [N, C, H, W], every roi's window added in (one ``bincount``: rois overlap)."""
    n, c, h, w = shape
    r, ph, kr = rows.weight.shape
    kc = cols.index.shape[1]
    by_pixel = share.transpose(0, 2, 3, 1)                                # R ph pw C
    d_t = xp.matmul(cols.weight[:, None].transpose(0, 1, 3, 2), by_pixel)  # R ph Kc C
    d_win = xp.matmul(rows.weight.transpose(0, 2, 1), d_t.reshape(r, ph, kc * c))
    at = ((((batch[:, None, None, None] * c + xp.arange(c)) * h
            + rows.index[:, :, None, None]) * w) + cols.index[:, None, :, None])  # R Kr Kc C
    dx = xp.bincount(at.reshape(-1), weights=d_win.reshape(-1), minlength=n * c * h * w)
    return dx.reshape(shape).astype(share.dtype)


def _roi_align_kernel(ctx: KernelContext) -> Callable:
    """The mean of each bin's samples: their weights gathered into each roi's windows
    along H and W, then `pool_windows`."""
    xp = ctx.xp

    def roi_align(x: Any, rois: Any, *lod: Any) -> Any:
        rows, cols, count = _align_samples(ctx, xp, rois)
        out = pool_windows(xp, x, batch_of(xp, rois, lod), window_of(xp, rows.taps),
                           window_of(xp, cols.taps))
        return (out / count[:, None, None, None]).astype(x.dtype)
    return roi_align


def _roi_align_grad_kernel(ctx: KernelContext) -> Callable:
    xp = ctx.xp
    shape = ctx.input("X").shape

    def roi_align_grad(x: Any, rois: Any, *rest: Any) -> Any:
        *lod, g = rest
        rows, cols, count = _align_samples(ctx, xp, rois)
        return spread_windows(xp, shape, batch_of(xp, rois, tuple(lod)),
                              window_of(xp, rows.taps), window_of(xp, cols.taps),
                              g / count[:, None, None, None])
    return roi_align_grad


_POOL_ATTRS = {"pooled_height": 1, "pooled_width": 1, "spatial_scale": 1.0}
_ALIGN_ATTRS = {**_POOL_ATTRS, "sampling_ratio": -1}
_PS_ATTRS = {**_POOL_ATTRS, "output_channels": 1}


def _grad(g: GradContext, grad_type: str, uses: tuple[str, ...]) -> None:
    emit_default_grad(g, uses, grad_type, ("X",))


def _grad_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("X@GRAD", x.shape, x.dtype)


def _register(op: str, kernel: Callable, grad_kernel: Callable, attrs: dict,
              kept: tuple[str, ...], doc: str) -> None:
    """An roi op and its gradient op, which reads X (for its shape), the rois and
    ``kept`` (outputs the forward op leaves for it)."""
    uses = ("X", "ROIs", "RoisLod") + kept
    register(OpSpec(op, slots("X", "ROIs", "RoisLod?"), slots("Out", *kept),
                    partial(infer_roi, argmax=bool(kept)), kernel,
                    partial(_grad, grad_type=f"{op}_grad", uses=uses), attrs=attrs,
                    host_access="reads", doc=doc))
    register(OpSpec(f"{op}_grad", slots("X", "ROIs", "RoisLod?", *kept, "Out@GRAD"),
                    slots("X@GRAD"), _grad_infer, grad_kernel, attrs=attrs,
                    shape_only=("X",), host_access="reads"))


_register("roi_pool", _roi_pool_kernel, _roi_pool_grad_kernel, _POOL_ATTRS, ("Argmax",),
          "The maximum of each of ph x pw bins of each roi (rounded to X's pixels), and "
          "Argmax, the index h * W + w of its first maximum.")
_register("roi_align", _roi_align_kernel, _roi_align_grad_kernel, _ALIGN_ATTRS, (),
          "The mean of a grid of bilinear samples in each of ph x pw bins of each roi (not "
          "rounded), Paddle 1.8's roi_align.")
_register("psroi_pool", _psroi_kernel, _psroi_grad_kernel, _PS_ATTRS, (),
          "Position-sensitive roi pooling: output (c, i, j) averages bin (i, j) of channel "
          "(c * ph + i) * pw + j.")
