"""Paddle's elementwise broadcasting, and its inverse for gradients.

With ``axis >= 0`` Y's shape must match a contiguous run of X's dims starting at ``axis``
(Paddle's rule; trailing size-1 dims of Y are ignored). With ``axis == -1`` both sides follow
NumPy broadcasting.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

from ..ir.text import format_shape
from .spec import InferContext


def _trim_trailing_ones(shape: Sequence[int]) -> tuple[int, ...]:
    s = list(shape)
    while len(s) > 1 and s[-1] == 1:
        s.pop()
    return tuple(s)


def aligned_y_shape(x_shape: Sequence[int], y_shape: Sequence[int], axis: int
                    ) -> tuple[int, ...] | None:
    """Y's shape padded with 1s so NumPy broadcasting implements Paddle's ``axis`` rule;
    None when NumPy broadcasting applies as is (axis -1)."""
    if axis < 0 or len(y_shape) == len(x_shape):
        return None
    y = _trim_trailing_ones(y_shape)
    if axis + len(y) > len(x_shape):
        raise ValueError(f"axis {axis} leaves no room for Y of rank {len(y)}")
    if axis + len(y) == len(x_shape):
        return None  # Y already aligns with X's trailing dims: NumPy's rule gives the same
    return (1,) * axis + y + (1,) * (len(x_shape) - axis - len(y))


def broadcast_dim(a: int, b: int) -> int | None:
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if a < 0:
        return b
    if b < 0:
        return a
    return None


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for da, db in zip(a, b):
        d = broadcast_dim(da, db)
        if d is None:
            return None
        out.append(d)
    return tuple(out)


def infer_binary(ctx: InferContext) -> tuple[int, ...]:
    """Shape rule shared by the binary elementwise ops."""
    x, y = ctx.input("X"), ctx.input("Y")
    if x.dtype != y.dtype:
        ctx.fail_dtype(f"X and Y must have the same dtype, got X {x.dtype} and Y {y.dtype}; "
                 f"cast one of them with fluid.layers.cast")
    axis = ctx.attrs["axis"]
    try:
        y_aligned = aligned_y_shape(x.shape, y.shape, axis)
    except ValueError as e:
        ctx.fail(f"cannot broadcast Y {format_shape(y.shape)} into X {format_shape(x.shape)}: {e}")
    if y_aligned is not None:
        out = broadcast_shape(x.shape, y_aligned)
        if out is not None and len(out) != len(x.shape):
            out = None
    else:
        out = broadcast_shape(x.shape, y.shape)
    if out is None:
        ctx.fail(f"X {format_shape(x.shape)} and Y {format_shape(y.shape)} do not broadcast "
                 f"(axis={axis}); "
                 f"with axis=-1 shapes follow NumPy broadcasting, with axis=k Y must match "
                 f"X's dims from k on")
    ctx.set_output("Out", out, x.dtype)
    return out


def reshaper(shape: tuple[int, ...] | None) -> Callable[[Any], Any]:
    if shape is None:
        return lambda a: a
    return lambda a: a.reshape(shape)


def make_unbroadcast(xp: Any, grad_shape: Sequence[int], target_shape: Sequence[int],
                     aligned: Sequence[int] | None, out: Any, dtype: str
                     ) -> Callable[[Any], Any]:
    """fn(g) summing gradient ``g`` (of ``grad_shape``) down to ``target_shape``.

    Returns ``g`` itself when no reduction is needed. A reduction over leading axes only,
    or over trailing axes only (a per-channel bias of a batch-innermost image), runs as a
    matrix-vector product, which is much faster than ``sum`` over those axes in NumPy.
    The result goes into ``out`` when given.
    """
    grad_shape, target_shape = tuple(grad_shape), tuple(target_shape)
    if grad_shape == target_shape:
        return lambda g: g
    full = tuple(aligned) if aligned is not None else (
        (1,) * (len(grad_shape) - len(target_shape)) + target_shape)
    axes = tuple(i for i, (g, t) in enumerate(zip(grad_shape, full)) if t == 1 and g != 1)
    lead = len(axes) and axes == tuple(range(len(axes)))
    if lead:
        m = 1
        for d in grad_shape[:len(axes)]:
            m *= d
        k = 1
        for d in grad_shape[len(axes):]:
            k *= d
        ones = xp.ones((m,), dtype=dtype)
        if out is not None and out.shape == (k,) and len(grad_shape) == 2:
            # the common bias gradient (g [m, k]; [m1, m2] summed whole has k = 1)
            return lambda g: xp.dot(ones, g.reshape(m, k), out=out)
        flat_out = out.reshape(k) if out is not None else None

        def lead_sum(g):
            r = xp.matmul(ones, g.reshape(m, k), out=flat_out)
            return r.reshape(target_shape)
        return lead_sum

    trailing = len(axes) and axes == tuple(range(len(grad_shape) - len(axes),
                                                   len(grad_shape)))
    if trailing:
        rows = prod(grad_shape[:-len(axes)])
        ones_t = xp.ones((prod(grad_shape[-len(axes):]),), dtype=dtype)
        flat_t = out.reshape(rows) if out is not None else None
        return lambda g: xp.matmul(g.reshape(rows, -1), ones_t, out=flat_t).reshape(
            target_shape)
    summed = tuple(d for i, d in enumerate(grad_shape) if i not in axes)
    into = out.reshape(summed) if out is not None else None

    def general_sum(g):
        return xp.sum(g, axis=axes, out=into).reshape(target_shape)
    return general_sum
