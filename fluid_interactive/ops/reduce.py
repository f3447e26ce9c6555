"""Reductions: ``mean`` over everything (a 0-d result, the usual loss)."""
from __future__ import annotations

from math import prod

from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, infer_like, slots


def _mean_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.dtype not in ("float16", "float32", "float64"):
        ctx.fail_dtype(f"mean needs a float input, got {x.dtype}; cast it first")
    ctx.set_output("Out", (), x.dtype)


_DOT_LIMIT = 1 << 16  # beyond this, pairwise summation keeps float32 sums accurate


def _mean_kernel(ctx: KernelContext):
    xp = ctx.xp
    x = ctx.input("X")
    n = max(prod(x.shape), 1)
    if n <= _DOT_LIMIT and x.dtype in ("float32", "float64"):
        # One BLAS dot with a vector of 1/n: far cheaper than np.mean's Python wrapper.
        weights = xp.full((n,), 1.0 / n, dtype=x.dtype)
        return lambda a: xp.dot(weights, a.reshape(n))
    inv = xp.asarray(1.0 / n, dtype=x.dtype)
    return lambda a: xp.multiply(xp.add.reduce(a, axis=None), inv)


def _mean_grad(g: GradContext) -> None:
    dout = g.out_grad("Out")
    if dout and dout[0] is not None and g.wants("X"):
        g.emit("mean_grad", {"X": g.input("X"), "Out@GRAD": dout}, {"X@GRAD": g.in_grad("X")})


def _mean_grad_kernel(ctx: KernelContext):
    xp = ctx.xp
    x = ctx.input("X")
    share = xp.full(x.shape, 1.0 / max(prod(x.shape), 1), dtype=x.dtype)
    out = ctx.buffer("X@GRAD")
    return lambda a, g: xp.multiply(share, g, out=out)


register(OpSpec("mean", slots("X"), slots("Out"), _mean_infer, _mean_kernel, _mean_grad,
                doc="Mean of all elements; Out is 0-d."))
register(OpSpec("mean_grad", slots("X", "Out@GRAD"), slots("X@GRAD"),
                infer_like({"X@GRAD": "X"}), _mean_grad_kernel, shape_only=("X",)))
