"""Ops built on vector norms: ``norm`` (what ``l2_normalize`` records), ``cos_sim``,
``dist`` and ``clip_by_norm``.

``norm``          Out = X / Norm, Norm = sqrt(sum(X^2 along axis) + epsilon) (kept as size 1)
``cos_sim``       Out = <x, y> / (|x| |y|) per row of X [N, ...] and Y [N or 1, ...]; the
                  squared norms are clamped below at 1e-8 as Paddle's kernel does
``dist``          Out = the p-norm of X - Y (broadcast), [1]; p = 0 counts non-zeros,
                  inf / -inf take the largest / smallest |X - Y|
``clip_by_norm``  Out = X * max_norm / |X| when |X| > max_norm, else X (no gradient, as in
                  Paddle)
"""
from __future__ import annotations

from collections.abc import Callable
from math import inf, prod
from typing import Any

from ..ir.records import FLOAT_DTYPES
from ..ir.text import format_shape as _fmt
from .broadcast import broadcast_shape
from .grad_rules import check_same_float, register_grad
from .linalg import sum_to
from .registry import register
from .spec import InferContext, KernelContext, OpSpec, dims_compatible, slots

# --- norm --------------------------------------------------------------------------------

_NORM = {"axis": -1, "epsilon": 1e-10}


def _norm_axis(ctx: Any, rank: int) -> int:
    axis = int(ctx.attrs["axis"])
    if not -rank <= axis < rank:
        ctx.fail(f"axis={axis} is out of range for X of rank {rank}; use an axis in "
                 f"[{-rank}, {rank - 1}]")
    return axis % rank


def _norm_infer(ctx: InferContext) -> None:
    x = check_same_float(ctx, "X")
    axis = _norm_axis(ctx, max(x.rank, 1))
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("Norm", x.shape[:axis] + (1,) + x.shape[axis + 1:], x.dtype)


def _norm_kernel(ctx: KernelContext) -> Callable:
    xp = ctx.xp
    axis, eps = _norm_axis(ctx, ctx.input("X").rank), ctx.attrs["epsilon"]
    out = ctx.buffer("Out")

    def fn(x):
        n = xp.sqrt(xp.sum(x * x, axis=axis, keepdims=True) + eps)
        return xp.divide(x, n, out=out), n
    return fn


def _norm_grads(ctx: KernelContext) -> Callable[..., dict[str, Any]]:
    xp = ctx.xp
    axis = _norm_axis(ctx, ctx.input("X").rank)

    def fn(x, n, g):
        y = x / n
        return {"X": (g - y * xp.sum(g * y, axis=axis, keepdims=True)) / n}
    return fn


register(OpSpec("norm", slots("X"), slots("Out", "Norm"), _norm_infer, _norm_kernel,
                register_grad("norm", ("X", "Norm"), ("X",), _norm_grads, _NORM),
                attrs=_NORM, doc="Out = X / sqrt(sum(X^2 along axis) + epsilon)."))


# --- cos_sim -------------------------------------------------------------------------------

_EPS = 1e-8   # Paddle's clamp of the squared norms


def _cos_sim_infer(ctx: InferContext) -> None:
    x = check_same_float(ctx, "X", "Y")
    y = ctx.input("Y")
    same = x.rank == y.rank and x.rank >= 2 and all(
        dims_compatible(a, b) for a, b in zip(x.shape[1:], y.shape[1:]))
    if not same or not (y.shape[0] in (1, -1) or dims_compatible(x.shape[0], y.shape[0])):
        ctx.fail(f"X {_fmt(x.shape)} and Y {_fmt(y.shape)} must have one shape of rank >= 2 "
                 f"but for Y's first dim, which may be 1")
    ctx.set_output("Out", (x.shape[0], 1), x.dtype)
    ctx.set_output("XNorm", (x.shape[0], 1), x.dtype)
    ctx.set_output("YNorm", (y.shape[0], 1), x.dtype)


def _rows(ctx: KernelContext) -> tuple[int, int]:
    x, y = ctx.input("X"), ctx.input("Y")
    return x.shape[0], y.shape[0]


def _cos_sim_kernel(ctx: KernelContext) -> Callable:
    xp = ctx.xp
    nx, ny = _rows(ctx)

    def fn(x, y):
        a, b = x.reshape(nx, -1), y.reshape(ny, -1)
        xn = xp.sqrt(xp.maximum(xp.einsum("ij,ij->i", a, a), _EPS)).reshape(nx, 1)
        yn = xp.sqrt(xp.maximum(xp.einsum("ij,ij->i", b, b), _EPS)).reshape(ny, 1)
        inner = xp.einsum("ij,ij->i", a, b) if ny == nx else a @ b[0]
        z = inner.reshape(nx, 1) / (xn * yn)
        return z.astype(x.dtype, copy=False), xn.astype(x.dtype, copy=False), \
            yn.astype(x.dtype, copy=False)
    return fn


def _cos_sim_grads(ctx: KernelContext) -> Callable[..., dict[str, Any]]:
    nx, ny = _rows(ctx)
    xs, ys = ctx.input("X").shape, ctx.input("Y").shape

    def fn(x, y, z, xn, yn, g):
        a, b = x.reshape(nx, -1), y.reshape(ny, -1)
        dx = g * (b / (xn * yn) - z * a / (xn * xn))
        dy = g * (a / (xn * yn) - z * b / (yn * yn))
        return {"X": dx.reshape(xs), "Y": dy.sum(axis=0).reshape(ys) if ny != nx else
                dy.reshape(ys)}
    return fn


register(OpSpec("cos_sim", slots("X", "Y"), slots("Out", "XNorm", "YNorm"), _cos_sim_infer,
                _cos_sim_kernel,
                register_grad("cos_sim", ("X", "Y", "Out", "XNorm", "YNorm"), ("X", "Y"),
                              _cos_sim_grads),
                doc="Out = cosine similarity of each row of X with the row of Y (or Y's "
                    "one row)."))


# --- dist --------------------------------------------------------------------------------

def _dist_infer(ctx: InferContext) -> None:
    x = check_same_float(ctx, "X", "Y")
    y = ctx.input("Y")
    if broadcast_shape(x.shape, y.shape) is None:
        ctx.fail(f"X {_fmt(x.shape)} and Y {_fmt(y.shape)} do not broadcast")
    ctx.set_output("Out", (1,), x.dtype)


def _p_norm(xp: Any, d: Any, p: float) -> Any:
    a = xp.abs(d)
    if p == 0:
        return xp.sum(a != 0).astype(d.dtype)
    if p == inf:
        return xp.amax(a)
    if p == -inf:
        return xp.amin(a)
    if p == 2:
        flat = a.reshape(-1)
        return xp.sqrt(xp.dot(flat, flat))
    return xp.sum(a ** p) ** (1.0 / p)


def _dist_kernel(ctx: KernelContext) -> Callable:
    xp, p = ctx.xp, float(ctx.attrs["p"])
    return lambda x, y: xp.asarray(_p_norm(xp, x - y, p), dtype=x.dtype).reshape(1)


def _dist_grads(ctx: KernelContext) -> Callable[..., dict[str, Any]]:
    xp, p = ctx.xp, float(ctx.attrs["p"])
    xs, ys = ctx.input("X").shape, ctx.input("Y").shape

    def fn(x, y, out, g):
        d = x - y
        n = out.reshape(())
        if p == 0:
            local = xp.zeros_like(d)
        elif p in (inf, -inf):
            local = xp.sign(d) * (xp.abs(d) == n)
        else:
            safe = xp.where(n == 0, 1, n)
            local = xp.sign(d) * xp.abs(d) ** (p - 1) / safe ** (p - 1) * (n != 0)
        local = local * g.reshape(())
        return {"X": sum_to(xp, local, xs), "Y": sum_to(xp, -local, ys)}
    return fn


register(OpSpec("dist", slots("X", "Y"), slots("Out"), _dist_infer, _dist_kernel,
                register_grad("dist", ("X", "Y", "Out"), ("X", "Y"), _dist_grads, {"p": 2.0}),
                attrs={"p": 2.0}, doc="Out = the p-norm of X - Y, shape [1]."))


# --- clip_by_norm --------------------------------------------------------------------------

def _clip_by_norm_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.dtype not in FLOAT_DTYPES:
        ctx.fail_dtype(f"clip_by_norm needs a float input, got {x.dtype}")
    if not float(ctx.attrs["max_norm"]) > 0:
        ctx.fail(f"max_norm must be > 0, got {ctx.attrs['max_norm']}")
    ctx.set_output("Out", x.shape, x.dtype)


def _clip_by_norm_kernel(ctx: KernelContext) -> Callable:
    xp, out = ctx.xp, ctx.buffer("Out")
    limit = float(ctx.attrs["max_norm"])
    n = prod(ctx.input("X").shape)

    def fn(x):
        flat = x.reshape(n)
        norm = xp.sqrt(xp.dot(flat, flat))
        factor = xp.where(norm > limit, limit / xp.maximum(norm, limit), 1.0)
        return xp.multiply(x, factor.astype(x.dtype), out=out)
    return fn


register(OpSpec("clip_by_norm", slots("X"), slots("Out"), _clip_by_norm_infer,
                _clip_by_norm_kernel, None, attrs={"max_norm": 1.0},
                doc="Out = X scaled down to L2 norm max_norm when its norm is larger."))
