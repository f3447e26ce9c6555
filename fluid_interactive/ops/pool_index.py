"""Pooling over windows given as index arrays rather than strided views: adaptive pooling
(``pool2d`` / ``pool3d`` with ``adaptive``) and ``max_pool2d_with_index`` /
``max_pool3d_with_index`` (Paddle's ops behind ``adaptive_pool2d(require_index=True)``),
whose ``Mask`` output holds, for each window, where its maximum lies in its plane
(``h * W + w``, or ``(d * H + h) * W + w``), as int32.

``max_pool{2,3}d_with_index``  X [N, C, *S] -> Out, Mask [N, C, *out]; attrs ``ksize``,
``strides``, ``paddings`` (one per dim), ``global_pooling``, ``adaptive``. Windows are
Paddle's: ``adaptive`` window i of a dim of n spans [floor(i*n/k), ceil((i+1)*n/k)) and
``ksize`` is the output size; otherwise window i starts at i*stride - padding, clipped to
the image, and the output has (n + 2*padding - k) / stride + 1 of them.

Adaptive windows differ in size and may overlap, so they are index arrays: along each
spatial dim, window o's t-th position is ``min(start_o + t, end_o - 1)`` for t up to the
largest window (a window shorter than that repeats its last position, which changes no
maximum and, coming after the original, never becomes the first one). One gather makes
[N, C, *out, K] of every window's values; the maximum is its first argmax. An average
over a box is the product of per-dim averages, so an adaptive mean is one small matrix
[out_i, size_i] applied along each spatial dim, and its gradient the transposes. The max
gradient adds each window's gradient at its first maximum (windows may share it).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from math import prod
from typing import Any

import numpy as np

from .layouts import channel_first_view
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, emit_default_grad, slots
from .window import check_float, check_rank, fmt, ints


def window_bounds(size: int, out: int, k: int, s: int, p: int, adaptive: bool
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the ``out`` windows along a dim of ``size``."""
    i = np.arange(out)
    if adaptive:
        return (i * size) // out, -((-(i + 1) * size) // out)
    starts = i * s - p
    return np.maximum(starts, 0), np.minimum(starts + k, size)


class IndexWindows:
    """The windows of one pooling as index arrays (see the module doc), made on the host
    when a plan is built and moved to the array module once."""

    def __init__(self, xp: Any, sizes: Sequence[int], bounds: Sequence[tuple]):
        self.xp, self.sizes = xp, tuple(sizes)
        self.outs = tuple(len(b[0]) for b in bounds)
        rank = len(sizes)
        per_dim = []
        for size, (starts, ends) in zip(sizes, bounds):
            taps = max(int((ends - starts).max()), 1)
            idx = np.minimum(starts[:, None] + np.arange(taps), np.maximum(ends, 1)[:, None] - 1)
            per_dim.append(np.clip(idx, 0, size - 1))
        self.taps = tuple(i.shape[1] for i in per_dim)
        # gather indices shaped [O0, K0, O1, K1, ...] for a channel-first image
        self.gather_index = tuple(
            xp.asarray(idx.reshape((1, 1) * d + idx.shape + (1, 1) * (rank - 1 - d)))
            for d, idx in enumerate(per_dim))
        # where each window's t-th value lies in its plane, [*out, K]
        strides = [prod(sizes[d + 1:]) for d in range(rank)]
        flat = sum(idx.reshape((1,) * d + (idx.shape[0],) + (1,) * (rank - 1 - d)
                               + (1,) * d + (idx.shape[1],) + (1,) * (rank - 1 - d)) * st
                   for d, (idx, st) in enumerate(zip(per_dim, strides)))
        self.plane_index = xp.asarray(np.asarray(flat).reshape(self.outs + (-1,)))
        self._order = tuple(range(2)) + tuple(2 + 2 * d for d in range(rank)) + \
            tuple(3 + 2 * d for d in range(rank))

    def values(self, cf: Any) -> Any:
        """Every window's values of a channel-first image: [N, C, *out, K]."""
        got = cf[(slice(None), slice(None)) + self.gather_index]
        n, c = cf.shape[:2]
        return got.transpose(self._order).reshape((n, c) + self.outs + (-1,))

    def first_max(self, cf: Any) -> tuple[Any, Any]:
        """(each window's maximum, the plane index of its first maximum)."""
        xp = self.xp
        vals = self.values(cf)
        t = xp.argmax(vals, axis=-1)[..., None]
        where = xp.take_along_axis(xp.broadcast_to(self.plane_index, vals.shape), t, -1)
        return xp.take_along_axis(vals, t, -1)[..., 0], where[..., 0]

    def scatter(self, where: Any, g: Any, n: int, c: int, dtype: str) -> Any:
        """dX [N, C, *sizes] with each window's gradient added at ``where``."""
        xp = self.xp
        plane = prod(self.sizes)
        dx = xp.zeros((n * c, plane), dtype)
        rows = xp.arange(n * c).reshape(-1, 1)
        xp.add.at(dx, (rows, where.reshape(n * c, -1)), g.reshape(n * c, -1))
        return dx.reshape((n, c) + self.sizes)


def mean_matrices(xp: Any, sizes: Sequence[int], bounds: Sequence[tuple],
                  dtype: str) -> list[Any]:
    """Per spatial dim, [out, size] averaging each window's positions."""
    mats = []
    for size, (starts, ends) in zip(sizes, bounds):
        cols = np.arange(size)
        inside = (cols >= starts[:, None]) & (cols < ends[:, None])
        mats.append(xp.asarray((inside / np.maximum(ends - starts, 1)[:, None]).astype(dtype)))
    return mats


def along_spatial(xp: Any, cf: Any, mats: Sequence[Any], transpose: bool) -> Any:
    """``cf`` [N, C, *a] with matrix i ([b_i, a_i], or its transpose) applied along
    spatial dim i: [N, C, *b]."""
    out = cf
    for m in mats:   # each product moves the new dim last: after all, they are in order
        out = xp.tensordot(out, m, axes=([2], [0] if transpose else [1]))
    return out


def _adaptive_bounds(geo: Any) -> list[tuple]:
    return [window_bounds(size, out, 0, 0, 0, True) for size, out in zip(geo.sizes, geo.outs)]


def adaptive_kernel(ctx: KernelContext, geo: Any) -> Callable:
    """pool2d / pool3d with ``adaptive``: fn(x) -> Out in the op's layout."""
    xp, out = ctx.xp, ctx.buffer("Out")
    bounds = _adaptive_bounds(geo)
    windows = IndexWindows(xp, geo.sizes, bounds) if geo.type == "max" else None
    mats = mean_matrices(xp, geo.sizes, bounds, geo.dtype) if windows is None else []

    def adaptive_pool(a: Any) -> Any:
        dst = out if out is not None else xp.empty(geo.out_shape, geo.dtype)
        cf = channel_first_view(a, geo.layout)
        pooled = windows.first_max(cf)[0] if windows is not None else \
            along_spatial(xp, cf, mats, False)
        xp.copyto(channel_first_view(dst, geo.layout), pooled)
        return dst
    return adaptive_pool


def adaptive_grad_kernel(ctx: KernelContext, geo: Any) -> Callable:
    """The gradient of `adaptive_kernel`: fn(x, out, dout) -> dX."""
    xp, dx_buf = ctx.xp, ctx.buffer("X@GRAD")
    bounds = _adaptive_bounds(geo)
    windows = IndexWindows(xp, geo.sizes, bounds) if geo.type == "max" else None
    mats = mean_matrices(xp, geo.sizes, bounds, geo.dtype) if windows is None else []

    def adaptive_pool_grad(a: Any, y: Any, g: Any) -> Any:
        dst = dx_buf if dx_buf is not None else xp.empty(geo.shape(geo.sizes), geo.dtype)
        gcf = channel_first_view(g, geo.layout)
        if windows is not None:
            where = windows.first_max(channel_first_view(a, geo.layout))[1]
            dx = windows.scatter(where, gcf, geo.n, geo.c, geo.dtype)
        else:
            dx = along_spatial(xp, gcf, mats, True)
        xp.copyto(channel_first_view(dst, geo.layout), dx)
        return dst
    return adaptive_pool_grad


# --- max_pool2d_with_index, max_pool3d_with_index ----------------------------------------------

def _index_params(ctx: Any, sizes: Sequence[int]) -> tuple:
    """(ksize, strides, paddings (one per dim), output sizes), -1 for unknown sizes."""
    rank = len(sizes)
    if ctx.attrs["global_pooling"]:
        k = tuple(sizes)
        s, p = (1,) * rank, (0,) * rank
    else:
        k = ints(ctx, "ksize", ctx.attrs["ksize"], rank, 1)
        s = ints(ctx, "strides", ctx.attrs["strides"], rank, 1)
        p = ints(ctx, "paddings", ctx.attrs["paddings"], rank, 0)
    if ctx.attrs["adaptive"]:
        return k, s, (0,) * rank, k
    outs = tuple(-1 if size < 0 else (size + 2 * pp - kk) // ss + 1
                 for size, kk, ss, pp in zip(sizes, k, s, p))
    return k, s, p, outs


def _with_index_infer(ctx: InferContext, rank: int) -> None:
    check_rank(ctx, "X", rank + 2, "image batch [N, C, " + ", ".join("DHW"[3 - rank:]) + "]")
    check_float(ctx, "X")
    x = ctx.input("X")
    n, c, *sizes = x.shape
    _, _, _, outs = _index_params(ctx, sizes)
    if any(o < 1 for o, size in zip(outs, sizes) if size >= 0):
        ctx.fail(f"the pooling window {ctx.attrs['ksize']} with paddings "
                 f"{ctx.attrs['paddings']} leaves no window in X {fmt(x.shape)}")
    ctx.set_output("Out", (n, c, *outs), x.dtype)
    ctx.set_output("Mask", (n, c, *outs), "int32")


def _with_index_windows(ctx: KernelContext) -> IndexWindows:
    x = ctx.input("X")
    n, c, *sizes = x.shape
    k, s, p, outs = _index_params(ctx, sizes)
    adaptive = bool(ctx.attrs["adaptive"])
    bounds = [window_bounds(size, o, kk, ss, pp, adaptive)
              for size, o, kk, ss, pp in zip(sizes, outs, k, s, p)]
    return IndexWindows(ctx.xp, sizes, bounds)


def _with_index_kernel(ctx: KernelContext) -> Callable:
    xp, windows = ctx.xp, _with_index_windows(ctx)
    out, mask = ctx.buffer("Out"), ctx.buffer("Mask")

    def max_pool_with_index(a: Any) -> tuple[Any, Any]:
        values, where = windows.first_max(a)
        if out is None or mask is None:
            return values, where.astype("int32")
        xp.copyto(out, values)
        xp.copyto(mask, where, casting="unsafe")
        return out, mask
    return max_pool_with_index


def _with_index_grad_kernel(ctx: KernelContext) -> Callable:
    windows = _with_index_windows(ctx)
    n, c = ctx.input("X").shape[:2]
    dtype = ctx.input("X").dtype

    def max_pool_with_index_grad(a: Any, mask: Any, g: Any) -> Any:
        return windows.scatter(mask, g, n, c, dtype)
    return max_pool_with_index_grad


def _with_index_grad(g: GradContext, grad_type: str) -> None:
    emit_default_grad(g, ("X", "Mask"), grad_type, ("X",))


def _with_index_grad_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.set_output("X@GRAD", x.shape, x.dtype)


_INDEX_DOC = ("Max pooling of X [N, C, *S] that also gives Mask (int32), the index of each "
              "window's first maximum in its plane; adaptive makes ksize the output size, "
              "window i of a dim of n spanning [floor(i*n/k), ceil((i+1)*n/k)).")


def _register(rank: int) -> None:
    op = f"max_pool{rank}d_with_index"
    attrs = {"ksize": [], "strides": [1] * rank, "paddings": [0] * rank,
             "global_pooling": False, "adaptive": False}
    register(OpSpec(op, slots("X"), slots("Out", "Mask"),
                    partial(_with_index_infer, rank=rank), _with_index_kernel,
                    partial(_with_index_grad, grad_type=f"{op}_grad"), attrs=attrs,
                    doc=_INDEX_DOC))
    register(OpSpec(f"{op}_grad", slots("X", "Mask", "Out@GRAD"), slots("X@GRAD"),
                    _with_index_grad_infer, _with_index_grad_kernel, attrs=attrs))


_register(2)
_register(3)

