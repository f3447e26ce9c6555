"""Ops that rearrange the values of tensors: tril_triu, kron, meshgrid, reverse.

``tril_triu``  Out = X with the values above (``lower``: tril) or below (triu) the diagonal
               ``diagonal`` of each [H, W] plane of its last two dims set to zero. Its
               gradient is the same op on dOut.
``kron``       Out = the Kronecker product of X and Y (``np.kron``: the input of lower rank
               gets leading dims of size 1; each output dim is the product of the two).
``meshgrid``   Out[i] = X[i] (1-D, n_i values) spread over the grid [n_0, n_1, ...] along
               dim i (``np.meshgrid(..., indexing='ij')``); dX[i] sums dOut[i] over the
               other dims.
``reverse``    Out = X with the order along each dim of ``axis`` reversed; its gradient
               is the same op on dOut.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.text import format_shape
from .registry import register
from .spec import (
    GradContext,
    InferContext,
    KernelContext,
    OpSpec,
    TensorType,
    grad_slot,
    infer_like,
    slots,
)

_NUMERIC = ("float16", "float32", "float64", "int32", "int64")


def _self_grad(op_type: str, x: str = "X"):
    """The gradient maker of a linear op that is its own adjoint (up to attrs): the same
    op on dOut."""
    def maker(g: GradContext) -> None:
        dout = g.flowing("Out")
        if dout is not None and g.wants(x):
            g.emit(op_type, {x: [dout]}, {"Out": g.in_grad(x)}, dict(g.attrs))
    return maker


# --- tril_triu ----------------------------------------------------------------------------------

def _tril_triu_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    if x.rank < 2:
        ctx.fail(f"X must have at least 2 dims (a matrix per plane), got shape "
                 f"{format_shape(x.shape)}")
    ctx.set_output("Out", x.shape, x.dtype)


def _tril_triu_kernel(ctx: KernelContext):
    xp, x, out = ctx.xp, ctx.input("X"), ctx.buffer("Out")
    rows, cols = x.shape[-2:]
    k = int(ctx.attrs["diagonal"])
    # True where a value is kept: on or below (tril) / on or above (triu) diagonal k
    keep = np.tri(rows, cols, k, dtype=bool)
    keep = xp.asarray(keep if ctx.attrs["lower"] else ~np.tri(rows, cols, k - 1, dtype=bool))

    def fn(a: Any) -> Any:
        target = out if out is not None else xp.empty(a.shape, a.dtype)
        target.fill(0)
        xp.copyto(target, a, where=keep)
        return target
    return fn


register(OpSpec("tril_triu", slots("X"), slots("Out"), _tril_triu_infer, _tril_triu_kernel,
                _self_grad("tril_triu"), attrs={"diagonal": 0, "lower": True},
                doc="Out = X with the values off the lower (tril) / upper (triu) triangle "
                    "of diagonal `diagonal` set to 0"))


# --- kron ---------------------------------------------------------------------------------------

def _kron_dims(x: tuple[int, ...], y: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    rank = max(len(x), len(y))
    return (1,) * (rank - len(x)) + tuple(x), (1,) * (rank - len(y)) + tuple(y)


def _kron_infer(ctx: InferContext) -> None:
    x, y = ctx.input("X"), ctx.input("Y")
    if x.dtype != y.dtype or x.dtype not in _NUMERIC:
        ctx.fail_dtype(f"X and Y must have one numeric dtype, got {x.dtype} and {y.dtype}")
    a, b = _kron_dims(x.shape, y.shape)
    ctx.set_output("Out", [p * q if p >= 0 and q >= 0 else -1 for p, q in zip(a, b)], x.dtype)


def _interleaved(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple, tuple, tuple]:
    """X's and Y's shapes spread over the dims (a0, b0, a1, b1, ...), and that shape."""
    xs = tuple(d for p in a for d in (p, 1))
    ys = tuple(d for q in b for d in (1, q))
    return xs, ys, tuple(d for p, q in zip(a, b) for d in (p, q))


def _kron_kernel(ctx: KernelContext):
    xp, o, out = ctx.xp, ctx.output("Out"), ctx.buffer("Out")
    xs, ys, both = _interleaved(*_kron_dims(ctx.input("X").shape, ctx.input("Y").shape))

    def fn(x: Any, y: Any) -> Any:
        target = out if out is not None else xp.empty(o.shape, o.dtype)
        xp.multiply(x.reshape(xs), y.reshape(ys), out=target.reshape(both))
        return target
    return fn


def _kron_grad_kernel(ctx: KernelContext):
    """dX[i] = sum over j of dOut[i, j] * Y[j] (dims interleaved), dY likewise."""
    xp = ctx.xp
    x, y = ctx.input("X"), ctx.input("Y")
    xs, ys, both = _interleaved(*_kron_dims(x.shape, y.shape))
    odd = tuple(range(1, len(both), 2))
    even = tuple(range(0, len(both), 2))
    want_x, want_y = ctx.has_output("X@GRAD"), ctx.has_output("Y@GRAD")

    def fn(a: Any, b: Any, g: Any) -> Any:
        spread = g.reshape(both)
        grads = []
        if want_x:
            grads.append(xp.sum(spread * b.reshape(ys), axis=odd).reshape(x.shape))
        if want_y:
            grads.append(xp.sum(spread * a.reshape(xs), axis=even).reshape(y.shape))
        return grads[0] if len(grads) == 1 else tuple(grads)
    return fn


def _kron_grad(g: GradContext) -> None:
    dout = g.flowing("Out")
    if dout is None or not (g.wants("X") or g.wants("Y")):
        return
    outs = {grad_slot(s): g.in_grad(s) for s in ("X", "Y") if g.wants(s)}
    g.emit("kron_grad", {"X": g.input("X"), "Y": g.input("Y"), "Out@GRAD": [dout]}, outs)


register(OpSpec("kron", slots("X", "Y"), slots("Out"), _kron_infer, _kron_kernel, _kron_grad,
                doc="Out = the Kronecker product of X and Y"))
register(OpSpec("kron_grad", slots("X", "Y", "Out@GRAD"), slots("X@GRAD?", "Y@GRAD?"),
                infer_like({"X@GRAD": "X", "Y@GRAD": "Y"}), _kron_grad_kernel))


# --- meshgrid -----------------------------------------------------------------------------------

def _meshgrid_infer(ctx: InferContext) -> None:
    xs = ctx.inputs("X")
    if not xs:
        ctx.fail("needs at least one input")
    if any(x.rank != 1 for x in xs):
        ctx.fail(f"every input must be 1-D, got shapes {[list(x.shape) for x in xs]}")
    if len({x.dtype for x in xs}) != 1 or xs[0].dtype not in _NUMERIC:
        ctx.fail_dtype(f"the inputs must share one numeric dtype, got "
                       f"{[x.dtype for x in xs]}")
    if ctx.output_count("Out") != len(xs):
        ctx.fail(f"gives one output per input: {len(xs)} inputs but "
                 f"{ctx.output_count('Out')} outputs")
    shape = tuple(x.shape[0] for x in xs)
    ctx.set_outputs("Out", [TensorType(shape, x.dtype) for x in xs])


def _meshgrid_kernel(ctx: KernelContext):
    """Read-only broadcast views of the inputs: nothing is copied (``aliases``)."""
    xp = ctx.xp
    shape = ctx.output("Out").shape
    rank = len(shape)
    spots = [tuple(d if i == k else 1 for i, d in enumerate(shape)) for k in range(rank)]

    def fn(*xs: Any) -> Any:
        grids = tuple(xp.broadcast_to(x.reshape(s), shape) for x, s in zip(xs, spots))
        return grids[0] if rank == 1 else grids
    return fn


def _meshgrid_grad_kernel(ctx: KernelContext):
    """dX[k] = dOut[k] summed over every dim but k; zeros where no dOut[k] came."""
    xp = ctx.xp
    xs = ctx.inputs("X")
    rank = len(xs)

    def fn(*arrays: Any) -> Any:
        grads = arrays[rank:]
        result = []
        for k, x in enumerate(xs):
            other = tuple(i for i in range(rank) if i != k)
            result.append(xp.sum(grads[k], axis=other).astype(x.dtype, copy=False))
        return result[0] if rank == 1 else tuple(result)
    return fn


def _meshgrid_grad(g: GradContext) -> None:
    douts = g.out_grad("Out")
    if not any(n is not None for n in douts) or not g.wants("X"):
        return
    names: list[str] = []
    for out, dout in zip(g.output("Out"), douts):
        if dout is None:   # no gradient reached this grid: it contributes zeros
            dout = g.tmp("meshgrid_zero")
            g.emit("fill_zeros_like", {"X": [out]}, {"Out": [dout]})
        names.append(dout)
    grads = [n if n else g.tmp("meshgrid_unused") for n in g.in_grad("X")]
    g.emit("meshgrid_grad", {"X": g.input("X"), "Out@GRAD": names}, {"X@GRAD": grads})


register(OpSpec("meshgrid", slots("X*"), slots("Out*"), _meshgrid_infer, _meshgrid_kernel,
                _meshgrid_grad, aliases=True,
                doc="Out[i] = X[i] spread over the grid of all inputs' sizes"))
register(OpSpec("meshgrid_grad", slots("X*", "Out@GRAD*"), slots("X@GRAD*"),
                infer_like({"X@GRAD": "X"}), _meshgrid_grad_kernel, shape_only=("X",)))


# --- reverse ------------------------------------------------------------------------------------

def _reverse_axes(ctx: InferContext | KernelContext, rank: int) -> tuple[int, ...]:
    return tuple(int(a) + rank if int(a) < 0 else int(a) for a in ctx.attrs["axis"])


def _reverse_infer(ctx: InferContext) -> None:
    x = ctx.input("X")
    axes = [int(a) for a in ctx.attrs["axis"]]
    if not axes:
        ctx.fail("axis must name at least one dim")
    bad = [a for a in axes if not -x.rank <= a < x.rank]
    if bad:
        ctx.fail(f"axis {bad[0]} is out of range for X {format_shape(x.shape)}; use "
                 f"[{-x.rank}, {x.rank - 1}]")
    if len(set(_reverse_axes(ctx, x.rank))) != len(axes):
        ctx.fail(f"axis {axes} names a dim twice")
    ctx.set_output("Out", x.shape, x.dtype)


def _reverse_kernel(ctx: KernelContext):
    """A view of X with negative strides: nothing is copied (``aliases``)."""
    xp = ctx.xp
    axes = _reverse_axes(ctx, ctx.input("X").rank)
    return lambda x: xp.flip(x, axes)


register(OpSpec("reverse", slots("X"), slots("Out"), _reverse_infer, _reverse_kernel,
                _self_grad("reverse"), attrs={"axis": []}, aliases=True,
                doc="Out = X with the order along each dim in `axis` reversed"))
