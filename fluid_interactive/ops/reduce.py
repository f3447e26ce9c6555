"""Reductions: ``mean`` over everything (a 0-d result, the usual loss) and Paddle's
``reduce_sum``, ``reduce_mean``, ``reduce_max`` and ``reduce_min`` over chosen dims."""
from __future__ import annotations

from collections.abc import Mapping
from math import prod
from typing import Any

from ..ir.records import FLOAT_DTYPES
from .registry import register
from .shape import fmt_shape
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    emit_default_grad,
    infer_like,
    present,
    slots,
)


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
    if dout and present(dout) and g.wants("X"):
        g.emit("mean_grad", {"X": g.input("X"), "Out@GRAD": dout},
               {"X@GRAD": [n for n in g.in_grad("X") if n]})


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


# --- reduce_sum / reduce_mean / reduce_max / reduce_min ---------------------------------------
#
# Paddle's attrs: ``dim`` (a list; negative counts from the end; empty means every dim),
# ``keep_dim`` and ``reduce_all``. Reducing every dim without keep_dim gives a 0-d result,
# like `mean`. The max/min gradient goes to the positions holding the extreme value; when
# several tie, dOut is split evenly among them, so the gradient still sums to dOut.

Shape = tuple[int, ...]
REDUCE_ATTRS = {"dim": [0], "keep_dim": False, "reduce_all": False}
_NUMERIC = frozenset({"float16", "float32", "float64", "int8", "uint8", "int16", "int32",
                      "int64"})


def reduced_axes(ctx: Any, shape: Shape, attrs: Mapping[str, Any]) -> Shape:
    """The dims a reduce op removes, sorted and non-negative."""
    rank = len(shape)
    dims = [int(d) for d in attrs["dim"]]
    if attrs["reduce_all"] or not dims or rank == 0:
        return tuple(range(rank))
    axes = set()
    for d in dims:
        if not -rank <= d < rank:
            ctx.fail(f"dim {d} is out of range for X {fmt_shape(shape)} of rank {rank}; use "
                     f"values in [{-rank}, {rank - 1}], or reduce_all=True for every dim")
        axes.add(d + rank if d < 0 else d)
    return tuple(sorted(axes))


def reduced_shape(shape: Shape, axes: Shape, keep: bool) -> Shape:
    if keep:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_infer(name: str, dtypes: frozenset):
    def infer(ctx: InferContext) -> None:
        x = ctx.input("X")
        if x.dtype not in dtypes:
            kind = "float" if dtypes == FLOAT_DTYPES else "numeric (not bool)"
            ctx.fail_dtype(f"{name} needs a {kind} input, got {x.dtype}; cast it first")
        axes = reduced_axes(ctx, x.shape, ctx.attrs)
        ctx.set_output("Out", reduced_shape(x.shape, axes, ctx.attrs["keep_dim"]), x.dtype)
    return infer


# op -> (NumPy ufunc whose .reduce computes it, the generic array-module function)
_REDUCERS = {"reduce_sum": ("add", "sum"), "reduce_mean": ("add", "mean"),
             "reduce_max": ("maximum", "amax"), "reduce_min": ("minimum", "amin")}


def _blas_sum(xp: Any, x: Any, axes: Shape, weight: float, out: Any, out_shape: Shape):
    """``weight *`` the sum over a leading or a trailing run of axes as one BLAS
    matrix-vector product (2-7x faster than ufunc.reduce in NumPy); None when the axes are
    not such a run or too many elements are summed for float32 accuracy."""
    rank, j = x.rank, len(axes)
    lead, trail = axes == tuple(range(j)), axes == tuple(range(rank - j, rank))
    n = prod(x.shape[i] for i in axes)
    if not (lead or trail) or not 0 < n <= _DOT_LIMIT:
        return None
    k = prod(d for i, d in enumerate(x.shape) if i not in axes)
    w = xp.full((n,), weight, dtype=x.dtype)
    matmul = xp.matmul
    if out is None:
        if lead:
            return lambda a: matmul(w, a.reshape(n, k)).reshape(out_shape)
        return lambda a: matmul(a.reshape(k, n), w).reshape(out_shape)
    flat = out.reshape(k)  # a view: writing it fills the buffer in Out's shape

    def lead_sum(a):
        matmul(w, a.reshape(n, k), out=flat)
        return out

    def trail_sum(a):
        matmul(a.reshape(k, n), w, out=flat)
        return out
    return lead_sum if lead else trail_sum


def _reduce_kernel(name: str):
    ufunc_name, generic = _REDUCERS[name]

    def kernel(ctx: KernelContext):
        xp = ctx.xp
        x = ctx.input("X")
        axes = reduced_axes(ctx, x.shape, ctx.attrs)
        keep = bool(ctx.attrs["keep_dim"])
        out = ctx.buffer("Out")
        to_array = out is None and not keep and len(axes) == x.rank  # NumPy gives a scalar
        is_mean = name == "reduce_mean"
        if xp.__name__ != "numpy" or (is_mean and x.dtype == "float16"):
            # numpy's mean accumulates float16 in float32; the generic call keeps that.
            fn = getattr(xp, generic)
            extra = {"dtype": x.dtype} if name == "reduce_sum" else {}
            return lambda a: xp.asarray(fn(a, axis=axes, keepdims=keep, out=out, **extra))
        count = prod(x.shape[i] for i in axes)
        if ufunc_name == "add" and x.dtype in ("float32", "float64"):
            share = 1.0 / count if is_mean and count else 1.0
            blas = _blas_sum(xp, x, axes, share, out, ctx.output("Out").shape)
            if blas is not None:
                return blas
        # ufunc.reduce skips NumPy's Python wrappers: about half the call time of np.sum.
        reduce = getattr(xp, ufunc_name).reduce
        dtype = x.dtype
        if not is_mean:
            if to_array:
                return lambda a: xp.asarray(reduce(a, axes, dtype, None, keep))
            return lambda a: reduce(a, axes, dtype, out, keep)
        share = 1.0 / count if count else float("nan")
        multiply = xp.multiply

        def mean(a):
            r = reduce(a, axes, dtype, out, keep)
            if to_array:
                r = xp.asarray(r, dtype=dtype)
                return xp.asarray(r * share, dtype=dtype)
            return multiply(r, share, out=r)
        return mean
    return kernel


def _kept_shape(ctx: KernelContext) -> tuple[Shape, Shape, Shape]:
    """X's shape, the reduced axes, and Out's shape with those axes kept as size 1."""
    shape = ctx.input("X").shape
    axes = reduced_axes(ctx, shape, ctx.attrs)
    return shape, axes, reduced_shape(shape, axes, True)


def _sum_like_grad_kernel(mean: bool):
    """dX = dOut broadcast back over the reduced axes (divided by their size for mean)."""
    def kernel(ctx: KernelContext):
        xp = ctx.xp
        shape, axes, kept = _kept_shape(ctx)
        dtype = ctx.input("X").dtype
        out = ctx.buffer("X@GRAD")
        share = 1.0 / max(prod(shape[i] for i in axes), 1)

        def fn(x, g):
            r = xp.empty(shape, dtype) if out is None else out
            if mean:
                return xp.multiply(xp.broadcast_to(g.reshape(kept), shape), share, out=r)
            xp.copyto(r, g.reshape(kept))  # broadcasts over the reduced axes
            return r
        return fn
    return kernel


def _extreme_grad_kernel(ctx: KernelContext):
    """dX = dOut at the positions equal to Out, split evenly among ties, zero elsewhere."""
    xp = ctx.xp
    shape, axes, kept = _kept_shape(ctx)
    dtype = ctx.input("X").dtype
    out = ctx.buffer("X@GRAD")

    def fn(x, o, g):
        hit = x == o.reshape(kept)
        count = hit.sum(axis=axes, keepdims=True, dtype=dtype)
        share = g.reshape(kept) / xp.maximum(count, 1)  # NaN in X: no hit, no division
        r = xp.empty(shape, dtype) if out is None else out
        return xp.multiply(hit, share, out=r)
    return fn


def _define_reduce(name: str, grad_kernel, uses: tuple[str, ...],
                   dtypes: frozenset, doc: str) -> None:
    def maker(g: GradContext) -> None:
        emit_default_grad(g, uses, name + "_grad", ("X",))

    register(OpSpec(name, slots("X"), slots("Out"), _reduce_infer(name, dtypes),
                    _reduce_kernel(name), maker, attrs=REDUCE_ATTRS, doc=doc))
    grad_in = ("X", "Out", "Out@GRAD") if "Out" in uses else ("X", "Out@GRAD")
    register(OpSpec(name + "_grad", slots(*grad_in), slots("X@GRAD"),
                    infer_like({"X@GRAD": "X"}), grad_kernel, attrs=REDUCE_ATTRS,
                    shape_only=() if "Out" in uses else ("X",)))


_define_reduce("reduce_sum", _sum_like_grad_kernel(False), ("X",), _NUMERIC,
               "Sum over the dims in dim (every dim if reduce_all or dim is empty).")
_define_reduce("reduce_mean", _sum_like_grad_kernel(True), ("X",), FLOAT_DTYPES,
               "Mean over the dims in dim (every dim if reduce_all or dim is empty).")
_define_reduce("reduce_max", _extreme_grad_kernel, ("X", "Out"), _NUMERIC,
               "Maximum over the dims in dim; the gradient is split evenly among ties.")
_define_reduce("reduce_min", _extreme_grad_kernel, ("X", "Out"), _NUMERIC,
               "Minimum over the dims in dim; the gradient is split evenly among ties.")
