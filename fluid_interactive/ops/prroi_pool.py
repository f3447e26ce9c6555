"""Precise roi pooling: prroi_pool (Jiang et al., "Acquisition of Localization Confidence
for Accurate Object Detection", 2018).

X [N, C, H, W], ROIs [R, 4] (x1, y1, x2, y2, times ``spatial_scale`` on X, not rounded),
and which image each roi is of: RoisLod (offsets [N + 1], as the other roi ops) or
BatchRoINums (counts [N], Paddle's argument); without either every roi is of image 0.
Out [R, C, ph, pw]: each of a roi's ph x pw bins is the integral over the bin of X's
bilinear interpolation (X taken as 0 outside the image) divided by the bin's area; a roi
of no area gives 0.

The interpolation is a sum of hat functions, one per pixel, and it separates by dim: a
bin's integral is ``sum_ij X[i, j] A_i B_j`` with A_i the integral over the bin's rows of
pixel row i's hat (and B_j over its columns). Each bin's A and B live on the pixels its
window [floor(start), ceil(end)] covers, so the op is roi_align's rows-then-columns
gather (`roi.py`) with these weights. The gradient reaches X through the same weights and
the boxes through the derivative of each bin's integral by its four ends (the
interpolation along the end, the hat values there), as Paddle's op gives.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.text import format_shape as fmt
from .registry import register
from .rnn import Unpack
from .roi import Window, batch_of, infer_roi, pool_windows, spread_windows
from .spec import InferContext, KernelContext, OpSpec, emit_default_grad, slots


def _hat_integral(xp: Any, u: Any) -> Any:
    """The integral of the hat max(0, 1 - |t|) from -inf to u."""
    u = xp.clip(u, -1.0, 1.0)
    return xp.where(u <= 0, 0.5 * (1 + u) ** 2, 1 - 0.5 * (1 - u) ** 2)


def _hat(xp: Any, u: Any) -> Any:
    return xp.maximum(1 - xp.abs(u), 0)


class _Integrals:
    """One dim of a roi's bins over the roi's window of pixels (`roi.Window`): per bin
    and pixel the integral of the pixel's hat over the bin (``area``), and its hat at
    the bin's start and at its end."""

    def __init__(self, xp: Any, start: Any, size: Any, bins: int, limit: int):
        dtype = start.dtype
        a = start[:, None] + xp.arange(bins, dtype=dtype) * size[:, None]   # R bins
        b = a + size[:, None]
        first = xp.clip(xp.floor(a[:, 0]), 0, limit - 1)
        last = xp.clip(xp.ceil(b[:, -1]), 0, limit - 1)
        k = int((last - first).max()) + 1 if a.size else 1
        pixel = first[:, None] + xp.arange(k, dtype=dtype)                 # R K
        used = (pixel <= last[:, None])[:, None]
        index = xp.minimum(pixel, limit - 1).astype("int64")
        a, b = a[..., None] - pixel[:, None], b[..., None] - pixel[:, None]   # R bins K
        self.area = Window(index, xp.where(used, _hat_integral(xp, b) - _hat_integral(xp, a),
                                           0))
        self.at_start = Window(index, xp.where(used, _hat(xp, a), 0))
        self.at_end = Window(index, xp.where(used, _hat(xp, b), 0))


class _Bins:
    """The bins of a call's rois along H and W, their sizes [R], and each roi's image."""

    def __init__(self, ctx: KernelContext, xp: Any, rois: Any, images: dict):
        scale = float(ctx.attrs["spatial_scale"])
        _, _, h, w = ctx.input("X").shape
        ph, pw = int(ctx.attrs["pooled_height"]), int(ctx.attrs["pooled_width"])
        box = rois * scale
        self.bin_h = xp.maximum(box[:, 3] - box[:, 1], 0) / ph
        self.bin_w = xp.maximum(box[:, 2] - box[:, 0], 0) / pw
        self.rows = _Integrals(xp, box[:, 1], self.bin_h, ph, h)
        self.cols = _Integrals(xp, box[:, 0], self.bin_w, pw, w)
        area = (self.bin_h * self.bin_w)[:, None, None, None]
        self.inverse_area = xp.where(area > 0, 1 / xp.where(area > 0, area, 1), 0)
        self.batch = _images(xp, rois, images)


def _images(xp: Any, rois: Any, images: dict) -> Any:
    """The image of each roi, from RoisLod (offsets) or BatchRoINums (counts)."""
    if "BatchRoINums" in images:
        counts = images["BatchRoINums"].reshape(-1).astype("int64")
        offsets = xp.concatenate([xp.zeros(1, "int64"), xp.cumsum(counts)])
        return batch_of(xp, rois, (offsets,))
    return batch_of(xp, rois, (images["RoisLod"],) if "RoisLod" in images else ())


def _infer(ctx: InferContext) -> None:
    infer_roi(ctx, argmax=False)
    if not ctx.has_input("BatchRoINums"):
        return
    nums, n = ctx.input("BatchRoINums"), ctx.input("X").shape[0]
    if ctx.has_input("RoisLod"):
        ctx.fail("prroi_pool: give the rois' images once, by rois_lod or by batch_roi_nums")
    if nums.dtype not in ("int32", "int64") or nums.rank != 1 or (
            n >= 0 and nums.shape[0] >= 0 and nums.shape[0] != n):
        ctx.fail(f"prroi_pool: BatchRoINums must be int64 [N] (the number of rois of each of "
                 f"X's {n} images), got {nums.dtype}{fmt(nums.shape)}")


_IMAGE_SLOTS = ("RoisLod", "BatchRoINums")


def _kernel(ctx: KernelContext) -> Callable:
    xp, unpack = ctx.xp, Unpack(ctx, _IMAGE_SLOTS)

    def prroi_pool(x: Any, rois: Any, *images: Any) -> Any:
        bins = _Bins(ctx, xp, rois, unpack(images))
        out = pool_windows(xp, x, bins.batch, bins.rows.area, bins.cols.area)
        return (out * bins.inverse_area).astype(x.dtype)
    return prroi_pool


def _stacked(xp: Any, dim: _Integrals) -> Window:
    """The area, start and end weights of a dim as one window of 3 x bins."""
    return Window(dim.area.index, xp.concatenate([dim.area.weight, dim.at_start.weight,
                                                  dim.at_end.weight], axis=1))


def _box_grad(xp: Any, x: Any, out: Any, share: Any, bins: _Bins, scale: float) -> Any:
    """ROIs@GRAD [R, 4]: each bin's derivative by its four ends (the integral along an
    end of the interpolation, less the output times the end's length, over the bin's
    area), carried to the roi's corners by where the bin lies in the roi."""
    ph, pw = out.shape[2:]
    # every pair of (area, at_start, at_end) weights along H and along W at once
    nine = pool_windows(xp, x, bins.batch, _stacked(xp, bins.rows), _stacked(xp, bins.cols))
    by_start_w, by_end_w = nine[:, :, :ph, pw:2 * pw], nine[:, :, :ph, 2 * pw:]
    by_start_h, by_end_h = nine[:, :, ph:2 * ph, :pw], nine[:, :, 2 * ph:, :pw]
    bh, bw = bins.bin_h[:, None, None, None], bins.bin_w[:, None, None, None]
    share = share * scale
    d_left = (bh * out - by_start_w) * share
    d_right = (by_end_w - bh * out) * share
    d_top = (bw * out - by_start_h) * share
    d_bottom = (by_end_h - bw * out) * share
    fh = (xp.arange(ph) / ph)[:, None]           # where each bin starts in its roi
    fw = xp.arange(pw) / pw
    return xp.stack([(d_left * (1 - fw) + d_right * (1 - fw - 1 / pw)).sum(axis=(1, 2, 3)),
                     (d_top * (1 - fh) + d_bottom * (1 - fh - 1 / ph)).sum(axis=(1, 2, 3)),
                     (d_left * fw + d_right * (fw + 1 / pw)).sum(axis=(1, 2, 3)),
                     (d_top * fh + d_bottom * (fh + 1 / ph)).sum(axis=(1, 2, 3))], axis=1)


def _grad_kernel(ctx: KernelContext) -> Callable:
    xp, unpack = ctx.xp, Unpack(ctx, _IMAGE_SLOTS)
    shape, scale = ctx.input("X").shape, float(ctx.attrs["spatial_scale"])
    wanted = [s for s in ("X@GRAD", "ROIs@GRAD") if ctx.has_output(s)]

    def prroi_pool_grad(x: Any, rois: Any, *rest: Any) -> Any:
        *images, out, g = rest
        bins = _Bins(ctx, xp, rois, unpack(tuple(images)))
        share = g * bins.inverse_area
        got = {}
        if "X@GRAD" in wanted:
            got["X@GRAD"] = spread_windows(xp, shape, bins.batch, bins.rows.area,
                                           bins.cols.area, share)
        if "ROIs@GRAD" in wanted:
            got["ROIs@GRAD"] = _box_grad(xp, x, out, share, bins, scale).astype(rois.dtype)
        outs = tuple(got[s] for s in wanted)
        return outs[0] if len(outs) == 1 else outs
    return prroi_pool_grad


def _grad_infer(ctx: InferContext) -> None:
    for slot in ("X", "ROIs"):
        t = ctx.input(slot)
        ctx.set_output(f"{slot}@GRAD", t.shape, t.dtype)


_ATTRS = {"pooled_height": 1, "pooled_width": 1, "spatial_scale": 1.0}
_INPUTS = ("X", "ROIs", "RoisLod?", "BatchRoINums?")
register(OpSpec("prroi_pool", slots(*_INPUTS), slots("Out"), _infer, _kernel,
                lambda g: emit_default_grad(g, ("X", "ROIs", *_IMAGE_SLOTS, "Out"),
                                            "prroi_pool_grad", ("X", "ROIs")),
                attrs=_ATTRS, host_access="reads",
                doc="Each of ph x pw bins of each roi: the integral of X's bilinear "
                    "interpolation over the bin, over its area (precise roi pooling)."))
register(OpSpec("prroi_pool_grad", slots(*_INPUTS, "Out", "Out@GRAD"),
                slots("X@GRAD?", "ROIs@GRAD?"), _grad_infer, _grad_kernel, attrs=_ATTRS,
                host_access="reads",
                doc="X@GRAD through each bin's integral weights; ROIs@GRAD through the "
                    "derivative of each bin's integral by its ends."))
