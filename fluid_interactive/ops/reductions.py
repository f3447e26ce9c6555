"""More reductions: ``reduce_prod``, ``reduce_all``, ``reduce_any`` and ``logsumexp``
over chosen dims (the attrs of `reduce.py`: ``dim``, ``keep_dim``, ``reduce_all``), and
``cumsum`` along one axis.

``reduce_prod``'s gradient is the product of the other elements of each group, right
where X holds zeros too (Paddle divides Out by X there). ``logsumexp`` is one op, computed
stably (``max + log(sum(exp(x - max)))``); Paddle 1.8's layer chained exp, reduce_sum and
log, which overflows for inputs beyond ~88 in float32.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.records import FLOAT_DTYPES
from .grad_rules import register_grad
from .reduce import REDUCE_ATTRS, reduced_axes, reduced_shape
from .registry import register
from .spec import GradContext, InferContext, KernelContext, OpSpec, slots

_NUMERIC = frozenset({"float16", "float32", "float64", "int8", "uint8", "int16", "int32",
                      "int64"})


def _infer(name: str, dtypes: frozenset, kind: str) -> Callable[[InferContext], None]:
    def infer(ctx: InferContext) -> None:
        x = ctx.input("X")
        if x.dtype not in dtypes:
            ctx.fail_dtype(f"{name} needs a {kind} input, got {x.dtype}; cast it first")
        axes = reduced_axes(ctx, x.shape, ctx.attrs)
        ctx.set_output("Out", reduced_shape(x.shape, axes, ctx.attrs["keep_dim"]), x.dtype)
    return infer


def _geometry(ctx: KernelContext) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
    """The reduced axes, X's shape with them kept as size 1, and keep_dim."""
    shape = ctx.input("X").shape
    axes = reduced_axes(ctx, shape, ctx.attrs)
    return axes, reduced_shape(shape, axes, True), bool(ctx.attrs["keep_dim"])


def _ufunc_kernel(ufunc: str) -> Callable[[KernelContext], Callable]:
    """``ufunc.reduce`` over the axes (an array even when every axis goes)."""
    def kernel(ctx: KernelContext) -> Callable:
        xp, out = ctx.xp, ctx.buffer("Out")
        axes, _, keep = _geometry(ctx)
        reduce = getattr(xp, ufunc).reduce
        dtype = ctx.output("Out").dtype
        if out is None:
            return lambda a: xp.asarray(reduce(a, axes, dtype, None, keep))
        return lambda a: reduce(a, axes, dtype, out, keep)
    return kernel


def _prod_grads(ctx: KernelContext) -> Callable[..., dict[str, Any]]:
    """dX = dOut * (the product of the group's other elements)."""
    xp = ctx.xp
    axes, kept, _ = _geometry(ctx)

    def fn(x, g):
        zero = x == 0
        nonzero = xp.where(zero, 1, x)
        rest = xp.multiply.reduce(nonzero, axes, x.dtype, None, True)   # of the non-zeros
        zeros = zero.sum(axis=axes, keepdims=True)
        others = xp.where(zero, xp.where(zeros == 1, rest, 0),
                          xp.where(zeros == 0, rest / nonzero, 0))
        return {"X": others * g.reshape(kept)}
    return fn


register(OpSpec("reduce_prod", slots("X"), slots("Out"),
                _infer("reduce_prod", _NUMERIC, "numeric (not bool)"), _ufunc_kernel("multiply"),
                register_grad("reduce_prod", ("X",), ("X",), _prod_grads, REDUCE_ATTRS),
                attrs=REDUCE_ATTRS,
                doc="Product over the dims in dim (every dim if reduce_all or dim is empty)."))
register(OpSpec("reduce_all", slots("X"), slots("Out"),
                _infer("reduce_all", frozenset({"bool"}), "bool"),
                _ufunc_kernel("logical_and"), None, attrs=REDUCE_ATTRS,
                doc="Whether every element over the dims in dim is true (bool; no gradient)."))
register(OpSpec("reduce_any", slots("X"), slots("Out"),
                _infer("reduce_any", frozenset({"bool"}), "bool"),
                _ufunc_kernel("logical_or"), None, attrs=REDUCE_ATTRS,
                doc="Whether any element over the dims in dim is true (bool; no gradient)."))


# --- logsumexp -----------------------------------------------------------------------------

def _logsumexp_kernel(ctx: KernelContext) -> Callable:
    xp, out = ctx.xp, ctx.buffer("Out")
    axes, kept, keep = _geometry(ctx)
    shape = ctx.output("Out").shape

    def fn(x):
        m = xp.amax(x, axis=axes, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0).astype(x.dtype, copy=False)   # all -inf, or inf
        s = xp.sum(xp.exp(x - m), axis=axes, keepdims=True)
        r = xp.add(xp.log(s), m).reshape(shape)
        if out is None:
            return r
        xp.copyto(out, r)
        return out
    return fn


def _logsumexp_grads(ctx: KernelContext) -> Callable[..., dict[str, Any]]:
    """dX = dOut * exp(X - Out): the softmax of X over the group."""
    xp = ctx.xp
    _, kept, _ = _geometry(ctx)
    return lambda x, y, g: {"X": xp.exp(x - y.reshape(kept)) * g.reshape(kept)}


register(OpSpec("logsumexp", slots("X"), slots("Out"),
                _infer("logsumexp", FLOAT_DTYPES, "float"), _logsumexp_kernel,
                register_grad("logsumexp", ("X", "Out"), ("X",), _logsumexp_grads,
                              REDUCE_ATTRS),
                attrs=REDUCE_ATTRS,
                doc="Out = log(sum(exp(X))) over the dims in dim, computed stably."))


# --- cumsum ----------------------------------------------------------------------------------

_CUMSUM = {"axis": -1, "exclusive": False, "reverse": False}


def _cumsum_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.dtype not in _NUMERIC:
        ctx.fail_dtype(f"cumsum needs a numeric input, got {x.dtype}; cast it first")
    axis = int(ctx.attrs["axis"])
    if not -len(x.shape) <= axis < max(len(x.shape), 1):
        ctx.fail(f"axis={axis} is out of range for X of rank {len(x.shape)}; use an axis "
                 f"in [{-len(x.shape)}, {len(x.shape) - 1}]")
    ctx.set_output("Out", x.shape, x.dtype)


def _cumsum_kernel(ctx: KernelContext) -> Callable:
    xp, out = ctx.xp, ctx.buffer("Out")
    x = ctx.input("X")
    axis = int(ctx.attrs["axis"]) % max(x.rank, 1)
    reverse, exclusive = bool(ctx.attrs["reverse"]), bool(ctx.attrs["exclusive"])
    head = (slice(None),) * axis
    if x.rank == 0:
        return lambda a: a.copy() if not exclusive else xp.zeros_like(a)

    def fn(a: Any) -> Any:
        src = xp.flip(a, axis) if reverse else a
        r = out if out is not None and not reverse else xp.empty(a.shape, a.dtype)
        if exclusive:
            r[head + (0,)] = 0
            xp.cumsum(src[head + (slice(0, -1),)], axis=axis, out=r[head + (slice(1, None),)])
        else:
            xp.cumsum(src, axis=axis, out=r)
        if not reverse:
            return r
        if out is None:
            return xp.flip(r, axis).copy()
        xp.copyto(out, xp.flip(r, axis))
        return out
    return fn


def _cumsum_maker(g: GradContext) -> None:
    """The gradient of a cumulative sum is the cumulative sum of dOut the other way."""
    dout = g.flowing("Out")
    if dout is None or not g.wants("X"):
        return
    g.emit("cumsum", {"X": [dout]}, {"Out": [n for n in g.in_grad("X") if n]},
           {**g.attrs, "reverse": not g.attrs["reverse"]})


register(OpSpec("cumsum", slots("X"), slots("Out"), _cumsum_infer, _cumsum_kernel,
                _cumsum_maker, attrs=_CUMSUM,
                doc="Out = the running sum of X along axis (from its end when reverse; "
                    "without the element itself when exclusive)."))
